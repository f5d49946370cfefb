"""Requested card-time per pool × model and whole hour of submission, summed once per UTC day
and per generation of the requests and kept in the shared cache, for the demand forecast
(:func:`pools.dashboards.capacity.demand_forecasts`, issue #29 item 7).

The forecast sums every request of the last 13 weeks: ~104,000 rows at 100,800 GPUs, a whole
scan that every row passes (an index does not help). Its weeks are measured back from now, so
they start at now's time of day: any whole hour that holds no week start lies in one week. The
whole hours from 91 days before today (UTC) to the end of today, and every later submission in
one sum (seeded or imported requests may carry one), are summed here once per generation; the
forecast adds the hours between its week starts from this and sums live only the 13 hours its
week starts fall in (about 1/170 of the rows).

Generation: a token of :mod:`pools.common.generation`, replaced once a transaction that saved
or deleted a request commits (:func:`requests_changed`, connected in :mod:`pools.apps`). The
approval's plain UPDATE (:mod:`pools.capacity.services.requests`) sends no signal; it turns a
submitted request approved, both demand, and changes no pool, model, card count, window or
submission time, so no sum here. A writer that bypasses ``save``/``delete`` otherwise
(``QuerySet.update``, ``bulk_create``, raw SQL) must call :func:`requests_changed` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, QuerySet, Sum
from django.db.models.functions import Trunc

from pools.common.generation import cached, changed, generation

HOUR = timedelta(hours=1)
MICROSECOND = timedelta(microseconds=1)
GENERATION_KEY = "dashboards:requests-generation"
# Kept a little over a day: the key names the day, so yesterday's entry is never read again.
HISTORY_CACHE_S = 26 * 3600


def requests_generation() -> str:
    """The current generation token (32 hex digits); a new one when the cache has none (first
    use, cleared, evicted), so no entry stored under an earlier token is read again."""
    return generation(GENERATION_KEY)


def requests_changed(**_signal_kwargs) -> None:
    """A request was written: a new generation once the transaction commits (at once outside
    one). After the commit, so that no reader stores sums read before it under the new token."""
    changed(GENERATION_KEY)


def floor_hour(at: datetime) -> datetime:
    """``at`` (aware) truncated to its whole hour, in UTC."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class HourlyDemand:
    """Card-time of the requests submitted in each whole hour of ``[start, end)`` (UTC) and
    from ``end`` on, per (pool id, model id): ``card_us[key][i]`` the card-microseconds (cards ×
    window length, µs) submitted before ``start + i`` hours, ``rows[key][i]`` how many requests;
    ``i`` from 0 to the number of hours, then one more entry: everything (prefix sums: a range
    of hours is one subtraction)."""

    start: datetime
    end: datetime
    card_us: dict[tuple[int, int], list[int]]
    rows: dict[tuple[int, int], list[int]]

    def between(self, key: tuple[int, int], lo: datetime, hi: datetime | None) -> tuple[int, int]:
        """Card-microseconds and rows of ``key`` submitted in ``[lo, hi)``: whole hours within
        ``[start, end]``, ``hi`` None for no end; ``(0, 0)`` when ``lo >= hi``."""
        if hi is not None and lo >= hi:
            return 0, 0
        a = (lo - self.start) // HOUR
        b = len(self.card_us[key]) - 1 if hi is None else (hi - self.start) // HOUR
        us, n = self.card_us[key], self.rows[key]
        return us[b] - us[a], n[b] - n[a]


def hourly_demand(named: QuerySet, *, now: datetime, days: int) -> HourlyDemand:
    """Sums of ``named`` (requests that name their pool and model: the forecast's demand
    statuses, not filtered by team, pool or model) over the whole hours from ``days`` days
    before today (UTC, ``now``'s day) to the end of today, and from then on, from the cache
    under today and the generation, or read in one query (grouped by pool, model, card count
    and hour) and stored; read and not stored inside a transaction
    (:func:`pools.common.generation.cached`)."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=days), today + timedelta(days=1)
    key = f"dashboards:demand-hours:{requests_generation()}:{today:%Y-%m-%d}:{days}"
    return cached(
        key,
        lambda: _hourly_demand_read(named, start, end),
        HISTORY_CACHE_S,
        fits=lambda found: isinstance(found, HourlyDemand),
    )


def _hourly_demand_read(named: QuerySet, start: datetime, end: datetime) -> HourlyDemand:
    """:func:`hourly_demand` read from the database (one query) over ``[start, end)``."""
    length = ExpressionWrapper(F("ends_at") - F("starts_at"), output_field=DurationField())
    rows = (
        named.filter(submitted_at__gte=start)
        .annotate(hour=Trunc("submitted_at", "hour", tzinfo=UTC))
        .values("pool_id", "gpu_model_id", "card_count", "hour")
        .annotate(length=Sum(length), n=Count("id"))
        .order_by()
        .values_list("pool_id", "gpu_model_id", "card_count", "hour", "length", "n")
    )
    hours = (end - start) // HOUR
    per_hour: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for pool_id, model_id, cards, hour, total, n in rows:
        empty = ([0] * (hours + 1), [0] * (hours + 1))
        us, counts = per_hour.setdefault((pool_id, model_id), empty)
        i = min((hour - start) // HOUR, hours)  # the last: from end on
        us[i] += cards * total // MICROSECOND
        counts[i] += n
    card_us, row_counts = {}, {}
    for k, (us, counts) in per_hour.items():
        card_us[k], row_counts[k] = _prefix(us), _prefix(counts)
    return HourlyDemand(start, end, card_us, row_counts)


def _prefix(values: list[int]) -> list[int]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out
