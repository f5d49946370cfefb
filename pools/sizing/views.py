"""Sizing pages: the what-if page (recomputed over htmx as the inputs change), saved estimates
(progress polled over htmx until the job is done) and their list. Thin: the form's fields go to
the sizing service under the service's own input names; it validates and computes."""

from __future__ import annotations

import json

from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods, require_POST

from pools.common.choices import Scheduler
from pools.common.errors import DomainError, InvalidInput
from pools.inventory import selectors as inventory_selectors
from pools.inventory.models import GpuModel, Pool
from pools.sizing import inputs as sizing_inputs
from pools.sizing import selectors as sizing_selectors
from pools.sizing import services as sizing_services
from pools.sizing.engines import ENGINE_PROFILES
from pools.sizing.filtersets import SizingEstimateFilterSet
from pools.sizing.gpus import NVLINK_DOMAIN_GPUS
from pools.sizing.labels import CUSTOM_LABELS, FIELD_LABELS, page_message
from pools.sizing.presets import model_presets
from pools.tenancy import selectors as tenancy_selectors
from pools.web.numbers import grouped
from pools.web.pages import Column, checked_export, csv_response, filtered_list

# The service's scalar input names; the form uses them as they are.
SCALAR_INPUTS = (
    "model",
    "precision",
    "kv_cache_dtype",
    "engine",
    "input_len",
    "output_len",
    "demand_kind",
    "output_tok_s",
    "requests_per_day",
    "peak_share",
    "peak_hours",
    "concurrency",
    "prompt_cache_hit_rate",
    "input_weight",
    "tpot_target_ms",
    "ttft_target_ms",
    "sized_share",
    "buffer_share",
    "tp",
    "pp",
    "ep",
    "dp_attention",
    "nic_gbps",
    "speculative_draft_tokens",
    "speculative_acceptance_rate",
    "speculative_draft_cost_ratio",
    "speculative_draft_model",
    "images_per_request",
    "image_width_px",
    "image_height_px",
    "video_seconds_per_request",
    "video_fps",
    "seed_per_card_tok_s",
)

ROW_COLUMNS = [
    Column("gpu_model", lambda r: r["gpu_model"]),
    Column("gpu_name", lambda r: r["gpu_name"]),
    Column("recommended", lambda r: r.get("recommendation", "")),
    Column("precision", lambda r: r["precision"]),
    Column("tp", lambda r: r["tp"]),
    Column("pp", lambda r: r.get("pp", 1)),
    Column("batch_per_replica", lambda r: r["batch"]),
    Column("weights_bytes", lambda r: r["weights_bytes"]),
    Column("weights_bytes_per_gpu", lambda r: r["weights_bytes_per_gpu"]),
    Column("kv_bytes_per_token", lambda r: r["kv_bytes_per_token"]),
    Column("kv_bytes_per_replica", lambda r: r["kv_bytes_per_replica"]),
    Column("kv_bytes_total", lambda r: r["kv_bytes_total"]),
    Column("overhead_reserve_bytes_per_gpu", lambda r: r["overhead_reserve_bytes_per_gpu"]),
    Column("decode_ceiling_batch1_tok_s", lambda r: r["decode_ceiling_batch1_tok_s"]),
    Column("output_tok_s_per_replica", lambda r: r["output_tok_s_per_replica"]),
    Column("likely_low_tok_s_per_replica", lambda r: (r.get("band") or {}).get("low_tok_s")),
    Column("likely_high_tok_s_per_replica", lambda r: (r.get("band") or {}).get("high_tok_s")),
    Column("band_regime", lambda r: (r.get("band") or {}).get("regime")),
    Column("speculative_tokens_per_step", lambda r: r.get("speculative_tokens_per_step")),
    Column("speculative_credited", lambda r: r.get("speculative_credited")),
    Column("draft_weights_bytes_per_gpu", lambda r: r.get("draft_weights_bytes_per_gpu")),
    Column("tpot_ms", lambda r: r["tpot_ms"]),
    Column("ttft_ms", lambda r: r["ttft_ms"]),
    Column("replica_requests_per_s", lambda r: r["replica_requests_per_s"]),
    Column("per_card_equivalent_tok_s", lambda r: r["per_card_equivalent_tok_s"]),
    Column("replicas", lambda r: r["replicas"]),
    Column("cards", lambda r: r["cards"]),
    Column("cards_pessimistic", lambda r: r.get("cards_pessimistic")),
    Column("free_cards", lambda r: r["free_cards"]),
    Column("pool", lambda r: r["pool"]),
    Column("price_per_card_hour", lambda r: r["price_per_card_hour"]),
    Column("monthly_cost", lambda r: r["monthly_cost"]),
    Column("currency", lambda r: r.get("currency")),
    Column("meets_targets", lambda r: r["meets_targets"]),
    Column("fits_free_capacity", lambda r: r["fits_free_capacity"]),
    Column("warnings", lambda r: " | ".join(w["message"] for w in r["warnings"])),
]

ESTIMATE_COLUMNS = [
    Column("id", lambda e: e.pk),
    Column("created_at", lambda e: e.created_at.isoformat()),
    Column("created_by", lambda e: e.created_by.username),
    Column("team", lambda e: e.team.slug if e.team_id else None),
    Column("model", lambda e: e.inputs.get("model")),
    Column("status", lambda e: e.status),
    Column("gpu_model", lambda e: ((e.results or {}).get("request") or {}).get("gpu_model")),
    Column("card_count", lambda e: ((e.results or {}).get("request") or {}).get("card_count")),
    Column("pool", lambda e: ((e.results or {}).get("request") or {}).get("pool")),
]


# The sizing chart's box (static/js/sizing.js): 26 px a GPU model, plus the frame - the card
# axis below with its title (80 px); with costs also the cost axis above, its tick labels slanted
# at phone width, and the legend: 90 px more, measured in Chromium at 390 and 1280 px wide
# (tests/browser/test_sizing_page.py: two priced rows in a 132 px box had no height for bars).
CHART_ROW_PX = 26
CHART_FRAME_PX = 80
CHART_FRAME_WITH_COST_PX = 170


def _error_items(errors: dict[str, str], form: dict | None = None) -> list[dict[str, str]]:
    """Field errors with the form's labels, in the form's order; ``field`` is the input's name.
    A custom-architecture field left blank on ``form`` beside a pasted config.json got its
    value from the config: its label says so (the user never typed it)."""
    order = {name: position for position, name in enumerate(FIELD_LABELS)}
    custom = (form or {}).get("custom_model") or {}
    pasted = isinstance(custom, dict) and str(custom.get("config") or "").strip()
    items = []
    for field, message in errors.items():
        head, _, tail = field.partition(".")
        if head == "custom_model" and tail and tail != "config" and pasted:
            given = str(custom.get(tail) or "").strip()
            where = "custom architecture" if given else "from the config.json"
            label = f"{CUSTOM_LABELS.get(tail, tail)} ({where})"
        elif head == "custom_model" and tail:
            label = f"{CUSTOM_LABELS.get(tail, tail)} (custom architecture)"
        elif head == "prices" and tail:
            label = f"Price per card-hour of {tail}"
        else:
            label = FIELD_LABELS.get(field, field)
        message = page_message(message, field)
        items.append({"field": field, "label": label, "message": message, "_at": order.get(head)})
    items.sort(key=lambda item: len(order) if item["_at"] is None else item["_at"])
    return items


def _raw_inputs(data: QueryDict) -> dict:
    """The form's fields as the service's inputs (custom fields ``custom_model.<name>``, prices
    ``prices.<slug>``, GPU models as repeated ``gpu_models``)."""
    raw: dict = {key: data[key] for key in SCALAR_INPUTS if key in data}
    raw["gpu_models"] = data.getlist("gpu_models")
    raw["only_free_capacity"] = data.get("only_free_capacity") in ("on", "true", "1")
    custom = {"name": data.get("custom_model.name", "")}
    for name, _required in sizing_inputs.CUSTOM_MODEL_FIELDS:
        custom[name] = data.get(f"custom_model.{name}", "")
    # a pasted (or uploaded, read into the text box by the page's script) config.json
    custom["config"] = data.get("custom_model.config", "")
    raw["custom_model"] = custom
    raw["prices"] = {
        key.removeprefix("prices."): value
        for key, value in data.items()
        if key.startswith("prices.") and value.strip()
    }
    return raw


def _initial_form() -> dict:
    """The form's values when the page opens with no inputs."""
    form = {k: v for k, v in sizing_services.PAGE_INITIAL.items() if k in SCALAR_INPUTS}
    form.update(gpu_models=[], only_free_capacity=False, custom_model={}, prices={})
    return form


def _names_an_input(data: QueryDict) -> bool:
    """Whether the query names any of the form's inputs: a scalar, the GPU models, the free
    capacity switch, a price or a custom-architecture field."""
    return any(
        key in SCALAR_INPUTS
        or key in ("gpu_models", "only_free_capacity")
        or key.startswith(("prices.", "custom_model."))
        for key in data
    )


def _form_values(data: QueryDict | None, *, link: bool = False) -> dict:
    """The inputs the page shows: the defaults when the query names none; else the query's.
    ``link`` (the page opened from an address, not the form's own htmx request): inputs the
    query leaves out keep their defaults, so ``?model=qwen3_30b_a3b&precision=NVFP4`` sizes that
    model at the page's lengths and load instead of asking for every field, and
    ``?gpu_models=h100_sxm`` sizes the page's model on H100 SXM alone."""
    if not data or not _names_an_input(data):
        return _initial_form()
    raw = _raw_inputs(data)
    if link:
        initial = _initial_form()
        for key in SCALAR_INPUTS:
            if key not in data and key in initial:
                raw[key] = initial[key]
    return raw


def _decorate(results: dict) -> dict:
    """Marks the recommended rows and adds the chart's data and the request link."""
    for row in results["rows"]:
        # The buffer is whole replicas (plan: ceil(share x sized replicas)); the page says so
        # when a replica is several cards ("30 % of 2" read as 2 cards of buffer).
        # a GB200 / GB300 NVL72 rack: TP may span its NVLink domain, not the default node
        row["nvlink_domain_gpus"] = NVLINK_DOMAIN_GPUS.get(row["gpu_model"])
        if not row.get("cards_per_replica"):  # saved before the rows carried it
            row["cards_per_replica"] = (row.get("tp") or 1) * (row.get("pp") or 1)
        if row.get("cards_sized") is not None:
            row["replicas_sized"] = row["cards_sized"] // row["cards_per_replica"]
        marks = []
        if row["gpu_model"] == results["recommended"]:
            marks.append("cheapest meeting targets")
        if row["gpu_model"] == results["recommended_in_free_capacity"]:
            marks.append("fits free capacity")
        row["recommendation"] = "; ".join(marks)
    sized = [row for row in results["rows"] if row["cards"] is not None]
    cost = [None if row["monthly_cost"] is None else float(row["monthly_cost"]) for row in sized]
    # "priced" says the rate card prices some model; the chart has a cost axis only when one
    # of its own rows has a price (else an empty axis and legend sat over the cards).
    charted_cost = results.get("priced") and any(value is not None for value in cost)
    results["chart"] = {
        "labels": [row["gpu_name"] for row in sized],
        "cards": [row["cards"] for row in sized],
        "meets": [row["meets_targets"] for row in sized],
        "cost": cost if charted_cost else None,
        "currency": results.get("currency") if charted_cost else None,
    }
    frame_px = CHART_FRAME_WITH_COST_PX if charted_cost else CHART_FRAME_PX
    results["chart_height_px"] = frame_px + CHART_ROW_PX * len(sized)
    names = dict(Pool.objects.values_list("slug", "name"))
    for row in results["rows"]:  # saved estimates from before pool names were stored
        row.setdefault("pool_name", names.get(row["pool"], row["pool"]))
        row.setdefault(
            "usable_pool_name", names.get(row.get("usable_pool"), row.get("usable_pool"))
        )
    results["request_url"] = sizing_services.sizing_request_url(results.get("request"))
    by_slug = {row["gpu_model"]: row for row in results["rows"]}
    results["recommended_row"] = by_slug.get(results["recommended"])
    results["free_row"] = by_slug.get(results["recommended_in_free_capacity"])
    results["request_row"] = by_slug.get((results.get("request") or {}).get("gpu_model"))
    return results


def _preset_config(preset) -> dict:
    """A preset as the custom-architecture fields, so "Custom" can start from it."""
    fields = {name: getattr(preset, name) for name, _ in sizing_inputs.CUSTOM_MODEL_FIELDS}
    if not preset.is_moe:
        fields["num_shared_experts"] = fields["first_k_dense_layers"] = None
    if preset.sliding_window_tokens is None or preset.sliding_window_layers is None:
        fields["sliding_window_layers"] = None
    return {"name": f"{preset.name} (modified)", **fields}


def _page_context(request, form: dict) -> dict:
    # Models an inference pool has are marked in the list of GPU models.
    fleet = set(inventory_selectors.cards_per_node_by_model(scheduler=Scheduler.KUBERNETES))
    return {
        "form": form,
        "presets": [
            (
                p.id,
                f"{p.name} ({p.total_params / 1e9:.1f} B params, "
                f"{grouped(p.max_context_tokens)} ctx)",
                json.dumps(_preset_config(p)),
            )
            for p in model_presets().values()
        ],
        "gpu_models": GpuModel.objects.order_by("name"),
        "in_fleet": fleet,
        "precisions": sizing_inputs.WEIGHT_PRECISIONS,
        "kv_precisions": sizing_inputs.KV_PRECISIONS,
        "engines": list(ENGINE_PROFILES),
        "demand_kinds": sizing_inputs.DEMAND_KINDS,
        "zero_fields": sizing_inputs.ZERO_ALLOWED_ARCH_FIELDS,
        "custom_fields": [
            (name, CUSTOM_LABELS[name]) for name, _ in sizing_inputs.CUSTOM_MODEL_FIELDS
        ],
        "teams": tenancy_selectors.team_list(user=request.user).order_by("name"),
    }


def _shared_query(data: QueryDict) -> str | None:
    """The address query a preview is shown at, to share or reload: the form's fields but a
    pasted config.json; ``None`` when the custom architecture comes from one (the address could
    not size it, and with it the address grew past what servers take: gunicorn refuses request
    lines over 4,094 bytes; DeepSeek-V3's config.json is 2,443 of them URL-encoded, the whole
    form with it about 4,800)."""
    if data.get("model") == "custom" and data.get("custom_model.config", "").strip():
        return None
    return _without(data, "csrfmiddlewaretoken", "custom_model.config", "export")


def _without(data: QueryDict, *keys: str) -> str:
    query = data.copy()
    for key in keys:
        query.pop(key, None)
    return query.urlencode()


@require_http_methods(["GET", "POST"])
def sizing_page(request):
    """The what-if page; the form POSTs its inputs over htmx for the ``results`` fragment as
    they change (a pasted config.json is too long for a GET's address), and a GET with the
    inputs in its query opens the page with them, as a shared link does; ``export=csv`` in the
    query answers the rows as CSV."""
    export = checked_export(request)
    posted = request.method == "POST"
    data = request.POST if posted else request.GET
    form = _form_values(data, link=not posted and not request.htmx)
    results = errors = None
    try:
        _inputs, results = sizing_services.sizing_preview(raw=form)
    except DomainError as exc:
        errors = _error_items(exc.data.get("errors") or {"model": exc.message}, form)
    if export == "csv":
        if results is None:
            return HttpResponse(
                "The inputs are invalid: "
                + "; ".join(f"{e['field']}: {e['message']}" for e in errors),
                status=400,
                content_type="text/plain; charset=utf-8",
            )
        _decorate(results)
        return csv_response(results["rows"], ROW_COLUMNS, "sizing.csv")
    query = _shared_query(data) if posted else data.urlencode()
    context = {
        **_page_context(request, form),
        "results": _decorate(results) if results else None,
        "errors": errors,
        "query": query or "",
        # no address holds a pasted config.json: the CSV is asked for by POST, the page's script
        # adding the form's fields as it is sent (static/js/sizing.js), and the page says how to
        # share it. The fragment never carries the config back: a 3 MB paste was 3 MB a preview.
        "csv_by_post": query is None,
    }
    template = "pools/sizing/sizing.html"
    response = render(request, f"{template}#results" if request.htmx else template, context)
    if posted and request.htmx:
        url = reverse("pools:sizing")
        response["HX-Push-Url"] = "false" if query is None else f"{url}?{query}"
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_POST
def sizing_save(request):
    """Save the inputs as an estimate and run its job; htmx is sent to the estimate's page."""
    form = _raw_inputs(request.POST)
    team, faults = None, {}
    try:
        team = tenancy_selectors.team_named(user=request.user, slug=request.POST.get("team"))
    except InvalidInput as exc:  # answered beside the inputs' own faults
        faults = exc.data.get("errors") or {"team": exc.message}
    try:
        estimate = sizing_services.sizing_estimate_create(
            actor=request.user, inputs=form, team=team, faults=faults
        )
    except DomainError as exc:
        context = {
            **_page_context(request, form),
            "results": None,
            "errors": _error_items(exc.data.get("errors") or {"model": exc.message}, form),
            "query": "",
        }
        return render(request, "pools/sizing/sizing.html#results", context)
    target = estimate.get_absolute_url()
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = target
        return response
    return redirect(target)


def _estimate_or_404(request, pk: int):
    try:
        return sizing_selectors.sizing_estimate_list(user=request.user).get(pk=pk)
    except Exception:  # DoesNotExist or a bad id: never leak whether it exists
        raise Http404("No such estimate.") from None


def sizing_estimate_detail(request, pk: int):
    """A saved estimate: progress while its job runs (htmx polls the ``body`` fragment), then
    the results; ``export=csv`` answers the rows."""
    estimate = _estimate_or_404(request, pk)
    export = checked_export(request)
    results = _decorate(dict(estimate.results)) if estimate.results else None
    if export == "csv":
        if results is None:
            return HttpResponse("The estimate has no results yet.", status=409)
        return csv_response(results["rows"], ROW_COLUMNS, f"sizing-estimate-{estimate.pk}.csv")
    context = {
        "estimate": estimate,
        "results": results,
        "errors": None,
        "what_if_query": _what_if_query(estimate.inputs),
        "model_name": _model_name(estimate.inputs),
    }
    template = "pools/sizing/estimate_detail.html"
    response = render(request, f"{template}#body" if request.htmx else template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _model_name(inputs: dict) -> str:
    if inputs.get("model") == "custom":
        return (inputs.get("custom_model") or {}).get("name") or "Custom model"
    preset = model_presets().get(inputs.get("model"))
    return preset.name if preset else str(inputs.get("model"))


def _what_if_query(inputs: dict) -> str:
    """The what-if page's query string for these inputs, to open a saved estimate there."""
    query = QueryDict(mutable=True)
    for key in SCALAR_INPUTS:
        value = inputs.get(key)
        if value is not None:
            query[key] = value
        elif key in ("tpot_target_ms", "ttft_target_ms"):
            query[key] = ""
    query.setlist("gpu_models", inputs.get("gpu_models") or [])
    if inputs.get("only_free_capacity"):
        query["only_free_capacity"] = "on"
    for name, value in (inputs.get("custom_model") or {}).items():
        if value is not None:
            query[f"custom_model.{name}"] = value
    for slug, price in (inputs.get("prices") or {}).items():
        query[f"prices.{slug}"] = price
    return query.urlencode()


def sizing_estimate_list(request):
    return filtered_list(
        request,
        queryset=sizing_selectors.sizing_estimate_list(user=request.user),
        filterset_class=SizingEstimateFilterSet,
        template="pools/sizing/estimate_list.html",
        columns=ESTIMATE_COLUMNS,
        filename="sizing-estimates.csv",
        default_ordering=("-created_at", "-id"),
        extra={
            "preset_names": {p.id: p.name for p in model_presets().values()},
            "gpu_names": dict(GpuModel.objects.values_list("slug", "name")),
        },
    )
