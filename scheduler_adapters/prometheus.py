"""``PrometheusAdapter``: read NVIDIA dcgm-exporter metrics through the Prometheus HTTP API.

Two layers:

- :meth:`PrometheusAdapter.query` (``GET /api/v1/query``) and
  :meth:`PrometheusAdapter.query_range` (``GET /api/v1/query_range``) return
  :class:`Series` (labels and :class:`Sample` values, ``None`` for ``NaN``), with timeouts and
  errors from :mod:`scheduler_adapters.errors`: connection refused and timeouts are
  :class:`SchedulerUnavailable`, a PromQL Prometheus refuses (HTTP 400/422, ``errorType``
  ``bad_data``/``execution``) is :class:`SchedulerRejected`, a body that is not the API's JSON is
  :class:`UnexpectedResponse`.
- :meth:`PrometheusAdapter.gpu_usage_summary` (the idle scan) has Prometheus reduce each
  device's steps over a window to a few numbers (:func:`summary_queries`), and reads per step
  only the devices that one series cannot describe whole.
- :meth:`PrometheusAdapter.gpu_usage` batches by metric name (three range queries, whatever
  the number of GPUs) and returns one :class:`DeviceUsage` per GPU (or MIG instance) and
  workload namespace, with the dcgm-exporter label traps resolved by :func:`dcgm_labels` and
  :func:`device_usage_from_series` (pure, so unit-testable without a server).

Metrics (dcgm-exporter ``etc/default-counters.csv``; DCGM field ids in brackets):

- ``DCGM_FI_DEV_GPU_UTIL`` [203]: % (0-100) of the sample period a kernel ran. Unsupported on
  MIG instances: the parent GPU reads 0 or the series is absent (dcgm-exporter #216, #105).
- ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` [1001]: ratio 0-1 of time the graphics/compute engine was
  active; per MIG instance (``GPU_I_ID``). Data-centre GPUs only: consumer cards such as the
  RTX 4090 emit no ``DCGM_FI_PROF_*`` (#404), so there only ``DCGM_FI_DEV_GPU_UTIL`` is used and
  the reading is marked low-confidence.
- ``DCGM_FI_DEV_FB_USED`` [252]: framebuffer used, MiB (``FB_RESERVED`` is separate).

Label traps (research/k8s_gpu_anchors.md §3.2):

- the host is ``Hostname`` up to exporter 4.5.x and ``hostname`` on newer releases;
- ``UUID`` is ``uuid`` with ``--use-old-namespace``, and ``namespace``/``pod`` are then
  ``pod_namespace``/``pod_name``;
- with ``honorLabels: false`` the workload's labels arrive as ``exported_namespace`` /
  ``exported_pod`` and ``namespace``/``pod`` name the exporter's own pod;
- time-sliced GPUs report one device under several pods (#642): the profiling value is the
  device's, copied to every pod; ``DCGM_FI_DEV_GPU_UTIL`` and ``FB_USED`` are per pod (#594);
- ``Hostname`` is the exporter *pod's* name unless the exporter runs with host networking or
  ``NODE_NAME`` set (dcgm-exporter README, #113), so it changes on every rollout, and ``gpu``
  is a node-local index: a series is identified by its GPU ``UUID`` (plus MIG instance and
  workload namespace), never by host, and callers place it on the inventory by that UUID;
- metric names are matched in upper or lower case (``DCGM_FI_DEV_GPU_UTIL`` /
  ``dcgm_fi_dev_gpu_util``, as relabelling or recording rules may write them).
"""

from __future__ import annotations

import gc
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import httpx

from scheduler_adapters.errors import (
    RemoteError,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
)

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"

# vLLM's own series (vllm/engine/metrics.py, v0.6+ and the V1 engine's loggers.py): a histogram
# of end-to-end request latency in seconds, a gauge of queued requests, and token counters.
VLLM_E2E_LATENCY = "vllm:e2e_request_latency_seconds"
VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"
INFERENCE_METRICS = (
    "util_pct",
    "cards_reporting",
    "latency_s",
    "waiting",
    "generation_tok_s",
    "prompt_tok_s",
    "request_s",
)


def metric_selector(name: str, matchers: str = "") -> str:
    """A PromQL selector for ``name`` in upper or lower case, plus ``matchers`` (``a="b",...``).

    ``{__name__=~"X|x"}`` with two literal names keeps Prometheus' index lookup exact.
    """
    names = f'__name__=~"{name.upper()}|{name.lower()}"'
    return "{" + names + (", " + matchers if matchers else "") + "}"


class Sample(NamedTuple):
    """One value at ``timestamp`` (Unix seconds). ``value`` is ``None`` for ``NaN``/``±Inf``.

    A named tuple, not a dataclass: a fleet-wide range query holds millions of them, and a
    tuple is made in half the time (``benchmarks/reclamation.py``)."""

    timestamp: float
    value: float | None


@dataclass(frozen=True)
class Series:
    """One time series: its metric name, its labels as sorted ``(name, value)`` pairs and its
    samples in time order (one sample for an instant query)."""

    metric: str
    labels: tuple[tuple[str, str], ...]
    samples: tuple[Sample, ...]

    def label(self, name: str) -> str | None:
        for key, value in self.labels:
            if key == name:
                return value
        return None

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True)
class DcgmLabels:
    """The labels of a dcgm-exporter series, whatever the exporter version and scrape setup.

    ``gpu_instance_id``/``mig_profile`` are set only on MIG instances. ``namespace``/``pod`` are
    the *workload's* (``None`` when the GPU runs no pod, or outside Kubernetes).
    """

    hostname: str | None
    uuid: str | None
    gpu: str | None
    model_name: str | None
    gpu_instance_id: str | None
    mig_profile: str | None
    namespace: str | None
    pod: str | None
    hpc_job: str | None
    container: str | None = None


def dcgm_labels(labels: Mapping[str, str]) -> DcgmLabels:
    """Read ``labels`` of one dcgm-exporter series (see the module docstring for the traps).

    ``exported_namespace``/``exported_pod`` win over ``namespace``/``pod``: when they exist,
    Prometheus renamed the exporter's labels (``honorLabels: false``) and ``namespace``/``pod``
    name the exporter's own pod, never the workload.
    """
    get = labels.get  # `a or b or None`: the first non-empty value, as a loop would read it
    renamed = "exported_namespace" in labels
    return DcgmLabels(
        hostname=get("Hostname") or get("hostname") or None,
        uuid=get("UUID") or get("uuid") or None,
        gpu=get("gpu") or None,
        model_name=get("modelName") or get("model_name") or None,
        gpu_instance_id=get("GPU_I_ID") or None,
        mig_profile=get("GPU_I_PROFILE") or None,
        namespace=get("exported_namespace")
        or get("pod_namespace")
        or (None if "exported_pod" in labels else get("namespace") or None),
        pod=get("exported_pod") or get("pod_name") or (None if renamed else get("pod") or None),
        hpc_job=get("hpc_job") or None,
        container=get("exported_container")
        or get("container_name")
        or (None if renamed else get("container") or None),
    )


@dataclass(frozen=True)
class DeviceUsage:
    """What one GPU (or MIG instance) did for one workload namespace over a range query.

    ``util_pct`` is utilisation in % (0-100) per step: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` x 100
    where the card has profiling metrics (``util_source="prof"``), else ``DCGM_FI_DEV_GPU_UTIL``
    (``"dev"``, low confidence: 100 % only says "a kernel ran"); empty for a MIG instance
    without profiling metrics (its DEV reading is meaningless). ``fb_used_mib`` is framebuffer
    used, MiB. Missing steps are simply absent: coverage is the caller's to judge.
    ``namespace`` is ``None`` for device-level series (no pod, or Slurm).
    """

    hostname: str | None
    uuid: str
    gpu: str | None
    model_name: str | None
    gpu_instance_id: str | None
    mig_profile: str | None
    namespace: str | None
    pods: tuple[str, ...]
    hpc_jobs: tuple[str, ...]
    util_source: str | None
    util_pct: tuple[Sample, ...]
    fb_used_mib: tuple[Sample, ...]

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        """(UUID, MIG instance, namespace): what one device is, whatever its ``Hostname``."""
        return (self.uuid, self.gpu_instance_id, self.namespace)


@dataclass(frozen=True)
class WindowStats:
    """One device's samples over one window ``[end - window_s, end]``, reduced to what the idle
    rules read (:func:`pools.reclamation.evaluate.instance_verdict`).

    ``util_points``: utilisation samples in the window (the mean's divisor); ``util_steps``:
    steps of ``step_s`` that hold one (coverage's numerator; equal to ``util_points`` for a range
    query's answer, one sample per step); ``util_sum``/``util_peak`` in %; ``util_newest``: Unix
    seconds of the newest sample (``None``: none). ``fb_steps``/``fb_peak``: the same for
    ``DCGM_FI_DEV_FB_USED``, MiB. Samples whose value is ``None`` (``NaN``/``±Inf``) are not
    samples."""

    util_points: int = 0
    util_steps: int = 0
    util_sum: float = 0.0
    util_peak: float | None = None
    util_newest: float | None = None
    fb_steps: int = 0
    fb_peak: float | None = None


def window_stats(
    util_pct: Iterable[Sample],
    fb_used_mib: Iterable[Sample],
    *,
    end: float,
    window_s: float,
    step_s: float,
) -> WindowStats:
    """:class:`WindowStats` of per-step samples (``end`` in Unix seconds): what
    :meth:`PrometheusAdapter.gpu_usage_summary` has Prometheus compute, done here on samples
    (a range query's answer, the fake's, the what-if's). A step is ``round((t - start) /
    step_s)``, so a step counts once however many samples fall near it."""
    start = end - window_s
    util = [s for s in util_pct if s.value is not None and start <= s.timestamp <= end]
    fb = [s for s in fb_used_mib if s.value is not None and start <= s.timestamp <= end]

    def steps(points: list[Sample]) -> int:
        return len({round((s.timestamp - start) / step_s) for s in points})

    values = [s.value for s in util if s.value is not None]
    return WindowStats(
        util_points=len(values),
        util_steps=steps(util),
        util_sum=sum(values),
        util_peak=max(values, default=None),
        util_newest=max((s.timestamp for s in util), default=None),
        fb_steps=steps(fb),
        fb_peak=max((s.value for s in fb if s.value is not None), default=None),
    )


@dataclass(frozen=True)
class DeviceSummary:
    """One GPU (or MIG instance) and workload namespace, as :class:`DeviceUsage` but with its
    samples reduced by Prometheus: ``windows`` maps a window length (s) to its
    :class:`WindowStats` for windows ending at ``end`` (Unix seconds) with ``step_s`` steps.
    ``util_source`` as in :class:`DeviceUsage` (chosen over the longest window). ``reduced``:
    one series, reduced by Prometheus (``False``: read per step and reduced here)."""

    hostname: str | None
    uuid: str
    gpu: str | None
    model_name: str | None
    gpu_instance_id: str | None
    mig_profile: str | None
    namespace: str | None
    pods: tuple[str, ...]
    hpc_jobs: tuple[str, ...]
    util_source: str | None
    end: float
    step_s: float
    windows: Mapping[int, WindowStats]
    reduced: bool = True

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        return (self.uuid, self.gpu_instance_id, self.namespace)

    def stats(self, *, end: float, window_s: int, step_s: float) -> WindowStats:
        """The reduced window; ``ValueError`` for a window, end or step it was not read for
        (never a silent "no samples")."""
        if end != self.end or step_s != self.step_s or window_s not in self.windows:
            raise ValueError(
                f"summary read for windows {sorted(self.windows)} s ending {self.end} every "
                f"{self.step_s} s, not {window_s} s ending {end} every {step_s} s"
            )
        return self.windows[window_s]


class PrometheusAdapter:
    """Instant and range queries against one Prometheus server (``url``, e.g.
    ``http://127.0.0.1:9090``). ``timeout_s`` bounds each request (Prometheus gets the same
    as its own ``timeout`` parameter, so a heavy query is cut there, not left running).
    ``compress``: ask for gzip answers (``Accept-Encoding: gzip``) instead of plain JSON
    (``identity``, the default): at 100,800 GPUs the idle scan's answers are ~100 MiB of JSON a
    scan, and compressing them cost Prometheus 2.42 ~1.3 s of its ~10.5 s of CPU a scan
    (``benchmarks/reclamation.py``) to save ~0.1 s of a 10 Gb/s link; worth it over a slow link
    only. ``transport`` is for tests (``httpx.MockTransport``)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        headers: Mapping[str, str] | None = None,
        compress: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._http = httpx.Client(
            base_url=self.url,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            headers={"Accept-Encoding": "gzip" if compress else "identity", **(headers or {})},
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------------- raw queries

    def query(self, expr: str, *, at: datetime) -> tuple[Series, ...]:
        """Evaluate ``expr`` at ``at`` (aware datetime). A scalar result is one unlabelled
        series named ``"scalar"``."""
        data = self._get(
            "query", "/api/v1/query", {"query": expr, "time": _unix(at), **self._timeout()}
        )
        return _parse_result(data, "query")

    def query_range(
        self, expr: str, *, start: datetime, end: datetime, step_s: float
    ) -> tuple[Series, ...]:
        """Evaluate ``expr`` from ``start`` to ``end`` every ``step_s`` seconds."""
        if end < start:
            raise ValueError("end is before start")
        if step_s <= 0:
            raise ValueError("step_s must be positive")
        params = {
            "query": expr,
            "start": _unix(start),
            "end": _unix(end),
            "step": f"{step_s:g}",
            **self._timeout(),
        }
        return _parse_result(self._get("query_range", "/api/v1/query_range", params), "query_range")

    def ready(self) -> bool:
        """``True`` when ``/-/ready`` answers 200."""
        try:
            return self._http.get("/-/ready").status_code == 200
        except httpx.HTTPError:
            return False

    # --------------------------------------------------------------------------- dcgm view

    def gpu_usage(
        self,
        *,
        start: datetime,
        end: datetime,
        step_s: float = 60,
        selector: str = "",
    ) -> tuple[DeviceUsage, ...]:
        """Every GPU's utilisation and framebuffer use from ``start`` to ``end``: three range
        queries (one per metric), ``selector`` added to each (e.g. ``Hostname=~"gpu-0.*"``).

        ``DCGM_FI_DEV_GPU_UTIL`` is asked for only where no ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
        series with the same labels exists at that step (``unless``: consumer cards, older
        exporters), since the profiling value wins anyway: a third less to send and parse.
        A profiling series that exists but reads ``NaN`` therefore gets no fallback."""
        # Binary operators match on labels without __name__, so `unless` pairs either case.
        prof = metric_selector(GR_ENGINE_ACTIVE, selector)
        queries = (
            prof,
            f"{metric_selector(GPU_UTIL, selector)} unless {prof}",
            metric_selector(FB_USED, selector),
        )
        series: list[Series] = []
        with cyclic_gc_paused():  # across the three answers: no catching up in between
            for chunk_start, chunk_end in _chunks(start, end, step_s):
                for expr in queries:
                    series.extend(
                        self.query_range(expr, start=chunk_start, end=chunk_end, step_s=step_s)
                    )
            return device_usage_from_series(series)

    def gpu_usage_summary(
        self,
        *,
        end: datetime,
        windows_s: Iterable[int],
        step_s: int = 60,
        min_coverage: float = 0.0,
        near_pct: Iterable[float] = (),
    ) -> tuple[DeviceSummary, ...]:
        """What :meth:`gpu_usage` returns, reduced in Prometheus: one :class:`DeviceSummary`
        per device with, for each window of ``windows_s`` ending at ``end``, the
        :class:`WindowStats` that :func:`window_stats` computes from ``gpu_usage``'s answer over
        that window (same steps ``end - k x step_s``, same lookback), one value per device and
        reduction (:func:`summary_queries`: 7 instant queries for one window, 6 more per other
        window, sent 4 at a time), whatever the number of GPUs. The devices that one series
        does not describe whole (:func:`device_summaries`; ``min_coverage`` and ``near_pct``
        are the policies' lowest coverage and their thresholds) are read per step with
        :meth:`gpu_usage`, their UUIDs in the selector, and reduced by :func:`window_stats`."""
        windows = sorted({int(w) for w in windows_s})
        if not windows or windows[0] <= 0 or step_s <= 0:
            raise ValueError("windows_s and step_s must be positive")
        end_ms = round(end.timestamp() * 1000)
        shift_ms = end_ms % (int(step_s) * 1000)
        at = datetime.fromtimestamp((end_ms - shift_ms) / 1000, tz=end.tzinfo)
        queries = summary_queries(windows, step_s=int(step_s), shift_ms=shift_ms)
        with cyclic_gc_paused(), ThreadPoolExecutor(max_workers=4) as pool:
            futures = {name: pool.submit(self._instant, expr, at) for name, expr in queries.items()}
            answers = {name: future.result() for name, future in futures.items()}
            read = device_summaries(
                answers,
                windows=windows,
                end=end_ms / 1000,
                step_s=step_s,
                min_coverage=min_coverage,
                near_pct=near_pct,
            )
            if not read.per_step:
                return read.devices
            uuids = sorted({key[0] for key in read.per_step})
            found: list[DeviceUsage] = []
            for label in ("UUID", "uuid"):
                found += self.gpu_usage(
                    start=end - timedelta(seconds=windows[-1]),
                    end=end,
                    step_s=step_s,
                    selector=uuid_selector(label, uuids),
                )
            at_s = end_ms / 1000
            stepped = tuple(
                summary_of(device, end=at_s, windows=windows, step_s=step_s)
                for device in found
                if device.key in read.per_step
            )
            return read.devices + stepped

    def utilisation_by_namespace(
        self,
        *,
        start: datetime,
        end: datetime,
        step_s: int = 60,
        namespaces: Iterable[str] | None = None,
    ) -> dict[str, tuple[Sample, ...]]:
        """Per workload namespace, the mean ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (x 100, %) over
        its series at each step from ``start`` to ``end``: range queries of the sum and the
        count ``by`` the labels that name the namespace, one short series per namespace label
        set, added up here, all sent at once. The mean over series is the mean over cards where
        each card has one series and no MIG instances (the caller's to check). ``namespaces``:
        only those (``None``: all; none: ``{}``), read by :func:`namespace_selectors` (a few
        selected series instead of the fleet's); ``ValueError`` for an empty name."""
        if namespaces is not None:
            namespaces = set(namespaces)
            if not namespaces:
                return {}
        by = ", ".join(_NAMESPACE_LABELS)
        prof = metric_selector(GR_ENGINE_ACTIVE)
        selectors = {None: prof} if namespaces is None else namespace_selectors(prof, namespaces)
        with ThreadPoolExecutor(max_workers=2) as pool:  # Prometheus answers two at once
            futures = [
                (
                    label,
                    index,
                    pool.submit(
                        self.query_range,
                        f"{op} by ({by}) ({sel})",
                        start=start,
                        end=end,
                        step_s=step_s,
                    ),
                )
                for label, sel in selectors.items()
                for index, op in enumerate(("sum", "count"))
            ]
            answers = [(label, index, future.result()) for label, index, future in futures]
        totals: dict[str, dict[float, list[float]]] = defaultdict(
            lambda: defaultdict(lambda: [0.0, 0.0])
        )
        for label, index, answer in answers:
            for item in answer:
                labels = item.label_map
                namespace = dcgm_labels(labels).namespace
                if namespace is None or (label is not None and _namespace_label(labels) != label):
                    continue  # another selector's (each label set is counted once)
                for sample in item.samples:
                    if sample.value is not None:
                        totals[namespace][sample.timestamp][index] += sample.value
        return {
            namespace: tuple(
                Sample(t, 100 * total / n) for t, (total, n) in sorted(steps.items()) if n
            )
            for namespace, steps in totals.items()
        }

    # ------------------------------------------------------------------------ elastic view

    def inference_signals(
        self,
        *,
        start: datetime,
        end: datetime,
        step_s: float = 60,
        rate_window_s: int = 120,
        namespaces: Iterable[str] | None = None,
        metrics: Iterable[str] = INFERENCE_METRICS,
    ) -> dict[str, InferenceSignals]:
        """Per namespace, the signals the elastic loop scales on, from ``start`` to ``end``:
        one range query per metric (:func:`inference_queries`, seven in all) whatever the
        number of namespaces, each aggregated ``by (namespace)`` in Prometheus. ``namespaces``
        keeps only those (``None``: every namespace that has a series); ``metrics`` asks for
        fewer (the what-if needs ``util_pct`` and ``latency_s`` only)."""
        wanted = tuple(metrics)
        unknown = set(wanted) - set(INFERENCE_METRICS)
        if unknown:
            raise ValueError(f"unknown inference metrics {sorted(unknown)}")
        results: dict[str, list[Series]] = {key: [] for key in wanted}
        only = None if namespaces is None else sorted(set(namespaces))
        queries = {
            key: expr
            for key, expr in inference_queries(
                rate_window_s=rate_window_s,
                namespace=only[0] if only is not None and len(only) == 1 else None,
            ).items()
            if key in wanted
        }
        with cyclic_gc_paused():
            for chunk_start, chunk_end in _chunks(start, end, step_s):
                for key, expr in queries.items():
                    results[key].extend(
                        self.query_range(expr, start=chunk_start, end=chunk_end, step_s=step_s)
                    )
        return inference_signals_from_series(results, namespaces=namespaces)

    # ----------------------------------------------------------------------------- private

    def _instant(self, expr: str, at: datetime) -> list[Any]:
        """An instant query's raw ``result`` list (``[{"metric": {...}, "value": [t, "v"]}]``),
        left undecoded into :class:`Series`: the summary reads a handful of labels of each."""
        data = self._get(
            "query", "/api/v1/query", {"query": expr, "time": _unix(at), **self._timeout()}
        )
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise UnexpectedResponse("no vector result in the answer", operation="query")
        result = data.get("result")
        if not isinstance(result, list):
            raise UnexpectedResponse("no 'data.result' list in the answer", operation="query")
        return result

    def _timeout(self) -> dict[str, str]:
        return {"timeout": f"{self.timeout_s:g}s"}

    def _get(self, operation: str, path: str, params: Mapping[str, str]) -> Any:
        try:
            response = self._http.get(path, params=params)
        except httpx.TimeoutException as exc:
            raise SchedulerUnavailable(
                f"Prometheus at {self.url} did not answer in time ({type(exc).__name__})",
                operation=operation,
            ) from exc
        except httpx.TransportError as exc:
            raise SchedulerUnavailable(
                f"cannot reach Prometheus at {self.url}: {exc or type(exc).__name__}",
                operation=operation,
            ) from exc
        status = response.status_code
        try:
            with cyclic_gc_paused():
                body = response.json()
                # JSON can only write NUL as \u0000, so only an answer with one is walked (the
                # summary reads ~100,000 series' labels). A backslash is rare in Prometheus' JSON
                # and one byte is a memchr: 6 ms for 115 MB, \u0000 alone 66 ms (benchmarks/
                # device_summaries.py)
                raw = response.content
                if b"\\" in raw and b"\\u0000" in raw:
                    body = _without_nul(body)
        except ValueError:
            body = None
        error = (
            RemoteError(None, str(body.get("error")), description=body.get("errorType"))
            if isinstance(body, dict) and body.get("status") == "error"
            else None
        )
        errors = (error,) if error else ()
        if status in (401, 403):
            raise SchedulerAuthError(
                f"Prometheus refused the credentials (HTTP {status})",
                operation=operation,
                http_status=status,
            )
        if status in (502, 503, 504) or (error and error.description in ("timeout", "canceled")):
            raise SchedulerUnavailable(
                f"Prometheus could not answer (HTTP {status})",
                operation=operation,
                errors=errors,
                http_status=status,
            )
        if status in (400, 422) or error:
            raise SchedulerRejected(
                f"Prometheus refused the query (HTTP {status})",
                operation=operation,
                errors=errors,
                http_status=status,
            )
        if status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            raise UnexpectedResponse(
                f"HTTP {status} from Prometheus is not an API answer: {response.text[:200]!r}",
                operation=operation,
                http_status=status,
            )
        return body.get("data")


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while an answer is decoded and parsed.

    A fleet-wide range query becomes millions of small objects (lists, then samples) that hold
    no reference cycles, so the collector frees none of them; left running, it walks the growing
    heap again and again (16,000 GPUs: decoding and parsing take about twice as long,
    ``benchmarks/reclamation.py``). Reference counting frees everything as usual meanwhile.
    Leaves the collector as it found it; nested uses are no-ops."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# Prometheus refuses a range query of more than 11,000 points per series ("exceeded maximum
# resolution of 11,000 points per timeseries", promql/engine.go); longer ranges are asked for in
# pieces of at most this many steps.
MAX_POINTS = 10_000


def _chunks(start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, datetime]]:
    """``[start, end]`` as consecutive ranges of at most :data:`MAX_POINTS` steps of ``step_s``
    that share no step (the next starts one step after the previous ends)."""
    span = timedelta(seconds=step_s * (MAX_POINTS - 1))
    step = timedelta(seconds=step_s)
    pieces = []
    while True:
        piece_end = min(start + span, end)
        pieces.append((start, piece_end))
        if piece_end >= end:
            return pieces
        start = piece_end + step


def _unix(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("naive datetime: pass an aware one")
    return f"{moment.timestamp():.3f}"


def _number(raw: Any) -> float | None:
    value = float(raw)  # Prometheus sends values as strings: "1.5", "NaN", "+Inf"
    return value if math.isfinite(value) else None


def _parse_samples(raw: Iterable[Any]) -> tuple[Sample, ...]:
    """``[[t, "v"], ...]`` as samples: :func:`_number` inlined, because a fleet-wide range query
    holds millions of values (16,000 GPUs x 31 steps per metric)."""
    samples = []
    append, isfinite = samples.append, math.isfinite
    for t, v in raw:
        value = float(v)
        append(Sample(float(t), value if isfinite(value) else None))
    return tuple(samples)


def _without_nul(node: Any) -> Any:
    """A decoded JSON answer with every NUL in its strings (keys and values) as U+FFFD: label
    values are any UTF-8, but PostgreSQL's text and jsonb refuse NUL, and one pod's
    ``model_name`` with it failed a whole import (one ``UUID`` or ``namespace`` with it, the
    whole idle scan). Read so by every reader of the answer, the series and the idle scan's
    summary alike; a device's key and its stored text are then the same string."""
    if isinstance(node, str):
        return node.replace("\x00", "\ufffd")
    if isinstance(node, list):
        return [_without_nul(item) for item in node]
    if isinstance(node, dict):
        return {_without_nul(key): _without_nul(value) for key, value in node.items()}
    return node


@cyclic_gc_paused()
def _parse_result(data: Any, operation: str) -> tuple[Series, ...]:
    if not isinstance(data, dict) or "resultType" not in data:
        raise UnexpectedResponse("no 'data.resultType' in the answer", operation=operation)
    kind, result = data["resultType"], data.get("result")
    try:
        if kind == "scalar":
            return (Series("scalar", (), (Sample(float(result[0]), _number(result[1])),)),)
        if kind not in ("vector", "matrix"):
            raise UnexpectedResponse(f"result type {kind!r} is not a series", operation=operation)
        out = []
        for item in result:
            metric = dict(item["metric"])  # NUL already read as U+FFFD: _get
            name = metric.pop("__name__", "")
            raw = [item["value"]] if kind == "vector" else item["values"]
            out.append(Series(name, tuple(sorted(metric.items())), _parse_samples(raw)))
        return tuple(out)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise UnexpectedResponse(f"unreadable {kind} result: {exc}", operation=operation) from exc


@cyclic_gc_paused()
def device_usage_from_series(series: Iterable[Series]) -> tuple[DeviceUsage, ...]:
    """Group dcgm-exporter series into one :class:`DeviceUsage` per (UUID, MIG instance,
    workload namespace).

    - The host is not part of the key: ``Hostname`` is the exporter pod's name on most
      installs and changes with every exporter rollout, so the series before and after one are
      the same GPU. ``hostname`` and ``gpu`` are those of the key's most recent sample.

    - Series of one key at one timestamp (pods of a time-sliced GPU, or label churn when a pod
      is renamed) merge by **maximum**, so nothing is counted twice and a busy pod is never
      averaged away.
    - A UUID with any MIG instance series is a MIG-mode GPU: its parent-level
      ``DCGM_FI_DEV_GPU_UTIL`` (0 or absent there) is dropped, never read as "idle".
    - ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio 0-1) is multiplied by 100 and preferred; a key
      without it falls back to ``DCGM_FI_DEV_GPU_UTIL`` (%), except on MIG instances.
    - Series without a UUID cannot be placed on a card and are skipped.
    """
    by_key: dict[tuple, dict[str, list[Series]]] = defaultdict(lambda: defaultdict(list))
    meta: dict[tuple, DcgmLabels] = {}
    pods: dict[tuple, set[str]] = defaultdict(set)
    jobs: dict[tuple, set[str]] = defaultdict(set)
    mig_uuids: set[str] = set()
    parsed = []
    for item in series:
        labels = dcgm_labels(item.label_map)
        if not labels.uuid:
            continue
        if labels.gpu_instance_id is not None:
            mig_uuids.add(labels.uuid)
        parsed.append((item, labels))
    latest: dict[tuple, float] = {}
    for item, labels in parsed:
        metric = item.metric.upper()
        if metric == GPU_UTIL and labels.uuid in mig_uuids and labels.gpu_instance_id is None:
            continue  # DEV_GPU_UTIL of a MIG-mode parent: unsupported, reads 0
        key = (labels.uuid, labels.gpu_instance_id, labels.namespace)
        last = item.samples[-1].timestamp if item.samples else -math.inf
        if key not in meta or last > latest[key]:
            meta[key], latest[key] = labels, last
        if labels.pod:
            pods[key].add(labels.pod)
        if labels.hpc_job:
            jobs[key].add(labels.hpc_job)
        by_key[key][metric].append(item)
    out = []
    for key in sorted(by_key, key=lambda k: tuple("" if part is None else part for part in k)):
        metrics, labels = by_key[key], meta[key]
        # DEV_GPU_UTIL is read only where no profiling value exists (most GPUs have one)
        source, util = "prof", _timeline(metrics.get(GR_ENGINE_ACTIVE, ()), scale=100.0)
        if not util:
            source, util = None, ()
            if labels.gpu_instance_id is None:
                util = _timeline(metrics.get(GPU_UTIL, ()), scale=1.0)
                source = "dev" if util else None
        out.append(
            DeviceUsage(
                hostname=labels.hostname,
                uuid=labels.uuid or "",
                gpu=labels.gpu,
                model_name=labels.model_name,
                gpu_instance_id=labels.gpu_instance_id,
                mig_profile=labels.mig_profile,
                namespace=labels.namespace,
                pods=tuple(sorted(pods[key])),
                hpc_jobs=tuple(sorted(jobs[key])),
                util_source=source,
                util_pct=util,
                fb_used_mib=_timeline(metrics.get(FB_USED, ()), scale=1.0),
            )
        )
    return tuple(out)


# ------------------------------------------------------------- the idle scan's reductions

# The labels from which dcgm_labels reads a device's key (UUID, MIG instance, namespace)
_DEVICE_LABELS = (
    "UUID", "uuid", "GPU_I_ID", "namespace", "exported_namespace", "pod_namespace", "exported_pod",
)  # fmt: skip
# The labels that decide a series' workload namespace (dcgm_labels' precedence)
_NAMESPACE_LABELS = ("namespace", "exported_namespace", "pod_namespace", "exported_pod")


def uuid_selector(label: str, uuids: Iterable[str]) -> str:
    """``label=~"..."``: a PromQL matcher of the series whose ``label`` is one of ``uuids``
    as this adapter read them. The regex (RE2, anchored) escapes each UUID and then, in the
    PromQL string, its backslashes and quotes once more; a U+FFFD becomes ``.``, since it stands
    for the NUL that Prometheus holds (:func:`_without_nul`), which the series read back are
    keyed by again. ``ValueError`` for no UUID (the matcher would select nothing useful)."""
    uuids = sorted(set(uuids))
    if not uuids:
        raise ValueError("no UUID to select")
    alternation = "|".join(re.escape(u).replace("\ufffd", ".") for u in uuids)
    alternation = alternation.replace("\\", "\\\\").replace('"', '\\"')
    return f'{label}=~"{alternation}"'


def namespace_selectors(selector: str, namespaces: Iterable[str]) -> dict[str, str]:
    """``selector`` (``{...}``) narrowed to ``namespaces``, one selector per label that may
    name a workload namespace (``exported_namespace``, ``pod_namespace``, ``namespace``), each
    a regex matcher of the names (plain matchers only: an ``or`` of them, or a ``label=""``
    matcher, costs Prometheus 2.42 about the fleet's whole range query). A series may match
    two; the caller keeps each answer only from the selector of the label
    :func:`_namespace_label` says names its namespace. ``ValueError``: no name, or an empty
    one (an empty alternation would match the series without the label)."""
    wanted = sorted(set(namespaces))
    if not wanted or not all(wanted):
        raise ValueError("namespaces must be non-empty names")
    # RE2 in a PromQL string: the regex's backslashes and any quote escaped once more
    alternation = "|".join(re.escape(n) for n in wanted)
    alternation = alternation.replace("\\", "\\\\").replace('"', '\\"')
    return {
        label: f'{selector[:-1]}, {label}=~"{alternation}"}}'
        for label in ("exported_namespace", "pod_namespace", "namespace")
    }


def _namespace_label(labels: Mapping[str, str]) -> str | None:
    """The label :func:`dcgm_labels` reads the workload namespace from (``None``: none)."""
    for label in ("exported_namespace", "pod_namespace"):
        if labels.get(label):
            return label
    return "namespace" if labels.get("namespace") and "exported_pod" not in labels else None


def _shifted(selector: str, shift_ms: int) -> str:
    """``selector`` read ``shift_ms`` later than it is evaluated (a negative offset, PromQL
    since 2.33), so that steps aligned to the epoch read the data of steps aligned to ``end``."""
    return f"{selector} offset -{shift_ms}ms" if shift_ms else selector


def _by_device(expr: str) -> str:
    """The instant vector ``expr`` (one value per series) with only the labels that make a
    device's key (:func:`dcgm_labels`: UUID, MIG instance, workload namespace), the maximum
    where a device has several series (those are read per step anyway). Applied to the reduced
    answer only (one value per series); no ``label_replace``, which costs Prometheus 2.42 about
    a second per 16,000 series."""
    return f"max by ({', '.join(_DEVICE_LABELS)}) ({expr})"


SummaryName = tuple[str, str, int]
"""``(metric, reduction, window_s)``: ``("prof" | "fb", "count" | "sum" | "max", window)``,
``("prof" | "fb", "series", longest)`` (full labels) or ``("dev", "count", longest)``."""


def summary_queries(
    windows: Sequence[int], *, step_s: int, shift_ms: int
) -> dict[SummaryName, str]:
    """The PromQL of :meth:`PrometheusAdapter.gpu_usage_summary`, each an instant query at
    ``end - shift_ms`` (a multiple of ``step_s``).

    Each reduction runs over a subquery of a plain selector, ``sel[W + step_s/2 : step_s]``:
    Prometheus evaluates ``sel`` at the epoch-aligned steps in that range (``end - k x step_s``
    once :func:`_shifted` reads it ``shift_ms`` later), ``W / step_s + 1`` of them on Prometheus
    2.x (range closed on the left) and 3.x (open) alike — the very steps, and lookback, of
    ``query_range(start=end - W, end=end, step=step_s)``. ``count_over_time`` counts the steps
    with a sample (``NaN`` included), ``sum_over_time`` their sum in time order (``NaN``/``±Inf``
    when one is), ``max_over_time`` their peak (``NaN`` skipped). Nothing else runs per step (no
    ``unless``, filter or ``label_replace`` inside: those cost several times the reduction).
    Over the longest window, the profiling and framebuffer counts keep every label (one result
    per series: the device's labels, and whether it has several series); the rest are one value
    per device (:func:`_by_device`); of the framebuffer's sums only those that are not finite
    (``* 0 != 0`` on the reduced value: the devices with a ``NaN`` or ``±Inf`` step, named
    ``("fb", "nonfinite", window)``), an empty answer on a healthy fleet instead of a value
    per device to decode. ``DEV_GPU_UTIL`` is only counted (where a device has no profiling
    series, the summary reads it per step)."""
    prof = _shifted(metric_selector(GR_ENGINE_ACTIVE), shift_ms)
    fb = _shifted(metric_selector(FB_USED), shift_ms)
    dev = _shifted(metric_selector(GPU_UTIL), shift_ms)
    half = step_s / 2

    def over(selector: str, window: int) -> str:
        return f"({selector})[{window + half:g}s:{step_s}s]"

    longest = max(windows)
    queries: dict[SummaryName, str] = {
        ("prof", "series", longest): f"count_over_time({over(prof, longest)})",
        ("fb", "series", longest): f"count_over_time({over(fb, longest)})",
        ("dev", "count", longest): _by_device(f"count_over_time({over(dev, longest)})"),
    }
    for window in windows:
        for metric, selector in (("prof", prof), ("fb", fb)):
            for reduction in ("count", "sum", "max"):
                if reduction == "count" and window == longest:
                    continue  # the series query's values
                expr = f"{reduction}_over_time({over(selector, window)})"
                if (metric, reduction) == ("fb", "sum"):
                    # only whether a step is NaN or ±Inf (x * 0 is NaN then, else 0): the
                    # framebuffer's sum is read for nothing else
                    reduction, expr = "nonfinite", f"{expr} * 0 != 0"
                queries[(metric, reduction, window)] = _by_device(expr)
    return queries


def _device_key(labels: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(UUID, MIG instance, workload namespace) as :func:`dcgm_labels` reads them, inlined:
    the summary reads it for every value of every answer."""
    get = labels.get
    namespace = get("exported_namespace") or get("pod_namespace")
    if not namespace and "exported_pod" not in labels:
        namespace = get("namespace")
    return (get("UUID") or get("uuid") or None, get("GPU_I_ID") or None, namespace or None)


DeviceKey = tuple[str | None, str | None, str | None]
"""(UUID, MIG instance, workload namespace) of :func:`_device_key`; UUID ``None``: no device."""


def _keyed(
    result: Sequence[Any],
    like: tuple[list[Mapping[str, str]], list[DeviceKey]],
    keys_seen: dict[DeviceKey, DeviceKey],
) -> tuple[list[Mapping[str, str]], list[DeviceKey]]:
    """Each item's labels and :func:`_device_key`, in the answer's order, each key the very
    tuple of ``keys_seen`` (added to it when new), so that the answers' dicts share key
    objects and a lookup is an identity, not a comparison of strings. ``like`` is another
    answer's labels and keys: Prometheus lists the series of one selector in one order (its
    index's) in every answer with the same labels, so where ``like`` has equal labels at the
    same index its key is taken; elsewhere (another order, a device missing from one answer)
    the key is computed, the same key either way."""
    labels = [item["metric"] for item in result]
    like_labels, like_keys = like
    seen = keys_seen.setdefault
    keys = [
        key if mine == theirs else seen(new := _device_key(mine), new)
        for mine, theirs, key in zip(labels, like_labels, like_keys, strict=False)
    ]
    keys += [seen(new := _device_key(mine), new) for mine in labels[len(keys) :]]
    return labels, keys


def _values_by_key(result: Sequence[Any], keys: list[DeviceKey]) -> dict[DeviceKey, float]:
    """``{key: value}`` of the items of ``result`` (``keys``: theirs, :func:`_keyed`) with a
    UUID; the maximum where several share a key (``NaN`` kept: it says a step was ``NaN``).
    An item without a UUID is skipped unread, whatever its value."""
    try:
        values = [float(item["value"][1]) for item in result]
    except (KeyError, TypeError, ValueError, IndexError):
        values = None  # raised below unless the unreadable value's item has no UUID
    if values is not None:
        out = dict(zip(keys, values, strict=True))
        if len(out) == len(values) and all(key[0] for key in out):
            return out  # one item per device, each with a UUID: nothing to merge or drop
    out = {}
    for item, key in zip(result, keys, strict=True):
        if key[0]:
            value = float(item["value"][1])
            out[key] = value if key not in out else max(out[key], value)
    return out


@dataclass(frozen=True)
class SummaryRead:
    """:func:`device_summaries`' answer: the devices it could reduce, and the keys of those it
    could not (several series, a ``NaN`` or ``±Inf`` sample, ``DEV_GPU_UTIL`` only, a gap at
    the window's end): :meth:`PrometheusAdapter.gpu_usage_summary` reads those per step."""

    devices: tuple[DeviceSummary, ...]
    per_step: frozenset[tuple[str, str | None, str | None]]


def device_summaries(
    answers: Mapping[SummaryName, Sequence[Any]],
    *,
    windows: Sequence[int],
    end: float,
    step_s: float,
    min_coverage: float,
    near_pct: Iterable[float] = (),
) -> SummaryRead:
    """The answers of :func:`summary_queries` (raw instant-vector ``result`` lists) as one
    :class:`DeviceSummary` per device that one profiling series (and at most one framebuffer
    series with the same labels) describes whole, with the rules of
    :func:`device_usage_from_series`; the other devices' keys are returned for a per-step
    reading. Per step too: a device whose newest step matters and is not known — fewer steps
    than the longest window's but at least ``min_coverage`` of them in some window (with all
    steps, the newest is ``end``; under ``min_coverage``, the device is unknown whatever its
    newest step); and one whose mean is within 1e-9 of one of ``near_pct`` (%, the policies'
    thresholds: there the sum's last bit decides). A device is a key of the profiling or
    framebuffer series, or of ``DEV_GPU_UTIL`` (``DEV_GPU_UTIL`` of a MIG-mode parent
    ignored, as there). Devices come in the profiling answer's order, then the framebuffer's.
    :class:`UnexpectedResponse` for an answer it cannot read (a missing value, labels that are
    not an object)."""
    try:
        return _device_summaries(answers, windows, end, step_s, min_coverage, tuple(near_pct))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise UnexpectedResponse(f"unreadable summary answer: {exc}", operation="query") from exc


def _series_by_key(
    result: Sequence[Any], labels: list[Mapping[str, str]], keys: list[DeviceKey]
) -> dict[DeviceKey, list[tuple[Mapping[str, str], float]]]:
    """Full-label answers by device key: each series' labels and value (``labels``/``keys``:
    the items', :func:`_keyed`)."""
    by_key: dict[DeviceKey, list[tuple[Mapping[str, str], float]]] = defaultdict(list)
    for item, item_labels, key in zip(result, labels, keys, strict=True):
        if key[0]:
            by_key[key].append((item_labels, float(item["value"][1])))
    return by_key


def _device_summaries(answers, windows, end, step_s, min_coverage, near) -> SummaryRead:
    longest = max(windows)
    # Keys computed once per series, each answer's taken from the one before where the labels
    # are the same at the same index (:func:`_keyed`): full labels for the two series answers,
    # the key's labels for the rest.
    series, like, keys_seen = {}, ([], []), {}
    for metric in ("prof", "fb"):
        result = answers[(metric, "series", longest)]
        like = _keyed(result, like, keys_seen)
        series[metric] = _series_by_key(result, *like)
    values, like = {}, ([], [])
    for name, result in answers.items():
        if name[1] != "series":
            keyed = _keyed(result, like, keys_seen)
            values[name] = _values_by_key(result, keyed[1])
            like = keyed if keyed[1] else like  # an empty answer (no NaN) is no reference
    for metric in ("prof", "fb"):  # the longest window's counts are the series query's
        values[(metric, "count", longest)] = {
            key: rows[0][1] for key, rows in series[metric].items() if len(rows) == 1
        }
    dev = values[("dev", "count", longest)]
    prof_series, fb_series = series["prof"], series["fb"]
    mig_uuids = {key[0] for metric in series.values() for key in metric if key[1]}
    mig_uuids |= {key[0] for key in dev if key[1]}
    per_step: set[tuple] = set()
    out = []
    # in the answers' order, not a set's: one device's objects after the other's in memory
    keys = list(series["prof"]) + [key for key in series["fb"] if key not in series["prof"]]
    for key in dev:
        if key in prof_series or key in fb_series or (key[1] is None and key[0] in mig_uuids):
            continue  # DEV_GPU_UTIL of a MIG-mode parent: unsupported, reads 0
        per_step.add(key)  # DEV_GPU_UTIL only: read per step (``unless`` and all)
    # each window's answers looked up once, not once per device
    reductions = [
        (
            window,
            window // step_s + 1,
            *(values[(metric, reduction, window)] for metric, reduction in _REDUCTIONS),
        )
        for window in (windows if keys else ())
    ]
    for key in keys:
        prof, fb = prof_series.get(key, []), fb_series.get(key, [])
        if len(prof) > 1 or len(fb) > 1 or (prof and fb and prof[0][0] != fb[0][0]):
            per_step.add(key)  # several series: merged step by step
            continue
        if not prof and key in dev and key[0] not in mig_uuids:
            per_step.add(key)  # no profiling series: DEV_GPU_UTIL's, step by step
            continue
        stats = _reduced(key, reductions, min_coverage, near, end)
        if stats is None:
            per_step.add(key)
            continue
        labels = dcgm_labels((prof or fb)[0][0])
        out.append(
            DeviceSummary(
                hostname=labels.hostname,
                uuid=key[0],
                gpu=labels.gpu,
                model_name=labels.model_name,
                gpu_instance_id=labels.gpu_instance_id,
                mig_profile=labels.mig_profile,
                namespace=labels.namespace,
                pods=(labels.pod,) if labels.pod else (),
                hpc_jobs=(labels.hpc_job,) if labels.hpc_job else (),
                util_source="prof" if prof and stats[longest].util_points else None,
                end=end,
                step_s=step_s,
                windows=stats,
            )
        )
    return SummaryRead(tuple(out), frozenset(per_step))


_REDUCTIONS = (
    ("prof", "count"), ("prof", "sum"), ("prof", "max"),
    ("fb", "count"), ("fb", "nonfinite"), ("fb", "max"),
)  # fmt: skip
# The order of each window's answers in :func:`_reduced`'s ``reductions``


def _reduced(key, reductions, min_coverage, near, end) -> dict[int, WindowStats] | None:
    """One device's :class:`WindowStats` per window from the reductions (``reductions``: per
    window, its length, its steps and its answers by key in :data:`_REDUCTIONS`' order), or
    ``None`` when they cannot say (see :func:`device_summaries`)."""
    stats = {}
    for window, steps, counts, sums, peaks, fb_counts, fb_nonfinite, fb_peaks in reductions:
        count = int(counts.get(key, 0))
        total = sums.get(key)
        fb_count = int(fb_counts.get(key, 0))
        if (count and not math.isfinite(total)) or (fb_count and key in fb_nonfinite):
            return None  # a NaN or ±Inf step: not a sample there
        if steps > count >= min_coverage * steps - 1e-9:
            return None  # the newest step decides
        # x 100 after the sum, not per sample: the last bit may differ from the per-step
        # reading's, which decides only a mean on a threshold (read per step)
        total = total * 100 if count else 0.0
        if count:
            mean = total / count
            for pct in near:
                if abs(mean - pct) <= 1e-9 * max(1.0, pct):
                    return None
        stats[window] = WindowStats(
            util_points=count,
            util_steps=count,
            util_sum=total,
            util_peak=peaks[key] * 100 if count else None,
            util_newest=end if count == steps else None,
            fb_steps=fb_count,
            fb_peak=fb_peaks.get(key) if fb_count else None,
        )
    return stats


def summary_of(
    device: DeviceUsage, *, end: float, windows: Sequence[int], step_s: float
) -> DeviceSummary:
    """A per-step reading as a :class:`DeviceSummary` (:func:`window_stats` per window)."""
    return DeviceSummary(
        hostname=device.hostname,
        uuid=device.uuid,
        gpu=device.gpu,
        model_name=device.model_name,
        gpu_instance_id=device.gpu_instance_id,
        mig_profile=device.mig_profile,
        namespace=device.namespace,
        pods=device.pods,
        hpc_jobs=device.hpc_jobs,
        util_source=device.util_source,
        end=end,
        step_s=step_s,
        windows={
            w: window_stats(device.util_pct, device.fb_used_mib, end=end, window_s=w, step_s=step_s)
            for w in windows
        },
        reduced=False,
    )


def _timeline(series: Sequence[Series], *, scale: float) -> tuple[Sample, ...]:
    """The samples of one key's series as one timeline: ``None`` dropped, values x ``scale``,
    series at one timestamp merged by maximum. One series in time order without ``None`` (what
    Prometheus sends for a steady GPU) is taken as it is, or scaled, without the merge."""
    if len(series) == 1:
        samples, last = series[0].samples, -math.inf
        for sample in samples:
            if sample.value is None or sample.timestamp <= last:
                break
            last = sample.timestamp
        else:
            if scale == 1.0:
                return samples
            return tuple([Sample(s.timestamp, s.value * scale) for s in samples])
    points: dict[float, float] = {}
    for item in series:
        for sample in item.samples:
            if sample.value is None:
                continue
            value = sample.value * scale
            previous = points.get(sample.timestamp)
            points[sample.timestamp] = value if previous is None else max(previous, value)
    return tuple(Sample(t, points[t]) for t in sorted(points))


# ------------------------------------------------------------------ elastic inference signals


@dataclass(frozen=True)
class InferenceSignals:
    """One namespace's timelines: ``util_pct`` (mean ``DCGM_FI_DEV_GPU_UTIL`` of the cards its
    pods hold, 0-100), ``cards_reporting`` (how many distinct cards, by GPU UUID, that mean was
    taken over: a card without a series is not in it), ``latency_s`` (mean end-to-end request
    latency, s: ``None`` where no request finished), ``waiting`` (requests queued),
    ``generation_tok_s`` / ``prompt_tok_s`` (tokens/s), ``request_s`` (requests finished per
    second). A missing sample is absent; a ``None`` value was ``NaN``."""

    namespace: str
    util_pct: tuple[Sample, ...] = ()
    cards_reporting: tuple[Sample, ...] = ()
    latency_s: tuple[Sample, ...] = ()
    waiting: tuple[Sample, ...] = ()
    generation_tok_s: tuple[Sample, ...] = ()
    prompt_tok_s: tuple[Sample, ...] = ()
    request_s: tuple[Sample, ...] = ()


def inference_queries(*, rate_window_s: int = 120, namespace: str | None = None) -> dict[str, str]:
    """The seven PromQL expressions, each grouped ``by (namespace)``.

    Utilisation takes the workload's namespace through the dcgm-exporter label traps in
    PromQL: ``label_replace`` copies ``pod_namespace`` (``--use-old-namespace``) and then
    ``exported_namespace`` (``honorLabels: false``) over ``namespace`` when they are set (a
    ``(.+)`` regex does not match an empty label, so the series passes unchanged). Mean
    latency is ``rate(sum) / rate(count)`` of the histogram, summed per namespace first so
    that every replica counts by its requests; the request rate (requests finished per second) is
    the rate of the same histogram's count. ``rate_window_s`` should span at least two
    scrapes. The cards reporting count distinct GPU UUIDs (``UUID`` or ``uuid``, as
    dcgm-exporter spells it by release), so MIG instances of one card count once.
    ``namespace`` (a DNS label) narrows every selector to one namespace, for the
    what-if of one allocation over weeks: Prometheus then reads only that team's series."""
    window = f"[{int(rate_window_s)}s]"
    if namespace is not None and not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"namespace {namespace!r} is not a DNS-1123 label")
    if namespace is None:
        util = metric_selector(GPU_UTIL)
        only = ""
    else:
        util = (
            f"({metric_selector(GPU_UTIL, f'exported_namespace={namespace!r}')} or "
            f"{metric_selector(GPU_UTIL, f'pod_namespace={namespace!r}')} or "
            + metric_selector(
                GPU_UTIL, f'namespace="{namespace}", exported_namespace="", pod_namespace=""'
            )
            + ")"
        ).replace("'", '"')
        only = f'{{namespace="{namespace}"}}'
    util = f'label_replace({util}, "namespace", "$1", "pod_namespace", "(.+)")'
    util = f'label_replace({util}, "namespace", "$1", "exported_namespace", "(.+)")'

    def rate(metric: str) -> str:
        return f"sum by (namespace) (rate({metric}{only}{window}))"

    return {
        "util_pct": f"avg by (namespace) ({util})",
        "cards_reporting": f"count by (namespace) (max by (namespace, UUID, uuid) ({util}))",
        "latency_s": f"{rate(VLLM_E2E_LATENCY + '_sum')} / {rate(VLLM_E2E_LATENCY + '_count')}",
        "waiting": f"sum by (namespace) ({VLLM_WAITING}{only})",
        "generation_tok_s": rate(VLLM_GENERATION_TOKENS),
        "prompt_tok_s": rate(VLLM_PROMPT_TOKENS),
        "request_s": rate(VLLM_E2E_LATENCY + "_count"),
    }


_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def inference_signals_from_series(
    results: Mapping[str, Sequence[Series]], *, namespaces: Iterable[str] | None = None
) -> dict[str, InferenceSignals]:
    """Group the answers of :func:`inference_queries` by namespace (pure). A namespace's
    pieces of one metric (chunked ranges) are joined in time order; series without a
    namespace label (cards no pod holds) are dropped."""
    wanted = None if namespaces is None else set(namespaces)
    timelines: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for key, series in results.items():
        if key not in INFERENCE_METRICS:
            raise ValueError(f"unknown inference metric {key!r}")
        for item in series:
            namespace = item.label("namespace")
            if not namespace or (wanted is not None and namespace not in wanted):
                continue
            timelines[namespace][key].extend(item.samples)
    out: dict[str, InferenceSignals] = {}
    for namespace, metrics in sorted(timelines.items()):
        out[namespace] = InferenceSignals(
            namespace,
            **{
                key: tuple(sorted(samples, key=lambda s: s.timestamp))
                for key, samples in metrics.items()
            },
        )
    return out
