"""Reads of the advisor: the stored signals its rules judge (rollups, placement neighbours,
fabric labels, scale events, daily framebuffer and throughput), gathered for many
allocations in a fixed number of queries, and the findings lists pages and the API show."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Avg, F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import Cast, TruncDay

from pools.advisor.choices import LIVE_STATUSES, FindingStatus
from pools.advisor.models import AdvisorFinding, AdvisorRun
from pools.advisor.rules import BUCKET_FIELDS, Bucket, DaySummary, ScaleChange
from pools.capacity.lifecycle import RUNNING_STATUSES
from pools.capacity.models import Allocation, PlacedCards
from pools.elastic.models import ElasticPolicy, ScaleEvent
from pools.inventory.models import Node, pool_node_cluster_id
from pools.serving.choices import Resolution
from pools.serving.models import ServingRollup

# Node labels that say whether a node has an RDMA fabric (Node Feature Discovery's, and the
# portal's own for Slurm nodes): a value "true" is a fast fabric, "false" none; absent unknown.
# A node as placed cards name it: (its cluster's id, None for the environment's; host name).
NodeKey = tuple[int | None, str]
FABRIC_LABELS = (
    "feature.node.kubernetes.io/rdma.available",
    "feature.node.kubernetes.io/rdma.capable",
    "gpu-pool-portal/fabric-rdma",
)


def advisor_live_allocations() -> QuerySet[Allocation]:
    """Allocations the advisor judges: running (active or expiring), team and pool joined."""
    return (
        Allocation.objects.filter(status__in=RUNNING_STATUSES)
        .select_related("team", "pool")
        .order_by("id")
    )


def advisor_buckets(
    *, allocation_ids: Iterable[int], start: datetime, end: datetime
) -> dict[int, list[Bucket]]:
    """Allocation id -> its 5-minute rollups in ``[start, end)`` as :class:`Bucket`, oldest
    first. One query, read as plain tuples in PostgreSQL's binary format (2,000 allocations x
    a day is 576,000 rows: the ORM's rows, then parsing timestamps and floats from text, took
    three quarters of a pass; binary timestamps and floats are read by psycopg's C loaders)."""
    ids = list(allocation_ids)
    if not ids:
        return {}
    if connection.vendor != "postgresql":  # the demo's SQLite: the ORM's way
        return _buckets_orm(ids, start, end)
    columns = ", ".join(BUCKET_FIELDS)
    sql = (
        f"SELECT bucket_start, {columns}, allocation_id "
        f"FROM {ServingRollup._meta.db_table} "
        "WHERE allocation_id = ANY(%s) AND bucket_seconds = %s "
        "AND bucket_start >= %s AND bucket_start < %s ORDER BY allocation_id, bucket_start"
    )
    out: dict[int, list[Bucket]] = defaultdict(list)
    make = Bucket._make
    with _binary_cursor() as cursor:
        cursor.execute(sql, [ids, Resolution.FIVE_MINUTES, start, end])
        while rows := cursor.fetchmany(50000):
            for row in rows:
                out[row[-1]].append(make(row[:-1]))
    return out


def _binary_cursor():
    """A cursor of the default connection whose results come in PostgreSQL's binary format
    (Django's own cursors bind parameters client-side, which allows text results only),
    wrapped as Django wraps its cursors so the query is logged and counted like any other."""
    import psycopg

    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    raw.format = psycopg.pq.Format.BINARY
    if connection.queries_logged:
        return connection.make_debug_cursor(raw)
    return connection.make_cursor(raw)


def _buckets_orm(ids: list[int], start: datetime, end: datetime) -> dict[int, list[Bucket]]:
    rows = (
        ServingRollup.objects.filter(
            allocation_id__in=ids,
            bucket_seconds=Resolution.FIVE_MINUTES,
            bucket_start__gte=start,
            bucket_start__lt=end,
        )
        .order_by("allocation_id", "bucket_start")
        .values_list("allocation_id", "bucket_start", *BUCKET_FIELDS)
    )
    out: dict[int, list[Bucket]] = defaultdict(list)
    for allocation_id, *values in rows.iterator(chunk_size=20000):
        out[allocation_id].append(Bucket._make(values))
    return out


def advisor_placement(*, allocation_ids: Iterable[int]) -> dict[int, list[tuple[NodeKey, int]]]:
    """Allocation id -> ``((cluster id, hostname), GPU mask)`` of each node its cards are on:
    the node of that name in the allocation's pool's cluster (``None``: the environment's;
    names are unique per cluster only). One query."""
    out: dict[int, list[tuple[NodeKey, int]]] = defaultdict(list)
    rows = (
        PlacedCards.objects.filter(allocation_id__in=list(allocation_ids))
        .annotate(node_cluster=pool_node_cluster_id("allocation__pool"))
        .values_list("allocation_id", "node_cluster", "hostname", "gpu_mask")
    )
    for allocation_id, cluster_id, host, mask in rows:
        out[allocation_id].append(((cluster_id, host), mask))
    return out


def neighbours_of(
    placement: dict[int, list[tuple[NodeKey, int]]],
) -> dict[int, tuple[set[int], str, tuple[str, ...]]]:
    """Allocation id -> ``(neighbour ids, "card" | "node", shared host names)``: the
    allocations with cards on a node it uses ("card" when a GPU mask overlaps: they share a
    card); a node is its cluster's, so namesakes in two clusters are not neighbours."""
    by_node: dict[NodeKey, list[tuple[int, int]]] = defaultdict(list)
    for allocation_id, nodes in placement.items():
        for node, mask in nodes:
            by_node[node].append((allocation_id, mask))
    out = {}
    for allocation_id, nodes in placement.items():
        ids, hosts, card = set(), set(), False
        for node, mask in nodes:
            for other, other_mask in by_node[node]:
                if other != allocation_id:
                    ids.add(other)
                    hosts.add(node[1])
                    card = card or bool(mask & other_mask)
        out[allocation_id] = (ids, "card" if card else "node", tuple(sorted(hosts)))
    return out


def fabric_of(nodes: Iterable[NodeKey]) -> dict[NodeKey, bool | None]:
    """``(cluster id, hostname)`` -> whether that node's labels say it has an RDMA fabric
    (``None`` unknown). One query."""
    nodes = set(nodes)
    out: dict[NodeKey, bool | None] = {}
    for cluster_id, hostname, labels in Node.objects.filter(
        hostname__in={h for _, h in nodes}
    ).values_list("cluster_id", "hostname", "labels"):
        if (cluster_id, hostname) not in nodes:
            continue
        value = next((str(labels[k]).lower() for k in FABRIC_LABELS if k in (labels or {})), None)
        out[cluster_id, hostname] = None if value is None else value == "true"
    return out


def advisor_scaling(
    *, allocation_ids: Iterable[int], start: datetime, end: datetime
) -> dict[int, tuple[int, list[ScaleChange]]]:
    """Allocation id -> ``(cooldown s, scale events effective in [start, end) that changed
    the cards, oldest first)`` for elastic allocations. Two queries."""
    policies = dict(
        ElasticPolicy.objects.filter(allocation_id__in=list(allocation_ids)).values_list(
            "pk", "allocation_id"
        )
    )
    cooldowns = dict(
        ElasticPolicy.objects.filter(pk__in=policies).values_list("pk", "cooldown_minutes")
    )
    out = {a: (cooldowns[p] * 60, []) for p, a in policies.items()}
    events = (
        ScaleEvent.objects.filter(
            policy_id__in=list(policies), effective_at__gte=start, effective_at__lt=end
        )
        .exclude(cards_from=F("cards_to"))
        .order_by("effective_at", "id")
        .values_list("policy_id", "effective_at", "cards_from", "cards_to")
    )
    for policy_id, at, cards_from, cards_to in events:
        out[policies[policy_id]][1].append(ScaleChange(at, cards_from, cards_to))
    return out


def advisor_days(
    *, allocation_ids: Iterable[int], start: datetime, end: datetime
) -> dict[int, list[DaySummary]]:
    """Allocation id -> one :class:`DaySummary` per UTC day in ``[start, end)`` with rollups
    (both resolutions), oldest first: mean free framebuffer per card (MiB; rows that report
    it) and output tokens per busy card-second (generation tokens over
    ``cards_busy x bucket_seconds`` of rows that report both). One query."""
    known = Q(generation_tokens__isnull=False, cards_busy__isnull=False)
    rows = (
        ServingRollup.objects.filter(
            allocation_id__in=list(allocation_ids), bucket_start__gte=start, bucket_start__lt=end
        )
        .annotate(day=TruncDay("bucket_start", tzinfo=UTC))
        .values("allocation_id", "day")
        .annotate(
            fb_free=Avg(Cast("fb_free_mib", FloatField()) / F("cards_held")),
            tokens=Sum("generation_tokens", filter=known),
            busy_s=Sum(F("cards_busy") * F("bucket_seconds"), filter=known),
        )
        .order_by("allocation_id", "day")
    )
    out: dict[int, list[DaySummary]] = defaultdict(list)
    for row in rows:
        speed = (
            row["tokens"] / row["busy_s"] if row["tokens"] is not None and row["busy_s"] else None
        )
        out[row["allocation_id"]].append(DaySummary(row["day"].date(), row["fb_free"], speed))
    return out


def live_findings(*, allocation_ids: Iterable[int] | None = None) -> list[AdvisorFinding]:
    """The live (not closed) findings, of ``allocation_ids`` (and team-wide ones when None)."""
    qs = AdvisorFinding.objects.filter(status__in=LIVE_STATUSES)
    if allocation_ids is not None:
        qs = qs.filter(allocation_id__in=list(allocation_ids))
    return list(qs)


def finding_list(*, user) -> QuerySet[AdvisorFinding]:
    """Findings ``user`` may see, with allocation, team and pool joined for the lists."""
    return AdvisorFinding.objects.visible_to(user).select_related(
        "team", "allocation", "allocation__pool", "allocation__gpu_model", "status_by"
    )


def findings_for_allocation(*, user, allocation_id: int) -> list[AdvisorFinding]:
    """The live findings of one allocation ``user`` may see, most urgent first."""
    return list(
        finding_list(user=user)
        .filter(allocation_id=allocation_id, status__in=LIVE_STATUSES)
        .order_by("severity_rank", "-last_seen_at")
    )


def findings_for_teams(*, user, team_ids: Iterable[int], limit: int = 20) -> list[AdvisorFinding]:
    """The open and acknowledged findings of ``team_ids`` ``user`` may see (muted ones left
    out), most urgent first, at most ``limit``."""
    return list(
        finding_list(user=user)
        .filter(
            team_id__in=list(team_ids),
            status__in=[FindingStatus.OPEN, FindingStatus.ACKNOWLEDGED],
        )
        .order_by("severity_rank", "-last_seen_at")[:limit]
    )


def last_advisor_run() -> AdvisorRun | None:
    return AdvisorRun.objects.order_by("-started_at").first()


def window_start(now: datetime, hours: int) -> datetime:
    """The start of the rules' window ending at ``now``: ``hours`` back."""
    return now - timedelta(hours=hours)
