"""``FakePrometheus``: the metrics side of :class:`~scheduler_adapters.prometheus.PrometheusAdapter`
in memory, for unit tests of the idle scan.

Holds :class:`~scheduler_adapters.prometheus.DeviceUsage` rows and returns those whose samples
fall in the asked range. ``down=True`` makes every call raise :class:`SchedulerUnavailable`,
as the real adapter does when Prometheus cannot be reached.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.prometheus import DeviceUsage


class FakePrometheus:
    def __init__(self, devices: Iterable[DeviceUsage] = (), *, down: bool = False) -> None:
        self.devices = list(devices)
        self.down = down
        self.calls: list[tuple[datetime, datetime, float]] = []

    def gpu_usage(
        self, *, start: datetime, end: datetime, step_s: float = 60, selector: str = ""
    ) -> tuple[DeviceUsage, ...]:
        self.calls.append((start, end, step_s))
        if self.down:
            raise SchedulerUnavailable(
                "cannot reach Prometheus at fake: down", operation="query_range"
            )
        lo, hi = start.timestamp(), end.timestamp()
        return tuple(
            replace(
                device,
                util_pct=tuple(s for s in device.util_pct if lo <= s.timestamp <= hi),
                fb_used_mib=tuple(s for s in device.fb_used_mib if lo <= s.timestamp <= hi),
            )
            for device in self.devices
        )

    def close(self) -> None:
        pass
