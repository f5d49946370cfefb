"""The capacity dashboard's Prometheus readings, made by a Celery task and kept in the shared
cache, so that no page waits on Prometheus (issue 29: at 100,800 GPUs the first view of every
two minutes spent ~1.4 s reading every pooled GPU and the answers, and a Prometheus that does
not answer held a gunicorn worker up to ``PROMETHEUS_DASHBOARD_TIMEOUT_S`` per query).

Four parts, each one fleet-wide reading that every filter narrows in the process
(:mod:`pools.dashboards.utilisation`): :data:`CARDS`, the cards in use now and each card's
30-minute mean (the capacity table, the *in use* card and the heatmap), and one chart per
range (``24h``, ``7d``, ``30d``).

- **Beat** (``dashboard-utilisation``, every :data:`REFRESH_EVERY`) reads the parts a page
  showed within :data:`WATCH_WINDOW` (a page marks its part watched on every view): the cards
  every time, a chart once its end has moved: 24 h and 7 d when their last step has closed
  (5 min, 30 min), 30 d once a day, when the UTC day rolls over (its 2-hour steps would
  re-read 30 days to add 0.3 % of the chart; :data:`utilisation.RANGES`); a chart a Prometheus
  gave nothing for, at its next step. A portal nobody looks at sends Prometheus nothing.
- **On demand**: a page that finds no reading, or one gone stale (cards older than
  :data:`CARDS_STALE_AFTER`, beat stopped; a chart whose last step closed), queues the part's
  read once (:data:`QUEUED_KEY` is held until the task ends) and shows what it has: the
  stored reading with its age, or "being read…" and an htmx poll while there is none. Where
  tasks run eagerly (the demo, no broker) the read runs in the request, as every queued task
  there does.
- A failed read is stored like a good one, with its error and the time of the attempt: the
  page says why there is no reading (never 0) and beat or the next stale view tries again.

Readings live under :data:`READING_KEY` for :data:`KEEP_FOR`; the cards' per-card means under
:data:`PER_CARD_KEY` (100,800 floats), read by the heatmap only. The cache must be shared by
the web and worker processes (``CACHE_URL``, Redis), as for the stranded-capacity snapshot.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from pools.dashboards import utilisation
from pools.dashboards.capacity import DashboardFilters
from pools.jobs import DASHBOARD_UTILISATION, enqueue

CARDS = "cards"
PARTS = (CARDS, *utilisation.RANGES)
READING_KEY = "dashboard:utilisation:v1:{part}"  # bump the version when a reading changes shape
PER_CARD_KEY = "dashboard:utilisation:v1:per-card"
QUEUED_KEY = "dashboard:utilisation:v1:queued:{part}"
WATCHED_KEY = "dashboard:utilisation:v1:watched:{part}"
REFRESH_EVERY = timedelta(minutes=2)  # the beat schedule (portal.settings)
CARDS_STALE_AFTER = timedelta(minutes=5)  # older (beat stopped, nobody looked): read on demand
WATCH_WINDOW = timedelta(minutes=10)
KEEP_FOR = timedelta(days=2)

Reading = utilisation.CardsReading | utilisation.HistoryReading


def _stored(part: str) -> Reading | None:
    found = cache.get(READING_KEY.format(part=part))
    return (
        found if isinstance(found, utilisation.CardsReading | utilisation.HistoryReading) else None
    )


def _due(part: str, reading: Reading | None, now: datetime) -> bool:
    """Whether ``part`` wants a new reading at ``now``: none yet, the cards' older than
    :data:`CARDS_STALE_AFTER`, a chart whose end has moved since it was read (its last step
    closed; for 30 d, the UTC day rolled over: :func:`utilisation.history_end`), or one a
    Prometheus gave nothing for once a step has closed since the attempt."""
    if reading is None:
        return True
    if part == CARDS:
        return now - reading.computed_at >= CARDS_STALE_AFTER
    if reading.coverage.missed and utilisation.history_step_closed_since(
        reading.computed_at, now, part
    ):
        return True
    return utilisation.history_end(now, part) > reading.end


def _read(part: str, now: datetime, metrics) -> Reading:
    """Read ``part`` from Prometheus and store it (the cards' per-card means apart)."""
    keep = int(KEEP_FOR.total_seconds())
    if part == CARDS:
        reading = utilisation.cards_reading_read(now=now, metrics=metrics)
        cache.set(PER_CARD_KEY, reading.by_gpu, keep)
        cache.set(READING_KEY.format(part=part), replace(reading, by_gpu={}), keep)
        return reading
    reading = utilisation.history_reading_read(now=now, range_key=part, metrics=metrics)
    cache.set(READING_KEY.format(part=part), reading, keep)
    return reading


def utilisation_refresh(
    *, part: str | None = None, now: datetime | None = None, metrics=None
) -> dict[str, str]:
    """Read and store the dashboard's utilisation: ``part`` (a page's request: only if still
    :func:`_due`, so a second request queued meanwhile reads nothing), or, from beat
    (``part=None``), every part watched within :data:`WATCH_WINDOW`, the cards each time and a
    chart when due. ``metrics``: an adapter standing for every Prometheus (tests). Returns
    part -> ``"read"`` or the error of the read; parts not read are absent. Safe to run twice:
    the newer reading replaces the older."""
    now = now or timezone.now()
    parts = [part] if part else [p for p in PARTS if cache.get(WATCHED_KEY.format(part=p))]
    done: dict[str, str] = {}
    for name in parts:
        try:
            if (part is None and name == CARDS) or _due(name, _stored(name), now):
                done[name] = _read(name, now, metrics).error or "read"
        finally:
            cache.delete(QUEUED_KEY.format(part=name))
    return done


def _looked_at(part: str, now: datetime) -> Reading | None:
    """A page shows ``part``: mark it watched, queue its read when :func:`_due` (once until the
    task ends), and return what is stored (after the read where tasks run eagerly)."""
    cache.set(WATCHED_KEY.format(part=part), True, int(WATCH_WINDOW.total_seconds()))
    reading = _stored(part)
    if _due(part, reading, now) and cache.add(
        QUEUED_KEY.format(part=part), True, settings.TASK_TIME_LIMIT_S
    ):
        enqueue(DASHBOARD_UTILISATION, part)
        reading = _stored(part)  # read already where tasks run eagerly
    return reading


def cards_stored(*, now: datetime, per_card: bool = False) -> utilisation.CardsReading | None:
    """The stored cards reading (``per_card``: with each card's mean, for the heatmap), a
    reading saying Prometheus is not configured when none is (one query), or ``None`` while
    the first is being read. Never asks Prometheus itself (:func:`_looked_at`)."""
    if utilisation.no_prometheus_anywhere():
        missed = {"": utilisation.NOT_CONFIGURED}
        return utilisation.CardsReading(
            now, coverage=utilisation.Coverage(urls=("",), missed=missed)
        )
    reading = _looked_at(CARDS, now)
    if reading is not None and per_card:
        reading = replace(reading, by_gpu=cache.get(PER_CARD_KEY) or {})
    return reading


def in_use_stored(*, filters: DashboardFilters, now: datetime) -> utilisation.UtilisationNow:
    """Cards in use for the page: the stored reading narrowed to ``filters``
    (:func:`utilisation.in_use_for`), or ``pending`` while the first is being read."""
    reading = cards_stored(now=now)
    if reading is None:
        return utilisation.UtilisationNow(now=now, pending=True)
    return utilisation.in_use_for(reading, filters, now=now)


def history_stored(
    *, filters: DashboardFilters, now: datetime, range_key: str
) -> utilisation.UtilisationHistory:
    """The utilisation chart of ``range_key`` for the page: the stored reading narrowed to
    ``filters`` (:func:`utilisation.history_for`), an error when Prometheus is not configured,
    or ``pending`` while the first reading of the range is being made."""
    chosen = utilisation.RANGES.get(range_key, utilisation.RANGES[utilisation.DEFAULT_RANGE])
    end = utilisation.history_end(now, chosen.key)
    empty = utilisation.UtilisationHistory(range=chosen, start=end - chosen.duration, end=end)
    if utilisation.no_prometheus_anywhere():
        return replace(empty, error=utilisation.NOT_CONFIGURED)
    reading = _looked_at(chosen.key, now)
    if reading is None:
        return replace(empty, pending=True)
    return utilisation.history_for(reading, filters)
