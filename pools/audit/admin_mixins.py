"""Django admin that writes through the audit trail: every save and delete made in the admin is
an audit event with its before/after snapshot, in the admin's own transaction (Django runs the
change and delete views in ``transaction.atomic``), and read-only admin for data only services
may change (usage, imports, audit events)."""

from __future__ import annotations

from django.contrib import admin
from django.db import transaction

from pools.audit.services import audit_event_record, audit_snapshot


def admin_snapshot(obj) -> dict:
    """Every concrete field of ``obj`` (foreign keys as ids), JSON-ready."""
    return audit_snapshot(obj, *(f.attname for f in obj._meta.concrete_fields))


class AuditedAdmin(admin.ModelAdmin):
    """Saves and deletes are audited as ``<model>.created|changed|deleted`` with reason
    "Django admin". Subclasses may snapshot more (inline rows) in :meth:`snapshot`."""

    def snapshot(self, obj) -> dict:
        return admin_snapshot(obj)

    def save_model(self, request, obj, form, change):
        before = self.snapshot(type(obj).objects.get(pk=obj.pk)) if change else None
        super().save_model(request, obj, form, change)
        request._audit_before = before  # the event is written once the inlines are saved too

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        obj = form.instance
        audit_event_record(
            actor=request.user,
            action=f"{obj._meta.model_name}.{'changed' if change else 'created'}",
            obj=obj,
            before=getattr(request, "_audit_before", None),
            after=self.snapshot(obj),
            reason="Django admin",
        )

    def delete_model(self, request, obj):
        audit_event_record(
            actor=request.user,
            action=f"{obj._meta.model_name}.deleted",
            obj=obj,
            before=self.snapshot(obj),
            reason="Django admin",
        )
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for obj in queryset:
                self.delete_model(request, obj)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse only: the rows are written by importers and services, never by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
