"""``FakePrometheus``: the metrics side of :class:`~scheduler_adapters.prometheus.PrometheusAdapter`
in memory, for unit tests of the idle scan and of the Prometheus usage importers.

Holds :class:`~scheduler_adapters.prometheus.DeviceUsage` rows and returns those whose samples
fall in the asked range. ``down=True`` makes every call raise :class:`SchedulerUnavailable`,
as the real adapter does when Prometheus cannot be reached.

``series`` (raw :class:`~scheduler_adapters.prometheus.Series`, as scraped) answers
:meth:`query` and :meth:`query_range` for plain selectors only: ``name{a="x",b!=""}``, and for
``query`` an optional range ``[<n>s]`` (raw samples in ``[at - n, at]``, as Prometheus 2.x).
``query_range`` mimics the evaluation at each step: the latest sample at most
``lookback_s`` (5 min, Prometheus' default lookback delta) before the step. No staleness
markers: a series that stops keeps answering for the lookback, as with backfilled data.

Beyond plain selectors, both calls evaluate the small part of PromQL the capacity dashboard
sends, with Prometheus 2.x semantics: ``<fn>(<selector>[<n>s])`` for ``avg_over_time``,
``max_over_time`` and ``min_over_time`` (raw samples in ``[t - n, t]``), and
``<op> by (<labels>) (<expr>)`` for ``sum``, ``avg``, ``max``, ``min`` and ``count``, nested
freely. Their results carry no metric name and, after ``by``, only the listed labels that the
series have (an empty label is an absent one), as Prometheus answers.

:meth:`FakePrometheus.as_transport` puts the same answers behind Prometheus' HTTP API, for a
real adapter on top: a test then runs the adapter's reading of the JSON too (NUL in a label
read as U+FFFD), which the fake's :class:`Series` skip.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta

import httpx

from scheduler_adapters.errors import SchedulerRejected, SchedulerUnavailable
from scheduler_adapters.prometheus import (
    INFERENCE_METRICS,
    DeviceSummary,
    DeviceUsage,
    InferenceSignals,
    Sample,
    Series,
    window_stats,
)

_SELECTOR = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)?(\{(?P<matchers>[^}]*)\})?"
                       r"(\[(?P<range>\d+)s\])?$")  # fmt: skip
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(!=|=)\s*"([^"]*)"\s*,?')
# metric_selector's name alternation: {__name__=~"NAME|name", ...}
_NAME_ALTERNATION = re.compile(r'\s*__name__=~"(?P<names>[a-zA-Z0-9_:|]+)"\s*,?')
_AGGREGATION = re.compile(
    r"^(?P<op>sum|avg|max|min|count)\s+by\s*\((?P<by>[^)]*)\)\s*\((?P<inner>.*)\)$", re.S
)
_OVER_TIME = re.compile(r"^(?P<fn>avg_over_time|max_over_time|min_over_time)\s*\((?P<inner>.*)\)$",
                        re.S)  # fmt: skip


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


_AGGREGATIONS: dict[str, Callable[[list[float]], float]] = {
    "sum": sum, "avg": _mean, "max": max, "min": min, "count": len,
}  # fmt: skip
_OVER_TIME_FUNCTIONS: dict[str, Callable[[list[float]], float]] = {
    "avg_over_time": _mean, "max_over_time": max, "min_over_time": min,
}  # fmt: skip
# One element of an instant vector: its labels (sorted pairs) and its value.
_Element = tuple[tuple[tuple[str, str], ...], float]


class FakePrometheus:
    def __init__(
        self,
        devices: Iterable[DeviceUsage] = (),
        *,
        series: Iterable[Series] = (),
        inference: Iterable[InferenceSignals] = (),
        down: bool = False,
        lookback_s: float = 300,
    ) -> None:
        self.devices = list(devices)
        self.inference: dict[str, InferenceSignals] = {
            signals.namespace: signals for signals in inference
        }
        self.series = list(series)
        self.down = down
        self.lookback_s = lookback_s
        self.calls: list[tuple[datetime, datetime, float]] = []
        self.queries: list[str] = []

    def gpu_usage(
        self, *, start: datetime, end: datetime, step_s: float = 60, selector: str = ""
    ) -> tuple[DeviceUsage, ...]:
        self.calls.append((start, end, step_s))
        self._check_up()
        lo, hi = start.timestamp(), end.timestamp()
        cut = (
            replace(
                device,
                util_pct=tuple(s for s in device.util_pct if lo <= s.timestamp <= hi),
                fb_used_mib=tuple(s for s in device.fb_used_mib if lo <= s.timestamp <= hi),
            )
            for device in self.devices
        )
        # a range query answers only series with a sample in the range: a card silent for the
        # whole range is absent, not an empty series
        return tuple(d for d in cut if d.util_pct or d.fb_used_mib)

    def gpu_usage_summary(
        self,
        *,
        end: datetime,
        windows_s: Iterable[int],
        step_s: int = 60,
        min_coverage: float = 0.0,
        near_pct: Iterable[float] = (),
    ) -> tuple[DeviceSummary, ...]:
        """:meth:`gpu_usage` over the longest window, each device reduced per window by
        :func:`~scheduler_adapters.prometheus.window_stats` (what the real adapter has
        Prometheus compute on per-step values)."""
        windows = sorted({int(w) for w in windows_s})
        at = end.timestamp()
        devices = self.gpu_usage(start=end - timedelta(seconds=windows[-1]), end=end, step_s=step_s)
        return tuple(
            DeviceSummary(
                **{
                    f.name: getattr(d, f.name)
                    for f in fields(DeviceSummary)
                    if f.name not in ("end", "step_s", "windows", "reduced")
                },
                end=at,
                step_s=step_s,
                windows={
                    w: window_stats(d.util_pct, d.fb_used_mib, end=at, window_s=w, step_s=step_s)
                    for w in windows
                },
            )
            for d in devices
        )

    def utilisation_by_namespace(
        self,
        *,
        start: datetime,
        end: datetime,
        step_s: int = 60,
        namespaces: Iterable[str] | None = None,
    ) -> dict[str, tuple[Sample, ...]]:
        """Per namespace (of ``namespaces`` only, unless ``None``), at each step of
        ``[start, end]``, the mean over its cards of each card's mean over its instances, of
        the devices whose reading is profiling; a sample counts at its nearest step (as the
        real adapter's range queries answer)."""
        self.calls.append((start, end, step_s))
        wanted = None if namespaces is None else set(namespaces)
        self._check_up()
        lo, hi = start.timestamp(), end.timestamp()
        steps: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(list))
        )
        for device in self.devices:
            if device.namespace is None or device.util_source != "prof":
                continue
            if wanted is not None and device.namespace not in wanted:
                continue
            for sample in device.util_pct:
                if sample.value is not None and lo <= sample.timestamp <= hi:
                    k = round((sample.timestamp - lo) / step_s)
                    steps[device.namespace][k][device.uuid].append(sample.value)
        out = {}
        for namespace, by_step in steps.items():
            line = []
            for k in sorted(by_step):
                cards = [sum(v) / len(v) for v in by_step[k].values()]
                line.append(Sample(lo + k * step_s, sum(cards) / len(cards)))
            out[namespace] = tuple(line)
        return out

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
        """``self.inference`` (namespace -> :class:`InferenceSignals`) cut to ``[start, end]``
        and to ``namespaces``, as the real adapter answers (its PromQL is not evaluated)."""
        self.calls.append((start, end, step_s))
        self._check_up()
        lo, hi = start.timestamp(), end.timestamp()
        wanted = None if namespaces is None else set(namespaces)
        out = {}
        for namespace, signals in sorted(self.inference.items()):
            if wanted is not None and namespace not in wanted:
                continue
            out[namespace] = InferenceSignals(
                namespace,
                **{
                    key: tuple(s for s in getattr(signals, key) if lo <= s.timestamp <= hi)
                    for key in metrics
                },
            )
        return out

    def query(self, expr: str, *, at: datetime) -> tuple[Series, ...]:
        self.queries.append(expr)
        self._check_up()
        t = at.timestamp()
        if _is_expression(expr):
            return tuple(
                Series("", labels, (Sample(t, value),)) for labels, value in self._evaluate(expr, t)
            )
        matching, seconds = self._select(expr)
        out = []
        for item in matching:
            if seconds is None:
                latest = [s for s in item.samples if t - self.lookback_s < s.timestamp <= t]
                samples = (Sample(t, latest[-1].value),) if latest else ()
            else:
                samples = tuple(s for s in item.samples if t - seconds <= s.timestamp <= t)
            if samples:
                out.append(replace(item, samples=samples))
        return tuple(out)

    def query_range(
        self, expr: str, *, start: datetime, end: datetime, step_s: float
    ) -> tuple[Series, ...]:
        self.queries.append(expr)
        self._check_up()
        if end < start:
            raise ValueError("end is before start")
        steps = []
        t = start.timestamp()
        while t <= end.timestamp():
            steps.append(t)
            t += step_s
        if _is_expression(expr):
            points: dict[tuple, list[Sample]] = defaultdict(list)
            for step in steps:
                for labels, value in self._evaluate(expr, step):
                    points[labels].append(Sample(step, value))
            return tuple(Series("", labels, tuple(samples)) for labels, samples in points.items())
        matching, seconds = self._select(expr)
        if seconds is not None:
            raise SchedulerRejected("range vector in a range query", operation="query_range")
        out = []
        for item in matching:
            samples = []
            for step in steps:
                latest = [s for s in item.samples if step - self.lookback_s < s.timestamp <= step]
                if latest and latest[-1].value is not None:
                    samples.append(Sample(step, latest[-1].value))
            if samples:
                out.append(Series(item.metric, item.labels, tuple(samples)))
        return tuple(out)

    def close(self) -> None:
        pass

    def as_transport(self) -> httpx.MockTransport:
        """This fake's :meth:`query` and :meth:`query_range` behind Prometheus' HTTP API
        (``GET /api/v1/query``, ``/api/v1/query_range``), written as Prometheus writes its JSON
        (``{"status": "success", "data": {"resultType", "result"}}``, values as strings, a NUL
        in a label as ``\\u0000``): a real
        :class:`~scheduler_adapters.prometheus.PrometheusAdapter` on this transport reads the
        answers as it reads Prometheus', its label cleaning included. ``down``: HTTP 503; an
        expression the fake cannot evaluate: HTTP 400 with Prometheus' error body."""
        return httpx.MockTransport(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        expr = params["query"]
        try:
            if request.url.path == "/api/v1/query_range":
                kind = "matrix"
                found = self.query_range(
                    expr,
                    start=_utc(params["start"]),
                    end=_utc(params["end"]),
                    step_s=float(params["step"]),
                )
            elif request.url.path == "/api/v1/query":
                plain = _SELECTOR.match(expr.strip())
                ranged = not _is_expression(expr) and plain is not None and plain["range"]
                kind = "matrix" if ranged else "vector"
                found = self.query(expr, at=_utc(params["time"]))
            else:
                return httpx.Response(404, text="404 page not found")
        except SchedulerUnavailable:
            return httpx.Response(503, text="Service Unavailable")
        except SchedulerRejected as exc:
            error = {"status": "error", "errorType": "bad_data", "error": str(exc)}
            return httpx.Response(400, json=error)
        result = []
        for item in found:
            metric = (
                {"__name__": item.metric, **dict(item.labels)} if item.metric else dict(item.labels)
            )
            points = [
                [s.timestamp, "NaN" if s.value is None else repr(s.value)] for s in item.samples
            ]
            if kind == "vector":
                result.append({"metric": metric, "value": points[-1]})
            else:
                result.append({"metric": metric, "values": points})
        body = {"status": "success", "data": {"resultType": kind, "result": result}}
        return httpx.Response(200, json=body)

    def _check_up(self) -> None:
        if self.down:
            raise SchedulerUnavailable(
                "cannot reach Prometheus at fake: down", operation="query_range"
            )

    def _select(self, expr: str) -> tuple[list[Series], int | None]:
        found = _SELECTOR.match(expr.strip())
        raw = (found["matchers"] or "") if found else ""
        names = {found["name"]} if found and found["name"] else set()
        alternation = _NAME_ALTERNATION.match(raw)
        if alternation:
            names |= set(alternation["names"].split("|"))
            raw = raw[alternation.end() :]
        if not found or not names:
            raise SchedulerRejected(f"the fake reads plain selectors only: {expr!r}",
                                    operation="query")  # fmt: skip
        matchers = _MATCHER.findall(raw)
        selected = []
        for item in self.series:
            if item.metric not in names:
                continue
            labels = item.label_map
            if all(
                (labels.get(k, "") == v) if op == "=" else (labels.get(k, "") != v)
                for k, op, v in matchers
            ):
                selected.append(item)
        seconds = int(found["range"]) if found["range"] else None
        return selected, seconds

    def _evaluate(self, expr: str, t: float) -> list[_Element]:
        """The instant vector of ``expr`` at ``t`` (Unix seconds); ``None`` samples are skipped."""
        expr = expr.strip()
        found = _AGGREGATION.match(expr)
        if found:
            by = [name.strip() for name in found["by"].split(",") if name.strip()]
            groups: dict[tuple, list[float]] = defaultdict(list)
            for labels, value in self._evaluate(found["inner"], t):
                values = dict(labels)
                key = tuple((name, values[name]) for name in sorted(by) if values.get(name))
                groups[key].append(value)
            return [(key, float(_AGGREGATIONS[found["op"]](vs))) for key, vs in groups.items()]
        found = _OVER_TIME.match(expr)
        if found:
            matching, seconds = self._select(found["inner"])
            if seconds is None:
                raise SchedulerRejected(f"{found['fn']} needs a range selector: {expr!r}",
                                        operation="query")  # fmt: skip
            out = []
            for item in matching:
                values = [
                    s.value
                    for s in item.samples
                    if t - seconds <= s.timestamp <= t and s.value is not None
                ]
                if values:
                    out.append((item.labels, _OVER_TIME_FUNCTIONS[found["fn"]](values)))
            return out
        matching, seconds = self._select(expr)
        if seconds is not None:
            raise SchedulerRejected(f"range vector where an instant one is needed: {expr!r}",
                                    operation="query")  # fmt: skip
        out = []
        for item in matching:
            latest = [s for s in item.samples if t - self.lookback_s < s.timestamp <= t]
            if latest and latest[-1].value is not None:
                out.append((item.labels, latest[-1].value))
        return out


def _utc(unix: str) -> datetime:
    """A query parameter's Unix time (``"1759658400.000"``) as an aware datetime."""
    return datetime.fromtimestamp(float(unix), tz=UTC)


def _is_expression(expr: str) -> bool:
    """A function call or an aggregation, as opposed to a plain selector."""
    return bool(_AGGREGATION.match(expr.strip()) or _OVER_TIME.match(expr.strip()))
