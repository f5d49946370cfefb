"""Utilisation on the capacity dashboard (issue 8): cards in use now, per-card utilisation for
the node heatmap, and mean utilisation over time per pool × GPU model.

Source: NVIDIA dcgm-exporter metrics in Prometheus (each pool's cluster's ``prometheus_url``,
blank or no cluster: ``settings.PROMETHEUS_URL``; each Prometheus asked once per read), through
:class:`scheduler_adapters.prometheus.PrometheusAdapter`. Utilisation is
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio 0-1) × 100 where a card has profiling metrics, else
``DCGM_FI_DEV_GPU_UTIL`` (%; consumer cards such as the RTX 4090 have no ``DCGM_FI_PROF_*``).
The ``DEV`` reading of a MIG-mode card is meaningless (0), so it is read only from series
without ``GPU_I_ID`` and never for a card the inventory knows to be in MIG mode.

Prometheus does the heavy part, so the number of queries is fixed whatever the fleet:

- **card level** (:func:`card_expr`): each series is averaged over a window
  (``avg_over_time``), pods of one card or MIG instance merge by ``max`` (a time-sliced card
  reports one series per pod; a busy pod is never averaged away), MIG instances of one card by
  ``avg`` (the card's share of busy slices);
- **in use now** (:func:`cards_reading_read`): two instant queries (PROF, DEV) of each card's
  mean over the last 30 minutes; a card is *in use* when that mean is at or above its pool's
  idle threshold (``ReclamationPolicy.idle_below_pct``, default 30 %, the seeds' scale-down
  rule);
- **over time** (:func:`history_reading_read`): four range queries (``sum`` and ``count`` of
  the card-level values by host and ``modelName``, for PROF and DEV), each step averaged over
  the step (5 min for 24 h, 30 min for 7 d, 2 h for 30 d: 289, 337 and 361 points); the
  24 h and 7 d charts end at their last step, the 30 d chart at the last UTC midnight
  (:data:`RANGES`: renewed daily).

Each read covers the whole fleet and is made by a Celery task, never by a page
(:mod:`pools.dashboards.utilisation_store` keeps the readings and says when they are read);
a page narrows the stored reading to its filters in the process (:func:`in_use_for`,
:func:`heatmap_utilisation`, :func:`history_for`: no query, no Prometheus).

Series are placed on the inventory by host (``Hostname`` up to exporter 4.5, ``hostname``
after; compared case-blind, then by short name when the exporter reports an FQDN) and by card:
``UUID`` when the inventory knows it, else the ``gpu`` index. A host name two clusters' nodes
share (names are unique per cluster only, and dcgm-exporter's series name no cluster) places
nothing by name: those cards are read by ``UUID`` alone, and the history leaves their series
unplaced. A card without a reading is
*unknown*, never idle, and Prometheus not configured or not answering is said so, never shown
as 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count

from pools.clusters.adapters import dashboard_metrics, metrics_url
from pools.clusters.models import Cluster
from pools.dashboards import capacity as dashboard
from pools.dashboards.capacity import CapacityRow, CardsInUse, DashboardFilters, HeatmapRow
from pools.inventory.gpu_names import normalise_model_key
from pools.inventory.models import Gpu, Node
from pools.reclamation.evaluate import IDLE_BELOW_PCT
from pools.reclamation.models import ReclamationPolicy
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.prometheus import (
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    Series,
    dcgm_labels,
    metric_selector,
)

BUSY_WINDOW_S = 30 * 60
DEFAULT_BUSY_PCT = float(IDLE_BELOW_PCT)  # ReclamationPolicy.idle_below_pct's default
DASHBOARD_TIMEOUT_S = 5.0
HOST_LABELS = ("Hostname", "hostname")
MODEL_LABELS = ("modelName", "model_name")
CARD_LABELS = (*HOST_LABELS, "UUID", "uuid", "gpu", *MODEL_LABELS)
NOT_CONFIGURED = "Prometheus is not configured (PROMETHEUS_URL is empty)."


@dataclass(frozen=True)
class HistoryRange:
    """A choice of the utilisation chart: ``duration`` shown, sampled every ``step_s`` seconds,
    each point the mean over its step; the chart ends on a multiple of ``renew_s`` seconds
    (since the epoch, so UTC; a multiple of ``step_s``) and is read again when the next one
    passes (:func:`history_end`). ``renew_label``: how often that is, in words; empty when it
    is every step."""

    key: str
    label: str
    duration: timedelta
    step_s: int
    step_label: str
    renew_s: int
    renew_label: str = ""


# The 30-day chart is renewed once a day, not at every 2-hour step: a read asks every
# Prometheus for 30 days of every card (four range queries scanning 30 d of samples) to add one
# point of 361 (0.3 % of the chart) while the 361 before it are unchanged; the last day is on
# the 24-hour and 7-day charts.
RANGES = {
    r.key: r
    for r in (
        HistoryRange("24h", "24 h", timedelta(hours=24), 5 * 60, "5 min", 5 * 60),
        HistoryRange("7d", "7 d", timedelta(days=7), 30 * 60, "30 min", 30 * 60),
        HistoryRange(
            "30d", "30 d", timedelta(days=30), 2 * 3600, "2 h", 24 * 3600, "once a day (UTC)"
        ),
    )
}
DEFAULT_RANGE = "24h"


def card_expr(metric: str, *, window_s: int) -> str:
    """PromQL: each card's mean of ``metric`` over the ``window_s`` seconds before each
    evaluation, one series per card (labels :data:`CARD_LABELS`), in the metric's own unit
    (ratio 0-1 for PROF, % for DEV). ``DCGM_FI_DEV_GPU_UTIL`` is read from device-level series
    only (``GPU_I_ID=""``): a MIG instance's DEV reading means nothing."""
    selector = metric_selector(metric, 'GPU_I_ID=""' if metric == GPU_UTIL else "")
    card = ", ".join(CARD_LABELS)
    return (
        f"avg by ({card}) (max by ({card}, GPU_I_ID) (avg_over_time({selector}[{int(window_s)}s])))"
    )


def _host_keys(hostname: str) -> tuple[str, str]:
    name = hostname.strip().lower().rstrip(".")
    return name, name.split(".", 1)[0]


def _shared_names(hostnames: Iterable[str]) -> set[str]:
    """Those of ``hostnames`` that nodes of more than one cluster have. One query."""
    rows = (
        Node.objects.filter(hostname__in=set(hostnames))
        .values("hostname")
        .annotate(nodes=Count("id"))
        .filter(nodes__gt=1)
        .order_by()
    )
    return {r["hostname"] for r in rows}


class _HostIndex:
    """Inventory hostnames, found by exact (case-blind) name, else by short name."""

    def __init__(self, hostnames: Iterable[str]) -> None:
        self.full: dict[str, str] = {}
        short: dict[str, set[str]] = defaultdict(set)
        for hostname in hostnames:
            full, brief = _host_keys(hostname)
            self.full[full] = hostname
            short[brief].add(hostname)
        self.short = {k: next(iter(v)) for k, v in short.items() if len(v) == 1}

    def find(self, hostname: str | None) -> str | None:
        if not hostname:
            return None
        full, brief = _host_keys(hostname)
        return self.full.get(full) or self.full.get(brief) or self.short.get(brief)


# ---------------------------------------------------------------------------------- per card


@dataclass(frozen=True)
class CardRef:
    """An inventory card to read: its ``Gpu`` id, host, index, UUID (if known), MIG mode."""

    gpu_id: int
    hostname: str
    index: int
    uuid: str | None = None
    mig_mode: bool | None = None


def card_utilisation(
    *, metrics: Any, cards: Iterable[CardRef], now: datetime, window_s: int = BUSY_WINDOW_S
) -> dict[int, float]:
    """Mean utilisation, % (0-100), of each card over the ``window_s`` seconds before ``now``,
    by ``Gpu`` id; a card without a reading is absent. Two instant queries (PROF, then DEV)
    and one database query (host names several clusters share: read by UUID only).
    Raises :class:`~scheduler_adapters.errors.SchedulerError` when Prometheus fails."""
    cards = list(cards)
    shared = _shared_names(c.hostname for c in cards)
    hosts = _HostIndex(c.hostname for c in cards if c.hostname not in shared)
    readings: dict[str, dict[tuple, float]] = {}
    for metric, scale in ((GR_ENGINE_ACTIVE, 100.0), (GPU_UTIL, 1.0)):
        by_card: dict[tuple, float] = {}
        for series in metrics.query(card_expr(metric, window_s=window_s), at=now):
            value = series.samples[0].value if series.samples else None
            if value is None:
                continue
            labels = dcgm_labels(series.label_map)
            host = hosts.find(labels.hostname)
            # An exporter rollout in the window (Hostname = the exporter pod's name) splits one
            # card into two series, each averaged over its part: the busier one is kept, so a
            # rollout never makes a busy card look idle.
            keys = [("uuid", labels.uuid)] if labels.uuid else []
            if host is not None and labels.gpu is not None:
                keys.append(("index", host, labels.gpu))
            for key in keys:
                by_card[key] = max(by_card.get(key, -math.inf), value * scale)
        readings[metric] = by_card
    out: dict[int, float] = {}
    for card in cards:
        keys = [] if card.hostname in shared else [("index", card.hostname, str(card.index))]
        if card.uuid:
            keys.insert(0, ("uuid", card.uuid))
        value = _first(readings[GR_ENGINE_ACTIVE], keys)
        if value is None and card.mig_mode is not True:
            value = _first(readings[GPU_UTIL], keys)
        if value is not None:
            out[card.gpu_id] = min(max(value, 0.0), 100.0)
    return out


def _first(readings: dict[tuple, float], keys: list[tuple]) -> float | None:
    for key in keys:
        if key in readings:
            return readings[key]
    return None


def _why(exc: SchedulerError) -> str:
    return f"Prometheus could not be read: {exc}"


def _url_of(own: str, default: str) -> str:
    """The Prometheus a pool's cards are read from: its cluster's ``prometheus_url`` (``own``),
    blank or no cluster: ``default`` (``PROMETHEUS_URL``); ``""`` when neither is set."""
    return own.rstrip("/") if own else default


def _by_prometheus(cards: Iterable[tuple[CardRef, str]], metrics: Any) -> dict[str, list[CardRef]]:
    """``(card, its pool's cluster's prometheus_url)`` pairs grouped by the Prometheus to read
    (:func:`_url_of`; ``""``: none); one group ``""`` when ``metrics`` (an adapter, tests)
    stands for all. No cards: the one group of ``PROMETHEUS_URL`` (asked as before, with
    nothing to place)."""
    if metrics is not None:
        return {"": [card for card, _ in cards]}
    default = metrics_url().rstrip("/")  # once: a settings read per card cost 0.26 s at 100,800
    groups: dict[str, list[CardRef]] = {}
    for card, own in cards:
        groups.setdefault(_url_of(own, default), []).append(card)
    return groups or {default: []}


def no_prometheus_anywhere(metrics: Any = None) -> bool:
    """True when no card could be read: no adapter given (``metrics``, tests), no
    ``PROMETHEUS_URL`` and no cluster naming its own ``prometheus_url``. One query, so that a
    portal without Prometheus neither reads every pooled GPU nor queues a reading to learn that
    none can be read."""
    return (
        metrics is None
        and not metrics_url()
        and not Cluster.objects.exclude(prometheus_url="").exists()
    )


def _read_cards(
    groups: dict[str, list[CardRef]], *, now: datetime, metrics: Any
) -> tuple[dict[int, float], dict[str, str]]:
    """Each group's cards (Prometheus URL -> cards) read from its Prometheus
    (:func:`card_utilisation`, two instant queries per URL): the readings by ``Gpu`` id, and
    URL -> why it gave none (:data:`NOT_CONFIGURED` without a URL)."""
    by_gpu: dict[int, float] = {}
    missed: dict[str, str] = {}
    for url, cards in groups.items():
        adapter = metrics if metrics is not None else dashboard_metrics(url)  # "": None
        if adapter is None:
            missed[url] = NOT_CONFIGURED
            continue
        try:
            by_gpu.update(card_utilisation(metrics=adapter, cards=cards, now=now))
        except SchedulerError as exc:
            missed[url] = _why(exc)
        finally:
            if adapter is not metrics:
                adapter.close()
    return by_gpu, missed


def _missed_text(cards: dict[str, int], missed: dict[str, str]) -> str:
    """Why some Prometheus gave no reading, one clause per URL of ``missed`` with its card
    count (``cards``: URL -> cards)."""
    return "; ".join(
        f"{cards.get(url, 0)} card(s) without a reading: "
        + ("no Prometheus is configured for their cluster." if why == NOT_CONFIGURED else why)
        for url, why in missed.items()
    )


Line = tuple[str, str, int | None]
"""A capacity line's cards: (pool slug, GPU model key — :func:`capacity.model_label`'s slug,
``?<raw name>`` when unrecognised —, driver branch or ``None``)."""


def _kept(line: Line, filters: DashboardFilters) -> bool:
    """Whether ``filters`` keep ``line``'s cards, as :func:`capacity.pooled_gpus` narrows (the
    team filter narrows allocations, not cards)."""
    pool, model, branch = line
    return (
        (not filters.pool or pool == filters.pool)
        and (not filters.gpu_model or model == filters.gpu_model)
        and (not filters.driver_branch or branch == filters.driver_branch)
    )


@dataclass
class Coverage:
    """Which Prometheus each pool's cards are read from (``pool_urls``, pool slug -> URL,
    ``""``: none configured), the URLs a reading asked (``urls``, in the order asked) and why
    each that gave nothing gave nothing (``missed``, URL -> text)."""

    pool_urls: dict[str, str] = field(default_factory=dict)
    urls: tuple[str, ...] = ()
    missed: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        """Why the reading has nothing at all: every URL asked gave nothing."""
        if self.urls and all(url in self.missed for url in self.urls):
            return "; ".join(dict.fromkeys(self.missed[url] for url in self.urls))
        return None

    def narrowed(self, pools: Iterable[str]) -> tuple[str | None, dict[str, str]]:
        """``(error, missed)`` for the cards of ``pools`` (slugs): the error when every URL
        they are read from gave nothing (with no pools: when the whole reading did), else the
        URLs among theirs that gave nothing, in the order asked."""
        theirs = {self.pool_urls.get(pool, "") for pool in pools}
        if not theirs:
            return self.error, {}
        missed = {
            url: self.missed[url] for url in self.urls if url in theirs and url in self.missed
        }
        if self.error or len(missed) == len(theirs):
            return self.error or "; ".join(dict.fromkeys(missed.values())), {}
        return None, missed


# ------------------------------------------------------------------------------ in use now


@dataclass
class CardsReading:
    """The whole fleet's cards in use, read at ``computed_at`` (:func:`cards_reading_read`):
    per :data:`Line`, the cards, those with a reading and those busy (``counts``, with the
    pool's threshold); which Prometheus gave nothing (``coverage``); each card's mean
    utilisation over the last 30 min, % by ``Gpu`` id (``by_gpu``; a card without a reading is
    absent). One reading serves every filter: pages narrow it (:func:`in_use_for`,
    :func:`heatmap_utilisation`)."""

    computed_at: datetime
    counts: dict[Line, CardsInUse] = field(default_factory=dict)
    coverage: Coverage = field(default_factory=Coverage)
    by_gpu: dict[int, float] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        return self.coverage.error


@dataclass
class UtilisationNow:
    """Cards in use now, per pool × model (``rows``) and per pool × model × driver group
    (``groups``), by the keys of :func:`pools.dashboards.capacity.capacity_rows`. ``error`` says why
    there is no reading at all (then every count is unknown), ``missed`` which Prometheus gave
    none when others did (their cards count as without a reading). ``read_at``: when the
    reading (or the failed attempt) was made; ``pending``: no reading yet, one is being made."""

    now: datetime
    error: str | None = None
    missed: str = ""  # the Prometheus that gave no reading when others did, and why
    read_at: datetime | None = None
    pending: bool = False
    rows: dict[tuple[str, str], CardsInUse] = field(default_factory=dict)
    groups: dict[tuple[str, str, str], CardsInUse] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        return self.error != NOT_CONFIGURED

    @property
    def known(self) -> bool:
        """Whether the counts mean anything (a reading is in and it is not all missing)."""
        return not self.pending and not self.error


def busy_thresholds() -> dict[str, float]:
    """Pool slug → busy threshold, %: the pool's ``ReclamationPolicy.idle_below_pct``, for the
    pools that have a policy (others use :data:`DEFAULT_BUSY_PCT`). One query."""
    return {
        slug: float(pct)
        for slug, pct in ReclamationPolicy.objects.values_list("pool__slug", "idle_below_pct")
    }


def cards_reading_read(*, now: datetime, metrics: Any = None) -> CardsReading:
    """The whole fleet's cards in use at ``now``: each pooled card's mean utilisation over the
    last 30 min (:data:`BUSY_WINDOW_S`), busy at or above its pool's threshold
    (:func:`busy_thresholds`), counted per :data:`Line`. Each card is read from its pool's
    cluster's Prometheus (blank or no cluster: ``PROMETHEUS_URL``): three queries (the check
    below, the GPUs, the thresholds; four with a host name two clusters share) and two
    Prometheus instant queries per Prometheus; one query and no Prometheus when none is
    configured. ``metrics``: an adapter (tests) standing for every card's; ``None`` builds and
    closes :func:`dashboard_metrics` per URL.

    Run by a task (:mod:`pools.dashboards.utilisation_store`), never by a page: at 100,800 GPUs
    reading every pooled GPU's row and the answers takes ~1.4 s, and a slow Prometheus up to
    ``PROMETHEUS_DASHBOARD_TIMEOUT_S`` per query."""
    if no_prometheus_anywhere(metrics):
        return CardsReading(now, coverage=Coverage(urls=("",), missed={"": NOT_CONFIGURED}))
    gpus = list(
        dashboard.pooled_gpus(DashboardFilters()).values(
            "id", "index", "uuid", "mig_mode", "node__hostname", "node__pool__slug",
            "gpu_model__slug", "gpu_model__name", "raw_model_name",
            "node__driver_group__branch", "node__pool__cluster__prometheus_url",
        )
    )  # fmt: skip
    groups = _by_prometheus(
        (
            (
                CardRef(g["id"], g["node__hostname"], g["index"], g["uuid"], g["mig_mode"]),
                g["node__pool__cluster__prometheus_url"] or "",
            )
            for g in gpus
        ),
        metrics,
    )
    by_gpu, missed = _read_cards(groups, now=now, metrics=metrics)
    default = "" if metrics is not None else metrics_url().rstrip("/")
    reading = CardsReading(now, coverage=Coverage(urls=tuple(groups), missed=missed), by_gpu=by_gpu)
    thresholds = busy_thresholds()
    for g in gpus:
        pool = g["node__pool__slug"]
        if pool not in reading.coverage.pool_urls:
            own = g["node__pool__cluster__prometheus_url"] or ""
            reading.coverage.pool_urls[pool] = "" if metrics is not None else _url_of(own, default)
        line = (pool, dashboard.model_label(g)[0], g["node__driver_group__branch"])
        counts = reading.counts.get(line)
        if counts is None:
            counts = reading.counts[line] = CardsInUse(
                busy_pct=thresholds.get(pool, DEFAULT_BUSY_PCT)
            )
        counts.total += 1
        value = by_gpu.get(g["id"])
        if value is not None:
            counts.reporting += 1
            counts.busy += value >= counts.busy_pct
    return reading


def in_use_for(
    reading: CardsReading, filters: DashboardFilters, *, now: datetime
) -> UtilisationNow:
    """``reading`` narrowed to ``filters``' cards, counted per pool × model and per driver group
    (no query). An error when none of their Prometheus gave a reading; ``missed`` names those
    that gave none when others did, with their cards."""
    result = UtilisationNow(now=now, read_at=reading.computed_at)
    kept = {line: c for line, c in reading.counts.items() if _kept(line, filters)}
    error, missed = reading.coverage.narrowed(pool for pool, _, _ in kept)
    if error is not None:
        result.error = error
        return result
    cards: dict[str, int] = defaultdict(int)
    for (pool, model, branch), c in kept.items():
        cards[reading.coverage.pool_urls.get(pool, "")] += c.total
        for into in (
            result.rows.setdefault((pool, model), CardsInUse(busy_pct=c.busy_pct)),
            result.groups.setdefault(
                (pool, model, dashboard.driver_group_label(branch)), CardsInUse(busy_pct=c.busy_pct)
            ),
        ):
            into.total += c.total
            into.reporting += c.reporting
            into.busy += c.busy
    result.missed = _missed_text(cards, missed)
    return result


def apply_in_use(rows: list[CapacityRow], now: UtilisationNow) -> None:
    """Set ``in_use`` on each capacity row and driver-group line from ``now``; a row with no
    card in the reading (held or asked for only, or new since) gets ``0`` of ``0``. Left
    ``None`` while there is no reading or Prometheus gave none."""
    if not now.known:
        return
    for row in rows:
        row.in_use = now.rows.get((row.pool_slug, row.gpu_model_slug), CardsInUse())
        for group in row.groups:
            group.in_use = now.groups.get(
                (row.pool_slug, row.gpu_model_slug, group.driver_group), CardsInUse()
            )


def heatmap_utilisation(
    *, rows: list[HeatmapRow], reading: CardsReading
) -> tuple[list[HeatmapRow], str | None]:
    """The heatmap's cells with ``util_pct`` (mean %, last 30 min, from ``reading``) and a
    title saying it; ``(rows unchanged, why)`` when none of the rows' Prometheus gave a
    reading. A card whose Prometheus failed says why in its title. No query."""
    error, _ = reading.coverage.narrowed({r.pool_slug for r in rows})
    if error is not None:
        return rows, error
    out = []
    for r in rows:
        url = reading.coverage.pool_urls.get(r.pool_slug, "")
        why = f" ({reading.coverage.missed[url]})" if url in reading.coverage.missed else ""
        cells = []
        for c in r.cells:
            value = reading.by_gpu.get(c.gpu_id) if c.gpu_id is not None else None
            text = (
                f"no utilisation reading{why}"
                if value is None
                else f"{value:.0f} % mean, last 30 min"
            )
            cells.append(replace(c, util_pct=value, title=f"{c.title} · {text}"))
        out.append(replace(r, cells=cells))
    return out, None


# ----------------------------------------------------------------------------- over time


@dataclass(frozen=True)
class UtilisationSeries:
    """Mean utilisation, % (0-100), of one pool × model at each step (``None``: no card of it
    reported), and the most cards that reported at one step."""

    pool_slug: str
    pool: str
    gpu_model_slug: str
    gpu_model: str
    values: list[float | None]
    cards: int


@dataclass
class UtilisationHistory:
    """The chart's data: ``timestamps`` (aware, UTC) and one series per pool × model.
    ``error`` says why there is none; ``unplaced`` counts host × model series that match no
    pooled node of the filters (other pools, or hosts the inventory does not know).
    ``read_at``: when Prometheus was read; ``pending``: no reading of this range yet, one is
    being made."""

    range: HistoryRange
    start: datetime
    end: datetime
    timestamps: list[datetime] = field(default_factory=list)
    series: list[UtilisationSeries] = field(default_factory=list)
    error: str | None = None
    missed: str = ""  # the Prometheus that gave nothing when others did, and why
    unplaced: int = 0
    read_at: datetime | None = None
    pending: bool = False

    @property
    def configured(self) -> bool:
        return self.error != NOT_CONFIGURED


Place = tuple[str, str, str, str, int | None]
"""Where a host × model series is charted: (pool slug, pool name, model slug, model name,
driver branch or ``None``)."""


@dataclass
class HistoryReading:
    """The whole fleet's utilisation over one range (:func:`history_reading_read`), read at
    ``computed_at``: per :data:`Place`, ``[sum %, cards]`` at each step (``totals``) and how
    many host × model series were placed there (``series``); the pooled lines
    (:data:`Line`) whether or not they report (``lines``); series placed nowhere
    (``unplaced``); which Prometheus gave nothing (``coverage``). Pages narrow it
    (:func:`history_for`)."""

    range: HistoryRange
    start: datetime
    end: datetime
    computed_at: datetime
    totals: dict[Place, list[list[float]]] = field(default_factory=dict)
    series: dict[Place, int] = field(default_factory=dict)
    lines: set[Line] = field(default_factory=set)
    unplaced: int = 0
    coverage: Coverage = field(default_factory=Coverage)

    @property
    def error(self) -> str | None:
        return self.coverage.error

    @property
    def timestamps(self) -> list[datetime]:
        step = timedelta(seconds=self.range.step_s)
        return [self.start + i * step for i in range(_points(self.range))]


def _points(chosen: HistoryRange) -> int:
    return int(chosen.duration.total_seconds() // chosen.step_s) + 1


def _aligned(now: datetime, every_s: int) -> datetime:
    """``now`` aligned down to a multiple of ``every_s`` seconds since the epoch (aware, UTC)."""
    return datetime.fromtimestamp(math.floor(now.timestamp() / every_s) * every_s, tz=UTC)


def history_end(now: datetime, range_key: str = DEFAULT_RANGE) -> datetime:
    """The end of the chart of ``range_key`` at ``now``: ``now`` aligned down to the range's
    ``renew_s`` (its step; a UTC day for 30 d). A reading ending there is current until the
    next one passes: 24 h at 12:07 ends 12:05, 30 d at 12:07 ends 00:00 that day."""
    return _aligned(now, RANGES.get(range_key, RANGES[DEFAULT_RANGE]).renew_s)


def history_step_closed_since(at: datetime, now: datetime, range_key: str) -> bool:
    """Whether a step of ``range_key`` has closed between ``at`` and ``now``: when a reading
    that failed at ``at`` (wholly or for one Prometheus) is tried again — at its step, as
    before ranges renewed less often, not at its ``renew_s``."""
    step = RANGES.get(range_key, RANGES[DEFAULT_RANGE]).step_s
    return _aligned(now, step) > at


def _placements(metrics: Any) -> tuple[_HostIndex, dict[str, dict[str, Place]], set[Line], dict]:
    """Every pooled host and, per host, model key → :data:`Place` under the keys of its
    nvidia-smi name and catalogue name (host names several clusters share left out:
    :func:`_shared_names`); the pooled lines; pool slug → its Prometheus URL (:func:`_url_of`;
    ``""`` for all when ``metrics``, an adapter for tests, stands for all). Two queries."""
    rows = (
        dashboard.pooled_gpus(DashboardFilters())
        .values(
            "node__hostname", "node__pool__slug", "node__pool__name",
            "gpu_model__slug", "gpu_model__name", "raw_model_name",
            "node__driver_group__branch", "node__pool__cluster__prometheus_url",
        )
        .distinct()
        .order_by()
    )  # fmt: skip
    models: dict[str, dict[str, Place]] = defaultdict(dict)
    lines: set[Line] = set()
    pool_urls: dict[str, str] = {}
    default = "" if metrics is not None else metrics_url().rstrip("/")
    shared = _shared_names(r["node__hostname"] for r in rows)
    for r in rows:
        slug, name, _ = dashboard.model_label(r)
        pool, branch = r["node__pool__slug"], r["node__driver_group__branch"]
        lines.add((pool, slug, branch))
        own = r["node__pool__cluster__prometheus_url"] or ""
        pool_urls.setdefault(pool, "" if metrics is not None else _url_of(own, default))
        if r["node__hostname"] in shared:
            continue
        place = (pool, r["node__pool__name"], slug, name, branch)
        for raw in (r["raw_model_name"], r["gpu_model__name"]):
            if raw and normalise_model_key(raw):
                models[r["node__hostname"]].setdefault(normalise_model_key(raw), place)
        models[r["node__hostname"]].setdefault("", place)
    return _HostIndex(models), models, lines, pool_urls


def _place(hosts, models, labels: dict[str, str], aliases=None) -> tuple | None:
    read = dcgm_labels(labels)
    host = hosts.find(read.hostname) or (aliases or {}).get(read.hostname or "")
    if host is None:
        return None
    on_host = models[host]
    if read.model_name and normalise_model_key(read.model_name) in on_host:
        return on_host[normalise_model_key(read.model_name)]
    places = set(on_host.values())
    return next(iter(places)) if len(places) == 1 else None


def _exporter_hosts(adapter: Any, hosts: _HostIndex, *, at: datetime, window_s: int) -> dict:
    """dcgm-exporter ``Hostname`` -> inventory host, through the GPU UUIDs each one exported.

    Without host networking or ``NODE_NAME`` the exporter's ``Hostname`` is its pod's name
    (dcgm-exporter PR #129), which no inventory host has and which changes on every rollout.
    One instant query lists which UUIDs each exporter name reported over the range; a name
    whose UUIDs all sit on one inventory node is that node. Asked only when a series could not
    be placed by name; ``{}`` when Prometheus fails (the series then stay unplaced).
    """
    labels = ", ".join((*HOST_LABELS, "UUID", "uuid"))
    # DEV_GPU_UTIL: in dcgm-exporter's default counters, on every device (MIG parents too)
    expr = f"count by ({labels}) (max_over_time({metric_selector(GPU_UTIL)}[{window_s}s]))"
    try:
        answer = adapter.query(expr, at=at)
    except SchedulerError:
        return {}
    where = dict(Gpu.objects.filter(uuid__isnull=False).values_list("uuid", "node__hostname"))
    seen: dict[str, set[str]] = defaultdict(set)
    for series in answer:
        read = dcgm_labels(series.label_map)
        node = where.get(read.uuid or "")
        if read.hostname and node and hosts.find(node):
            seen[read.hostname].add(hosts.find(node))
    return {name: next(iter(nodes)) for name, nodes in seen.items() if len(nodes) == 1}


def history_reading_read(
    *, now: datetime, range_key: str = DEFAULT_RANGE, metrics: Any = None
) -> HistoryReading:
    """The whole fleet's mean utilisation over the range ending at ``now`` aligned down to a
    step (:func:`history_end`): per :data:`Place` and step, the sum of the card step means (%)
    and the cards that report, PROF where a host × model reports it at that step, else DEV.
    Each pool's cards are read from its cluster's Prometheus (blank or no cluster:
    ``PROMETHEUS_URL``): two queries and four range queries per Prometheus (one more instant
    query where an exporter names a host no node has); one that fails is named in the
    coverage and the others are read. ``metrics``: an adapter (tests) standing for all;
    ``None`` builds :func:`dashboard_metrics` per URL. Run by a task, never by a page."""
    chosen = RANGES.get(range_key, RANGES[DEFAULT_RANGE])
    step, points = chosen.step_s, _points(chosen)
    end = history_end(now, chosen.key)
    start = end - chosen.duration
    hosts, models, lines, pool_urls = _placements(metrics)
    urls = (
        [""]
        if metrics is not None
        else sorted(set(pool_urls.values())) or [metrics_url().rstrip("/")]
    )
    reading = HistoryReading(chosen, start, end, now, lines=lines,
                             coverage=Coverage(pool_urls, tuple(urls)))  # fmt: skip
    answers: dict[str, tuple[Series, ...]] = {}
    aliases: dict[str, str] = {}
    for url in urls:
        adapter = metrics if metrics is not None else dashboard_metrics(url)  # "": None
        if adapter is None:
            reading.coverage.missed[url] = NOT_CONFIGURED
            continue
        try:
            try:
                found = _history_answers(adapter, start=start, end=end, step=step)
            except SchedulerError as exc:
                reading.coverage.missed[url] = _why(exc)
                continue
            for key, series in found.items():
                answers[key] = answers.get(key, ()) + series
            names = {dcgm_labels(s.label_map).hostname for got in found.values() for s in got}
            if any(name and hosts.find(name) is None for name in names):
                window_s = int((end - start).total_seconds())
                aliases.update(_exporter_hosts(adapter, hosts, at=end, window_s=window_s))
        finally:
            if adapter is not metrics:
                adapter.close()
    if reading.error is not None:
        return reading
    per_key = _steps_by_labels(answers, start_s=start.timestamp(), step=step, points=points)
    for labels, metrics_by_name in per_key.items():
        place = _place(hosts, models, dict(labels), aliases or None)
        if place is None:
            reading.unplaced += 1
            continue
        total = reading.totals.setdefault(place, [[0.0, 0.0] for _ in range(points)])
        reading.series[place] = reading.series.get(place, 0) + 1
        _add_prof_or_dev(total, metrics_by_name)
    return reading


def history_for(reading: HistoryReading, filters: DashboardFilters) -> UtilisationHistory:
    """``reading`` narrowed to ``filters``' pooled cards, one series per pool × model (driver
    groups summed), sorted by pool and model name; series of places the filters leave out
    count as unplaced. An error when none of their Prometheus gave an answer. No query."""
    history = UtilisationHistory(
        range=reading.range, start=reading.start, end=reading.end,
        timestamps=reading.timestamps, read_at=reading.computed_at,
    )  # fmt: skip
    pools = {pool for pool, model, branch in reading.lines if _kept((pool, model, branch), filters)}
    history.error, missed = reading.coverage.narrowed(pools)
    if history.error is not None:
        return history
    history.missed = "; ".join(
        ("no Prometheus is configured for some clusters" if why == NOT_CONFIGURED else why)
        for why in missed.values()
    )
    history.unplaced = reading.unplaced
    totals: dict[tuple[str, str, str, str], list[list[float]]] = {}
    for place, steps in reading.totals.items():
        pool_slug, pool, model_slug, model, branch = place
        if not _kept((pool_slug, model_slug, branch), filters):
            history.unplaced += reading.series[place]
            continue
        total = totals.setdefault((pool_slug, pool, model_slug, model),
                                  [[0.0, 0.0] for _ in steps])  # fmt: skip
        for into, (s, n) in zip(total, steps, strict=True):
            into[0] += s
            into[1] += n
    for (pool_slug, pool, model_slug, model), total in sorted(
        totals.items(), key=lambda item: (item[0][1], item[0][3])
    ):
        history.series.append(
            UtilisationSeries(
                pool_slug,
                pool,
                model_slug,
                model,
                [round(s / n, 1) if n else None for s, n in total],
                int(max((n for _, n in total), default=0)),
            )  # fmt: skip
        )
    return history


def _history_answers(
    adapter: Any, *, start: datetime, end: datetime, step: int
) -> dict[str, tuple[Series, ...]]:
    """The four range queries, ``"<sum|count> <metric>"`` -> series: sum and count by host and
    model of the card means of PROF (GR_ENGINE_ACTIVE) and DEV (GPU_UTIL). Raises
    :class:`SchedulerError`."""
    by_host = ", ".join((*HOST_LABELS, *MODEL_LABELS))
    answers: dict[str, tuple[Series, ...]] = {}
    for metric in (GR_ENGINE_ACTIVE, GPU_UTIL):
        card = card_expr(metric, window_s=step)
        for op in ("sum", "count"):
            answers[f"{op} {metric}"] = adapter.query_range(
                f"{op} by ({by_host}) ({card})", start=start, end=end, step_s=step
            )
    return answers


def _steps_by_labels(
    answers: dict[str, tuple[Series, ...]], *, start_s: float, step: int, points: int
) -> dict[tuple, dict[str, list[list[float]]]]:
    """(labels, metric) -> ``[sum %, count]`` per step (PROF's 0-1 ratio scaled to %)."""
    per_key: dict[tuple, dict[str, list[list[float]]]] = defaultdict(dict)
    for metric, scale in ((GR_ENGINE_ACTIVE, 100.0), (GPU_UTIL, 1.0)):
        for op, column in (("sum", 0), ("count", 1)):
            for series in answers[f"{op} {metric}"]:
                steps = per_key[series.labels].setdefault(
                    metric, [[0.0, 0.0] for _ in range(points)]
                )
                for sample in series.samples:
                    i = round((sample.timestamp - start_s) / step)
                    if sample.value is not None and 0 <= i < points:
                        steps[i][column] = sample.value * (scale if column == 0 else 1.0)
    return per_key


def _add_prof_or_dev(
    total: list[list[float]], metrics_by_name: dict[str, list[list[float]]]
) -> None:
    """Add one host × model's ``[sum, count]`` per step to ``total``: PROF where it reports at
    that step, else DEV."""
    prof = metrics_by_name.get(GR_ENGINE_ACTIVE)
    dev = metrics_by_name.get(GPU_UTIL)
    for i, step_total in enumerate(total):
        chosen_step = prof[i] if prof and prof[i][1] else (dev[i] if dev else None)
        if chosen_step and chosen_step[1]:
            step_total[0] += chosen_step[0]
            step_total[1] += chosen_step[1]
