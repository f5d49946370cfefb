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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from scheduler_adapters.errors import SchedulerRejected, SchedulerUnavailable
from scheduler_adapters.prometheus import DeviceUsage, Sample, Series

_SELECTOR = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<matchers>[^}]*)\})?"
                       r"(\[(?P<range>\d+)s\])?$")  # fmt: skip
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(!=|=)\s*"([^"]*)"\s*,?')


class FakePrometheus:
    def __init__(
        self,
        devices: Iterable[DeviceUsage] = (),
        *,
        series: Iterable[Series] = (),
        down: bool = False,
        lookback_s: float = 300,
    ) -> None:
        self.devices = list(devices)
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
        return tuple(
            replace(
                device,
                util_pct=tuple(s for s in device.util_pct if lo <= s.timestamp <= hi),
                fb_used_mib=tuple(s for s in device.fb_used_mib if lo <= s.timestamp <= hi),
            )
            for device in self.devices
        )

    def query(self, expr: str, *, at: datetime) -> tuple[Series, ...]:
        self.queries.append(expr)
        self._check_up()
        matching, seconds = self._select(expr)
        t = at.timestamp()
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
        matching, seconds = self._select(expr)
        if seconds is not None:
            raise SchedulerRejected("range vector in a range query", operation="query_range")
        steps = []
        t = start.timestamp()
        while t <= end.timestamp():
            steps.append(t)
            t += step_s
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

    def _check_up(self) -> None:
        if self.down:
            raise SchedulerUnavailable(
                "cannot reach Prometheus at fake: down", operation="query_range"
            )

    def _select(self, expr: str) -> tuple[list[Series], int | None]:
        found = _SELECTOR.match(expr.strip())
        if not found:
            raise SchedulerRejected(f"the fake reads plain selectors only: {expr!r}",
                                    operation="query")  # fmt: skip
        matchers = _MATCHER.findall(found["matchers"] or "")
        selected = []
        for item in self.series:
            if item.metric != found["name"]:
                continue
            labels = item.label_map
            if all(
                (labels.get(k, "") == v) if op == "=" else (labels.get(k, "") != v)
                for k, op, v in matchers
            ):
                selected.append(item)
        seconds = int(found["range"]) if found["range"] else None
        return selected, seconds
