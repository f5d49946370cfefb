"""The audit trail: one row per change, with the actor, a before/after snapshot and the reason."""

from __future__ import annotations

from typing import Any, Self

from django.apps import apps
from django.conf import settings
from django.db import models
from django.db.models import CharField, F, Value
from django.db.models.fields.tuple_lookups import TupleIn
from django.db.models.functions import Cast
from django.db.models.lookups import In

from pools.tenancy.roles import sees_every_team

# The objects whose events a team's members see: their teams' requests and allocations (by
# label, as ``object_type`` names them; each model's ``visible_to`` says which rows).
TEAM_AUDITED = ("pools.capacityrequest", "pools.allocation")


class _RowValueIn(TupleIn):
    """``(a, b) IN (subquery)`` as written, on PostgreSQL and on SQLite alike: SQLite reads row
    values since 3.15 (2016), but Django 5.2 rewrites the lookup there into an ``EXISTS`` that
    drops the filters of a ``UNION``'s parts."""

    def as_sql(self, compiler, connection):
        return In.as_sql(self, compiler, connection)


def _keys(rows: models.QuerySet) -> models.QuerySet:
    """``(object_type, object_id)`` of the rows of ``rows`` (one model): its label and the
    row's id cast to text, as events name them."""
    return (
        rows.order_by()
        .annotate(
            key_type=Value(rows.model._meta.label_lower, output_field=CharField()),
            key_id=Cast("pk", output_field=CharField()),
        )
        .values_list("key_type", "key_id")
    )


class AuditEventQuerySet(models.QuerySet):
    def about(self, *querysets: models.QuerySet) -> Self:
        """Events about the rows of ``querysets`` (each of one model), as one subquery:
        ``(object_type, object_id) IN (keys of the first UNION ALL keys of the next …)``.

        One row-value ``IN`` rather than an ``OR`` of one ``IN`` per model: PostgreSQL runs an
        ``OR`` of subqueries as a filter on every event, newest first, until a page is found
        (a member's 30 events of 201,600 at 100,800 GPUs: the whole index, 259 ms), but turns
        one ``IN`` into a join on the ``(object_type, object_id)`` index (2.5 ms)."""
        keys = [_keys(rows) for rows in querysets]
        union = keys[0].union(*keys[1:], all=True) if len(keys) > 1 else keys[0]
        return self.filter(_RowValueIn((F("object_type"), F("object_id")), union.query))

    def visible_to(self, user: Any) -> Self:
        """All events for pool admins; for others the events of the :data:`TEAM_AUDITED`
        rows they may see (subqueries, not lists of ids: the database keeps to one page of the
        newest events)."""
        if sees_every_team(user):
            return self
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.about(
            *(apps.get_model(label).objects.visible_to(user) for label in TEAM_AUDITED)
        )


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

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"
