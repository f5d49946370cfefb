"""Django admin for every inventory and tenancy model."""

from django.contrib import admin

from pools.audit import models as audit_models
from pools.inventory import models as inventory_models
from pools.sizing import models as sizing_models
from pools.tenancy import models as tenancy_models


class GpuModelAliasInline(admin.TabularInline):
    model = inventory_models.GpuModelAlias
    extra = 0


@admin.register(inventory_models.GpuModel)
class GpuModelAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "slug",
        "card_class",
        "form_factor",
        "memory_gib",
        "memory_bandwidth_gbps",
        "bf16_dense_tflops",
        "nvlink_gbps",
        "tdp_w",
    ]
    list_filter = ["card_class", "form_factor"]
    search_fields = ["name", "slug", "vendor_name"]
    inlines = [GpuModelAliasInline]


@admin.register(inventory_models.GpuModelAlias)
class GpuModelAliasAdmin(admin.ModelAdmin):
    list_display = ["value", "kind", "gpu_model", "key"]
    list_filter = ["kind"]
    search_fields = ["value", "key"]
    list_select_related = ["gpu_model"]


@admin.register(inventory_models.DriverGroup)
class DriverGroupAdmin(admin.ModelAdmin):
    list_display = ["branch", "min_driver_version", "max_driver_version", "max_cuda"]


@admin.register(inventory_models.Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "scheduler", "slurm_partition", "overcommit_ratio"]
    list_filter = ["scheduler"]
    search_fields = ["name", "slug"]


class GpuInline(admin.TabularInline):
    model = inventory_models.Gpu
    extra = 0
    fields = [
        "index",
        "gpu_model",
        "raw_model_name",
        "uuid",
        "memory_total_mib",
        "mig_mode",
        "health",
    ]
    show_change_link = True


@admin.register(inventory_models.Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["hostname", "pool", "scheduler", "state", "driver_version", "last_seen_at"]
    list_filter = ["scheduler", "state", "pool", "driver_group"]
    search_fields = ["hostname"]
    list_select_related = ["pool"]
    inlines = [GpuInline]


class MigDeviceInline(admin.TabularInline):
    model = inventory_models.MigDevice
    extra = 0


@admin.register(inventory_models.Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ["__str__", "gpu_model", "raw_model_name", "uuid", "health", "mig_mode"]
    list_filter = ["health", "mig_mode", "gpu_model"]
    search_fields = ["node__hostname", "uuid", "serial", "raw_model_name"]
    list_select_related = ["node", "gpu_model"]
    inlines = [MigDeviceInline]


@admin.register(inventory_models.MigDevice)
class MigDeviceAdmin(admin.ModelAdmin):
    list_display = ["gpu", "index", "profile", "memory_total_mib"]
    list_select_related = ["gpu__node"]


@admin.register(inventory_models.InventoryImport)
class InventoryImportAdmin(admin.ModelAdmin):
    list_display = [
        "created_at",
        "source",
        "filename",
        "actor",
        "nodes_created",
        "nodes_updated",
        "nodes_unchanged",
        "nodes_rejected",
    ]
    list_filter = ["source"]


class MembershipInline(admin.TabularInline):
    model = tenancy_models.Membership
    extra = 0


@admin.register(tenancy_models.Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "cost_centre"]
    search_fields = ["name", "slug", "cost_centre"]
    inlines = [MembershipInline]


@admin.register(audit_models.AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor", "action", "object_type", "object_repr"]
    list_filter = ["action", "object_type"]
    search_fields = ["object_repr", "object_id", "reason"]
    readonly_fields = [f.name for f in audit_models.AuditEvent._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(sizing_models.SizingEstimate)
class SizingEstimateAdmin(admin.ModelAdmin):
    """Read-only: estimates are created on the sizing page or the API and computed by a job."""

    list_display = ("id", "created_at", "created_by", "team", "status", "progress")
    list_filter = ("status",)
    list_select_related = ("created_by", "team")
    readonly_fields = [f.name for f in sizing_models.SizingEstimate._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
