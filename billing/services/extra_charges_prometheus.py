"""Extra charges from Prometheus (issue 35; seed 004 §5.2): shared storage in GB-months and
network egress in GB per team and billing month, read from the series the settings name —
the same rows the CSV import (:mod:`billing.services.extra_charges`) writes for the same numbers
(basis ``storage`` / ``egress``, unit GB-months / GB, no pool: priced at the rate card's
storage / egress price for every pool), from ``source="extra-prometheus"``.

Settings (``""``: that charge is not read from Prometheus; the CSV import still works):

- ``EXTRA_CHARGES_STORAGE_PROMQL``: an instant vector of **bytes held**, one series or more
  per namespace (label ``namespace``), e.g.
  ``kube_persistentvolumeclaim_resource_requests_storage_bytes`` (kube-state-metrics
  docs/persistentvolumeclaim-metrics.md: the size each claim asked for, what a volume is
  billed by) or
  ``kubelet_volume_stats_used_bytes`` (kubelet, bytes in use);
- ``EXTRA_CHARGES_EGRESS_PROMQL``: a series selector of **byte counters**, labelled
  ``namespace``, e.g. ``container_network_transmit_bytes_total{interface="eth0"}`` (cAdvisor;
  it counts every byte a pod sends, in-cluster traffic too: a CNI's egress-only counter is the
  closer basis where one exists);
- ``EXTRA_CHARGES_STEP_S`` (300): the storage step, dividing an hour, at least 300 s (a 31-day
  month is 8,928 steps of 300 s, under Prometheus' 11,000 points per series).

Units: 1 GB = 10^9 bytes (SI, as cloud bills and the CSV import count GB). A billing month is
``[first local midnight, first local midnight of the next month)`` in ``BILLING_TIME_ZONE``;
the month in progress is metered up to "now" and its records replaced on the next import.

- **Storage**, GB-months: ``sum by (namespace) (<storage PromQL>)`` as a range query every
  ``step_s`` from the month's start; the value at step ``t`` counts for ``[t, t + step)``
  (clipped at the period's end), so GB-months = Σ bytes(t) × step ÷ 10^9 ÷ the month's seconds
  — GB × the share of the month held, as :func:`billing.pricing.gb_months` meters a CSV line.
  Steps where a namespace has no series count 0: a volume held for half the month is half its
  size in GB-months (``avg_over_time`` would average only the steps it existed, a full month's
  charge). **Error**: a volume's start and end are seen to within one step, and a series that
  ends without a staleness marker (a Prometheus restart, backfilled data) is still seen up to
  the lookback delta (5 min by default).
- **Egress**, GB: ``sum by (namespace) (increase(<egress selector>[<period>s]))`` at the
  period's end, the period ``[month start, min(month end, now)]``. ``increase()`` is taken per
  series before the sum, so a counter reset (a pod restarting from 0) is a reset of that series
  only and adds its new value (Prometheus docs, *rate*: "always take a rate() first, then
  aggregate"). It extrapolates to the window's edges when the first / last sample is within
  1.1 scrape intervals of them, never below the counter's zero (``extrapolatedRate`` in
  prometheus/promql/functions.go): a series scraped across the whole month is exact to a
  fraction of one scrape interval at each edge; bytes sent before a series' first scrape are
  not seen (as in any PromQL). Prometheus 2.x ranges include both ends, so a sample exactly at
  a month boundary closes one month and opens the next: consecutive months add up (3.x leaves
  the start out and extrapolates over it instead).

Team: namespace ``team-<slug>``, or a namespace an allocation's binding names
(:class:`~billing.services.prometheus_import.NamespaceTeams`); several namespaces of one team
add up. One record per (charge, team, month), key ``prom:<charge>:<team slug>:<YYYY-MM>``, so
importing again replaces the month's figure and writes nothing when it did not change. With a
Prometheus per cluster (:mod:`billing.services.prometheus_meters`), per cluster and span too:
``prom@<cluster id>:…`` for a cluster kept as data, ``…:<YYYY-MM>@<span start>`` for the part
of the month after a cluster's Prometheus changed; storage steps and egress stretches are
billed by the Prometheus the namespace's cluster reads at their time.

Bad input is reported on the import (``issues``) and never read as 0: a namespace that is no
team's (``unknown_namespace``), a series without a namespace (``no_namespace``), a value that
is ``NaN`` / ``±Inf`` (``not_a_number``), negative (``negative_value``) or implausibly large
(``implausible_value``) leaves that team's charge of that month unwritten (the last imported
record stays) and the rest is imported. A query Prometheus refuses (bad PromQL) or an answer
that cannot be read (``query_refused`` / ``unreadable_answer``) skips that charge only.
Prometheus unreachable raises :class:`~scheduler_adapters.errors.SchedulerUnavailable` with
nothing written (the beat task retries).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from billing.choices import ChargeBasis, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.models import UsageImport, UsageRecord
from billing.pricing import month_bounds, month_of, month_seconds, next_month
from billing.services.extra_charges import MAX_GB
from billing.services.prometheus_import import MetricsSource, NamespaceTeams
from billing.services.prometheus_meters import (
    LEGACY,
    ClusterKey,
    Meter,
    MeterMap,
    cluster_key_prefix,
)
from billing.services.usage_import import (
    ImportReport,
    UsageCatalogue,
    usage_import_save,
    usage_records_upsert,
    usage_window_check,
)
from scheduler_adapters.errors import SchedulerRejected, UnexpectedResponse
from scheduler_adapters.prometheus import Series

BYTES_PER_GB = Decimal(10) ** 9  # SI gigabyte, as the CSV import's GB
SIX_PLACES = Decimal("0.000001")
NAMESPACE_LABEL = "namespace"


@dataclass(frozen=True)
class Charge:
    """One charge read from Prometheus: its CSV name, basis, unit and the PromQL it reads."""

    name: str
    basis: str
    unit: str
    promql: str


def configured_charges() -> list[Charge]:
    """The charges whose PromQL the settings name (none: nothing to import). Raises
    ``ValueError`` for a storage step that does not divide an hour or is under 300 s."""
    step = storage_step_s()
    if step < 300 or 3600 % step:
        raise ValueError(f"EXTRA_CHARGES_STEP_S={step}: it must divide 3600 and be at least 300")
    found = [
        Charge("storage", ChargeBasis.STORAGE, UsageUnit.GB_MONTHS,
               settings.EXTRA_CHARGES_STORAGE_PROMQL.strip()),
        Charge("egress", ChargeBasis.EGRESS, UsageUnit.GB,
               settings.EXTRA_CHARGES_EGRESS_PROMQL.strip()),
    ]  # fmt: skip
    return [charge for charge in found if charge.promql]


def storage_step_s() -> int:
    return int(settings.EXTRA_CHARGES_STEP_S)


def billing_months(start: datetime, end: datetime, zone) -> list[date]:
    """The billing months (first days) ``[start, end)`` touches, in order."""
    months, month = [], month_of(start, zone)
    last = month_of(end - timedelta(microseconds=1), zone)
    while month <= last:
        months.append(month)
        month = next_month(month)
    return months


def extra_charges_import_prometheus(
    *,
    metrics: MetricsSource,
    start: datetime,
    end: datetime,
    now: datetime | None = None,
    charges: list[Charge] | None = None,
    meter: Meter = LEGACY,
    meters: MeterMap | None = None,
) -> UsageImport:
    """Import the configured charges (:func:`configured_charges`, or ``charges``) of every
    billing month ``[start, end)`` touches, each month whole from its start up to
    ``min(month end, now)`` (the module docstring has the queries, units and errors). Returns
    the :class:`UsageImport` with the counts and every issue. Raises ``ValueError`` for a
    naive or empty window; :class:`SchedulerUnavailable` when Prometheus cannot be reached.

    ``metrics`` is the Prometheus of ``meter``: a namespace's storage steps and egress are
    billed here only while its cluster (:class:`MeterMap`) is read from this Prometheus, one
    record per team, cluster and span of the month (:mod:`billing.services.prometheus_meters`;
    default: one Prometheus for everything, the keys above)."""
    meters = meters or MeterMap()
    usage_window_check(start, end)
    now = (now or timezone.now()).replace(microsecond=0)
    zone = billing_zone()
    charges = configured_charges() if charges is None else charges
    report = ImportReport()
    periods = _periods(start, end, now, zone)
    teams = NamespaceTeams(UsageCatalogue())
    records: list[UsageRecord] = []
    for charge in charges:
        for period in periods:
            records += _month_records(metrics, charge, period, teams, zone, report, (meter, meters))
    with transaction.atomic():
        usage_records_upsert(records, report, now)
        window_start = periods[0][1] if periods else start
        window_end = periods[-1][2] if periods else end
        return usage_import_save(
            UsageSource.EXTRA_CHARGES_PROMETHEUS, window_start, window_end, report
        )


def _periods(start: datetime, end: datetime, now: datetime, zone) -> list[tuple]:
    """``[(month, month start, period end)]`` of the billing months (in ``zone``) that
    ``[start, end)`` touches, each from its start to ``min(month end, now)``; a month that has
    not begun by ``now`` is left out."""
    periods = []
    for month in billing_months(start, end, zone):
        month_start, month_end = month_bounds(month, zone)
        period_end = min(month_end, now)
        if period_end > month_start:
            periods.append((month, month_start, period_end))
    return periods


def _month_records(
    metrics: MetricsSource,
    charge: Charge,
    period: tuple[date, datetime, datetime],
    teams: NamespaceTeams,
    zone,
    report: ImportReport,
    metering: tuple[Meter, MeterMap],
) -> list[UsageRecord]:
    """The records of one ``charge`` over one ``period`` (``(month, month start, period
    end)``, a billing month of ``zone``), one per team, cluster and span with usage, in key
    order, of the namespaces ``metering`` (this Prometheus' meter and the map) bills here. A
    refused query or an unreadable answer is added to ``report.issues`` (``query_refused`` /
    ``unreadable_answer``) and gives no records; ``report.jobs_seen`` counts the series
    read."""
    month, month_start, period_end = period
    try:
        chunks = [
            (a, b, _read(metrics, charge, a, b))
            for a, b in _chunks(charge, month_start, period_end, metering[1])
        ]
    except (SchedulerRejected, UnexpectedResponse) as exc:
        rejected = isinstance(exc, SchedulerRejected)
        code = "query_refused" if rejected else "unreadable_answer"
        report.issues.append({"charge": charge.name, "month": f"{month:%Y-%m}",
                              "code": code, "detail": str(exc)[:300]})  # fmt: skip
        return []
    report.jobs_seen += sum(len(series) for _, _, series in chunks)
    month_s = month_seconds(month, zone)
    totals = _team_totals(chunks, charge, month, month_s, teams, report, metering)
    return [
        _record(charge, key, teams.slugs[key[0]], month, quantity, month_start, period_end)
        for key, quantity in sorted(totals.items(), key=lambda kv: tuple(map(str, kv[0])))
    ]


def _chunks(
    charge: Charge, month_start: datetime, period_end: datetime, meters: MeterMap
) -> list[tuple[datetime, datetime]]:
    """The pieces of ``[month_start, period_end)`` read one query each: storage one (its steps
    are placed one by one); egress one per stretch between the spans' starts inside it (an
    increase is placed whole, so no piece may straddle a cluster's switch)."""
    cuts = sorted(
        {
            since
            for spans in meters.spans.values()
            for since, _ in spans
            if since is not None and month_start < since < period_end
        }
    )
    if charge.name == "storage" or not cuts:
        return [(month_start, period_end)]
    edges = [month_start, *cuts, period_end]
    return list(zip(edges, edges[1:], strict=False))


def _read(
    metrics: MetricsSource, charge: Charge, month_start: datetime, period_end: datetime
) -> tuple[Series, ...]:
    """Storage: one range query of the per-namespace bytes at every step ``t < period_end``;
    egress: one instant query of the per-namespace increase over the period."""
    if charge.name == "storage":
        step = storage_step_s()
        steps = -(-int(period_end.timestamp() - month_start.timestamp()) // step)  # ceil
        month_start = month_start.astimezone(UTC)  # steps of elapsed time, DST or not
        last = month_start + timedelta(seconds=step * (steps - 1))
        expr = f"sum by ({NAMESPACE_LABEL}) ({charge.promql})"
        return metrics.query_range(expr, start=month_start, end=last, step_s=step)
    seconds = int(period_end.timestamp() - month_start.timestamp())
    expr = f"sum by ({NAMESPACE_LABEL}) (increase({charge.promql}[{seconds}s]))"
    return metrics.query(expr, at=period_end)


def _team_totals(
    chunks: list[tuple[datetime, datetime, tuple[Series, ...]]],
    charge: Charge,
    month: date,
    month_s: int,
    teams: NamespaceTeams,
    report: ImportReport,
    metering: tuple[Meter, MeterMap],
) -> dict[tuple, Decimal]:
    """GB-months (storage) or GB (egress) per ``(team id, cluster, span)`` of the pieces this
    meter bills (:func:`_billed_pieces`); a key with any bad value is left out and reported
    (its namespaces' good values are not charged alone: a part is not the whole)."""
    totals: dict[tuple, Decimal] = defaultdict(Decimal)
    spoilt: set[tuple] = set()
    label = f"{month:%Y-%m}"

    def issue(namespace: str, code: str, detail: str) -> None:
        report.issues.append({"charge": charge.name, "month": label, "namespace": namespace,
                              "code": code, "detail": detail})  # fmt: skip

    for a, b, series in chunks:
        for item in sorted(series, key=lambda s: s.labels):
            namespace = item.label(NAMESPACE_LABEL) or ""
            pieces = _billed_pieces(item, charge, namespace, a, metering)
            team_id = _charged_team(pieces, namespace, charge, teams, issue)
            if team_id is None:
                continue
            for (cluster, span), samples in pieces.items():
                key = (team_id, cluster, span)
                try:
                    totals[key] += _amount(samples, charge, b, month_s)
                except _BadValue as exc:
                    detail = f"{exc.detail}: the team's {charge.name} of {label} not written"
                    issue(namespace, exc.code, detail)
                    spoilt.add(key)
    return {
        key: quantity.quantize(SIX_PLACES, ROUND_HALF_UP)
        for key, quantity in totals.items()
        if key not in spoilt
    }


def _charged_team(pieces, namespace: str, charge: Charge, teams: NamespaceTeams, issue):
    """The team a series' billed ``pieces`` go to, or ``None``: no pieces (another meter's),
    or no namespace / no team's namespace (reported through ``issue``)."""
    if not pieces:
        return None
    if not namespace:
        issue("", "no_namespace", f"a {charge.name} series without a namespace: not charged")
        return None
    team_id = teams.get(namespace)
    if team_id is None:
        issue(namespace, "unknown_namespace", f"namespace {namespace!r} is no team's: not charged")
    return team_id


def _billed_pieces(
    item: Series,
    charge: Charge,
    namespace: str,
    chunk_start: datetime,
    metering: tuple[Meter, MeterMap],
) -> dict[tuple, list]:
    """``{(cluster, span): samples}`` of ``item`` this meter bills: a storage step where the
    namespace's cluster is read from this Prometheus at its time, an egress increase (one
    sample, over a chunk no span start cuts) where it is at ``chunk_start``."""
    meter, meters = metering
    cluster: ClusterKey = meters.cluster_of_namespace(namespace, meter)
    pieces: dict[tuple, list] = defaultdict(list)
    for sample in item.samples:
        at = (
            datetime.fromtimestamp(sample.timestamp, tz=UTC)
            if charge.name == "storage"
            else chunk_start
        )
        if meters.reads(cluster, meter, at):
            pieces[(cluster, meters.span_bounds(cluster, at))].append(sample)
    return pieces


class _BadValue(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


def _amount(samples, charge: Charge, period_end: datetime, month_s: int) -> Decimal:
    """The samples' GB-months or GB; :class:`_BadValue` (its issue code) on a bad value."""
    total = Decimal(0)
    step = storage_step_s()
    end_s = Decimal(int(period_end.timestamp()))
    for sample in samples:
        if sample.value is None:
            raise _BadValue("not_a_number", f"NaN or infinite bytes at {_at(sample.timestamp)}")
        if sample.value < 0:
            raise _BadValue("negative_value", f"{sample.value:g} bytes at {_at(sample.timestamp)}")
        value = Decimal(repr(sample.value))
        if value / BYTES_PER_GB > MAX_GB:
            raise _BadValue("implausible_value", f"{sample.value:g} bytes at "
                             f"{_at(sample.timestamp)}")  # fmt: skip
        if charge.name == "storage":
            t = Decimal(repr(sample.timestamp))
            total += value * max(Decimal(0), min(Decimal(step), end_s - t))
        else:
            total += value
    if charge.name == "storage":
        return total / BYTES_PER_GB / month_s
    return total / BYTES_PER_GB


def _at(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=billing_zone()).isoformat()


def _record(
    charge: Charge,
    key: tuple,
    slug: str,
    month: date,
    quantity: Decimal,
    month_start: datetime,
    period_end: datetime,
) -> UsageRecord:
    """The record of ``key`` (``(team id, cluster, (span since, until))``): over the month's
    period clipped to the span, keyed ``prom[@<cluster>]:<charge>:<slug>:<YYYY-MM>[@<span
    start, epoch s>]`` (the suffix when the span starts inside the month)."""
    team_id, cluster, (since, until) = key
    start = max(month_start, since) if since else month_start
    end = min(period_end, until) if until else period_end
    piece = f"@{int(start.timestamp())}" if start > month_start else ""
    return UsageRecord(
        team_id=team_id,
        pool=None,
        quantity=quantity,
        unit=charge.unit,
        basis=charge.basis,
        month=month,
        period_start=start,
        period_end=end,
        source=UsageSource.EXTRA_CHARGES_PROMETHEUS,
        source_id=f"{cluster_key_prefix('prom', cluster)}:{charge.name}:{slug}:{month:%Y-%m}"
        f"{piece}",
    )
