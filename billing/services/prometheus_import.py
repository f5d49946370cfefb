"""Usage importers reading Prometheus: Kubernetes GPU requests and vLLM token counters.

Both write :class:`~billing.models.UsageRecord` through the same upsert as the Slurm importer
(:mod:`billing.services.usage_import`), keyed by **billing day** so that overlapping or repeated
windows find the same keys and nothing is counted twice: the window is widened to whole days
in the billing time zone (``[local midnight of start's day, local midnight after end)``) and
clipped at "now" (today's record is metered up to now and updated in place on the next run).
A billing day never crosses a month boundary, so records are split at month starts by
construction; a daylight-saving day simply has 23 or 25 hours.

Several Prometheus servers (issue 29): the importers read one Prometheus, a *meter* of
:mod:`billing.services.prometheus_meters`, and bill only the series of the clusters that meter
reads at each time; the keys below name the cluster (``k8s@<cluster id>:…``, none for the
environment's) and a span start when a cluster's Prometheus changed inside the day
(``<YYYY-MM-DD>@<epoch s>``), as that module decides.

Kubernetes (``source="kubernetes"``), key ``k8s:<namespace>:<model slug>:<YYYY-MM-DD>:<where>``
where ``where`` is ``alloc<id>`` for the card-seconds of the steps inside an allocation of the
team and GPU model in a Kubernetes pool of the node's cluster whose namespace (its scheduler
binding's, else ``team-<slug>``) is the series' — never one in another cluster's pool or a
Slurm pool (matched per step by the Slurm import's rule, :mod:`billing.reserved_cover`:
``included`` in one priced by reserved card-hours or by tokens, within its cards — the team's
cards of the model at a step beyond them, on the nodes last in (cluster, namespace, node) name
order, are not — and ``used`` — charged — in one priced on use) and ``used`` for the rest:

- series: ``kube_pod_container_resource_requests{resource="nvidia_com_gpu",node!=""}``
  (kube-state-metrics; ``node!=""`` keeps scheduled pods only, pending pods hold no card),
  read with a range query at ``step_s`` (default 60 s) aligned to the day's local midnight,
  summed in Python per (namespace, node) at each step;
- pods whose ``kube_pod_status_phase{phase="Succeeded"|"Failed"}`` is 1 at a step are not
  counted at that step (kube-state-metrics exports a finished pod's requests until it is
  deleted); a Pending pod already bound to a node holds its cards and is counted;
- integration: the value at step ``t`` counts for ``[t, t + step)`` (left Riemann sum).
  **Error**: a pod's start and end are seen to within one step, so each start or stop is off by
  at most ``step_s`` × its cards (≤ 60 card-s per card per edge at the default step; the sum over
  a long window is unbiased on average). A series that vanishes without a staleness marker
  (a Prometheus restart, backfilled data) keeps its last value for up to the lookback delta
  (5 min by default) — the same as any PromQL over these series;
- team: namespace ``team-<slug>``, or the ``namespace`` of an allocation's scheduler binding;
  other namespaces are reported (``unknown_namespace``), never charged;
- GPU model, in this order: (1) the node's ``nvidia.com/gpu.product`` label (GPU feature
  discovery), read from ``kube_node_labels{label_nvidia_com_gpu_product!=""}`` and matched
  exactly through :class:`~pools.models.GpuModelAlias` (``NVIDIA-A100-SXM4-80GB``); (2) the
  pools inventory: the node's hostname in ``pools.Node`` with exactly one GPU model; (3) the
  team's allocation(s) in Kubernetes pools when they have exactly one model. Otherwise the
  usage is reported (``unknown_gpu_model``) and not charged;
- a day partly inside an allocation priced on use always has its ``used`` record, at 0 when
  nothing ran outside the allocation, so that a record imported before such allocations were
  matched is corrected in place on a re-import (:func:`_k8s_used_kept`);
- an ``alloc<id>`` or ``used`` record of a piece imported again that the rule no longer gives
  (the allocation cancelled since, or another pool's, imported before pools were matched;
  usage now inside an elastic allocation's burst cards) is set to 0 (:func:`_k8s_gone_parts`),
  as the Slurm import does.

vLLM tokens (``source="prometheus-tokens"``), key
``vllm:<namespace>:<model_name>:<unit>:<YYYY-MM-DD>``:

- ``vllm:prompt_tokens_total`` → input tokens, ``vllm:generation_tokens_total`` → output
  tokens, per namespace (→ team as above) and ``model_name`` (the served model). vLLM counts
  prefix-cache hits inside prompt tokens, so all prompt tokens are charged as input tokens;
- the raw samples are read (``metric[<seconds>s]`` at the window's end, from the window start
  minus ``lookback_s``) and the increase computed in Python with
  :func:`billing.pricing.counter_increase` (a drop means a reset: the new value is all new), not
  with PromQL ``increase()`` (which extrapolates to the window's edges). Each increase between
  two consecutive samples belongs to the day of the later sample, so days add up exactly. The
  first sample of a series has no predecessor and adds nothing (as in PromQL).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Protocol

from django.db import transaction
from django.utils import timezone

from billing.choices import ChargeBasis, ShareBasis, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.models import UsageImport, UsageRecord
from billing.pricing import counter_increase, local_midnight, split_at
from billing.reserved_cover import Use, cover_at
from billing.services.prometheus_meters import (
    LEGACY,
    ClusterKey,
    Meter,
    MeterMap,
    cluster_key_prefix,
    day_key,
)
from billing.services.usage_import import (
    ImportReport,
    UsageCatalogue,
    usage_import_save,
    usage_records_upsert,
    usage_window_check,
)
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation
from pools.common.choices import Scheduler
from pools.inventory.gpu_names import normalise_model_key
from pools.inventory.models import Gpu
from scheduler_adapters.prometheus import Series, dcgm_labels

GPU_REQUESTS = 'kube_pod_container_resource_requests{resource="nvidia_com_gpu",node!=""}'
# kube-state-metrics keeps exporting the requests of Succeeded/Failed pods until they are
# deleted; they hold no card then (a Pending pod bound to a node does: it is pulling images).
FINISHED_PHASES = (
    'kube_pod_status_phase{phase="Succeeded"}',
    'kube_pod_status_phase{phase="Failed"}',
)
NODE_PRODUCT = 'kube_node_labels{label_nvidia_com_gpu_product!=""}'
# GPU feature discovery's labels of a time-sliced / MPS node (billing/services/shared_card_import)
SHARED_NODES = 'kube_node_labels{label_nvidia_com_gpu_replicas!=""}'
REPLICAS_LABEL = "label_nvidia_com_gpu_replicas"
STRATEGY_LABEL = "label_nvidia_com_gpu_sharing_strategy"
_SHARE_BASIS = {"time-slicing": ShareBasis.TIME_SLICING, "mps": ShareBasis.MPS}
PRODUCT_LABEL = "label_nvidia_com_gpu_product"
_MIG_MARK = "-MIG-"
_MIG_SLICES_OF = re.compile(r"(?P<g>[1-7])g\.[0-9]+gb(\+me)?", re.IGNORECASE)
TOKEN_COUNTERS = (
    ("vllm:prompt_tokens_total", UsageUnit.INPUT_TOKENS),
    ("vllm:generation_tokens_total", UsageUnit.OUTPUT_TOKENS),
)
DEFAULT_STEP_S = 60
DEFAULT_LOOKBACK_S = 600


class MetricsSource(Protocol):
    """What the importers need of :class:`~scheduler_adapters.prometheus.PrometheusAdapter`."""

    def query(self, expr: str, *, at: datetime) -> tuple[Series, ...]: ...

    def query_range(
        self, expr: str, *, start: datetime, end: datetime, step_s: float
    ) -> tuple[Series, ...]: ...


def billing_days(
    start: datetime, end: datetime, now: datetime, zone
) -> list[tuple[date, datetime, datetime]]:
    """Billing days covering ``[start, end)``, the last clipped at ``now``: ``(day, a, b)``."""
    day = start.astimezone(zone).date()
    out = []
    while True:
        a = local_midnight(day, zone)
        if a >= end or a >= now:
            break
        b = min(local_midnight(day + timedelta(days=1), zone), now)
        out.append((day, a, b))
        day += timedelta(days=1)
    return out


class NamespaceTeams:
    """Team ids by Kubernetes namespace: ``team-<slug>``, and any namespace an allocation's
    binding names (read once per import); ``slugs``: each team's slug by its id."""

    def __init__(self, catalogue: UsageCatalogue) -> None:
        self.slugs = {team_id: slug for slug, team_id in catalogue.teams.items()}
        self.by_namespace = {f"team-{slug}": team_id for slug, team_id in catalogue.teams.items()}
        for team_id, binding in Allocation.objects.values_list("team_id", "scheduler_binding"):
            namespace = (binding or {}).get("namespace")
            if isinstance(namespace, str):
                self.by_namespace.setdefault(namespace, team_id)

    def get(self, namespace: str | None) -> int | None:
        return self.by_namespace.get(namespace or "")


# --------------------------------------------------------------------------- Kubernetes


class _K8sModels:
    """GPU model of a (node, team): node product label, then inventory, then allocation."""

    def __init__(self, catalogue: UsageCatalogue, node_products: dict[str, str]) -> None:
        self.catalogue = catalogue
        self.node_products = node_products
        self.inventory: dict[str, set[int]] = defaultdict(set)
        for hostname, model_id in (
            Gpu.objects.filter(gpu_model__isnull=False)
            .values_list("node__hostname", "gpu_model_id")
            .distinct()
        ):
            self.inventory[hostname].add(model_id)
        self.team_models: dict[int, set[int]] = defaultdict(set)
        for team_id, model_id in Allocation.objects.filter(
            pool__scheduler=Scheduler.KUBERNETES, status__in=CHARGED_STATUSES
        ).values_list("team_id", "gpu_model_id"):
            self.team_models[team_id].add(model_id)

    def resolve(self, node: str | None, team_id: int) -> tuple[int | None, str, Decimal]:
        """``(model id, how it was found, card share of one requested nvidia.com/gpu)``.

        Under MIG strategy *single* the node's product is ``<model>-MIG-<g>g.<m>gb`` and one
        requested ``nvidia.com/gpu`` is one slice: the model is ``<model>`` and the share
        ``g``/7 of a card (the compute slices it takes, as for Slurm MIG GRES, C10). A
        ``-MIG-INVALID`` node is misconfigured: no model, reported.
        """
        product = self.node_products.get(node or "")
        share = Decimal(1)
        if product and _MIG_MARK in product:
            label = product
            product, _, profile = product.rpartition(_MIG_MARK)
            if profile.upper() == "INVALID":
                return None, f"node {node!r}: misconfigured MIG (product {label!r})", share
            slices = _MIG_SLICES_OF.match(profile)
            if slices is None:
                return None, f"node {node!r}: MIG product profile {profile!r}", share
            share = Decimal(int(slices["g"])) / Decimal(7)
        if product:
            model_id = self.catalogue.alias.get(normalise_model_key(product))
            if model_id is not None:
                return model_id, "node-label", share
        if share != 1:
            return None, f"node {node!r}: MIG base model {product!r} is not in the catalogue", share
        in_node = self.inventory.get(node or "", set())
        if len(in_node) == 1:
            return next(iter(in_node)), "inventory", share
        held = self.team_models.get(team_id, set())
        if len(held) == 1:
            return next(iter(held)), "allocation", share
        return None, f"node {node!r} (product {product!r}) and the team's allocations", share


def _node_products(metrics: MetricsSource, start: datetime, end: datetime) -> dict[str, str]:
    seconds = max(1, math.ceil((end - start).total_seconds()))
    products: dict[str, tuple[float, str]] = {}
    for series in metrics.query(f"{NODE_PRODUCT}[{seconds}s]", at=end):
        node, product = series.label("node"), series.label(PRODUCT_LABEL)
        if not node or not product or not series.samples:
            continue
        last = series.samples[-1].timestamp
        if node not in products or last >= products[node][0]:
            products[node] = (last, product)
    return {node: product for node, (_, product) in products.items()}


def shared_nodes(
    metrics: MetricsSource, start: datetime, end: datetime
) -> dict[str, tuple[int, str]]:
    """Node → ``(replicas per card, share basis)`` for nodes GPU feature discovery labels as
    shared (more than one replica; strategy ``mps``, else time-slicing), newest label wins."""
    seconds = max(1, math.ceil((end - start).total_seconds()))
    found: dict[str, tuple[float, int, str]] = {}
    for series in metrics.query(f"{SHARED_NODES}[{seconds}s]", at=end):
        node, text = series.label("node"), series.label(REPLICAS_LABEL) or ""
        if not node or not text.isdigit() or int(text) < 2 or not series.samples:
            continue
        basis = _SHARE_BASIS.get(series.label(STRATEGY_LABEL) or "", ShareBasis.TIME_SLICING)
        last = series.samples[-1].timestamp
        if node not in found or last >= found[node][0]:
            found[node] = (last, int(text), basis)
    return {node: (replicas, basis) for node, (_, replicas, basis) in found.items()}


def usage_import_kubernetes(
    *,
    metrics: MetricsSource,
    start: datetime,
    end: datetime,
    now: datetime | None = None,
    step_s: int = DEFAULT_STEP_S,
    meter: Meter = LEGACY,
    meters: MeterMap | None = None,
) -> UsageImport:
    """Card-seconds of GPU requests of scheduled pods per namespace and GPU model, per billing
    day of ``[start, end)`` (see the module docstring for keys, model resolution and error).

    ``metrics`` is the Prometheus of ``meter``; ``meters`` says which cluster each node is and
    which steps of it this meter bills (:mod:`billing.services.prometheus_meters`; default:
    one Prometheus for everything, the environment's keys)."""
    usage_window_check(start, end)
    if step_s <= 0 or 3600 % step_s:
        raise ValueError("step_s must divide an hour")
    now = now or timezone.now()
    zone = billing_zone()
    report = ImportReport()
    days = billing_days(start, end, now, zone)
    if not days:
        with transaction.atomic():
            return usage_import_save(UsageSource.KUBERNETES, start, end, report)
    wide_start, wide_end = days[0][1], days[-1][2]
    catalogue = UsageCatalogue()
    teams = NamespaceTeams(catalogue)
    models = _K8sModels(catalogue, _node_products(metrics, wide_start, wide_end))
    series, finished = _k8s_series(metrics, days, step_s)
    cards = _k8s_cards(series, finished, report)
    _drop_shared_nodes(cards, shared_nodes(metrics, wide_start, wide_end), report)
    totals = _k8s_totals(
        cards, (teams, models, catalogue), (meter, meters or MeterMap()), step_s, days, report
    )
    records = _k8s_records(totals, days, catalogue, teams)
    with transaction.atomic():
        records += _k8s_gone_parts(records)
        usage_records_upsert(records, report, now)
        return usage_import_save(UsageSource.KUBERNETES, start, end, report)


@dataclass
class _Total:
    """Card-seconds of one record to be, and the stretch its steps cover (``since``, ``until``:
    the first step's start, the last one's end)."""

    quantity: Decimal = Decimal(0)
    since: datetime | None = None
    until: datetime | None = None

    def add(self, card_seconds: Decimal, start: datetime, end: datetime) -> None:
        self.quantity += card_seconds
        self.since = start if self.since is None else min(self.since, start)
        self.until = end if self.until is None else max(self.until, end)


def _k8s_totals(
    cards: dict[tuple[str, str], dict[float, Decimal]],
    resolvers: tuple[NamespaceTeams, _K8sModels, UsageCatalogue],
    metering: tuple[Meter, MeterMap],
    step_s: int,
    days: list[tuple[date, datetime, datetime]],
    report: ImportReport,
) -> dict[tuple, _Total]:
    """Card-seconds per ``(cluster, team, model, day, span, allocation, basis)`` of the steps
    of ``cards`` (``{(namespace, node): {epoch s: cards}}``) this meter bills, the cluster the
    node's (``metering``: this Prometheus' meter and the map); each step's allocation and basis
    those of its start, the team's reservations covering at most their cards
    (:func:`_k8s_covered`, the Slurm import's rule)."""
    teams, models, catalogue = resolvers
    meter, meters = metering
    zone = billing_zone()
    steps: dict[tuple[ClusterKey, int, int, datetime], list[tuple]] = defaultdict(list)
    reported: set[tuple[str, str]] = set()
    for (namespace, node), points in sorted(cards.items()):
        cluster = meters.cluster_of_node(node, meter)
        billed = _steps_billed_here(points, cluster, meter, meters)
        if not billed:
            continue  # another meter's (the cluster's Prometheus at those times)
        charged = _k8s_charged(namespace, node, teams, models, reported, report)
        if charged is None:
            continue
        team_id, model_id, share = charged
        # one span (no switch): the same bounds for every step, not looked up per step
        fixed = (None, None) if meters.always(cluster, meter) is not None else None
        rank = (str(cluster), namespace, node)
        for day, a, count, seconds in _k8s_step_pieces(billed, step_s, days, zone):
            span = fixed or meters.span_bounds(cluster, a)
            steps[(cluster, team_id, model_id, a)].append((rank, (day, span), count * share,
                                                           seconds))  # fmt: skip
    return _k8s_covered(steps, catalogue)


def _k8s_covered(steps: dict[tuple, list[tuple]], catalogue: UsageCatalogue) -> dict:
    """Totals as :func:`_k8s_totals` returns them from ``steps``: ``{(cluster, team, model,
    step piece start): [(rank, (day, span), cards, seconds)]}``, ``rank`` ``(cluster,
    namespace, node)``. At each step the team's reservations of the model in force in the
    Kubernetes pools of that cluster cover at most their cards, each the usage in its namespace
    (:func:`billing.reserved_cover.cover_at`; the nodes first in ``rank`` name order, first),
    the rest is used in its allocation priced on use there or none."""
    by_cluster: dict[ClusterKey, set[tuple[int, int]]] = defaultdict(set)
    for cluster, team_id, model_id, _ in steps:
        by_cluster[cluster].add((team_id, model_id))
    held = {
        (cluster, *pair): found
        for cluster, pairs in by_cluster.items()
        for pair, found in catalogue.held(
            pairs, scheduler=Scheduler.KUBERNETES, cluster=cluster
        ).items()
    }
    totals: dict[tuple, _Total] = defaultdict(_Total)
    for (cluster, team_id, model_id, a), entries in steps.items():
        reserved, on_use = held[(cluster, team_id, model_id)]
        uses = [
            Use(i, rank, a, a + timedelta(seconds=seconds), Fraction(cards), rank[1])
            for i, (rank, _, cards, seconds) in enumerate(entries)
        ]
        for i, (allocation_id, included), cards in cover_at(uses, reserved, on_use, a):
            _, (day, span), _, seconds = entries[i]
            basis = ChargeBasis.INCLUDED if included else ChargeBasis.USED
            card_seconds = Decimal(cards.numerator) / cards.denominator * seconds
            totals[(cluster, team_id, model_id, day, span, allocation_id, basis)].add(
                card_seconds, a, a + timedelta(seconds=seconds)
            )
    return totals


def _k8s_used_kept(
    totals: dict[tuple, _Total],
    bounds: dict[date, tuple[datetime, datetime]],
    catalogue: UsageCatalogue,
) -> None:
    """Add to ``totals`` (at 0) the ``used`` total of each piece of a day (``bounds``: the
    day's ``(start, end)``, clipped to its span) with usage inside an allocation priced on use
    that is not in force all through the piece
    (:meth:`~billing.services.usage_import.UsageCatalogue.on_use_throughout`, among the
    cluster's Kubernetes pools).

    Before on-use allocations were matched, all of such a piece's usage outside reservations
    was its ``used`` record; the migration ``0017`` moved the records of pieces wholly inside
    one to that allocation's key, but of a piece that is partly inside it nobody can tell
    which steps were: importing the day again writes that ``used`` record (its usage outside
    the allocation, 0 if none), so the old total is corrected in place, never charged beside
    the allocation's new record."""
    for cluster, team_id, model_id, day, span, allocation_id, basis in list(totals):
        if allocation_id is None or basis != ChargeBasis.USED:
            continue
        piece = _piece_bounds(*bounds[day], span)
        if (
            catalogue.on_use_throughout(
                team_id, model_id, *piece, scheduler=Scheduler.KUBERNETES, cluster=cluster
            )
            is None
        ):
            totals.setdefault((cluster, team_id, model_id, day, span, None, basis), _Total())


def _steps_billed_here(
    points: dict[float, Decimal], cluster: ClusterKey, meter: Meter, meters: MeterMap
) -> dict[float, Decimal]:
    """The steps of ``points`` (``{epoch s: cards}``) of ``cluster`` that ``meter`` bills."""
    always = meters.always(cluster, meter)
    if always is not None:  # no switch in the cluster's history: no step to look at
        return points if always else {}
    return {
        t: count
        for t, count in points.items()
        if meters.reads(cluster, meter, datetime.fromtimestamp(t, tz=UTC))
    }


def _piece_bounds(
    a: datetime, b: datetime, span: tuple[datetime | None, datetime | None]
) -> tuple[datetime, datetime]:
    """A billing day ``[a, b)`` clipped to a span ``(since, until)`` (``None``: unbounded)."""
    since, until = span
    return (max(a, since) if since else a), (min(b, until) if until else b)


def _k8s_step_pieces(
    points: dict[float, Decimal],
    step_s: int,
    days: list[tuple[date, datetime, datetime]],
    zone,
) -> Iterator[tuple[date, datetime, Decimal, int]]:
    """``(billing day, piece start, cards, seconds)`` of each sample of ``points`` (``{step
    timestamp in epoch s: cards}``): the step ``[t, t + step_s)`` clipped to the end of
    ``days`` (``[(day, start, end)]``, in order, the days of ``zone``) and split at their
    starts; a step before the first day or with nothing left after clipping gives none."""
    wide_start, wide_end = days[0][1], days[-1][2]
    day_starts = [a for _, a, _ in days[1:]]
    for timestamp, count in points.items():
        t = datetime.fromtimestamp(timestamp, tz=UTC)
        t_end = min(t + timedelta(seconds=step_s), wide_end)
        if t < wide_start or t_end <= t:
            continue
        for a, b in split_at(t, t_end, day_starts):
            yield a.astimezone(zone).date(), a, count, int((b - a).total_seconds())


def _drop_shared_nodes(
    cards: dict[tuple[str, str], dict[float, Decimal]],
    shared: dict[str, tuple[int, str]],
    report: ImportReport,
) -> None:
    """Leave out the requests on time-sliced / MPS nodes: one requested ``nvidia.com/gpu`` there
    is a replica, not a card (OpenCost #3828 charges it as a whole card); those pods are billed
    by their share of the card (:mod:`billing.services.shared_card_import`). Reported once per
    (namespace, node) as ``shared_card``."""
    for key in sorted(k for k in cards if k[1] in shared):
        del cards[key]
        replicas = shared[key[1]][0]
        detail = f"node {key[1]!r} is shared ({replicas} replicas per card): billed by share"
        report.issues.append({"namespace": key[0], "code": "shared_card", "detail": detail})


def _k8s_series(
    metrics: MetricsSource, days: list[tuple[date, datetime, datetime]], step_s: int
) -> tuple[list[Series], set[tuple[str, str, float]]]:
    """``(GPU request series, (namespace, pod, step) of pods in a finished phase)``: one range
    query per day (under Prometheus' 11,000 points), samples at ``t < day end`` only."""
    series: list[Series] = []
    finished: set[tuple[str, str, float]] = set()
    for _day, a, b in days:
        last_t = b - timedelta(seconds=1)
        if last_t < a:
            continue
        series.extend(metrics.query_range(GPU_REQUESTS, start=a, end=last_t, step_s=step_s))
        for expr in FINISHED_PHASES:
            for item in metrics.query_range(expr, start=a, end=last_t, step_s=step_s):
                workload = dcgm_labels(item.label_map)
                pod_key = (workload.namespace or "", workload.pod or "")
                finished.update((*pod_key, x.timestamp) for x in item.samples if x.value == 1)
    return series, finished


def _k8s_cards(
    series: list[Series], finished: set[tuple[str, str, float]], report: ImportReport
) -> dict[tuple[str, str], dict[float, Decimal]]:
    """Cards requested per ``(namespace, node)`` and step timestamp, pods of a finished phase
    left out; counts every series in ``report.jobs_seen``."""
    cards: dict[tuple[str, str], dict[float, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for item in series:
        report.jobs_seen += 1
        # namespace/pod_namespace/exported_namespace, pod/pod_name/exported_pod alike
        workload = dcgm_labels(item.label_map)
        key = (workload.namespace or "", item.label("node") or "")
        pod = workload.pod or ""
        for sample in item.samples:
            if sample.value and (key[0], pod, sample.timestamp) not in finished:
                cards[key][sample.timestamp] += Decimal(str(sample.value))
    return cards


def _k8s_charged(
    namespace: str,
    node: str,
    teams: NamespaceTeams,
    models: _K8sModels,
    reported: set[tuple[str, str]],
    report: ImportReport,
) -> tuple[int, int, Decimal] | None:
    """``(team, GPU model, share)`` a namespace's cards on a node are charged to, or ``None``
    (reported once per namespace / pair) when the namespace is no team's or the model unknown."""
    team_id = teams.get(namespace)
    if team_id is None:
        if ("ns", namespace) not in reported:
            reported.add(("ns", namespace))
            report.issues.append({"namespace": namespace, "code": "unknown_namespace",
                                  "detail": f"namespace {namespace!r} is no team's: "
                                            "not charged"})  # fmt: skip
        return None
    model_id, how, share = models.resolve(node, team_id)
    if model_id is None:
        if (namespace, node) not in reported:
            reported.add((namespace, node))
            detail = f"no GPU model from {how}: not charged"
            report.issues.append(
                {"namespace": namespace, "code": "unknown_gpu_model", "detail": detail}
            )
        return None
    return team_id, model_id, share


def _k8s_records(
    totals: dict[tuple, _Total],
    days: list[tuple[date, datetime, datetime]],
    catalogue: UsageCatalogue,
    teams: NamespaceTeams,
) -> list[UsageRecord]:
    """One card-seconds :class:`UsageRecord` per ``(cluster, team, model, day, span,
    allocation, basis)`` of ``totals`` (with the ``used`` ones :func:`_k8s_used_kept` adds), in
    key order, keyed ``k8s[@<cluster>]:<namespace>:<model>:<day>[@<span start>]:alloc<id>|used``
    (:mod:`billing.services.prometheus_meters`). A record's period is the day clipped to the
    span; one inside an allocation priced on use covers only its steps (its first one's start to
    its last one's end), which the idle cost reads as its cards in use
    (:func:`billing.selectors._beyond_on_use`)."""
    bounds = {day: (a, b) for day, a, b in days}
    _k8s_used_kept(totals, bounds, catalogue)
    namespace_of = {team_id: ns for ns, team_id in sorted(teams.by_namespace.items(), reverse=True)}
    records = []
    for (cluster, team_id, model_id, day, span, allocation_id, basis), total in sorted(
        totals.items(), key=lambda kv: tuple(str(part) for part in kv[0])
    ):
        day_start = bounds[day][0]
        a, b = _piece_bounds(*bounds[day], span)
        slug = catalogue.model_slug.get(model_id, str(model_id))
        prefix = cluster_key_prefix("k8s", cluster)
        on_use = allocation_id is not None and basis == ChargeBasis.USED
        tail = f"alloc{allocation_id}" if allocation_id else "used"
        records.append(
            UsageRecord(
                team_id=team_id,
                gpu_model_id=model_id,
                allocation_id=allocation_id,
                quantity=total.quantity.quantize(Decimal("0.000001")),
                unit=UsageUnit.CARD_SECONDS,
                basis=basis,
                month=day.replace(day=1),
                period_start=max(a, total.since) if on_use else a,
                period_end=min(b, total.until) if on_use else b,
                source=UsageSource.KUBERNETES,
                source_id=f"{prefix}:{namespace_of.get(team_id, team_id)}:{slug}:"
                f"{day_key(day, a, day_start)}:{tail}",
            )
        )
    return records


def _k8s_gone_parts(records: list[UsageRecord]) -> list[UsageRecord]:
    """The stored ``…:alloc<id>`` and ``…:used`` records of the pieces ``records`` writes (a
    piece: the key up to its last ``:``, cluster, namespace, model, day and span) that
    ``records`` no longer has — the allocation was cancelled, its window moved off the steps,
    or, imported before allocations were matched to their pool, it is another pool's; usage
    once used is now inside a reservation (its cards held above an elastic floor, imported
    before they covered) — at 0, so their usage is not counted beside the piece's new records
    (as the Slurm import's :func:`~billing.services.usage_import._gone_parts`, whose ``used``
    key is always written). A piece this import does not write (another meter's, a day
    outside the window) is left alone. One query."""
    if not records:
        return []
    written = {r.source_id for r in records}
    pieces = {key.rpartition(":")[0] for key in written}
    stale = []
    for row in UsageRecord.objects.filter(
        source=UsageSource.KUBERNETES,
        team_id__in={r.team_id for r in records},
        month__in={r.month for r in records},
        quantity__gt=0,
    ).order_by("id"):
        if row.source_id in written or row.source_id.rpartition(":")[0] not in pieces:
            continue
        row.pk, row.quantity = None, Decimal(0)
        stale.append(row)
    return stale


# --------------------------------------------------------------------------- vLLM tokens


def _increase_by_day(
    samples: Iterable[tuple[datetime, Decimal]], bucket_of, wide_start: datetime, wide_end: datetime
) -> dict:
    """Increase between consecutive samples, each given to ``bucket_of`` its later sample
    (:func:`counter_increase` of the pair, so a reset counts the new value); a bucket of
    ``None`` (another meter bills that time) drops the increase."""
    out: dict = defaultdict(Decimal)
    ordered = sorted(samples)
    for previous, current in zip(ordered, ordered[1:], strict=False):
        if wide_start <= current[0] < wide_end:
            bucket = bucket_of(current[0])
            if bucket is not None:
                out[bucket] += counter_increase([previous, current])
    return out


def _vllm_totals(
    metrics: MetricsSource,
    days: list[tuple[date, datetime, datetime]],
    lookback_s: int,
    zone,
    report: ImportReport,
    meter: Meter = LEGACY,
    meters: MeterMap | None = None,
) -> dict[tuple, Decimal]:
    """Tokens per ``(cluster, team, namespace, served model, unit, billing day, span)`` over
    ``days`` (``[(day, start, end)]``, in order, the days of ``zone``, not empty): one instant
    range query per counter of :data:`TOKEN_COUNTERS` reaching ``lookback_s`` before the first
    day, each increase given to the day of its later sample, when ``meter`` bills the series'
    cluster (its namespace's, :class:`MeterMap`) at that time. Series with no team's namespace
    or no ``model_name`` are reported once per namespace; every series counts in
    ``report.jobs_seen``."""
    meters = meters or MeterMap()
    wide_start, wide_end = days[0][1], days[-1][2]
    teams = NamespaceTeams(UsageCatalogue())
    at = wide_end - timedelta(milliseconds=1)  # samples at t < wide_end
    seconds = math.ceil((at - wide_start).total_seconds()) + lookback_s
    totals: dict[tuple, Decimal] = defaultdict(Decimal)
    reported: set[str] = set()
    for metric, unit in TOKEN_COUNTERS:
        for item in metrics.query(f'{metric}{{namespace!=""}}[{seconds}s]', at=at):
            report.jobs_seen += 1
            cluster = meters.cluster_of_namespace(dcgm_labels(item.label_map).namespace, meter)
            points = [
                (datetime.fromtimestamp(s.timestamp, tz=UTC), Decimal(str(s.value)))
                for s in item.samples
                if s.value is not None
            ]
            if not any(
                wide_start <= t < wide_end and meters.reads(cluster, meter, t) for t, _ in points
            ):
                continue  # another meter's (the cluster's Prometheus at those times)
            charged = _vllm_charged(item, teams, reported, report)
            if charged is None:
                continue
            team_id, namespace, served = charged
            bucket_of = _token_buckets(cluster, meter, meters, zone)
            for (day, span), tokens in _increase_by_day(
                points, bucket_of, wide_start, wide_end
            ).items():
                totals[(cluster, team_id, namespace, served, unit, day, span)] += tokens
    return totals


def _token_buckets(cluster: ClusterKey, meter: Meter, meters: MeterMap, zone):
    """``t`` → ``(billing day of zone, span)`` of a counter's increase at ``t`` of ``cluster``,
    or ``None`` when another meter bills that time."""

    def bucket_of(t: datetime) -> tuple | None:
        if not meters.reads(cluster, meter, t):
            return None
        return t.astimezone(zone).date(), meters.span_bounds(cluster, t)

    return bucket_of


def _vllm_charged(
    item: Series, teams: NamespaceTeams, reported: set[str], report: ImportReport
) -> tuple[int, str, str] | None:
    """``(team, namespace, served model)`` a vLLM counter series is charged to, or ``None``
    when its namespace is no team's (``unknown_namespace``) or it has no ``model_name``
    (``no_model_name``), reported once per namespace (``reported`` holds those done)."""
    namespace = dcgm_labels(item.label_map).namespace or ""
    served = item.label("model_name") or ""
    team_id = teams.get(namespace)
    if team_id is not None and served:
        return team_id, namespace, served
    if namespace not in reported:
        reported.add(namespace)
        code = "unknown_namespace" if served else "no_model_name"
        detail = f"namespace {namespace!r}: no team's, or no model_name; not charged"
        report.issues.append({"namespace": namespace, "code": code, "detail": detail})
    return None


def _vllm_records(
    totals: dict[tuple, Decimal],
    days: list[tuple[date, datetime, datetime]],
) -> list[UsageRecord]:
    """One token :class:`UsageRecord` per non-zero total of ``totals`` (as
    :func:`_vllm_totals` returns), in key order, over its billing day of ``days`` clipped to
    its span, keyed ``vllm[@<cluster>]:<namespace>:<served model>:<unit>:<day>[@<span
    start>]`` (:mod:`billing.services.prometheus_meters`)."""
    bounds = {day: (a, b) for day, a, b in days}
    records = []
    for (cluster, team_id, namespace, served, unit, day, span), tokens in sorted(
        totals.items(), key=lambda kv: tuple(str(part) for part in kv[0])
    ):
        if not tokens:
            continue
        day_start = bounds[day][0]
        a, b = _piece_bounds(*bounds[day], span)
        prefix = cluster_key_prefix("vllm", cluster)
        records.append(
            UsageRecord(
                team_id=team_id,
                served_model=served[:120],
                quantity=tokens.quantize(Decimal("0.000001")),
                unit=unit,
                basis=ChargeBasis.TOKENS,
                month=day.replace(day=1),
                period_start=a,
                period_end=b,
                source=UsageSource.PROMETHEUS_TOKENS,
                source_id=f"{prefix}:{namespace}:{served}:{unit.value}:"
                f"{day_key(day, a, day_start)}"[:200],
            )
        )
    return records


def usage_import_vllm_tokens(
    *,
    metrics: MetricsSource,
    start: datetime,
    end: datetime,
    now: datetime | None = None,
    lookback_s: int = DEFAULT_LOOKBACK_S,
    meter: Meter = LEGACY,
    meters: MeterMap | None = None,
) -> UsageImport:
    """Input and output tokens per team, served model and billing day of ``[start, end)`` from
    vLLM's counters (see the module docstring); ``metrics`` is the Prometheus of ``meter``,
    billing the series ``meters`` gives it (:mod:`billing.services.prometheus_meters`)."""
    usage_window_check(start, end)
    now = now or timezone.now()
    zone = billing_zone()
    report = ImportReport()
    days = billing_days(start, end, now, zone)
    records = (
        _vllm_records(_vllm_totals(metrics, days, lookback_s, zone, report, meter, meters), days)
        if days
        else []
    )
    with transaction.atomic():
        usage_records_upsert(records, report, now)
        return usage_import_save(UsageSource.PROMETHEUS_TOKENS, start, end, report)
