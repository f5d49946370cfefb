"""API of recurring reservations (issue 32 item 2, ``/api/v1/recurring-reservations/``): read by
the team's members and pool admins, made and cancelled by pool admins through
:mod:`pools.recurring.services.reservations`. Domain errors become 400 / 403 / 409 bodies in
:func:`portal.api.exception_handler` (a conflict names the first conflicting ``date``)."""

from __future__ import annotations

import re

from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, viewsets

from pools.inventory.models import GpuModel, Pool
from pools.recurring import selectors
from pools.recurring.models import NAME_MAX_LENGTH, Recurrence, RecurringReservation
from pools.recurring.services.reservations import (
    recurring_reservation_cancel,
    recurring_reservation_create,
)
from pools.tenancy.models import Team
from pools.web.api import CancelActionMixin, PoolAdminCreateMixin

MAX_CARDS = 100_000  # a bound for the integer field; the pool's usable cards refuse sooner
WALL_CLOCK_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$"


@extend_schema_field(
    {
        "type": "string",
        "pattern": WALL_CLOCK_PATTERN,
        "example": "09:00",
        "description": "Local wall-clock time in the reservation's time_zone, HH:MM or HH:MM:SS, "
        "without an offset.",
    }
)
class WallClockTimeField(serializers.TimeField):
    """A local wall-clock time (``HH:MM[:SS]``) read in the reservation's ``time_zone``.

    Not OpenAPI's ``format: time``: that is RFC 3339's *full-time*, which carries an offset,
    while an occurrence's offset follows the date (Europe/Berlin is +01:00 in January and
    +02:00 in July). An offset, fractions of a second or anything else is refused with 400
    rather than silently dropped (Django's ``parse_time`` discards an offset)."""

    default_error_messages = {
        "wall_clock": "Enter a wall-clock time HH:MM or HH:MM:SS without an offset; it is read in "
        "time_zone.",
    }

    def to_internal_value(self, value):
        if not isinstance(value, str) or not re.fullmatch(WALL_CLOCK_PATTERN, value):
            self.fail("wall_clock")
        return super().to_internal_value(value)


class RecurringReservationSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    gpu_model = serializers.SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.all())
    name = serializers.CharField(max_length=NAME_MAX_LENGTH)
    card_count = serializers.IntegerField(min_value=1, max_value=MAX_CARDS)
    recurrence = serializers.ChoiceField(choices=Recurrence.choices)
    start_time = WallClockTimeField()
    end_time = WallClockTimeField()
    next_occurrence = serializers.SerializerMethodField()

    class Meta:
        model = RecurringReservation
        fields = [
            "id", "team", "pool", "gpu_model", "name", "card_count", "recurrence", "time_zone",
            "first_date", "last_date", "start_time", "end_time", "status", "next_occurrence",
            "scheduler_binding", "created_at",
        ]  # fmt: skip
        # scheduler_binding: what the beat wrote in the scheduler ({"reservation": name, "nodes",
        # "repeat", "starts_at"} in Slurm) or {"reservation": null, "note": why not}
        read_only_fields = ["status", "scheduler_binding", "created_at"]

    def get_next_occurrence(self, reservation) -> dict | None:
        """The first occurrence still to end (UTC, ISO 8601), or ``None``."""
        now = timezone.now()
        found = next((o for o in reservation.occurrences_from(now)), None)
        return (
            None if found is None else {"start": found[0].isoformat(), "end": found[1].isoformat()}
        )


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


@extend_schema_view(
    create=extend_schema(
        examples=[
            OpenApiExample(
                "A course: 8 L40S every weekday 09:00-18:00 Berlin time",
                value={
                    "team": "nlp",
                    "pool": "infer",
                    "gpu_model": "l40s",
                    "name": "LLM course",
                    "card_count": 8,
                    "recurrence": "weekday",
                    "time_zone": "Europe/Berlin",
                    "first_date": "2027-01-11",
                    "last_date": "2027-03-26",
                    "start_time": "09:00",
                    "end_time": "18:00",
                },  # fmt: skip
                request_only=True,
            )
        ]
    ),
    cancel=extend_schema(request=CancelSerializer, responses=RecurringReservationSerializer),
)
class RecurringReservationViewSet(
    PoolAdminCreateMixin, CancelActionMixin, viewsets.ReadOnlyModelViewSet
):
    """Recurring reservations of whole cards (daily, weekdays, weekly in a time zone)."""

    queryset = RecurringReservation.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = RecurringReservationSerializer
    filterset_fields = ["status", "recurrence"]
    create_refusal = "Only pool admins may reserve recurring capacity."
    create_service = staticmethod(recurring_reservation_create)
    cancel_serializer_class = CancelSerializer
    cancel_service = staticmethod(recurring_reservation_cancel)
    cancel_keyword = "reservation"

    def get_queryset(self):
        return selectors.recurring_reservation_list(user=self.request.user)
