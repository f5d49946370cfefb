"""Serving signals: which engine and dcgm-exporter series the portal reads, the PromQL that reads
them for every allocation at once, and how the answers are grouped (pure, no Django).

One instant query per signal **family** (:data:`FAMILIES`, six in all), whatever the number of
allocations. Each query is the ``or`` of one term per metric name; every term is aggregated in
Prometheus ``by (namespace, portal_allocation)`` (plus ``le`` for histograms) and labelled with
``signal``, ``engine`` and ``metric`` (``label_replace`` with an empty source, which always
matches), so the terms never collide and Python knows which name answered.

Prometheus does the counter arithmetic: ``increase(x[5m])`` handles counter resets (a restarted
replica), so no reset reaches Python. Python picks the current name over the previous one where
an engine exports both (vLLM emitted the deprecated names beside the new ones for a release),
adds engines up, and turns histogram buckets into quantiles (:func:`histogram_quantile`).

Targets: ``namespace`` (the pod's, as the scrape sets it; for dcgm-exporter the workload's, the
label traps of :mod:`scheduler_adapters.prometheus` resolved in PromQL) and ``portal_allocation``
(an allocation id, where a site relabels the pod label ``gpu-pool-portal/allocation`` onto the
series; absent otherwise).

Metric names, verified in the engines' source:

- vLLM ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``) and ``docs/design/metrics.md``:
  gauges ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (ratio 0-1; before 0.9 ``vllm:gpu_cache_usage_perc``, "Deprecated
  in 0.9 - Renamed as vllm:kv_cache_usage_perc"); counters (``_total`` added by
  prometheus_client) ``vllm:prompt_tokens``, ``vllm:generation_tokens``,
  ``vllm:num_preemptions``, ``vllm:request_success`` (label ``finished_reason``: ``stop``,
  ``length``, ``abort``, and ``error`` on newer releases), ``vllm:prefix_cache_queries`` /
  ``vllm:prefix_cache_hits`` (before 0.9 ``vllm:gpu_prefix_cache_queries`` / ``..._hits``);
  histograms ``vllm:time_to_first_token_seconds``, ``vllm:e2e_request_latency_seconds`` and
  ``vllm:inter_token_latency_seconds`` (earlier ``vllm:time_per_output_token_seconds``, kept as
  a deprecated twin with identical buckets for a release).
- SGLang ``python/sglang/srt/metrics/collector.py``: gauges ``sglang:num_running_reqs``,
  ``sglang:num_queue_reqs``, ``sglang:token_usage`` (KV pool use, ratio 0-1); counters
  ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
  ``sglang:cached_tokens_total`` (prompt tokens served from the radix cache: the prefix hits;
  the queries are the prompt tokens), ``sglang:num_requests_total``,
  ``sglang:num_aborted_requests_total``, ``sglang:num_retracted_requests_total`` (SGLang's
  preemption: a running request retracted to free KV cache); histograms
  ``sglang:time_to_first_token_seconds``, ``sglang:inter_token_latency_seconds``,
  ``sglang:e2e_request_latency_seconds``.
- TensorRT-LLM's own server (``trtllm-serve``), ``tensorrt_llm/metrics/collector.py``
  (``MetricsCollector``, prefix ``trtllm_``): gauges ``trtllm_num_requests_running``,
  ``trtllm_num_requests_waiting``, ``trtllm_kv_cache_utilization`` (ratio 0-1); counters
  ``trtllm_prompt_tokens_total``, ``trtllm_generation_tokens_total``,
  ``trtllm_request_success_total`` (label ``finished_reason``), ``trtllm_request_error_total``
  (label ``http_code``), ``trtllm_prompt_cached_tokens_total`` (prompt tokens served from the
  KV cache: the prefix hits, the prompt tokens the queries, as for SGLang); histograms
  ``trtllm_time_to_first_token_seconds``, ``trtllm_time_per_output_token_seconds`` and
  ``trtllm_e2e_request_latency_seconds``. The per-request families are filled only with
  ``return_perf_metrics: true`` in the LLM args (the collector's note). No preemption counter:
  unknown for it.
- Triton Inference Server with the TensorRT-LLM backend: the server's own families
  (``docs/user_guide/metrics.md`` of triton-inference-server/server):
  ``nv_inference_pending_request_count`` (gauge: requests not yet started by a backend, the
  queue), counters ``nv_inference_request_success`` / ``nv_inference_request_failure``, and the
  histogram ``nv_inference_first_response_histogram_ms`` (decoupled models, i.e. streaming
  LLMs; **milliseconds**, its ``le`` bounds read as ms and scaled to seconds); the backend's
  gauges (tensorrtllm_backend ``inflight_batcher_llm/src/custom_metrics_reporter/
  custom_metrics_reporter.cc``): ``nv_trt_llm_request_metrics{request_type="active"}``
  (requests in flight) and ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=...}``
  (``used`` and ``max`` blocks: KV use = used / max, divided in PromQL; the ``fraction`` label
  of later backends is not relied on). Triton counts no tokens and no inter-token latency:
  those are unknown (named in ``missing``) for it; its end-to-end time is a cumulative counter
  only, so no e2e quantile either.
- dcgm-exporter ``etc/default-counters.csv`` / ``dcp-metrics-included.csv`` (DCGM field ids):
  ``DCGM_FI_DEV_GPU_UTIL`` [203] %, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` [1001] ratio,
  ``DCGM_FI_PROF_SM_ACTIVE`` [1002] ratio, ``DCGM_FI_PROF_DRAM_ACTIVE`` [1005] ratio,
  ``DCGM_FI_DEV_FB_USED`` [252] / ``DCGM_FI_DEV_FB_FREE`` [251] MiB, ``DCGM_FI_DEV_GPU_TEMP``
  [150] °C, ``DCGM_FI_DEV_XID_ERRORS`` [230] (the last XID code, 0 without one),
  ``DCGM_FI_PROF_NVLINK_TX_BYTES`` [1011] / ``..._RX_BYTES`` [1012] bytes/s.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from scheduler_adapters.prometheus import Series, cyclic_gc_paused, metric_selector

WINDOW_S = 300  # one rollup bucket: 5 minutes
ALLOCATION_LABEL = "portal_allocation"
TARGET_LABELS = ("namespace", ALLOCATION_LABEL)

# signal kinds: how a metric is read in PromQL and combined across engines in Python
GAUGE_SUM = "gauge_sum"  # avg_over_time per series, summed over replicas and engines
GAUGE_AVG = "gauge_avg"  # avg_over_time per series, averaged over replicas; max over engines
GAUGE_MAX = "gauge_max"  # max_over_time per series, max over replicas
COUNTER = "counter"  # increase over the window, summed
HISTOGRAM = "histogram"  # increase of each bucket over the window, summed by le
CARD_COUNT = "card_count"  # cards with a series (count), summed
BUSY_COUNT = "busy_count"  # cards whose window mean is at or above the busy threshold


@dataclass(frozen=True)
class Metric:
    """One exported name of a signal: ``engine`` (``vllm``, ``sglang``, ``trtllm``, ``triton``,
    ``dcgm``), the name, ``matchers`` added to its selector, ``rank`` (0 the current name; 1 a
    previous one, read only where the current one is absent) and ``scale`` (times the value:
    ratio -> %; for a histogram, times its ``le`` bounds: ms -> s). With ``over``, the value is
    ``name{matchers} / ignoring(<ignoring>) name{over}`` (Triton's KV blocks used ÷ max)."""

    engine: str
    name: str
    rank: int = 0
    matchers: str = ""
    scale: float = 1.0
    over: str = ""  # matchers of the same name to divide by (a ratio of two label values)
    ignoring: str = ""  # the label that tells numerator and denominator apart


@dataclass(frozen=True)
class Signal:
    key: str
    family: str
    kind: str
    metrics: tuple[Metric, ...]


def _v(name: str, rank: int = 0, **kw) -> Metric:
    return Metric("vllm", name, rank, **kw)


def _s(name: str, **kw) -> Metric:
    return Metric("sglang", name, **kw)


def _t(name: str, **kw) -> Metric:
    return Metric("trtllm", name, **kw)


def _tr(name: str, **kw) -> Metric:
    return Metric("triton", name, **kw)


KV_BLOCKS = "nv_trt_llm_kv_cache_block_metrics"


def _d(name: str, rank: int = 0, **kw) -> Metric:
    return Metric("dcgm", name, rank, **kw)


SIGNALS: tuple[Signal, ...] = (
    Signal("requests_running", "engine_load", GAUGE_SUM,
           (_v("vllm:num_requests_running"), _s("sglang:num_running_reqs"),
            _t("trtllm_num_requests_running"),
            _tr("nv_trt_llm_request_metrics", matchers='request_type="active"'))),
    Signal("requests_waiting", "engine_load", GAUGE_SUM,
           (_v("vllm:num_requests_waiting"), _s("sglang:num_queue_reqs"),
            _t("trtllm_num_requests_waiting"), _tr("nv_inference_pending_request_count"))),
    Signal("kv_cache_usage_pct", "engine_load", GAUGE_AVG,
           (_v("vllm:kv_cache_usage_perc", scale=100.0),
            _v("vllm:gpu_cache_usage_perc", 1, scale=100.0),
            _s("sglang:token_usage", scale=100.0),
            _t("trtllm_kv_cache_utilization", scale=100.0),
            _tr(KV_BLOCKS, matchers='kv_cache_block_type="used"',
                over='kv_cache_block_type="max"', ignoring="kv_cache_block_type",
                scale=100.0))),
    Signal("prompt_tokens", "engine_counters", COUNTER,
           (_v("vllm:prompt_tokens_total"), _s("sglang:prompt_tokens_total"),
            _t("trtllm_prompt_tokens_total"))),
    Signal("generation_tokens", "engine_counters", COUNTER,
           (_v("vllm:generation_tokens_total"), _s("sglang:generation_tokens_total"),
            _t("trtllm_generation_tokens_total"))),
    Signal("prefix_cache_hits", "engine_counters", COUNTER,
           (_v("vllm:prefix_cache_hits_total"), _v("vllm:gpu_prefix_cache_hits_total", 1),
            _s("sglang:cached_tokens_total"), _t("trtllm_prompt_cached_tokens_total"))),
    Signal("prefix_cache_queries", "engine_counters", COUNTER,
           (_v("vllm:prefix_cache_queries_total"), _v("vllm:gpu_prefix_cache_queries_total", 1),
            _s("sglang:prompt_tokens_total"), _t("trtllm_prompt_tokens_total"))),
    Signal("requests_finished", "engine_counters", COUNTER,
           (_v("vllm:request_success_total"), _s("sglang:num_requests_total"),
            _t("trtllm_request_success_total"), _tr("nv_inference_request_success"))),
    Signal("requests_failed", "engine_counters", COUNTER,
           (_v("vllm:request_success_total", matchers='finished_reason=~"abort|error"'),
            _s("sglang:num_aborted_requests_total"), _t("trtllm_request_error_total"),
            _tr("nv_inference_request_failure"))),
    Signal("preemptions", "engine_counters", COUNTER,
           (_v("vllm:num_preemptions_total"), _s("sglang:num_retracted_requests_total"))),
    Signal("ttft", "ttft", HISTOGRAM,
           (_v("vllm:time_to_first_token_seconds_bucket"),
            _s("sglang:time_to_first_token_seconds_bucket"),
            _t("trtllm_time_to_first_token_seconds_bucket"),
            _tr("nv_inference_first_response_histogram_ms_bucket", scale=0.001))),
    Signal("itl", "itl", HISTOGRAM,
           (_v("vllm:inter_token_latency_seconds_bucket"),
            _v("vllm:time_per_output_token_seconds_bucket", 1),
            _s("sglang:inter_token_latency_seconds_bucket"),
            _t("trtllm_time_per_output_token_seconds_bucket"))),
    Signal("e2e", "e2e", HISTOGRAM,
           (_v("vllm:e2e_request_latency_seconds_bucket"),
            _s("sglang:e2e_request_latency_seconds_bucket"),
            _t("trtllm_e2e_request_latency_seconds_bucket"))),
    Signal("gpu_util_pct", "gpu", GAUGE_AVG,
           (_d("DCGM_FI_PROF_GR_ENGINE_ACTIVE", scale=100.0), _d("DCGM_FI_DEV_GPU_UTIL", 1))),
    Signal("sm_active_pct", "gpu", GAUGE_AVG, (_d("DCGM_FI_PROF_SM_ACTIVE", scale=100.0),)),
    Signal("dram_active_pct", "gpu", GAUGE_AVG, (_d("DCGM_FI_PROF_DRAM_ACTIVE", scale=100.0),)),
    Signal("fb_used_mib", "gpu", GAUGE_SUM, (_d("DCGM_FI_DEV_FB_USED"),)),
    Signal("fb_free_mib", "gpu", GAUGE_SUM, (_d("DCGM_FI_DEV_FB_FREE"),)),
    Signal("temperature_c", "gpu", GAUGE_MAX, (_d("DCGM_FI_DEV_GPU_TEMP"),)),
    Signal("xid_last", "gpu", GAUGE_MAX, (_d("DCGM_FI_DEV_XID_ERRORS"),)),
    Signal("nvlink_tx_bytes_s", "gpu", GAUGE_SUM, (_d("DCGM_FI_PROF_NVLINK_TX_BYTES"),)),
    Signal("nvlink_rx_bytes_s", "gpu", GAUGE_SUM, (_d("DCGM_FI_PROF_NVLINK_RX_BYTES"),)),
    Signal("cards_reporting", "gpu", CARD_COUNT,
           (_d("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), _d("DCGM_FI_DEV_GPU_UTIL", 1))),
    Signal("cards_busy", "gpu", BUSY_COUNT,
           (_d("DCGM_FI_PROF_GR_ENGINE_ACTIVE", scale=100.0), _d("DCGM_FI_DEV_GPU_UTIL", 1))),
)  # fmt: skip
SIGNAL_BY_KEY = {signal.key: signal for signal in SIGNALS}
FAMILIES = tuple(dict.fromkeys(signal.family for signal in SIGNALS))


def _labelled(expr: str, **labels: str) -> str:
    for name, value in labels.items():
        expr = f'label_replace({expr}, "{name}", "{value}", "", "")'
    return expr


def _workload_namespace(expr: str) -> str:
    """dcgm-exporter's workload namespace over ``namespace`` (module docstring of
    :mod:`scheduler_adapters.prometheus`): ``pod_namespace``, then ``exported_namespace``."""
    expr = f'label_replace({expr}, "namespace", "$1", "pod_namespace", "(.+)")'
    return f'label_replace({expr}, "namespace", "$1", "exported_namespace", "(.+)")'


def _term(signal: Signal, metric: Metric, *, window_s: int, busy_pct: float) -> str:
    window = f"[{int(window_s)}s]"
    by = ", ".join(TARGET_LABELS)
    if metric.engine == "dcgm":
        selector = metric_selector(metric.name, metric.matchers)
    else:
        selector = metric.name + (f"{{{metric.matchers}}}" if metric.matchers else "")
    if signal.kind == HISTOGRAM:
        expr = f"sum by ({by}, le) (increase({selector}{window}))"
    elif signal.kind == COUNTER:
        expr = f"sum by ({by}) (increase({selector}{window}))"
    else:
        over = "max_over_time" if signal.kind == GAUGE_MAX else "avg_over_time"
        inner = f"{over}({selector}{window})"
        if metric.over:  # a ratio of two series of one name: over a subquery of the window
            ratio = f"{selector} / ignoring({metric.ignoring}) {metric.name}{{{metric.over}}}"
            inner = f"{over}(({ratio}){window[:-1]}:])"
        if metric.engine == "dcgm":
            inner = _workload_namespace(inner)
        if signal.kind == BUSY_COUNT:
            threshold = busy_pct / metric.scale
            expr = f"count by ({by}) ({inner} >= {threshold:g})"
        else:
            op = {GAUGE_SUM: "sum", GAUGE_AVG: "avg", GAUGE_MAX: "max", CARD_COUNT: "count"}
            expr = f"{op[signal.kind]} by ({by}) ({inner})"
    return _labelled(expr, signal=signal.key, engine=metric.engine, metric=metric.name)


def family_queries(*, window_s: int = WINDOW_S, busy_pct: float = 30.0) -> dict[str, str]:
    """One PromQL expression per family: the ``or`` of every term of its signals.

    ``busy_pct`` (%) is the utilisation at or above which a card counts busy (the dashboard's
    default, ``ReclamationPolicy.idle_below_pct``, 30 %)."""
    terms: dict[str, list[str]] = defaultdict(list)
    for signal in SIGNALS:
        for metric in signal.metrics:
            terms[signal.family].append(_term(signal, metric, window_s=window_s, busy_pct=busy_pct))
    return {family: " or ".join(exprs) for family, exprs in terms.items()}


# ------------------------------------------------------------------------------ answers


Target = tuple[str, str]  # (namespace, portal_allocation), "" where absent


@dataclass
class TargetReadings:
    """What the answers hold for one target. ``values[signal][(engine, metric)]`` is the
    number read (scaled); ``buckets[signal][(engine, metric)]`` maps ``le`` (``math.inf`` for
    ``+Inf``) to the bucket's increase. ``notes`` say what was skipped and why."""

    values: dict[str, dict[tuple[str, str], float]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    buckets: dict[str, dict[tuple[str, str], dict[float, float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(dict))
    )
    notes: list[str] = field(default_factory=list)


@dataclass
class Answers:
    """The answers of one pass grouped by target; ``unlabelled`` counts series that carried
    no ``signal`` label (an answer this module did not ask for)."""

    targets: dict[Target, TargetReadings] = field(default_factory=dict)
    unlabelled: int = 0


_SCALE = {(m.engine, m.name): m.scale for s in SIGNALS for m in s.metrics}


def answers_from_series(results: Mapping[str, Sequence[Series]]) -> Answers:
    """Group the family answers by target (pure). A ``NaN``/``±Inf`` value (``None`` after
    parsing) is skipped with a note naming the metric; everything else is kept as read,
    scaled (ratio -> %)."""
    out = Answers()
    targets = out.targets
    les: dict[str | None, float | None] = {}  # a fleet answer repeats some 20 bounds
    for series_list in results.values():
        for item in series_list:
            labels = dict(item.labels)
            signal = SIGNAL_BY_KEY.get(labels.get("signal", ""))
            if signal is None:
                out.unlabelled += 1
                continue
            target = (labels.get("namespace", ""), labels.get(ALLOCATION_LABEL, ""))
            readings = targets.get(target)
            if readings is None:  # not setdefault: a fleet answer has ~90 series per target
                readings = targets[target] = TargetReadings()
            source = (labels.get("engine", ""), labels.get("metric", ""))
            value = item.samples[-1].value if item.samples else None
            if value is None:  # the adapter reads NaN and ±Inf as None
                readings.notes.append(f"{source[1]}: NaN or Inf from Prometheus, skipped")
                continue
            kind = signal.kind
            if kind == HISTOGRAM:
                raw = labels.get("le")
                le = les[raw] if raw in les else les.setdefault(raw, _le(raw))
                if le is None:
                    readings.notes.append(f"{source[1]}: bucket without a readable le, skipped")
                    continue
                le *= _SCALE.get(source, 1.0)  # Triton's bounds are ms; inf stays inf
                readings.buckets[signal.key][source][le] = value
            elif kind in (CARD_COUNT, BUSY_COUNT):
                readings.values[signal.key][source] = value
            else:
                readings.values[signal.key][source] = value * _SCALE.get(source, 1.0)
    return out


def _le(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> tuple[float | None, str]:
    """The ``q`` quantile (0-1) of one cumulative histogram given as ``le -> count`` (the
    buckets' increases over the window), and why not when ``None``.

    Prometheus' rule (``promql/quantile.go``): rank ``q x count(+Inf)``; the first bucket whose
    cumulative count reaches it; linear interpolation from the previous bound (0 below the first
    bucket when its bound is positive) to its own; a rank in the ``+Inf`` bucket answers the
    highest finite bound. Unlike Prometheus, a histogram that cannot be trusted gives no
    quantile instead of a repaired one: no ``+Inf`` bucket (buckets missing), counts that fall
    as ``le`` grows (buckets from different scrapes or missing), or no observation at all
    (no request finished: unknown, not 0)."""
    if not 0 <= q <= 1:
        raise ValueError("q must be within 0..1")
    if math.inf not in buckets:
        return None, "no +Inf bucket"
    bounds = sorted(buckets)
    counts = [buckets[b] for b in bounds]
    if any(later < earlier - 1e-9 for earlier, later in zip(counts, counts[1:], strict=False)):
        return None, "bucket counts fall as le grows"
    total = counts[-1]
    if total <= 0:
        return None, "no observation"
    if len(bounds) < 2:
        return None, "only the +Inf bucket"
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if bound == math.inf:
                return bounds[-2], ""
            if bound <= 0:
                return bound, ""
            if count == previous_count:
                return bound, ""
            share = (rank - previous_count) / (count - previous_count)
            return previous_bound + (bound - previous_bound) * share, ""
        previous_bound, previous_count = bound, count
    return bounds[-2], ""


class QueriesPrometheus(Protocol):
    def query(self, expr: str, *, at: datetime) -> tuple[Series, ...]: ...


def serving_answers(
    prometheus: QueriesPrometheus,
    *,
    at: datetime,
    window_s: int = WINDOW_S,
    busy_pct: float = 30.0,
) -> tuple[Answers, int]:
    """Ask ``prometheus`` every family at ``at`` (the end of the window) and group the answers:
    one instant query per family (:data:`FAMILIES`), whatever the number of allocations.
    Returns the answers and the number of requests sent. Errors of the adapter
    (:class:`~scheduler_adapters.errors.SchedulerUnavailable` on a timeout) propagate: a pass
    that cannot read everything writes nothing."""
    queries = family_queries(window_s=window_s, busy_pct=busy_pct)
    with cyclic_gc_paused():  # ~90 series a target, no cycles: see the helper's docstring
        results = {family: prometheus.query(expr, at=at) for family, expr in queries.items()}
        return answers_from_series(results), len(queries)
