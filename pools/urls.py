from django.urls import path

from pools import views, views_reclamation, views_requests, views_sizing

app_name = "pools"

urlpatterns = [
    path("", views.fleet_overview, name="fleet-overview"),
    path("nodes/", views.node_list, name="node-list"),
    path("nodes/<str:hostname>/", views.node_detail, name="node-detail"),
    path("gpus/", views.gpu_list, name="gpu-list"),
    path("gpu-models/", views.gpu_model_list, name="gpu-model-list"),
    path("pools/", views.pool_list, name="pool-list"),
    path("unrecognised-models/", views.unrecognised_models, name="unrecognised-models"),
    path("inventory/import/", views.inventory_import, name="inventory-import"),
    path("scheduler/drift/", views.scheduler_drift, name="scheduler-drift"),
    path("idle/", views_reclamation.idle_findings, name="idle-findings"),
    path("idle/policies/", views_reclamation.reclamation_policies, name="reclamation-policies"),
    path("idle/scan/", views_reclamation.idle_scan_now, name="idle-scan-now"),
    path(
        "idle/<int:pk>/<str:action>/",
        views_reclamation.idle_finding_action,
        name="idle-finding-action",
    ),
    path("teams/mine/", views_requests.my_teams, name="my-teams"),
    path("requests/", views_requests.request_list, name="request-list"),
    path("requests/new/", views_requests.request_new, name="request-new"),
    path("requests/queue/", views_requests.approval_queue, name="approval-queue"),
    path("requests/<int:pk>/", views_requests.request_detail, name="request-detail"),
    path("requests/<int:pk>/<str:action>/", views_requests.request_action, name="request-action"),
    path("allocations/", views_requests.allocation_list, name="allocation-list"),
    path(
        "allocations/<int:pk>/<str:action>/",
        views_requests.allocation_action,
        name="allocation-action",
    ),
    path("timeline/", views_requests.timeline, name="timeline"),
    path("sizing/", views_sizing.sizing_page, name="sizing"),
    path("sizing/save/", views_sizing.sizing_save, name="sizing-save"),
    path("sizing/estimates/", views_sizing.sizing_estimate_list, name="sizing-estimate-list"),
    path(
        "sizing/estimates/<int:pk>/",
        views_sizing.sizing_estimate_detail,
        name="sizing-estimate-detail",
    ),
]
