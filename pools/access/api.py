"""``/api/v1/auth/token/``: a client signs in with a username and password for its own token
(``POST``), and revokes the token it authenticates with (``DELETE``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from pools.access.models import ApiToken
from pools.access.services import api_token_create, api_token_revoke
from pools.common.errors import InvalidInput
from pools.common.validators import single_line_text_validator


class TokenRequestSerializer(AuthTokenSerializer):
    client = serializers.CharField(
        max_length=80,
        required=False,
        allow_blank=True,
        default="",
        validators=[single_line_text_validator],
        help_text="What will use the token (e.g. ci-pipeline): each client gets its own.",
    )


TOKEN_ANSWER = inline_serializer(
    "ApiTokenCreated",
    {
        "token": serializers.CharField(help_text="Shown this once; only a digest is stored."),
        "client": serializers.CharField(),
        "expiry": serializers.DateTimeField(allow_null=True),
    },
)


class TokenView(APIView):
    """``POST`` username, password and optionally ``client`` -> a new token for that client,
    valid for ``API_TOKEN_TTL_DAYS``; ``DELETE`` (authenticated by a token) revokes that token."""

    # Scoped, so the rate is REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["token"] (per client
    # address); AnonRateThrottle would look for an "anon" rate that is not set and answer 500.
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "token"

    def _signing_in(self) -> bool:
        # self.request is None while the OpenAPI schema is generated
        return getattr(self.request, "method", None) == "POST"

    def get_permissions(self):
        return [AllowAny()] if self._signing_in() else super().get_permissions()

    def get_authenticators(self):
        # Signing in needs no credentials but the body's (and no CSRF token for a session).
        return [] if self._signing_in() else super().get_authenticators()

    @extend_schema(request=TokenRequestSerializer, responses={200: TOKEN_ANSWER})
    def post(self, request):
        form = TokenRequestSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        token, key = api_token_create(
            user=form.validated_data["user"], client=form.validated_data["client"]
        )
        return Response({"token": key, "client": token.client, "expiry": token.expiry})

    @extend_schema(request=None, responses={204: None})
    def delete(self, request):
        if not isinstance(request.auth, ApiToken):
            raise InvalidInput(
                "Send the token to revoke in the Authorization header.",
                errors={"token": "Authenticate with the token to revoke."},
            )
        api_token_revoke(token=request.auth, actor=request.user, reason="revoked by its client")
        return Response(status=status.HTTP_204_NO_CONTENT)
