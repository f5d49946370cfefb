"""Maintenance windows (issue 32 item 2): nodes taken out for a while by a pool admin."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from pools.capacity.models import overlap_q
from pools.inventory.models import DriverGroup, Node, Pool

# Maintenance windows (issue 32 item 2): a pool admin takes nodes out for ``[starts_at,
# ends_at)`` (a driver upgrade, a firmware flash). While planned, the schedulable cards of its
# nodes count as away in the card invariant (pools.capacity.window.maintenance_intervals), so
# no approval, form or calendar offers them; in Slurm the nodes get a reservation with
# Flags=MAINT (pools.maintenance.services.binding).


TITLE_MAX_LENGTH = 60  # a window's title: one line in the calendar and the list


class MaintenanceScope(models.TextChoices):
    NODES = "nodes", "Named nodes"
    POOL = "pool", "A whole pool"
    DRIVER_GROUP = "driver_group", "A driver group"


class MaintenanceStatus(models.TextChoices):
    PLANNED = "planned", "Planned"
    CANCELLED = "cancelled", "Cancelled"


class MaintenanceWindowQuerySet(models.QuerySet):
    def planned(self) -> MaintenanceWindowQuerySet:
        return self.filter(status=MaintenanceStatus.PLANNED)

    def overlapping(self, start, end) -> MaintenanceWindowQuerySet:
        """Windows overlapping ``[start, end)`` (half-open, aware; :func:`overlap_q`)."""
        return self.filter(overlap_q(start, end))


class MaintenanceWindow(models.Model):
    """See the comment above. ``nodes`` are the hosts the scope named when the window was
    made (a pool's or driver group's nodes at that moment), so a node added later is not
    taken out behind the admin's back. ``wave`` / ``wave_number``: the upgrade wave plan the
    window belongs to (blank for a single window), waves numbered from 1."""

    title = models.CharField(max_length=TITLE_MAX_LENGTH)
    scope = models.CharField(max_length=12, choices=MaintenanceScope.choices)
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="maintenance_windows"
    )
    driver_group = models.ForeignKey(
        DriverGroup, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    nodes = models.ManyToManyField(Node, related_name="maintenance_windows")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    reason = models.TextField(blank=True)
    status = models.CharField(
        max_length=10, choices=MaintenanceStatus.choices, default=MaintenanceStatus.PLANNED
    )
    wave = models.CharField(max_length=32, blank=True, default="", db_index=True)
    wave_number = models.PositiveSmallIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # What the maintenance sync wrote in Slurm: {"reservation": "portal-maint-3", "nodes": [...]}
    # or {"reservation": null, "note": why not}; empty until then and once deleted.
    scheduler_binding = models.JSONField(default=dict, blank=True)

    objects = MaintenanceWindowQuerySet.as_manager()

    class Meta:
        ordering = ["starts_at", "id"]
        indexes = [models.Index(fields=["status", "ends_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_at__gt=F("starts_at")), name="maintenance_window_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.starts_at:%Y-%m-%d %H:%M} UTC)"
