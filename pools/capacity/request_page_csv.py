"""The request page's tables as CSV (``/requests/<id>/?export=<name>``), beside its audit trail's
``?export=audit``: ``request`` (what was asked, one row), ``allocation`` (what was granted, one
row; none before approval), ``scheduler`` (the objects the *In the scheduler* panel lists) and
``drifts`` (the panel's drifts the scheduler refused to repair). Same rows and order as the
page; instants ISO 8601 in UTC; card-hours to 3 decimals, as pages show them; money as
``amount`` (a plain decimal at the currency's minor unit) beside its ``currency`` code, as the
other CSVs give it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.http import StreamingHttpResponse

from pools.capacity.arithmetic import card_hours
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.scheduler_panel import SchedulerPanel
from pools.web.csv_numbers import card_hours_csv
from pools.web.pages import Column, csv_response


def _utc(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _slug(related) -> str | None:
    return related.slug if related is not None else None


def _decided_by(r: CapacityRequest) -> str | None:
    """Who decided, as the page says it: a pool rule when no one did."""
    if r.decided_at is None:
        return None
    return r.decided_by.username if r.decided_by else "pool rule"


REQUEST_ASKED_COLUMNS = [
    Column("request", lambda r: r.pk),
    Column("status", lambda r: r.status),
    Column("team", lambda r: r.team.slug),
    Column("cost_centre", lambda r: r.team.cost_centre),
    Column("kind", lambda r: r.kind),
    Column("workload_kind", lambda r: r.workload_kind),
    Column("pool", lambda r: _slug(r.pool)),  # empty: any eligible pool
    Column("workload_class", lambda r: _slug(r.workload_class)),
    Column("gpu_model", lambda r: _slug(r.gpu_model)),  # empty: any with min_memory_gib
    Column("min_memory_gib", lambda r: r.min_memory_gib),
    Column("card_count", lambda r: r.card_count),
    Column("mig_profile", lambda r: r.mig_profile),
    Column("cards_per_node", lambda r: r.cards_per_node),
    Column("node_count", lambda r: r.node_count),
    Column("one_nvlink_domain", lambda r: r.one_nvlink_domain),
    Column("shared_nodes", lambda r: r.shared_nodes),
    Column("starts_at", lambda r: _utc(r.starts_at)),
    Column("ends_at", lambda r: _utc(r.ends_at)),
    Column("hours", lambda r: f"{r.duration_hours:.2f}"),
    Column("cuda_version", lambda r: r.cuda_version),
    Column("justification", lambda r: r.justification),
    Column("requested_by", lambda r: r.requested_by.username),
    Column("created_at", lambda r: _utc(r.created_at)),
    Column("extends_allocation", lambda r: r.extends_id),
    Column("budget_verdict", lambda r: r.budget_verdict),
    Column("budget_reason", lambda r: r.budget_reason),
    Column("decided_by", _decided_by),
    Column("decided_at", lambda r: _utc(r.decided_at)),
    Column("decision_reason", lambda r: r.decision_reason),
]


def _placement(a: Allocation) -> str:
    """``gpu-01 (GPU 0, 1); gpu-02 (GPU 3)``, as the page's *Placed on*; ``""`` unplaced."""
    return "; ".join(
        f"{spot['node']} (GPU {', '.join(str(g) for g in spot['gpus'])})" for spot in a.placement
    )


def _cost(name: str) -> Callable[[tuple], object]:
    """A field of the row's cost so far (``None`` without a pricing hook)."""
    return lambda row: getattr(row[1], name) if row[1] is not None else None


# Rows: (allocation, its cost so far or None).
ALLOCATION_COLUMNS = [
    Column("allocation", lambda row: row[0].pk),
    Column("status", lambda row: row[0].status),
    Column("status_reason", lambda row: row[0].status_reason),
    Column("card_count", lambda row: row[0].card_count),
    Column("gpu_model", lambda row: row[0].gpu_model.slug),
    Column("mig_profile", lambda row: row[0].mig_profile),
    Column("pool", lambda row: row[0].pool.slug),
    Column("placement", lambda row: _placement(row[0])),
    Column("starts_at", lambda row: _utc(row[0].starts_at)),
    Column("ends_at", lambda row: _utc(row[0].ends_at)),
    Column(
        "reserved_card_hours",
        lambda row: card_hours_csv(card_hours(row[0].card_count, row[0].starts_at, row[0].ends_at)),
    ),
    Column("pricing_method", lambda row: row[0].pricing_method),
    Column("scheduler_applied", lambda row: bool((row[0].scheduler_binding or {}).get("applied"))),
    Column("held_card_hours", lambda row: card_hours_csv(row[1].card_hours) if row[1] else None),
    Column("price_per_card_hour", _cost("price_plain")),
    Column("cost_so_far", _cost("amount")),  # empty: unknown (cost_reason says why)
    Column("currency", _cost("currency")),
    Column("cost_reason", _cost("reason")),
]

# Rows: (panel, one of its objects).
SCHEDULER_OBJECT_COLUMNS = [
    Column("scheduler", lambda row: row[0].scheduler),
    Column("state", lambda row: row[0].state),
    Column("object", lambda row: row[1].kind),
    Column("name", lambda row: row[1].name),
    Column("holds", lambda row: row[1].detail),
]

DRIFT_COLUMNS = [
    Column("detected_at", lambda d: _utc(d.detected_at)),
    Column("object", lambda d: d.subject),
    Column("expected", lambda d: d.expected),
    Column("found", lambda d: d.found),
    Column("scheduler_answered", lambda d: d.detail),
]

EXPORTS = ("request", "allocation", "scheduler", "drifts")


def request_page_csv(
    name: str,
    *,
    req: CapacityRequest,
    allocation: Allocation | None,
    scheduler: SchedulerPanel | None,
    cost,
) -> StreamingHttpResponse:
    """The CSV of the page's table ``name`` (one of :data:`EXPORTS`), named
    ``request-<id>-<name>.csv``; a table the page does not show (no allocation yet, no drift)
    is its header alone. ``cost``: the allocation's cost so far, ``None`` when unknown."""
    if name == "request":
        rows, columns = [req], REQUEST_ASKED_COLUMNS
    elif name == "allocation":
        rows, columns = ([(allocation, cost)] if allocation else []), ALLOCATION_COLUMNS
    elif name == "scheduler":
        objects = scheduler.objects if scheduler else []
        rows, columns = [(scheduler, o) for o in objects], SCHEDULER_OBJECT_COLUMNS
    else:
        rows, columns = (scheduler.unrepaired if scheduler else []), DRIFT_COLUMNS
    return csv_response(rows, columns, f"request-{req.pk}-{name}.csv")
