"""Django admin of billing: rate-card changes are audited and held to the rate-card service's
rules; usage, imports and statements are read-only (importers and the statement services write
them)."""

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import transaction
from django.http import HttpResponseRedirect
from django.urls import reverse

from billing import models
from billing.errors import RateCardConflict
from billing.forms import RateCardForm
from billing.services.rates import rate_card_check
from billing.services.versions import price_list_changed
from pools.audit.admin_mixins import AuditedAdmin, ReadOnlyAdmin, admin_snapshot
from pools.common.errors import InvalidInput


class RateCardEntryInline(admin.TabularInline):
    model = models.RateCardEntry
    extra = 0


@admin.register(models.RateCard)
class RateCardAdmin(AuditedAdmin):
    """Rate cards with their entries. Adding or changing one is checked by :class:`RateCardForm`;
    deleting one by the same check (:meth:`delete_view`: the card before it would run on into
    the months it leaves), one card at a time (no bulk delete)."""

    form = RateCardForm
    list_display = ["name", "currency", "effective_from", "effective_to"]
    inlines = [RateCardEntryInline]

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # each deletion is checked on its own
        return actions

    def delete_view(self, request, object_id, extra_context=None):
        # one transaction: the check's lock is held until the deletion commits
        with transaction.atomic():
            posted = request.method == "POST"
            card = self.get_object(request, unquote(object_id)) if posted else None
            if card is not None:
                try:
                    rate_card_check(card, delete=True)
                except (InvalidInput, RateCardConflict) as exc:
                    self.message_user(request, exc.message, messages.ERROR)
                    return HttpResponseRedirect(
                        reverse("admin:billing_ratecard_change", args=[card.pk])
                    )
            return super().delete_view(request, object_id, extra_context)

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
