"""Login required everywhere except the login page, health probes, the API, the OIDC callback and
``/metrics`` (Prometheus scrapes it without a session; it holds counts and timings, no data).

The API authenticates on its own (token or session, in DRF) and answers 401/403 as JSON instead of
redirecting to the login page.
"""

from django.contrib.auth.middleware import LoginRequiredMiddleware as _DjangoLoginRequired


class LoginRequiredMiddleware(_DjangoLoginRequired):
    """Django's LoginRequiredMiddleware, exempting ``/api/`` (DRF enforces its own auth) and
    ``/metrics``."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path.startswith(("/api/", "/oidc/")) or request.path == "/metrics":
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
