from django.urls import path

from pools.advisor import views as advisor_views
from pools.calendar import views as calendar_views
from pools.calibration import views as calibration_views
from pools.capacity import views as capacity_views
from pools.clusters import views as cluster_views
from pools.dashboards import views as dashboard_views
from pools.dashboards import views_classes as dashboard_class_views
from pools.elastic import views as elastic_views
from pools.explain import views as explain_views
from pools.inventory import views as inventory_views
from pools.maintenance import views as maintenance_views
from pools.overrides import views as overrides_views
from pools.reclamation import views as reclamation_views
from pools.serving import views as serving_views
from pools.sizing import views as sizing_views
from pools.waiting import views as waiting_views
from pools.web import team_picker

app_name = "pools"

urlpatterns = [
    path("", inventory_views.fleet_overview, name="fleet-overview"),
    path("nodes/", inventory_views.node_list, name="node-list"),
    path("nodes/<str:hostname>/", inventory_views.node_detail, name="node-detail"),
    path("gpus/", inventory_views.gpu_list, name="gpu-list"),
    path("gpu-models/", inventory_views.gpu_model_list, name="gpu-model-list"),
    path("gpu-models/new/", inventory_views.gpu_model_edit, name="gpu-model-create"),
    path("gpu-models/<slug:slug>/edit/", inventory_views.gpu_model_edit, name="gpu-model-edit"),
    path("pools/", inventory_views.pool_list, name="pool-list"),
    path("maintenance/", maintenance_views.maintenance_list, name="maintenance-list"),
    path("maintenance/new/", maintenance_views.maintenance_new, name="maintenance-new"),
    path("maintenance/waves/", maintenance_views.maintenance_waves, name="maintenance-waves"),
    path("maintenance/<int:pk>/", maintenance_views.maintenance_detail, name="maintenance-detail"),
    path(
        "maintenance/<int:pk>/cancel/",
        maintenance_views.maintenance_cancel,
        name="maintenance-cancel",
    ),
    path(
        "pools/<slug:pool>/<slug:model>/calendar/",
        calendar_views.pool_calendar,
        name="pool-calendar",
    ),
    path("overrides/", overrides_views.override_list, name="override-list"),
    path("overrides/new/", overrides_views.override_new, name="override-new"),
    path(
        "overrides/<int:pk>/cancel/",
        overrides_views.override_cancel_page,
        name="override-cancel",
    ),
    path(
        "driver-groups/<int:branch>/calendar/",
        calendar_views.driver_group_calendar,
        name="driver-group-calendar",
    ),
    path("clusters/", cluster_views.cluster_list, name="cluster-list"),
    path("classes/", dashboard_class_views.class_list, name="class-list"),
    path("clusters/<slug:slug>/check/", cluster_views.cluster_check_now, name="cluster-check"),
    path("clusters/new/", cluster_views.cluster_edit, name="cluster-create"),
    path("clusters/<slug:slug>/edit/", cluster_views.cluster_edit, name="cluster-edit"),
    path("clusters/<slug:slug>/delete/", cluster_views.cluster_delete_page, name="cluster-delete"),
    path("unrecognised-models/", inventory_views.unrecognised_models, name="unrecognised-models"),
    path("inventory/import/", inventory_views.inventory_import, name="inventory-import"),
    path("inventory/uploads/<int:pk>/", inventory_views.inventory_upload, name="inventory-upload"),
    path("scheduler/drift/", capacity_views.scheduler_drift, name="scheduler-drift"),
    path("idle/", reclamation_views.idle_findings, name="idle-findings"),
    path("idle/policies/", reclamation_views.reclamation_policies, name="reclamation-policies"),
    path("idle/scan/", reclamation_views.idle_scan_now, name="idle-scan-now"),
    path(
        "idle/<int:pk>/<str:action>/",
        reclamation_views.idle_finding_action,
        name="idle-finding-action",
    ),
    path("advisor/", advisor_views.advisor_findings, name="advisor-findings"),
    path("advisor/run/", advisor_views.advisor_run_now, name="advisor-run-now"),
    path("advisor/digest/", advisor_views.digest_toggle, name="advisor-digest"),
    path(
        "advisor/<int:pk>/<str:action>/",
        advisor_views.finding_action,
        name="advisor-finding-action",
    ),
    path(
        "allocations/<int:pk>/findings/",
        advisor_views.allocation_findings,
        name="advisor-allocation",
    ),
    path("teams/<slug:slug>/findings/", advisor_views.team_findings, name="advisor-team"),
    path("elastic/", elastic_views.elastic_list, name="elastic-list"),
    path("elastic/<int:pk>/", elastic_views.elastic_detail, name="elastic-detail"),
    path("elastic/burst/", elastic_views.burst_opt_in_list, name="burst-opt-in-list"),
    path("elastic/burst/<int:pk>/opt-out/", elastic_views.burst_opt_out, name="burst-opt-out"),
    path("start/", dashboard_views.landing, name="landing"),
    path("teams/mine/", dashboard_views.my_teams, name="my-teams"),
    path("teams/suggest/", team_picker.team_suggestions, name="team-suggest"),
    path(
        "teams/<slug:slug>/calendar.ics",
        calendar_views.team_calendar_ics,
        name="team-calendar-ics",
    ),
    path(
        "teams/<slug:slug>/calendar/",
        calendar_views.team_calendar_page,
        name="team-calendar",
    ),
    path(
        "teams/<slug:slug>/calendar/<str:action>/",
        calendar_views.team_calendar_link,
        name="team-calendar-link",
    ),
    path(
        "calendar/<str:token>.ics",
        calendar_views.calendar_feed,
        name="calendar-feed",
    ),
    path("teams/<slug:slug>/waiting/", waiting_views.waiting_work, name="waiting-work"),
    path("requests/", capacity_views.request_list, name="request-list"),
    path("requests/new/", capacity_views.request_new, name="request-new"),
    # the queue shows the explainer's verdicts (capacity sits below explain: handed in here)
    path(
        "requests/queue/",
        capacity_views.approval_queue,
        {"verdicts": explain_views.queue_verdicts},
        name="approval-queue",
    ),
    path("requests/explain/", explain_views.draft_explanation, name="request-explain"),
    path("requests/<int:pk>/", capacity_views.request_detail, name="request-detail"),
    path(
        "requests/<int:pk>/explanation/",
        explain_views.request_explanation,
        name="request-explanation",
    ),
    path("requests/<int:pk>/<str:action>/", capacity_views.request_action, name="request-action"),
    path("allocations/", capacity_views.allocation_list, name="allocation-list"),
    path(
        "allocations/<int:pk>/serving/",
        serving_views.allocation_serving,
        name="allocation-serving",
    ),
    path(
        "allocations/<int:pk>/serving/estimate/",
        calibration_views.served_estimate,
        name="allocation-serving-estimate",
    ),
    path(
        "allocations/<int:pk>/<str:action>/",
        capacity_views.allocation_action,
        name="allocation-action",
    ),
    path("timeline/", capacity_views.timeline, name="timeline"),
    path("sizing/", sizing_views.sizing_page, name="sizing"),
    path("sizing/save/", sizing_views.sizing_save, name="sizing-save"),
    path("sizing/estimates/", sizing_views.sizing_estimate_list, name="sizing-estimate-list"),
    path(
        "sizing/estimates/<int:pk>/",
        sizing_views.sizing_estimate_detail,
        name="sizing-estimate-detail",
    ),
]
