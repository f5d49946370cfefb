"""Login required everywhere except the login page, health probes, the API and the OIDC callback.

The API authenticates on its own (token or session, in DRF) and answers 401/403 as JSON instead of
redirecting to the login page.
"""

from django.contrib.auth.middleware import LoginRequiredMiddleware as _DjangoLoginRequired


class LoginRequiredMiddleware(_DjangoLoginRequired):
    """Django's LoginRequiredMiddleware, exempting ``/api/`` (DRF enforces its own auth)."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path.startswith(("/api/", "/oidc/")):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
