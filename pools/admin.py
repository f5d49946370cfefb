"""Django admin for every model of the pools app: changes are audited (:class:`AuditedAdmin`),
pool binding fields follow the pool services' rules, rows only services write are read-only, and
users' rights and API tokens change through the audited services of :mod:`pools.access`."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db import transaction

from pools.access import models as access_models
from pools.access.services import api_token_revoke, user_rights_set
from pools.audit import models as audit_models
from pools.audit.admin_mixins import AuditedAdmin, ReadOnlyAdmin, admin_snapshot
from pools.calibration.forms import ServedModelForm
from pools.classes import models as classes_models
from pools.inventory import models as inventory_models
from pools.inventory.services.pools import POOL_BINDING_FIELDS, pool_usage
from pools.serving import models as serving_models
from pools.sizing import models as sizing_models
from pools.tenancy import models as tenancy_models
from pools.tenancy.roles import RIGHTS


class GpuModelAliasInline(admin.TabularInline):
    model = inventory_models.GpuModelAlias
    extra = 0


@admin.register(inventory_models.GpuModel)
class GpuModelAdmin(AuditedAdmin):
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
    # Edited on the catalogue page / API, which check the 0xNNNN form and that no other model
    # claims an id (the import resolver relies on both).
    readonly_fields = ["pci_device_ids"]
    inlines = [GpuModelAliasInline]


@admin.register(inventory_models.GpuModelAlias)
class GpuModelAliasAdmin(AuditedAdmin):
    list_display = ["value", "kind", "gpu_model", "key"]
    list_filter = ["kind"]
    search_fields = ["value", "key"]
    list_select_related = ["gpu_model"]


@admin.register(inventory_models.DriverGroup)
class DriverGroupAdmin(AuditedAdmin):
    list_display = ["branch", "min_driver_version", "max_driver_version", "max_cuda"]


@admin.register(inventory_models.Pool)
class PoolAdmin(AuditedAdmin):
    list_display = ["name", "slug", "scheduler", "slurm_partition", "overcommit_ratio"]
    list_filter = ["scheduler"]
    search_fields = ["name", "slug"]

    def get_readonly_fields(self, request, obj=None):
        # The pool services' rule: scheduler, slug and partition are fixed while allocations
        # hold cards in the pool (they name the scheduler objects those cards are applied in).
        if obj is not None and pool_usage(obj)["holding_allocations"]:
            return POOL_BINDING_FIELDS
        return ()

    def has_delete_permission(self, request, obj=None):
        # Deleted only when nothing refers to it (as the API's pool_delete refuses).
        if obj is None:
            return super().has_delete_permission(request)
        usage = pool_usage(obj)
        return not (usage["allocations"] or usage["requests"]) and super().has_delete_permission(
            request, obj
        )


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
class NodeAdmin(AuditedAdmin):
    list_display = ["hostname", "pool", "scheduler", "state", "driver_version", "last_seen_at"]
    list_filter = ["scheduler", "state", "pool", "driver_group"]
    search_fields = ["hostname"]
    list_select_related = ["pool"]
    inlines = [GpuInline]

    def get_readonly_fields(self, request, obj=None):
        # A node's hostname is its identity: imports match it, and placements, reservations and
        # scheduler bindings name it, so renaming would free the cards placed on it.
        return ("hostname",) if obj is not None else ()


class MigDeviceInline(admin.TabularInline):
    model = inventory_models.MigDevice
    extra = 0


@admin.register(inventory_models.Gpu)
class GpuAdmin(AuditedAdmin):
    list_display = ["__str__", "gpu_model", "raw_model_name", "uuid", "health", "mig_mode"]
    list_filter = ["health", "mig_mode", "gpu_model"]
    search_fields = ["node__hostname", "uuid", "serial", "raw_model_name"]
    list_select_related = ["node", "gpu_model"]
    inlines = [MigDeviceInline]


@admin.register(inventory_models.MigDevice)
class MigDeviceAdmin(AuditedAdmin):
    list_display = ["gpu", "index", "profile", "memory_total_mib"]
    list_select_related = ["gpu__node"]


@admin.register(inventory_models.InventoryImport)
class InventoryImportAdmin(ReadOnlyAdmin):
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


@admin.register(classes_models.WorkloadClass)
class WorkloadClassAdmin(AuditedAdmin):
    """Pool admins edit the classes (issue 36); the audit keeps the named models too."""

    list_display = ["name", "slug", "card_classes", "exclusive", "priority", "preemption_order"]
    filter_horizontal = ["gpu_models"]

    def snapshot(self, obj) -> dict:
        return {**admin_snapshot(obj), "gpu_models": sorted(m.slug for m in obj.gpu_models.all())}


@admin.register(tenancy_models.Team)
class TeamAdmin(AuditedAdmin):
    list_display = ["name", "slug", "cost_centre", "default_class"]
    search_fields = ["name", "slug", "cost_centre"]
    inlines = [MembershipInline]


@admin.register(audit_models.AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor", "action", "object_type", "object_repr"]
    list_filter = ["action", "object_type"]
    search_fields = ["object_repr", "object_id", "reason"]
    readonly_fields = [f.name for f in audit_models.AuditEvent._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(serving_models.ServedModel)
class ServedModelAdmin(AuditedAdmin):
    """What an allocation serves (sizing catalogue model id, precision, TP, engine), so the
    calibration pass can set its measured throughput against the sizing engine."""

    form = ServedModelForm
    list_display = ("allocation", "model_id", "precision", "tp", "engine")
    raw_id_fields = ("allocation",)


@admin.register(sizing_models.CalibrationRecord)
class CalibrationRecordAdmin(ReadOnlyAdmin):
    """Read-only: written by the hourly calibration pass."""

    list_display = (
        "model_id",
        "gpu_model",
        "engine",
        "precision",
        "driver_branch",
        "days",
        "median_tok_s_per_card",
        "median_ratio",
    )


@admin.register(sizing_models.SizingEstimate)
class SizingEstimateAdmin(ReadOnlyAdmin):
    """Read-only: estimates are created on the sizing page or the API and computed by a job."""

    list_display = ("id", "created_at", "created_by", "team", "status", "progress")
    list_filter = ("status",)
    list_select_related = ("created_by", "team")
    readonly_fields = [f.name for f in sizing_models.SizingEstimate._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(access_models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are made by their clients (``POST /api/v1/auth/token/``), never here, and never
    shown: only who, for what and until when. Deleting one revokes it, audited."""

    list_display = ["user", "client", "created", "expiry"]
    list_filter = ["client"]
    search_fields = ["user__username", "client"]
    list_select_related = ["user"]
    fields = readonly_fields = ["user", "client", "created", "expiry"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        api_token_revoke(token=obj, actor=request.user, reason="revoked in the Django admin")

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for token in queryset:
                self.delete_model(request, token)


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class AuditedUserAdmin(DjangoUserAdmin):
    """Django's user admin, with staff and superuser rights changed through
    :func:`pools.access.services.user_rights_set` (audited as ``user.rights_changed``)."""

    def save_model(self, request, obj, form, change):
        wanted = {name: getattr(obj, name) for name in RIGHTS}
        if change:
            stored = User.objects.only(*RIGHTS).get(pk=obj.pk)
            for name in RIGHTS:
                setattr(obj, name, getattr(stored, name))
        else:
            for name in RIGHTS:  # granted below, audited
                setattr(obj, name, False)
        super().save_model(request, obj, form, change)
        user_rights_set(user=obj, actor=request.user, reason="Django admin", **wanted)
