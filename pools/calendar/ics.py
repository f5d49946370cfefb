"""A team's iCalendar feed (RFC 5545): its allocations as single events and its recurring
reservations as one event each with an ``RRULE``, local times under the rule's ``TZID`` so a
calendar app keeps 09:00-18:00 on the wall clock across a change of summer time.

UIDs are ``allocation-<id>@<host>`` and ``recurring-<id>@<host>``: an app that subscribes
updates an event in place rather than adding it twice. DTSTAMP is the feed's instant in UTC.
The recurrence follows :mod:`pools.recurring.recurrence`: ``daily``, ``weekday`` (Monday to
Friday: ``FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR``) and ``weekly`` (on the first date's weekday),
``UNTIL`` the start of the last occurrence in UTC (RFC 5545 3.3.10: UTC when DTSTART has a
TZID). DTSTART is the first date the rule holds on, since RFC 5545 counts DTSTART as an
occurrence even when the rule would skip it (a weekday rule starting on a Saturday).
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from icalendar import Calendar, Event

from pools.recurring.recurrence import DAILY, WEEKDAY, occurrences

PRODID = "-//gpu-pool-portal//capacity calendar//EN"
_WEEKDAYS = ["MO", "TU", "WE", "TH", "FR"]
_WEEK = timedelta(days=8)  # a weekly rule has an occurrence in any 8 days of its range


def _allocation_event(allocation, *, host: str, stamp: datetime) -> Event:
    model = allocation.gpu_model.name
    what = f"{allocation.card_count} × {model}"
    if allocation.mig_profile:
        what = f"{allocation.card_count} × MIG {allocation.mig_profile} slices of {model}"
    event = Event()
    event.add("uid", f"allocation-{allocation.pk}@{host}")
    event.add("dtstamp", stamp)
    event.add("dtstart", allocation.starts_at.astimezone(UTC))
    event.add("dtend", allocation.ends_at.astimezone(UTC))
    event.add("summary", f"{what} on {allocation.pool.name}")
    event.add("location", allocation.pool.name)
    event.add("description", f"Allocation {allocation.pk} ({allocation.status})")
    return event


def _rrule(reservation, last_start: datetime) -> dict:
    rule: dict = {"until": last_start.astimezone(UTC)}
    if reservation.recurrence == DAILY:
        rule["freq"] = "daily"
    elif reservation.recurrence == WEEKDAY:
        rule.update(freq="weekly", byday=_WEEKDAYS)
    else:
        rule["freq"] = "weekly"
    return rule


def _recurring_event(reservation, *, host: str, stamp: datetime) -> Event | None:
    """``None`` when the rule holds on no date (a weekday rule over one weekend)."""
    rule = reservation.rule
    head = occurrences(rule, None, datetime.combine(rule.first_date + _WEEK, time(), UTC))
    tail = occurrences(rule, datetime.combine(rule.last_date - _WEEK, time(), UTC), None)
    if not head or not tail:
        return None
    zone = ZoneInfo(rule.time_zone)
    day = head[0][0].astimezone(zone).date()
    event = Event()
    event.add("uid", f"recurring-{reservation.pk}@{host}")
    event.add("dtstamp", stamp)
    event.add("dtstart", datetime.combine(day, rule.start_time, tzinfo=zone))
    event.add("dtend", datetime.combine(day, rule.end_time, tzinfo=zone))
    event.add("rrule", _rrule(reservation, tail[-1][0]))
    event.add(
        "summary",
        f"{reservation.name}: {reservation.card_count} × {reservation.gpu_model.name}"
        f" on {reservation.pool.name}",
    )
    event.add("location", reservation.pool.name)
    event.add("description", f"Recurring reservation {reservation.pk} ({reservation.recurrence})")
    return event


def team_calendar(team, allocations, recurring, *, host: str, now: datetime) -> bytes:
    """The feed of ``team`` as bytes (CRLF lines, UTF-8), with a VTIMEZONE for each zone used."""
    calendar = Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", f"{team.name} GPU capacity")
    stamp = now.astimezone(UTC)
    for allocation in allocations:
        calendar.add_component(_allocation_event(allocation, host=host, stamp=stamp))
    for reservation in recurring:
        event = _recurring_event(reservation, host=host, stamp=stamp)
        if event is not None:
            calendar.add_component(event)
    calendar.add_missing_timezones()
    return calendar.to_ical()
