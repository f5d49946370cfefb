from django.contrib import admin

from billing import models


class RateCardEntryInline(admin.TabularInline):
    model = models.RateCardEntry
    extra = 0


@admin.register(models.RateCard)
class RateCardAdmin(admin.ModelAdmin):
    list_display = ["name", "currency", "effective_from", "effective_to"]
    inlines = [RateCardEntryInline]


@admin.register(models.UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    list_display = ["team", "gpu_model", "served_model", "quantity", "unit", "basis", "month",
                    "source", "source_id", "flag"]  # fmt: skip
    list_filter = ["source", "basis", "unit", "flag", "month"]
    search_fields = ["source_id", "team__slug"]
    list_select_related = ["team", "gpu_model"]


@admin.register(models.UsageImport)
class UsageImportAdmin(admin.ModelAdmin):
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
class StatementAdmin(admin.ModelAdmin):
    """Read-only: statements change only through the build and finalize services."""

    list_display = ["team", "month", "status", "total_amount", "currency", "finalized_at"]
    list_filter = ["status", "month"]
    inlines = [StatementLineInline]

    def has_change_permission(self, request, obj=None):
        return False
