"""The audit trail: one row per change, with the actor, a before/after snapshot and the reason."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """Who changed what, when, from where: written explicitly by every service (no signals).
    Rows are only ever added: on PostgreSQL a trigger refuses any UPDATE or DELETE."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # PROTECT: the table is append-only (a PostgreSQL trigger refuses UPDATE and DELETE, see
    # migration 0020), so a user with events is deactivated, never deleted (SET_NULL would
    # rewrite their events).
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT
    )
    action = models.CharField(max_length=64, db_index=True)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=255, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"
