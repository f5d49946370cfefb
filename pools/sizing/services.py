"""LLM sizing estimates (issue 5): validate the inputs, store them, compute the plan as a job.

The arithmetic is :mod:`pools.sizing` (pure functions); this module feeds it from the database
and stores plain JSON. Where the numbers come from:

- **GPU specs**: the ``GpuModel`` rows (the shipped catalogue as synced, with any admin edits),
  turned into :class:`~pools.sizing.gpus.GpuSpec` by ``gpu_spec_from_fields``.
- **Free cards**: sizing is for serving, and serving runs in inference (Kubernetes) pools, which
  is where "Request these cards" sends the user. A GPU model's free cards are the most that any
  *one* inference pool has free (a request lands in one pool) for the whole of the window the
  request form pre-fills: from the next full hour for seven days (:func:`capacity_window`).
  They are read when the estimate is computed, and the window is stored with the results.
- **Cards per node** (the largest TP degree): the most cards of the model on one node of an
  inference pool; for a model no inference pool has, 8 (the usual server, HGX or PCIe): the
  cards would have to be bought or moved, so odd hosts elsewhere in the fleet do not bound it.
- **Prices**: the rate card's reserved price per card-hour in force now, in its currency
  (billing hands it down by the name ``settings.SIZING_CARD_HOUR_PRICES`` gives); a price per
  card-hour given per GPU model in the inputs takes precedence. Without either the monthly cost
  is ``None`` (unknown), never a guess. :func:`card_hour_prices` is the one place prices come in.

Inputs are a JSON object (the API body; the page's form sends the same names), checked by
:func:`pools.sizing.inputs.sizing_inputs_clean` (plain Python, no DRF).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string

from pools.audit.services import audit_event_record, audit_snapshot
from pools.capacity.availability import SCHEDULER_OF_KIND, earliest_free_start, request_options
from pools.capacity.placement import shape_from_sizing
from pools.common.choices import EstimateStatus, RequestKind, WorkloadKind
from pools.common.errors import InvalidInput, NotFound
from pools.inventory import selectors
from pools.inventory.models import GpuModel, Pool
from pools.jobs import SIZING_ESTIMATE, enqueue_on_commit, jobs_waiting
from pools.sizing import SizingInputError
from pools.sizing.engines import engine_profile
from pools.sizing.fp4_kernels import fp4_kernels
from pools.sizing.gpus import GPU_SPEC_FIELDS, GpuSpec, gpu_spec_from_fields
from pools.sizing.inputs import (
    DEFAULT_INPUTS,
    demand_of,
    model_arch,
    sizing_inputs_clean,
    speculation_of,
    visual_of,
)
from pools.sizing.memory import (
    ENGINE_OVERHEAD_BYTES,
    LM_HEAD_BITS,
    RESERVE_FRACTION,
    RESERVE_MIN_BYTES,
    checkpoint_bytes,
    embedding_params,
    kv_bytes_per_sequence,
    kv_cache_bits,
    kv_cache_dtype_for,
    model_kv_bytes_per_token,
    precision_parse,
    stored_bits_per_weight,
    weights_bytes,
)
from pools.sizing.models import SizingEstimate
from pools.sizing.plan import (
    DEFAULT_CARDS_PER_NODE,
    PlanRow,
    SizingPlan,
    figures_json,
    model_as_kept,
    replica_estimate_as_dict,
    sizing_plan,
)
from pools.sizing.routing import skew_factor
from pools.sizing.selectors import measured_on_fleet
from pools.sizing.throughput import (
    BANDWIDTH_EFFICIENCY,
    Speculation,
    fp4_compute_shares,
    fp8_block_compute_share,
    hopper_mxfp4_shares,
)
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_member

logger = logging.getLogger(__name__)

#: What the what-if page starts from: Qwen2.5-72B serving 2,000 output tok/s of 1,000-token
#: prompts and 200-token answers (the issue's "Done when").
PAGE_INITIAL: dict[str, Any] = {
    **DEFAULT_INPUTS,
    "model": "qwen2_5_72b",
    "input_len": 1000,
    "output_len": 200,
    "output_tok_s": 2000,
    "requests_per_day": 100000,
    "concurrency": 64,
}

REQUEST_WINDOW = timedelta(days=7)


# ---------------------------------------------------------------------------------------------
# The fleet as the estimator sees it


def capacity_window(now: datetime | None = None) -> tuple[datetime, datetime]:
    """The window free cards are counted over: from the next full hour for seven days, the
    window the request form pre-fills, so a "Request these cards" link asks for what was
    checked."""
    now = timezone.localtime(now or timezone.now())
    start = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return start, start + REQUEST_WINDOW


def inference_free_cards(*, start: datetime, end: datetime) -> dict[str, tuple[int, str]]:
    """``{gpu model slug: (free cards, pool slug)}``: the inference pool with the most cards of
    the model free for all of ``[start, end)`` (ties: pool name order). Models no inference pool
    offers are absent. Read through ``request_options``, the new-request page's panel: the same
    arithmetic as ``pool_free_cards`` (over-commit, holding allocations) for every pool and model
    in a few queries."""
    return _best_inference_pool(start=start, end=end, by="free")


def inference_usable_cards(*, start: datetime, end: datetime) -> dict[str, tuple[int, str]]:
    """``{gpu model slug: (usable cards, pool slug)}``: the inference pool that could hold the
    most cards of the model in ``[start, end)`` once they are free (usable = schedulable cards ×
    over-commit, what a request may ask for at most; ``request_options``)."""
    return _best_inference_pool(start=start, end=end, by="usable")


def _best_inference_pool(*, start: datetime, end: datetime, by: str) -> dict[str, tuple[int, str]]:
    best: dict[str, tuple[int, str]] = {}
    scheduler = SCHEDULER_OF_KIND[WorkloadKind.INFERENCE]
    for option in request_options(
        workload_kind=WorkloadKind.INFERENCE, card_count=1, start=start, end=end
    ):
        if option.pool.scheduler != scheduler or not option.total:
            continue
        slug, cards = option.gpu_model.slug, getattr(option, by)
        if slug not in best or cards > best[slug][0]:
            best[slug] = (cards, option.pool.slug)
    return best


def card_hour_prices(
    *, inputs: Mapping[str, Any], gpu_slugs: list[str]
) -> tuple[str | None, dict[str, Decimal]]:
    """``(currency, {gpu model slug: price per card-hour})``: the rate card's reserved prices in
    force now, from the function ``settings.SIZING_CARD_HOUR_PRICES`` names (``billing`` sits
    above ``pools``, so it hands them down by name; ``(None, {})`` without a rate card), with the
    prices given in the inputs taking precedence (read in the rate card's currency; ``None``,
    unknown, without one). Never a made-up default."""
    provider = getattr(settings, "SIZING_CARD_HOUR_PRICES", "")
    currency, prices = import_string(provider)(gpu_slugs=gpu_slugs) if provider else (None, {})
    given = inputs.get("prices") or {}
    return currency, {**prices, **{s: Decimal(given[s]) for s in gpu_slugs if s in given}}


def _gpu_specs(inputs: Mapping[str, Any]) -> list[tuple[GpuModel, GpuSpec]]:
    rows = GpuModel.objects.order_by("name")
    if inputs["gpu_models"]:
        rows = rows.filter(slug__in=inputs["gpu_models"])
    return [
        (row, gpu_spec_from_fields(**{f: getattr(row, f) for f in GPU_SPEC_FIELDS})) for row in rows
    ]


def _cards_per_node() -> dict[str, int]:
    return selectors.cards_per_node_by_model(scheduler=SCHEDULER_OF_KIND[WorkloadKind.INFERENCE])


# ---------------------------------------------------------------------------------------------
# Computing


def _kv_per_replica(memory, batch: float | None) -> int | None:
    """One sequence's KV bytes counted once per replica (a TP rank's share × the ranks it is
    split over; MLA's latent and replicated KV heads are one copy) × the sequences in flight
    (the batch, rounded up); ``None`` without a fit (pure)."""
    if memory is None or batch is None:
        return None
    per_sequence = (
        memory.kv_bytes_per_sequence_per_gpu
        * memory.kv_bytes_per_token
        // memory.kv_bytes_per_token_per_gpu
    )
    return per_sequence * math.ceil(batch)


def _row_parallelism_json(
    row: PlanRow, *, gpu: GpuModel, spec: GpuSpec, cards_per_node: int
) -> dict[str, Any]:
    """The card and how a replica is split over cards and nodes (pure)."""
    return {
        "gpu_model": row.gpu_slug,
        "gpu_name": row.gpu_name,
        "memory_gib": float(gpu.memory_gib),
        "memory_bandwidth_gbps": spec.memory_bandwidth_gbps,
        "nvlink": spec.has_nvlink,
        "card_class": gpu.card_class,
        "cards_per_node": cards_per_node,
        "precision": None if row.estimate is None else row.estimate.precision,
        "min_fit_tp": row.min_fit_tp,
        "tp": row.tp,
        "pp": row.pp,
        "cards_per_replica": None if row.tp is None else row.tp * row.pp,
        "ep": row.ep,
        "dp_attention": row.dp_attention,
        "nic_gbps": row.nic_gbps,
    }


def _row_memory_json(row: PlanRow, memory, *, batch, kv_per_token: int) -> dict[str, Any]:
    """Bytes per card of the weights, the KV cache, overhead and reserve, and of the vision
    encoder and the draft model when there are (pools/sizing/memory.py; pure). Without a fit
    (``memory`` ``None``) only the model's KV bytes per token."""
    kv_per_replica = _kv_per_replica(memory, batch)
    fitted = (
        "weights_bytes", "weights_bytes_per_gpu", "vision_weights_bytes_per_gpu",
        "draft_weights_bytes_per_gpu", "draft_kv_bytes_per_sequence_per_gpu",
    )  # fmt: skip
    return {
        **{name: None if memory is None else getattr(memory, name) for name in fitted},
        "kv_bytes_per_token": kv_per_token if memory is None else memory.kv_bytes_per_token,
        "kv_bytes_per_replica": kv_per_replica,
        "kv_bytes_total": None
        if kv_per_replica is None or row.replicas is None
        else kv_per_replica * row.replicas,
        "overhead_reserve_bytes_per_gpu": None
        if memory is None
        else memory.engine_overhead_bytes_per_gpu + memory.reserve_bytes_per_gpu,
    }


def _row_throughput_json(throughput) -> dict[str, Any]:
    """A replica's speed at its batch (pools/sizing/throughput.py), with speculative decoding's
    output tokens per sequence per draft-and-verify pass and whether it beat plain decoding
    there (000 §3.3); all ``None`` without a fit (pure)."""
    names = (
        "decode_ceiling_batch1_tok_s", "tpot_ms", "ttft_ms", "speculative_tokens_per_step",
        "speculative_credited",
    )  # fmt: skip
    return {
        "batch": None if throughput is None else throughput.batch,
        **{name: None if throughput is None else getattr(throughput, name) for name in names},
        "output_tok_s_per_replica": None if throughput is None else throughput.output_tok_s_total,
    }


def _row_cards_json(row: PlanRow) -> dict[str, Any]:
    """The replicas and cards, and the cards as separate lines (seeds/004 section 2.3): the
    whole peak, the share of it sized for, and the buffer on top; cards = (sized + buffer)
    replicas × TP × PP. With where similar published measurements fell
    (pools/sizing/band.py) and the cards if every replica serves only its low end (pure)."""

    def cards(replicas: int | None) -> int | None:
        return None if replicas is None else replicas * row.tp * row.pp

    return {
        "replica_requests_per_s": row.replica_requests_per_s,
        "per_card_equivalent_tok_s": row.per_card_equivalent_tok_s,
        "replicas": row.replicas,
        "cards": row.cards,
        "cards_at_peak": cards(row.replicas_at_peak),
        "cards_sized": cards(row.replicas_sized),
        "cards_buffer": cards(row.replicas_buffer),
        "band": None if row.band is None else row.band.as_dict(),
        "replicas_pessimistic": row.replicas_pessimistic,
        "cards_pessimistic": row.cards_pessimistic,
    }


def _row_json(
    row: PlanRow,
    *,
    gpu: GpuModel,
    spec: GpuSpec,
    cards_per_node: int,
    free: tuple[int, str] | None,
    kv_per_token: int,
    pool_names: Mapping[str, str],
) -> dict[str, Any]:
    """One GPU model's row of the plan as JSON (pure): the parallelism, memory, throughput and
    cards parts, then where the cards are free, the price and the verdicts."""
    estimate = row.estimate
    throughput = estimate.throughput if estimate is not None else None
    memory = estimate.memory if estimate is not None else None
    speed = _row_throughput_json(throughput)
    return {
        **_row_parallelism_json(row, gpu=gpu, spec=spec, cards_per_node=cards_per_node),
        **_row_memory_json(row, memory, batch=speed["batch"], kv_per_token=kv_per_token),
        **speed,
        **_row_cards_json(row),
        "free_cards": row.free_cards,
        "pool": None if free is None else free[1],
        "pool_name": None if free is None else pool_names.get(free[1], free[1]),
        "price_per_card_hour": row.price_per_card_hour,
        "monthly_cost": row.monthly_cost,
        "meets_targets": row.meets_targets,
        "fits_free_capacity": row.fits_free_capacity,
        "warnings": [_warning(w, row=row, free=free, pool_names=pool_names) for w in row.warnings],
        "estimate": None if estimate is None else replica_estimate_as_dict(estimate),
    }


def _speculation_json(speculation: Speculation | None, *, precision) -> dict[str, Any] | None:
    """The speculative decoding asked for, with Leviathan et al.'s expected tokens per pass
    (1 - alpha^(gamma+1)) / (1 - alpha) and the draft model's whole weights at the target's
    precision (bytes; per card: the rows' ``draft_weights_bytes_per_gpu``)."""
    if speculation is None:
        return None
    draft = speculation.draft
    return {
        "draft_tokens": speculation.draft_tokens,
        "acceptance_rate": speculation.acceptance_rate,
        "draft_cost_ratio": speculation.draft_cost_ratio,
        "tokens_per_step": speculation.tokens_per_step(),
        "draft_model": None if draft is None else draft.id,
        "draft_model_name": None if draft is None else draft.name,
        "draft_params": None if draft is None else draft.total_params,
        "draft_weights_bytes": None if draft is None else checkpoint_bytes(draft, precision),
    }


def _warning(
    warning, *, row: PlanRow, free: tuple[int, str] | None, pool_names: Mapping[str, str]
) -> dict[str, str]:
    """The core's warning, with the free-capacity one told in this fleet's terms."""
    if warning.code != "fewer_free_cards":
        return warning.as_dict()
    if free is None:
        return {
            "code": "not_in_inference_pools",
            "message": f"No inference pool has {row.gpu_name} cards.",
        }
    return {
        "code": warning.code,
        "message": f"Needs {row.cards:,} {row.gpu_name} cards; {free[0]:,} are free in "
        f"{pool_names.get(free[1], free[1])} for the whole request window.",
    }


def _request(results: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """What "Request these cards" asks for, and what the best option lacks today:

    1. ``recommended_in_free_capacity``: the option that fits today's free capacity;
    2. ``offered_by_a_pool``: else the cheapest option meeting the targets that an inference pool
       could hold (its usable cards, the most a request may ask for); the request waits until
       enough of them are free;
    3. ``capacity_to_add``: else a request of kind ``growth`` for the cheapest option meeting
       the targets — capacity no pool has yet, which a pool admin accepts as a plan or declines
       — in no pool when no inference pool has the model, else in the pool that holds most of
       it and must grow; ``lacks`` says what is missing in words.

    Returns ``(request or None, lacks or None)``; both ``None`` when nothing meets the targets.
    """
    rows = {r["gpu_model"]: r for r in results["rows"]}
    meeting = [r for r in results["rows"] if r["meets_targets"] and r["cards"]]
    holdable = [r for r in meeting if r["usable_cards"] >= r["cards"]]
    window: dict[str, datetime] = {}
    if results["recommended_in_free_capacity"]:
        basis, row = "recommended_in_free_capacity", rows[results["recommended_in_free_capacity"]]
        pool = row["pool"]
        lacks = None
    elif holdable:  # rows are ranked, cheapest first
        basis, row, pool = "offered_by_a_pool", holdable[0], holdable[0]["usable_pool"]
        lacks, window = _pool_wait(row, pool, results["capacity"])
    elif meeting:
        window = {}
        row = rows.get(results["recommended"]) or meeting[0]
        basis, pool = "capacity_to_add", row["usable_pool"]
        lacks = _growth_lacks(row, pool)
    else:
        return None, None
    return {
        "basis": basis,
        "kind": RequestKind.GROWTH.value if basis == "capacity_to_add" else RequestKind.CARDS.value,
        "lacks": lacks,
        "workload_kind": WorkloadKind.INFERENCE.value,
        "gpu_model": row["gpu_model"],
        "card_count": row["cards"],
        "pool": pool,
        "justification": _justification(results, row),
        **_shape_of(row),
        **{key: value.isoformat() for key, value in window.items()},
    }, lacks


def _pool_wait(
    row: dict[str, Any], pool: str, capacity: dict[str, str]
) -> tuple[str, dict[str, datetime]]:
    """``(lacks, window)`` of an option ``row`` that inference ``pool`` (slug) could hold but
    not from today's free cards: how many more cards must be free there (or that it waits for
    them) and from when they are (:func:`_free_from`); ``window`` the first
    :data:`REQUEST_WINDOW` from then (``{}`` when no time is known)."""
    free_now = row["free_cards"] if row["pool"] == pool else None
    name = row["usable_pool_name"]
    starts = _free_from(row, pool, capacity)
    when = f" from {timezone.localtime(starts):%Y-%m-%d %H:%M %Z}" if starts else ""
    lacks = (
        f"needs {row['cards'] - free_now:,} more {row['gpu_name']} cards free in {name} "
        f"than the {free_now:,} free now; {row['cards']:,} are free{when}"
        if free_now is not None
        else f"waits until {row['cards']:,} {row['gpu_name']} cards are free in {name}{when}"
    )
    if not starts:
        return lacks, {}
    # the request asks for the first week they are free
    return lacks, {"starts_at": starts, "ends_at": starts + REQUEST_WINDOW}


def _growth_lacks(row: dict[str, Any], pool: str | None) -> str:
    """What a growth request for option ``row`` lacks, in words: no inference pool has its
    model (``pool`` empty), or how many cards ``pool`` (the one holding most) must add."""
    if not pool:
        return (
            f"no inference pool has {row['gpu_name']} cards: ask a pool admin to host "
            f"{row['cards']:,} of them"
        )
    return (
        f"{row['cards']:,} × {row['gpu_name']} are needed and the most any inference "
        f"pool could hold is {row['usable_cards']:,} (in {row['usable_pool_name']}): ask a "
        "pool admin to add "
        f"{row['cards'] - row['usable_cards']:,}"
    )


def _free_from(row: dict[str, Any], pool: str, capacity: dict[str, str]) -> datetime | None:
    """When the row's cards are first free in ``pool`` for a request window (7 days), from the
    window the page counted over (:func:`pools.capacity.availability.earliest_free_start`)."""
    start = datetime.fromisoformat(capacity["window_start"])
    return earliest_free_start(
        pool=Pool.objects.get(slug=pool),
        gpu_model=GpuModel.objects.get(slug=row["gpu_model"]),
        cards=row["cards"],
        start=start,
        length=REQUEST_WINDOW,
    )


def _shape_of(row: dict[str, Any]) -> dict[str, Any]:
    """The request's shape from the sized option: ``replicas`` groups of ``tp`` cards, each
    group on one node and, on models with NVLink, in one NVLink domain (a TP group all-reduces
    every layer); replicas may share nodes. TP 1 (or cards that are not TP × replicas): no shape,
    any cards (:func:`pools.capacity.placement.shape_from_sizing`)."""
    tp, replicas = row.get("tp"), row.get("replicas")
    none = {"cards_per_node": None, "node_count": None}
    if not tp or not replicas or tp == 1 or tp * replicas != row["cards"]:
        return none
    shape = shape_from_sizing(tensor_parallel=tp, replicas=replicas)
    nvlink = (
        GpuModel.objects.filter(slug=row["gpu_model"]).values_list("nvlink_gbps", flat=True).first()
    )
    return {
        "cards_per_node": shape.cards_per_node,
        "node_count": shape.nodes,
        "one_nvlink_domain": shape.one_nvlink_domain and nvlink is not None,
        "shared_nodes": shape.shared_nodes,
    }


def _justification(results: dict[str, Any], row: dict[str, Any]) -> str:
    """The request's "what the cards are for", from the estimate: model, load, targets and the
    sized option, so the approver sees why this many cards."""
    model = results["model"]["name"]
    demand = results.get("demand") or {}
    load = (
        f"{demand['peak_output_tok_s']:,.0f} output tok/s at peak"
        if demand.get("peak_output_tok_s")
        else f"{results.get('concurrency') or '?'} sequences in flight"
    )
    return (
        f"Serve {model} for {load}. Sized by the portal: {row['cards']} × {row['gpu_name']} "
        f"(TP {row['tp']} × {row['replicas']} replicas), TPOT {row['tpot_ms']:.1f} ms, "
        f"TTFT {row['ttft_ms']:.0f} ms"
        + (
            f"; {row['cards_pessimistic']} cards if the pessimistic end of the error band holds."
            if row.get("cards_pessimistic") and row["cards_pessimistic"] != row["cards"]
            else "."
        )
    )


@dataclass(frozen=True)
class _Fleet:
    """What the fleet offers the plan, read once: the capacity window (aware), the best
    inference pool's free and usable cards per GPU model slug (``(cards, pool slug)``), the GPU
    models asked about with their specs, the largest TP degree per slug, the card-hour prices
    (currency, ``{slug: Decimal}``) and the pools' names by slug."""

    start: datetime
    end: datetime
    free: dict[str, tuple[int, str]]
    usable: dict[str, tuple[int, str]]
    gpus: list[tuple[GpuModel, GpuSpec]]
    max_tp: dict[str, int]
    currency: str | None
    prices: dict[str, Decimal]
    pool_names: dict[str, str]

    def free_cards(self, slug: str) -> int:
        return self.free.get(slug, (0, ""))[0]


def _fleet_read(inputs: Mapping[str, Any]) -> _Fleet:
    """Step 1 of :func:`sizing_results`: the database reads (module doc: where the free cards,
    cards per node and prices come from)."""
    start, end = capacity_window()
    free = inference_free_cards(start=start, end=end)
    gpus = _gpu_specs(inputs)
    if inputs["only_free_capacity"]:
        gpus = [(row, spec) for row, spec in gpus if free.get(spec.slug, (0, ""))[0] > 0]
    per_node = _cards_per_node()
    currency, prices = card_hour_prices(inputs=inputs, gpu_slugs=[spec.slug for _, spec in gpus])
    return _Fleet(
        start=start,
        end=end,
        free=free,
        usable=inference_usable_cards(start=start, end=end),
        gpus=gpus,
        max_tp={spec.slug: per_node.get(spec.slug, DEFAULT_CARDS_PER_NODE) for _, spec in gpus},
        currency=currency,
        prices=prices,
        pool_names=dict(Pool.objects.values_list("slug", "name")),  # people read names
    )


@dataclass(frozen=True)
class _Ask:
    """The workload the plan sizes, from the inputs: the architecture, the vision part (or
    ``None``), the input tokens with the images' and video's (000 §6.3: they reach the language
    model as input tokens, so the prefill, the KV cache and the demand count them), the demand
    (or ``None``: sized by concurrency) and the speculative decoding (or ``None``)."""

    model: Any
    visual: Any
    input_len: int
    demand: Any
    speculation: Speculation | None


def _ask_of(inputs: Mapping[str, Any]) -> _Ask:
    """Step 2 of :func:`sizing_results` (pure)."""
    model = model_arch(inputs)
    visual = visual_of(inputs, model)
    input_len = inputs["input_len"] + (0 if visual is None else visual.tokens)
    return _Ask(
        model=model,
        visual=visual,
        input_len=input_len,
        demand=demand_of({**inputs, "input_len": input_len}),
        speculation=speculation_of(inputs, model),
    )


def _plan_of(
    inputs: Mapping[str, Any],
    ask: _Ask,
    fleet: _Fleet,
    on_progress: Callable[[int, int], None] | None,
) -> SizingPlan:
    """Step 3 of :func:`sizing_results`: :func:`pools.sizing.plan.sizing_plan` over the fleet's
    GPU models (pure but for ``on_progress``)."""
    return sizing_plan(
        model=ask.model,
        gpus=[spec for _, spec in fleet.gpus],
        precision=inputs["precision"],
        kv_cache_dtype=inputs["kv_cache_dtype"],
        input_tokens=ask.input_len,
        output_tokens=inputs["output_len"],
        demand=ask.demand,
        concurrency=inputs["concurrency"],
        tpot_target_ms=inputs["tpot_target_ms"],
        ttft_target_ms=inputs["ttft_target_ms"],
        engine=inputs["engine"],
        cards_per_node=fleet.max_tp,
        free_cards={spec.slug: fleet.free_cards(spec.slug) for _, spec in fleet.gpus},
        prices=fleet.prices,
        seed_per_card_tok_s=inputs["seed_per_card_tok_s"] if ask.demand is not None else None,
        on_progress=on_progress,
        sized_share=inputs.get("sized_share", 1.0),
        buffer_share=inputs.get("buffer_share", 0.0),
        tp=inputs.get("tp"),
        pp=inputs.get("pp") or 1,
        ep=inputs.get("ep"),
        dp_attention=inputs.get("dp_attention"),
        nic_gbps=inputs.get("nic_gbps"),
        speculation=ask.speculation,
        encoder_flops_per_request=0.0 if ask.visual is None else ask.visual.encoder_flops,
    )


def _model_json(model) -> dict[str, Any]:
    """The architecture's figures the page shows (pure)."""
    names = (
        "id", "name", "hf_repo", "total_params", "active_params", "num_layers", "num_kv_heads",
        "head_dim", "kv_lora_rank", "qk_rope_head_dim", "max_context_tokens",
    )  # fmt: skip
    return {name: getattr(model, name) for name in names}


def _fp4_kernel_shares(model, precision, efficiency, gpus) -> list[dict[str, Any]]:
    """Per FP4 chip family among ``gpus`` (GpuSpec, in order), the shares of the FP4 peak the run
    multiplies at there (pools/sizing/fp4_kernels.py): ``{"cards": names, "linear": share,
    "routed": share or None, "source": publication}``; empty for a precision other than FP4 or
    no card with FP4 tensor cores (pure)."""
    families: dict[Any, dict[str, Any]] = {}
    for gpu in gpus:
        kernels = fp4_kernels(gpu)
        linear, routed = fp4_compute_shares(
            model=model, precision=precision, gpu=gpu, efficiency=efficiency
        )
        if linear is None:
            continue
        family = families.setdefault(
            kernels,
            {"cards": [], "linear": linear, "routed": routed, "source": kernels.source},
        )
        family["cards"].append(gpu.name)
    return [{**family, "cards": ", ".join(family["cards"])} for family in families.values()]


def _rate_shares(model, precision, engine, gpus) -> dict[str, Any]:
    """The shares of peak bandwidth and tensor rate the run is modelled at: the engine's, and
    below it FP4 on Blackwell (per chip family among ``gpus``, :func:`_fp4_kernel_shares`) and
    block-scaled FP8 experts on Hopper at the measured kernel rates (pools/sizing/
    fp4_kernels.py, throughput.py), and a mixture of experts' routing skew (pure)."""
    efficiency = engine.compute_efficiency
    return {
        "bandwidth_efficiency": BANDWIDTH_EFFICIENCY,
        "compute_efficiency": efficiency,
        "fp4_kernels": _fp4_kernel_shares(model, precision, efficiency, gpus),
        "fp8_block_routed_share": fp8_block_compute_share(
            model=model, precision=precision, efficiency=efficiency
        ),
        **_hopper_mxfp4_json(model, precision, engine),
        # A mixture of experts' busiest card under a skewed router (pools/sizing/routing.py):
        # one card, and eight expert-parallel ones; None for a dense model.
        "routing_skew_one": skew_factor(model=model, ranks=1) if model.is_moe else None,
        "routing_skew_eight": skew_factor(model=model, ranks=8) if model.is_moe else None,
    }


def _hopper_mxfp4_json(model, precision, engine) -> dict[str, float | None]:
    """The measured rates of MXFP4 experts on Hopper under TensorRT-LLM's TRITON MoE op
    (pools/sizing/throughput.py ``hopper_mxfp4_shares``), ``None`` each where they do not apply
    (pure)."""
    shares = hopper_mxfp4_shares(
        model=model, precision=precision, triton=engine.hopper_mxfp4_moe_triton
    )
    multiply, slot_s, stream = shares or (None, None, None)
    return {
        "hopper_mxfp4_routed_share": multiply,
        "hopper_mxfp4_slot_ns": None if slot_s is None else slot_s * 1e9,
        "hopper_mxfp4_stream_share": stream,
    }


def _memory_json(inputs: Mapping[str, Any], ask: _Ask, gpus: list[GpuSpec]) -> dict[str, Any]:
    """The precision, the engine's constants (the FP4 kernel shares of ``gpus``, the cards the
    rows compare) and the per-token and per-sequence KV bytes behind every row
    (pools/sizing/memory.py; pure)."""
    context = ask.input_len + inputs["output_len"]
    precision = precision_parse(inputs["precision"])
    engine = engine_profile(inputs["engine"])
    model = ask.model
    kv_bits = kv_cache_bits(kv_cache_dtype_for(inputs["kv_cache_dtype"], model)[0])
    # The KV the engine allocates: TensorRT-LLM keeps a windowed layer's whole context (plan.py).
    kept = model_as_kept(ask.model, engine)
    per_sequence = kv_bytes_per_sequence(kept, context_tokens=context, kv_bits=kv_bits)
    concurrency = inputs["concurrency"]
    return {
        "precision": precision.name,
        "weight_bits": precision.weight_bits,
        "kv_cache_bits": kv_bits,
        "engine": engine.name,
        **_rate_shares(model, precision, engine, gpus),
        # What the page's "overhead + reserve" is made of (pools/sizing/memory.py).
        "engine_overhead_bytes": ENGINE_OVERHEAD_BYTES,
        "reserve_fraction": RESERVE_FRACTION,
        "reserve_min_bytes": RESERVE_MIN_BYTES,
        "reserve_of_free": engine.reserve_of_free,
        "sized_share": inputs.get("sized_share", 1.0),
        "buffer_share": inputs.get("buffer_share", 0.0),
        "weights_bytes": checkpoint_bytes(model, precision),
        # What the page's weights line is made of (memory.checkpoint_bytes).
        "stored_bits_per_weight": stored_bits_per_weight(precision),
        "embedding_params": embedding_params(model),
        "layer_params": model.total_params - embedding_params(model),
        "embedding_bits": max(LM_HEAD_BITS, precision.weight_bits),
        "kv_bytes_per_token": model_kv_bytes_per_token(model, kv_bits=kv_bits),
        "kv_bytes_per_sequence": per_sequence,
        "context_tokens": context,
        "concurrency": concurrency,
        "kv_bytes_for_concurrency": None if concurrency is None else per_sequence * concurrency,
    }


def _multimodal_json(inputs: Mapping[str, Any], ask: _Ask) -> dict[str, Any] | None:
    """Images and video as input tokens and the vision encoder's cost (000 §6.3; pure)."""
    if ask.visual is None:
        return None
    encoder = ask.model.vision.params
    return {
        **asdict(ask.visual),
        "text_input_len": inputs["input_len"],
        "input_len": ask.input_len,
        "encoder_params": encoder,
        "encoder_weights_bytes": weights_bytes(params=encoder, weight_bits=16),
    }


def _seed_rule_json(plan: SizingPlan, demand) -> dict[str, Any] | None:
    """The seeds' rule of thumb beside the plan (pure)."""
    if plan.seed_rule_cards is None:
        return None
    return {
        "per_card_tok_s": plan.seed_per_card_tok_s,
        "equivalent_tok_s": demand.peak_equivalent_output_tok_s,
        "cards": plan.seed_rule_cards,
    }


def _rows_json(plan: SizingPlan, fleet: _Fleet, *, kv_per_token: int) -> list[dict[str, Any]]:
    """One row per GPU model with every intermediate number, its price's currency and the
    usable cards of its best inference pool (pure)."""
    specs = {spec.slug: (row, spec) for row, spec in fleet.gpus}
    rows = []
    for plan_row in plan.rows:
        gpu, spec = specs[plan_row.gpu_slug]
        row = _row_json(
            plan_row,
            gpu=gpu,
            spec=spec,
            cards_per_node=fleet.max_tp[plan_row.gpu_slug],
            free=fleet.free.get(plan_row.gpu_slug),
            kv_per_token=kv_per_token,
            pool_names=fleet.pool_names,
        )
        row["currency"] = fleet.currency if row["monthly_cost"] is not None else None
        row["usable_cards"], row["usable_pool"] = fleet.usable.get(row["gpu_model"], (0, None))
        row["usable_pool_name"] = fleet.pool_names.get(row["usable_pool"], row["usable_pool"])
        rows.append(row)
    return rows


def _pricing(rows: list[dict[str, Any]]) -> str:
    """Whether the rows that meet the targets are all, partly or not priced: with prices for
    some models only, "cheapest" ranks the priced ones first (plan.py), and the page says so."""
    meeting = [row for row in rows if row["meets_targets"]]
    priced = [row for row in meeting if row["monthly_cost"] is not None]
    return "none" if not priced else "all" if len(priced) == len(meeting) else "partial"


def _slug_or_none(row: PlanRow | None) -> str | None:
    return row.gpu_slug if row else None


def sizing_results(
    *, inputs: Mapping[str, Any], on_progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Compute the plan for clean ``inputs`` (from :func:`sizing_inputs_clean`) as plain JSON:
    the model's numbers, the demand, the seeds' rule, one row per GPU model with every
    intermediate number, the recommendations and what to request. Reads the GPU models and the
    free cards of the inference pools; writes nothing. ``on_progress(done, total)`` per GPU
    model. Raises :class:`SizingInputError` if the arithmetic refuses the inputs.

    Steps: the workload asked for (:func:`_ask_of`), the fleet's reads (:func:`_fleet_read`),
    the plan (:func:`_plan_of`), its JSON parts, the fleet's measurements per row, and the
    request the recommendation makes (:func:`_request`)."""
    ask = _ask_of(inputs)
    fleet = _fleet_read(inputs)
    plan = _plan_of(inputs, ask, fleet, on_progress)
    memory = _memory_json(inputs, ask, [spec for _, spec in fleet.gpus])
    results = {
        "model": _model_json(ask.model),
        **memory,
        "demand": None if ask.demand is None else asdict(ask.demand),
        "speculation": _speculation_json(
            ask.speculation, precision=precision_parse(inputs["precision"])
        ),
        "multimodal": _multimodal_json(inputs, ask),
        "seed_rule": _seed_rule_json(plan, ask.demand),
        "capacity": {
            "window_start": fleet.start.isoformat(),
            "window_end": fleet.end.isoformat(),
            "pools": "inference (Kubernetes) pools",
        },
        "rows": _rows_json(plan, fleet, kv_per_token=memory["kv_bytes_per_token"]),
        "recommended": _slug_or_none(plan.recommended),
        "recommended_in_free_capacity": _slug_or_none(plan.recommended_in_free_capacity),
        "priced": bool(fleet.prices),
        "currency": fleet.currency,
    }
    results["pricing"] = _pricing(results["rows"])
    fleet_measured = measured_on_fleet(
        model_id=ask.model.id,
        precision=memory["precision"],
        engine=memory["engine"],
        gpu_slugs=[row["gpu_model"] for row in results["rows"]],
    )
    for row in results["rows"]:
        row["measured_on_fleet"] = fleet_measured.get(row["gpu_model"])
    results["request"], results["request_lacks"] = _request(results)
    return figures_json(results)


def sizing_preview(*, raw: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Clean ``raw`` and compute at once (the what-if page): ``(inputs, results)``. Writes
    nothing. Raises :class:`InvalidInput` with field errors."""
    inputs = sizing_inputs_clean(raw)
    try:
        return inputs, sizing_results(inputs=inputs)
    except SizingInputError as exc:
        field = exc.data.get("field") or "model"
        raise InvalidInput(exc.message, errors={field: exc.message}) from None


# ---------------------------------------------------------------------------------------------
# The estimate's life: created pending, run by a task


def _snapshot(estimate: SizingEstimate) -> dict[str, Any]:
    return audit_snapshot(estimate, "status", "progress", team="team.slug", model="inputs.model")


def sizing_estimate_create(
    *,
    actor: Any,
    inputs: Mapping[str, Any],
    team: Team | None = None,
    refuse_unknown: bool = False,
    extra_fields: Collection[str] = (),
    faults: Mapping[str, str] | None = None,
) -> SizingEstimate:
    """Store an estimate (pending) and queue its job when the transaction commits.

    ``team`` (optional) shares it with that team; the actor must belong to it (or be a pool
    admin). Raises :class:`InvalidInput` with ``errors`` ``{field: message}`` for unusable inputs
    and :class:`PermissionDenied` for a team the actor is not in; nothing is written then.
    ``refuse_unknown``, ``extra_fields``, ``faults``: as :func:`sizing_inputs_clean` takes them
    (the API refuses keys it does not read, and answers a bad ``team`` beside the inputs'
    faults).
    """
    clean = sizing_inputs_clean(
        inputs, refuse_unknown=refuse_unknown, extra_fields=extra_fields, faults=faults
    )
    if team is not None:
        require_member(actor, team)
    with transaction.atomic():
        estimate = SizingEstimate.objects.create(inputs=clean, created_by=actor, team=team)
        audit_event_record(
            actor=actor, action="sizing_estimate.created", obj=estimate, after=_snapshot(estimate)
        )
        enqueue_on_commit(SIZING_ESTIMATE, estimate.pk)
    return estimate


def sizing_estimate_run(*, estimate_id: int) -> SizingEstimate:
    """Compute a pending (or interrupted, still running) estimate; done or failed at the end.

    Idempotent: a done or failed estimate is returned as it is, so a redelivered task does
    nothing; :class:`NotFound` when it was deleted meanwhile. Progress is the share of GPU
    models computed. Inputs the arithmetic refuses mark the estimate failed with the reason; so
    does an unexpected error (logged), since computing the same inputs again would fail again.
    """
    with transaction.atomic():
        estimate = SizingEstimate.objects.select_for_update().filter(pk=estimate_id).first()
        if estimate is None:
            raise NotFound(f"No sizing estimate #{estimate_id}.", id=estimate_id)
        if estimate.status in (EstimateStatus.DONE, EstimateStatus.FAILED):
            return estimate
        estimate.status = EstimateStatus.RUNNING
        estimate.progress = 0
        estimate.started_at = timezone.now()
        estimate.save(update_fields=["status", "progress", "started_at"])

    reported = [0]

    def progress(done: int, total: int) -> None:
        percent = min(99, done * 100 // max(total, 1))
        if percent > reported[0]:
            reported[0] = percent
            SizingEstimate.objects.filter(pk=estimate_id, status=EstimateStatus.RUNNING).update(
                progress=percent
            )

    results = error = None
    try:
        results = sizing_results(inputs=estimate.inputs, on_progress=progress)
    except SizingInputError as exc:
        error = f"The inputs cannot be estimated: {exc.message}"
    except Exception as exc:  # a bug must not leave the estimate running for ever
        logger.exception("sizing estimate %s failed", estimate_id)
        error = f"The estimate failed with an internal error ({type(exc).__name__}); see the logs."
    return _finish(estimate_id=estimate_id, results=results, error=error)


def _finish(*, estimate_id: int, results: dict | None, error: str | None) -> SizingEstimate:
    with transaction.atomic():
        estimate = SizingEstimate.objects.select_for_update().get(pk=estimate_id)
        if estimate.status != EstimateStatus.RUNNING:
            return estimate  # another run finished first
        before = _snapshot(estimate)
        if error is None:
            estimate.status, estimate.results, estimate.progress = EstimateStatus.DONE, results, 100
        else:
            estimate.status, estimate.error = EstimateStatus.FAILED, error
        estimate.finished_at = timezone.now()
        estimate.save(update_fields=["status", "results", "progress", "error", "finished_at"])
        audit_event_record(
            actor=None,
            action=f"sizing_estimate.{estimate.status}",
            obj=estimate,
            before=before,
            after=_snapshot(estimate),
            reason=error or "",
        )
    return estimate


def sizing_estimates_requeue_stranded(*, now: datetime | None = None) -> list[int]:
    """Queue again the estimates whose job was lost: ``pending`` since before, or ``running``
    since before, ``now`` minus ``TASK_TIME_LIMIT_S`` (the longest a task may run, so no
    worker can still be computing them), unless their job is still waiting in the outbox for
    the broker. Returns their ids, oldest first. Safe to repeat: a run of an estimate that is
    already done or failed does nothing.
    """
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.TASK_TIME_LIMIT_S)
    waiting = {args[0] for args in jobs_waiting(SIZING_ESTIMATE) if args}
    stranded = [
        pk
        for pk in SizingEstimate.objects.filter(
            Q(status=EstimateStatus.PENDING, created_at__lt=cutoff)
            | Q(status=EstimateStatus.RUNNING, started_at__lt=cutoff)
        )
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
        if pk not in waiting
    ]
    for pk in stranded:
        logger.warning("sizing estimate %s stranded since before %s: queued again", pk, cutoff)
        enqueue_on_commit(SIZING_ESTIMATE, pk)
    return stranded


def sizing_request_url(request: Mapping[str, Any] | None) -> str | None:
    """The new-request page pre-filled with ``results["request"]`` (kind, model, cards, pool,
    justification)."""
    if not request or not request.get("card_count"):
        return None
    query = {
        "workload_kind": request["workload_kind"],
        "gpu_model": request["gpu_model"],
        "card_count": request["card_count"],
    }
    if request.get("kind") == RequestKind.GROWTH:
        query["kind"] = request["kind"]
    if request.get("justification"):
        query["justification"] = request["justification"]
    if request.get("cards_per_node"):
        query["cards_per_node"] = request["cards_per_node"]
        query["node_count"] = request["node_count"]
        for flag in ("one_nvlink_domain", "shared_nodes"):
            if request.get(flag):
                query[flag] = "on"
    if request.get("pool"):
        query["pool"] = request["pool"]
    for key in ("starts_at", "ends_at"):  # a request that waits for its cards: when they are free
        if request.get(key):
            local = timezone.localtime(datetime.fromisoformat(request[key]))
            query[key] = local.strftime("%Y-%m-%dT%H:%M")
    return f"{reverse('pools:request-new')}?{urlencode(query)}"


def sizing_recommendation(results: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The row the estimate recommends (``results["recommended"]``), with its error band.

    ``{"gpu_model", "tp", "replicas", "cards", "cards_pessimistic", "output_tok_s_per_replica",
    "band"}``; ``None`` when there are no results yet or nothing meets the targets.
    """
    if not results or not results.get("recommended"):
        return None
    for row in results.get("rows", ()):
        if row["gpu_model"] == results["recommended"]:
            return {
                "gpu_model": row["gpu_model"],
                "tp": row["tp"],
                "replicas": row["replicas"],
                "cards": row["cards"],
                "cards_pessimistic": row.get("cards_pessimistic"),
                "output_tok_s_per_replica": row["output_tok_s_per_replica"],
                "band": row.get("band"),
            }
    return None
