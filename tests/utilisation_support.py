"""The capacity dashboard's utilisation fleet, its readings worked out by hand, with
FakePrometheus holding raw dcgm-exporter series (60 s scrapes) that it evaluates like Prometheus
(``tests/pools/dashboards/test_utilisation*.py``).

Fleet (pool *infer*, Kubernetes): node gpu-a (R550) with 8 × L40S whose mean utilisation over
the last 30 min is 85, 30, 45, 29.9, 10, 0, 2 and 100 % (card 4 was busy before the window,
so its hour is not its half hour); node gpu-b.example.com in the inventory, reported by a newer
exporter as ``hostname="GPU-B"``, R570, with one MIG-mode A100 whose instances read 80 % and
0 % (its parent's DEV reads 0) and one A100 without any series. Pool *dev*: node dev-1 with one
RTX 4090 (no profiling metrics) at 50 % DEV.

By hand, busy threshold 30 % (≥): L40S 85, 30, 45, 100 → 4 of 8 in use; A100 (80 + 0) / 2 = 40
→ 1 in use of 1 reporting, 2 cards; RTX 4090 50 → 1 of 1.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from factories import GpuFactory, NodeFactory, PoolFactory

from pools.common.choices import Scheduler
from pools.inventory.models import GpuModel
from scheduler_adapters.prometheus import GPU_UTIL, GR_ENGINE_ACTIVE, Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a multiple of every chart step
L40S_NOW = [85, 30, 45, 29.9, 10, 0, 2, 100]


def dcgm(metric, labels: dict, value_at, *, end: datetime = NOW, minutes: int = 60) -> Series:
    """One series scraped every 60 s for ``minutes`` up to ``end``; ``value_at(age_s)``."""
    samples = [
        Sample(end.timestamp() - age, float(value_at(age))) for age in range(minutes * 60, -1, -60)
    ]
    return Series(metric, tuple(sorted(labels.items())), tuple(samples))


def fleet_series(end: datetime = NOW) -> list[Series]:
    """Every series of the fleet, ending at ``end``."""
    return [
        Series(s.metric, s.labels,
               tuple(Sample(p.timestamp - NOW.timestamp() + end.timestamp(), p.value)
                     for p in s.samples))
        for s in l40s_series() + other_series()
    ]  # fmt: skip


def l40s_series() -> list[Series]:
    out = []
    for index, pct in enumerate(L40S_NOW):
        labels = {"Hostname": "gpu-a", "gpu": str(index), "UUID": f"GPU-a-{index}",
                  "modelName": "NVIDIA L40S"}  # fmt: skip
        if index == 4:  # 100 % until 31 min ago, 10 % in the window: the window's mean is 10
            out.append(dcgm(GR_ENGINE_ACTIVE, labels, lambda age: 1.0 if age > 1800 else 0.1))
        elif index == 1:  # two pods of a time-sliced card: merged by max, not averaged
            out.append(dcgm(GR_ENGINE_ACTIVE, {**labels, "pod": "p1"}, lambda age: 0.30))
            out.append(dcgm(GR_ENGINE_ACTIVE, {**labels, "pod": "p2"}, lambda age: 0.05))
        else:
            out.append(dcgm(GR_ENGINE_ACTIVE, labels, lambda age, r=pct / 100: r))
        out.append(dcgm(GPU_UTIL, labels, lambda age: 100))  # DEV ignored where PROF exists
    return out


def other_series() -> list[Series]:
    mig = {"hostname": "GPU-B", "gpu": "0", "UUID": "GPU-b-0", "modelName": "NVIDIA A100-SXM4-80GB"}
    dev = {
        "Hostname": "dev-1",
        "gpu": "0",
        "UUID": "GPU-d-0",
        "modelName": "NVIDIA GeForce RTX 4090",
    }
    return [
        dcgm(GPU_UTIL, mig, lambda age: 0),  # a MIG parent's DEV: meaningless
        dcgm(GR_ENGINE_ACTIVE, {**mig, "GPU_I_ID": "1"}, lambda age: 0.8),
        dcgm(GR_ENGINE_ACTIVE, {**mig, "GPU_I_ID": "2"}, lambda age: 0.0),
        dcgm(GPU_UTIL, dev, lambda age: 50),
        dcgm(GPU_UTIL, {**dev, "Hostname": "stranger", "UUID": "GPU-x"}, lambda age: 70),
    ]


@pytest.fixture
def fleet():
    l40s, a100 = GpuModel.objects.get(slug="l40s"), GpuModel.objects.get(slug="a100_80g_sxm")
    rtx = GpuModel.objects.get(slug="rtx4090")
    infer = PoolFactory(slug="infer", name="Infer", scheduler=Scheduler.KUBERNETES)
    dev = PoolFactory(slug="dev", name="Dev", scheduler=Scheduler.SLURM)
    gpu_a = NodeFactory(hostname="gpu-a", pool=infer, driver_version="550.54.15")
    gpu_b = NodeFactory(hostname="gpu-b.example.com", pool=infer, driver_version="570.86.10")
    dev_1 = NodeFactory(hostname="dev-1", pool=dev, driver_version="570.86.10")
    for i in range(8):  # matched by UUID, except card 7: by host and index
        GpuFactory(node=gpu_a, index=i, gpu_model=l40s, raw_model_name="NVIDIA L40S",
                   uuid=None if i == 7 else f"GPU-a-{i}")  # fmt: skip
    GpuFactory(node=gpu_b, index=0, gpu_model=a100, raw_model_name="NVIDIA A100-SXM4-80GB",
               uuid="GPU-b-0", mig_mode=True)  # fmt: skip
    GpuFactory(node=gpu_b, index=1, gpu_model=a100, raw_model_name="NVIDIA A100-SXM4-80GB",
               uuid="GPU-b-1")  # fmt: skip
    GpuFactory(node=dev_1, index=0, gpu_model=rtx, raw_model_name="NVIDIA GeForce RTX 4090",
               uuid=None)  # fmt: skip
    return {"infer": infer, "fake": FakePrometheus(series=fleet_series())}


def in_use(reading, *key) -> tuple[int, int, int]:
    counts = (reading.rows if len(key) == 2 else reading.groups)[key]
    return counts.busy, counts.reporting, counts.total
