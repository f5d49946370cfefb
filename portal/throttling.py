"""Who a request comes from, and what a locked-out client is told.

The client address is DRF's rule (``REST_FRAMEWORK["NUM_PROXIES"]``, from the ``NUM_PROXIES``
setting): with 0 trusted proxies it is ``REMOTE_ADDR`` and ``X-Forwarded-For`` is ignored, so a
header cannot reset a throttle; with N it is the N-th address from the right of
``X-Forwarded-For`` (the one the outermost trusted proxy saw). The API's throttles and the login
lockout (django-axes) both use it, and both keep their counters in the shared cache
(``CACHE_URL``: Redis in production, so every gunicorn worker and pod counts together).
"""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle


def client_ip(request: HttpRequest) -> str:
    """The client address behind ``NUM_PROXIES`` trusted proxies (django-axes' IP callable)."""
    return BaseThrottle().get_ident(request)


class LoginRateThrottle(SimpleRateThrottle):
    """Sign-in attempts per client address, whatever the username (``LOGIN_THROTTLE_RATE``,
    default 30 a minute): the lockout holds one username, this caps spraying many."""

    scope = "login"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class LoginView(auth_views.LoginView):
    """Django's sign-in page, its POSTs throttled per client address (429 page when over)."""

    def post(self, request, *args, **kwargs):
        throttle = LoginRateThrottle()
        if not throttle.allow_request(request, self):
            wait_s = int(throttle.wait() or 60)
            response = render(
                request,
                "registration/locked_out.html",
                {"retry_after_minutes": max(1, round(wait_s / 60)), "per_address": True},
                status=429,
            )
            response["Retry-After"] = str(wait_s)
            return response
        return super().post(request, *args, **kwargs)


def lockout_response(
    request: HttpRequest, original_response=None, credentials=None
) -> HttpResponse:
    """429 after too many failed sign-ins for one username from one address, until the cool-off
    (``AXES_COOLOFF_TIME``) has passed: JSON with a code for the API, a page for the browser."""
    from django.conf import settings

    retry_after_s = int(settings.AXES_COOLOFF_TIME.total_seconds())
    if request.path.startswith("/api/"):
        response = JsonResponse(
            {
                "code": "locked_out",
                "detail": "Too many failed sign-ins from this address; try again later.",
                "data": {"retry_after_s": retry_after_s},
            },
            status=429,
        )
    else:
        response = render(
            request,
            "registration/locked_out.html",
            {"retry_after_minutes": max(1, retry_after_s // 60)},
            status=429,
        )
    response["Retry-After"] = str(retry_after_s)
    return response
