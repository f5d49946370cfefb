"""Top-level URLs: pages, admin, auth, health probes, the REST API and its schema."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from billing.api import views as billing_api
from billing.budgets import api as budgets_api
from billing.dashboards import api as dashboards_api
from billing.dashboards import views as dashboards_views
from billing.tokenflow import api as tokenflow_api
from pools.access import api as access_api
from pools.advisor import api as advisor_api
from pools.audit import api as audit_api
from pools.calibration import api as calibration_api
from pools.capacity import api as capacity_api
from pools.clusters import api as clusters_api
from pools.elastic import api as elastic_api
from pools.explain import api as explain_api
from pools.inventory import api as inventory_api
from pools.maintenance import api as maintenance_api
from pools.overrides import api as overrides_api
from pools.reclamation import api as reclamation_api
from pools.recurring import api as recurring_api
from pools.serving import api as serving_api
from pools.sizing import api as sizing_api
from pools.tenancy import api as tenancy_api
from pools.waiting import api as waiting_api
from portal.health import deep_health, healthz, readyz
from portal.schema_view import SchemaView
from portal.throttling import LoginView, lockout_response


class TokenView(access_api.TokenView):
    """``/api/v1/auth/token/`` (:class:`pools.access.api.TokenView`), with the sign-in lockout."""

    def finalize_response(self, request, response, *args, **kwargs):
        # django-axes marks the (DRF) request it was given when this username at this address
        # is locked out; Django's authenticate() then only says "no user", so answer the 429.
        if getattr(request, "axes_locked_out", False):
            response = lockout_response(request._request)
        return super().finalize_response(request, response, *args, **kwargs)


handler400 = "portal.handlers.bad_request"
handler404 = "portal.handlers.page_not_found"
handler500 = "portal.handlers.server_error"

router = DefaultRouter()
router.register("gpu-models", inventory_api.GpuModelViewSet, basename="gpu-model")
router.register("driver-groups", inventory_api.DriverGroupViewSet, basename="driver-group")
router.register("pools", inventory_api.PoolViewSet, basename="pool")
router.register("clusters", clusters_api.ClusterViewSet, basename="cluster")
router.register("nodes", inventory_api.NodeViewSet, basename="node")
router.register("gpus", inventory_api.GpuViewSet, basename="gpu")
router.register(
    "inventory/imports", inventory_api.InventoryImportViewSet, basename="inventory-import"
)
router.register(
    "inventory/uploads", inventory_api.InventoryUploadViewSet, basename="inventory-upload"
)
router.register("teams", tenancy_api.TeamViewSet, basename="team")
router.register("requests", capacity_api.CapacityRequestViewSet, basename="request")
router.register("allocations", capacity_api.AllocationViewSet, basename="allocation")
router.register(
    "recurring-reservations",
    recurring_api.RecurringReservationViewSet,
    basename="recurring-reservation",
)
router.register(
    "maintenance-windows",
    maintenance_api.MaintenanceWindowViewSet,
    basename="maintenance-window",
)
router.register("overrides", overrides_api.OverrideViewSet, basename="override")
router.register("audit-events", audit_api.AuditEventViewSet, basename="audit-event")
router.register("estimates", sizing_api.SizingEstimateViewSet, basename="estimate")
router.register("idle-findings", reclamation_api.IdleFindingViewSet, basename="idle-finding")
router.register(
    "reclamation-policies", reclamation_api.ReclamationPolicyViewSet, basename="reclamation-policy"
)
router.register("exemptions", reclamation_api.ExemptionViewSet, basename="exemption")
router.register(
    "reclamation-whatifs", reclamation_api.ReclamationWhatIfViewSet, basename="reclamation-whatif"
)
router.register("elastic-policies", elastic_api.ElasticPolicyViewSet, basename="elastic-policy")
router.register("elastic-whatifs", elastic_api.ElasticWhatIfViewSet, basename="elastic-whatif")
router.register("scale-events", elastic_api.ScaleEventViewSet, basename="scale-event")
router.register("burst-opt-ins", elastic_api.BurstOptInViewSet, basename="burst-opt-in")
router.register("serving", serving_api.ServingViewSet, basename="serving")
router.register("served-models", calibration_api.ServedModelViewSet, basename="served-model")
router.register("advisor/findings", advisor_api.AdvisorFindingViewSet, basename="advisor-finding")
router.register("statements", billing_api.StatementViewSet, basename="statement")
router.register("budgets", budgets_api.BudgetViewSet, basename="budget")
router.register("pending-work", waiting_api.PendingWorkViewSet, basename="pending-work")
router.register("token-flow/tasks", tokenflow_api.AgentTaskViewSet, basename="token-flow-task")

api_v1 = [
    path("auth/token/", TokenView.as_view(), name="auth-token"),
    path(
        "unrecognised-models/",
        inventory_api.UnrecognisedModelView.as_view(),
        name="unrecognised-models",
    ),
    path("usage/tokens/", billing_api.TokenUsageView.as_view(), name="usage-tokens"),
    path(
        "stranded-capacity/",
        dashboards_api.StrandedCapacityView.as_view(),
        name="stranded-capacity",
    ),
    # before the router: "requests/explain/" is not a request id
    path("requests/explain/", explain_api.RequestExplainView.as_view(), name="request-explain"),
    path(
        "requests/<int:pk>/explanation/",
        explain_api.RequestExplanationView.as_view(),
        name="request-explanation",
    ),
    path("", include(router.urls)),
]

urlpatterns = [
    *([path("oidc/", include("mozilla_django_oidc.urls"))] if settings.OIDC_ENABLED else []),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("healthz/deep", deep_health, name="healthz-deep"),
    path(
        "login/",
        LoginView.as_view(extra_context={"oidc_enabled": settings.OIDC_ENABLED}),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    # The split view serves its script from a URL (?script), not inline: the CSP allows it.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("costs/", include("billing.urls")),
    path("dashboard/", dashboards_views.admin_dashboard, name="dashboard"),
    path(
        "dashboard/stranded/recompute/",
        dashboards_views.stranded_recompute,
        name="dashboard-stranded-recompute",
    ),
    path("teams/<slug:slug>/dashboard/", dashboards_views.team_dashboard, name="team-dashboard"),
    path("", include("django_prometheus.urls")),
    path("", include("pools.urls")),
]
