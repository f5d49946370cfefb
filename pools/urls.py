from django.urls import path

from pools import views

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
]
