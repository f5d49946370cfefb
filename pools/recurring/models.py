"""Recurring reservations: a team's whole cards of one GPU model in one pool at the same local
hours on repeating dates (issue 32 item 2)."""

from __future__ import annotations

from datetime import UTC, timedelta

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from pools.inventory.models import GpuModel, Pool
from pools.recurring.recurrence import Rule, occurrences
from pools.tenancy.models import Team, TeamOwnedQuerySet


class Recurrence(models.TextChoices):
    """How a recurring reservation repeats; the values are Slurm's reservation flags
    (``scontrol`` man page, *Flags*: ``DAILY``, ``WEEKDAY``, ``WEEKLY``), lower-cased, and
    :mod:`pools.recurring.recurrence`'s."""

    DAILY = "daily", "Every day"
    WEEKDAY = "weekday", "Monday to Friday"
    WEEKLY = "weekly", "Every week"


class ReservationStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    CANCELLED = "cancelled", "Cancelled"


# Recurring reservations (issue 32 item 2): a team's cards of one GPU model in one pool at the
# same local hours on repeating dates, e.g. 8 L40S every weekday 09:00-18:00 Europe/Berlin for
# a course. While active, their occurrences (pools.recurring.recurrence) count in the card
# invariant like holding allocations (pools.capacity.window).

MAX_SPAN_DAYS = 366  # a rule reaches at most a year ahead: the horizon it is checked over
NAME_MAX_LENGTH = 60


class RecurringReservationQuerySet(TeamOwnedQuerySet):
    def overlapping_dates(self, start, end) -> RecurringReservationQuerySet:
        """Active reservations of any pool with a date within a day of ``[start, end)``
        (aware; see :meth:`holding`)."""
        return self.filter(
            status=ReservationStatus.ACTIVE,
            first_date__lte=end.astimezone(UTC).date() + timedelta(days=1),
            last_date__gte=start.astimezone(UTC).date() - timedelta(days=1),
        )

    def holding(
        self, *, pool_id: int, gpu_model_id: int, start, end
    ) -> RecurringReservationQuerySet:
        """The active reservations of the pool × GPU model with a date within a day of
        ``[start, end)`` (aware): a local date is at most 14 h from UTC's, so no occurrence in
        the window is missed (their occurrences are then clipped by
        :func:`pools.recurring.recurrence.occurrences`)."""
        return self.filter(
            pool_id=pool_id,
            gpu_model_id=gpu_model_id,
            status=ReservationStatus.ACTIVE,
            first_date__lte=end.astimezone(UTC).date() + timedelta(days=1),
            last_date__gte=start.astimezone(UTC).date() - timedelta(days=1),
        )


class RecurringReservation(models.Model):
    """See the comment above. ``first_date``/``last_date`` are local dates, both included;
    ``start_time`` < ``end_time`` local wall-clock times in ``time_zone`` (an IANA name);
    ``card_count`` whole cards at each occurrence."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="recurring_reservations")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="recurring_reservations")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    card_count = models.PositiveIntegerField()
    recurrence = models.CharField(max_length=8, choices=Recurrence.choices)
    time_zone = models.CharField(max_length=64)
    first_date = models.DateField()
    last_date = models.DateField()
    start_time = models.TimeField()
    end_time = models.TimeField()
    status = models.CharField(
        max_length=10, choices=ReservationStatus.choices, default=ReservationStatus.ACTIVE
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # What the beat loop wrote in the scheduler (pools/recurring/services/binding.py):
    # {"reservation": "portal-recur-7", "nodes": [...], "repeat": "DAILY"} in Slurm, or
    # {"note": why not}; empty until then and again once the Slurm reservation is deleted.
    scheduler_binding = models.JSONField(default=dict, blank=True)

    objects = RecurringReservationQuerySet.as_manager()

    class Meta:
        ordering = ["first_date", "start_time", "id"]
        indexes = [models.Index(fields=["pool", "gpu_model", "status", "last_date"])]
        constraints = [
            models.CheckConstraint(condition=Q(card_count__gt=0), name="recurring_cards_positive"),
            models.CheckConstraint(
                condition=Q(last_date__gte=F("first_date")), name="recurring_dates_ordered"
            ),
            models.CheckConstraint(
                condition=Q(end_time__gt=F("start_time")), name="recurring_times_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.team.slug}, {self.card_count} × {self.gpu_model.slug})"

    def occurrences_from(self, start) -> list[tuple]:
        """``(starts_at, ends_at)`` (UTC) of the occurrences that end after ``start``."""
        return occurrences(self.rule, start, None)

    @property
    def rule(self) -> Rule:
        return Rule(
            self.recurrence,
            self.first_date,
            self.last_date,
            self.start_time,
            self.end_time,
            self.time_zone,
            self.card_count,
        )
