"""Django admin of billing: rate-card changes are audited; usage, imports and statements are
read-only (importers and the statement services write them)."""

from django.contrib import admin

from billing import models
from billing.services.versions import price_list_changed
from pools.audit.admin_mixins import AuditedAdmin, ReadOnlyAdmin, admin_snapshot


class RateCardEntryInline(admin.TabularInline):
    model = models.RateCardEntry
    extra = 0


@admin.register(models.RateCard)
class RateCardAdmin(AuditedAdmin):
    list_display = ["name", "currency", "effective_from", "effective_to"]
    inlines = [RateCardEntryInline]

    def snapshot(self, obj) -> dict:
        return {
            **admin_snapshot(obj),
            "entries": [admin_snapshot(e) for e in obj.entries.order_by("pk")],
        }

    # every month's priced figures move with the cards (billing.services.versions)
    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        price_list_changed()

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        price_list_changed()


@admin.register(models.UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = ["team", "gpu_model", "served_model", "quantity", "unit", "basis", "month",
                    "source", "source_id", "flag"]  # fmt: skip
    list_filter = ["source", "basis", "unit", "flag", "month"]
    search_fields = ["source_id", "team__slug"]
    list_select_related = ["team", "gpu_model"]


@admin.register(models.SharedCardUse)
class SharedCardUseAdmin(ReadOnlyAdmin):
    """Read-only: the shared-card import (billing/services/shared_card_import.py) writes them."""

    list_display = ["gpu", "team", "basis", "period_start", "period_end", "parts_held",
                    "parts_per_card", "utilisation_pct", "source_id"]  # fmt: skip
    list_filter = ["basis"]
    search_fields = ["source_id", "team__slug", "gpu__node__hostname"]
    list_select_related = ["team", "gpu__node"]


@admin.register(models.UsageImport)
class UsageImportAdmin(ReadOnlyAdmin):
    list_display = ["source", "window_start", "window_end", "records_created",
                    "records_updated", "records_unchanged", "flagged", "created_at"]  # fmt: skip


class StatementLineInline(admin.TabularInline):
    model = models.StatementLine
    extra = 0
    can_delete = False

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(models.Statement)
class StatementAdmin(ReadOnlyAdmin):
    """Read-only: statements change only through the build and finalize services."""

    list_display = ["team", "month", "status", "total_amount", "currency", "finalized_at"]
    list_filter = ["status", "month"]
    inlines = [StatementLineInline]

    def has_change_permission(self, request, obj=None):
        return False
