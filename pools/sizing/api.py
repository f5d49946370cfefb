"""API of LLM sizing estimates (``/api/v1/estimates/``).

``POST`` takes the inputs (:class:`pools.sizing.inputs.SizingInputsSerializer`, plus an
optional ``team`` slug to share the estimate with) and answers ``202 Accepted`` with the estimate
and its URL in ``Location``: a job computes it. ``GET`` on that URL gives the status, the
progress and, once done, the results. Lists are scoped: a caller sees their own estimates and
their teams' (pool admins see all); any other answers 404.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, OpenApiTypes, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from pools.errors import InvalidInput
from pools.sizing import schema as _sizing_schema  # noqa: F401  (the inputs' schema)
from pools.sizing import selectors as sizing_selectors
from pools.sizing import services as sizing_services
from pools.sizing.filtersets import SizingEstimateFilterSet
from pools.sizing.inputs import SizingInputsSerializer
from pools.sizing.models import SizingEstimate
from pools.tenancy import selectors as tenancy_selectors


class SizingEstimateCreateSerializer(SizingInputsSerializer):
    """What ``POST /api/v1/estimates/`` takes (for the schema): the inputs and a team slug."""

    team = serializers.SlugField(
        required=False,
        allow_blank=True,
        help_text="Team slug, not its name (`nlp`, not `NLP`): one of your teams to share the "
        "estimate with.",
    )


class SizingEstimateSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:estimate-detail")
    page_url = serializers.SerializerMethodField()
    request_url = serializers.SerializerMethodField()
    recommendation = serializers.SerializerMethodField()
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    created_by = serializers.StringRelatedField()

    class Meta:
        model = SizingEstimate
        fields = [
            "id",
            "url",
            "page_url",
            "status",
            "progress",
            "error",
            "team",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "inputs",
            "results",
            "recommendation",
            "request_url",
        ]
        read_only_fields = fields

    def get_page_url(self, obj) -> str:
        """The estimate's page."""
        return reverse("pools:sizing-estimate-detail", args=[obj.pk])

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_recommendation(self, obj) -> dict | None:
        """The recommended GPU model's cards with their error band (once done): ``cards``,
        ``cards_pessimistic`` (if the band's low end holds), ``output_tok_s_per_replica`` and
        ``band`` (``low_tok_s`` / ``high_tok_s``: P10 / P90 of similar published rows, with the
        ``regime`` and its ``rows``). ``None`` before the job is done or without a
        recommendation.
        """
        return sizing_services.sizing_recommendation(obj.results)

    def get_request_url(self, obj) -> str | None:
        """The new-request page pre-filled with the recommended option (once done)."""
        return sizing_services.sizing_request_url((obj.results or {}).get("request"))


class SizingEstimateListSerializer(SizingEstimateSerializer):
    """A list row: the inputs' model and the recommendation instead of the whole results."""

    model = serializers.SerializerMethodField()
    recommendation = serializers.SerializerMethodField()

    class Meta(SizingEstimateSerializer.Meta):
        fields = [
            *(f for f in SizingEstimateSerializer.Meta.fields if f not in ("inputs", "results")),
            "model",
            "recommendation",
        ]
        read_only_fields = fields

    def get_model(self, obj) -> str | None:
        """The model preset id (or ``custom``)."""
        return obj.inputs.get("model")

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_recommendation(self, obj):
        """What "Request these cards" asks for: ``basis``, ``gpu_model``, ``card_count``,
        ``pool``; ``null`` until done or when no option meets the targets."""
        return (obj.results or {}).get("request")


class SizingEstimateViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """LLM sizing estimates: create (computed by a job), then poll for status and results."""

    queryset = SizingEstimate.objects.none()  # for the schema; get_queryset scopes by user
    filterset_class = SizingEstimateFilterSet

    def get_queryset(self):
        return sizing_selectors.sizing_estimate_list(user=self.request.user).order_by(
            "-created_at", "-id"
        )

    def get_serializer_class(self):
        return SizingEstimateListSerializer if self.action == "list" else SizingEstimateSerializer

    @extend_schema(
        request=SizingEstimateCreateSerializer,
        responses={202: SizingEstimateSerializer},
        description="The estimate's inputs; `team`: the slug of one of your teams to share it "
        "with; `gpu_models`: GPU model slugs to compare (empty: all). A job computes the plan: "
        "poll the estimate's URL.",
        examples=[
            OpenApiExample(
                "A 70B chat model serving 2,000 output tokens/s",
                value={
                    "team": "nlp",
                    "model": "llama3_70b",
                    "precision": "BF16",
                    "engine": "vllm",
                    "input_len": 1000,
                    "output_len": 200,
                    "demand_kind": "output_rate",
                    "output_tok_s": 2000,
                    "tpot_target_ms": 50,
                    "ttft_target_ms": 1000,
                    "gpu_models": ["h100_sxm", "l40s"],
                },
                request_only=True,
            )
        ],
    )
    def create(self, request, *args, **kwargs):
        body = request.data
        if not isinstance(body, dict):
            body = body.dict() if hasattr(body, "dict") else None
        if body is None:
            raise InvalidInput("Send the inputs as a JSON object.", errors={})
        inputs = {key: value for key, value in body.items() if key != "team"}
        team = None
        if body.get("team"):
            # Among the caller's teams: another team's slug answers like a missing one.
            team = tenancy_selectors.team_list(user=request.user).filter(slug=body["team"]).first()
            if team is None:
                raise InvalidInput(
                    "The estimate has invalid inputs.",
                    errors={"team": f"No team {body['team']!r}."},
                )
        estimate = sizing_services.sizing_estimate_create(
            actor=request.user, inputs=inputs, team=team
        )
        fresh = self.get_queryset().get(pk=estimate.pk)  # the job may have run on commit
        data = SizingEstimateSerializer(fresh, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": data["url"]})
