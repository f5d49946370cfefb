"""The capacity dashboard's utilisation queries against a real Prometheus holding backfilled
dcgm-exporter history (dcgm_history.py: on k8s-n1, GPU 0 an L40S at 85 %, GPU 1 an H100 at 2 %
behind the newer ``hostname`` label, GPU 2 an A100 in MIG mode with instances at 80 % and 0 %
and a parent DEV reading 0, GPU 3 an L40S at 0 % whose samples stop 20 minutes before the end;
and gpu-a100-01 / gpu-4090-01, nodes of the Slurm tests that this inventory does not hold).

By hand, last 30 min, busy at ≥ 30 %: L40S 85 (busy) and 0 (reporting, from the samples 20-30
minutes old) → 1 of 2; H100 2 → 0 of 1; A100 (80 + 0) / 2 = 40 → 1 of 1. Over time, a step
more than 20 minutes back averages both L40S, (85 + 0) / 2 = 42.5; the last step only the busy
one, 85. The same history loaded into FakePrometheus must answer the same: the fake mirrors
Prometheus for the queries the dashboard sends.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from factories import GpuFactory, NodeFactory, PoolFactory
from integration.prometheus.dcgm_history import generate

from pools.common.choices import Scheduler
from pools.dashboards import capacity as dashboard
from pools.dashboards import utilisation
from pools.dashboards.utilisation_store import history_stored, in_use_stored, utilisation_refresh
from pools.inventory.models import GpuModel
from scheduler_adapters.prometheus import PrometheusAdapter, Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
ALL = dashboard.DashboardFilters()
_LINE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<labels>.*)\} (?P<value>\S+) (?P<t>\d+)$"
)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')


def fake_from_history(end: float) -> FakePrometheus:
    """The same OpenMetrics the real Prometheus was backfilled with, as FakePrometheus series."""
    points: dict[tuple, list[Sample]] = {}
    for line in generate(end=end).splitlines():
        found = _LINE.match(line)
        if found:
            key = (found["name"], tuple(sorted(_LABEL.findall(found["labels"]))))
            points.setdefault(key, []).append(Sample(float(found["t"]), float(found["value"])))
    return FakePrometheus(
        series=[Series(name, labels, tuple(s)) for (name, labels), s in points.items()]
    )


@pytest.fixture
def node_k8s_n1():
    pool = PoolFactory(slug="infer", name="Infer", scheduler=Scheduler.KUBERNETES)
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    models = {
        slug: GpuModel.objects.get(slug=slug) for slug in ("l40s", "h100_sxm", "a100_80g_sxm")
    }
    cards = [
        (0, "l40s", "NVIDIA L40S", "GPU-busy-0001", False),
        (1, "h100_sxm", "NVIDIA H100 80GB HBM3", None, False),  # found by host and index
        (2, "a100_80g_sxm", "NVIDIA A100-SXM4-80GB", "GPU-mig-0003", True),
        (3, "l40s", "NVIDIA L40S", "GPU-gap-0004", False),
    ]
    for index, slug, raw, uuid, mig in cards:
        GpuFactory(node=node, index=index, gpu_model=models[slug], raw_model_name=raw, uuid=uuid,
                   mig_mode=mig)  # fmt: skip
    return node


def counts(reading) -> dict[str, tuple[int, int, int]]:
    return {model: (c.busy, c.reporting, c.total) for (_, model), c in reading.rows.items()}


def test_cards_in_use_from_real_prometheus(prometheus, node_k8s_n1):
    url, end = prometheus
    at = datetime.fromtimestamp(end, tz=UTC)
    real = PrometheusAdapter(url, timeout_s=10)
    fleet = utilisation.cards_reading_read(now=at, metrics=real)
    reading = utilisation.in_use_for(fleet, ALL, now=at)
    assert reading.error is None
    assert counts(reading) == {"l40s": (1, 2, 2), "h100_sxm": (0, 1, 1), "a100_80g_sxm": (1, 1, 1)}
    by_index = {g.index: fleet.by_gpu[g.pk] for g in node_k8s_n1.gpus.all()}
    assert by_index == pytest.approx({0: 85.0, 1: 2.0, 2: 40.0, 3: 0.0})
    fake = utilisation.cards_reading_read(now=at, metrics=fake_from_history(end))
    assert counts(utilisation.in_use_for(fake, ALL, now=at)) == counts(reading)
    assert fake.by_gpu == pytest.approx(fleet.by_gpu)
    real.close()


def test_the_task_stores_what_the_page_shows(prometheus, node_k8s_n1, settings):
    """The refresh task reads the real Prometheus (the URL as a deployment sets it) and
    stores the fleet's reading; the page's readers return it narrowed, without asking
    Prometheus (its URL is then one nothing listens on)."""
    url, end = prometheus
    at = datetime.fromtimestamp(end, tz=UTC)
    settings.PROMETHEUS_URL = url
    assert utilisation_refresh(part="cards", now=at) == {"cards": "read"}
    assert utilisation_refresh(part="24h", now=at) == {"24h": "read"}
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"  # discard: a read would fail
    shown = in_use_stored(filters=ALL, now=at)
    assert (shown.error, shown.pending, shown.read_at) == (None, False, at)
    assert counts(shown) == {"l40s": (1, 2, 2), "h100_sxm": (0, 1, 1), "a100_80g_sxm": (1, 1, 1)}
    only_l40s = in_use_stored(filters=dashboard.DashboardFilters(gpu_model="l40s"), now=at)
    assert counts(only_l40s) == {"l40s": (1, 2, 2)}
    chart = history_stored(filters=ALL, now=at, range_key="24h")
    assert chart.error is None and chart.unplaced == 2
    assert {s.gpu_model_slug: s.values[-1] for s in chart.series} == pytest.approx(
        {"l40s": 85.0, "h100_sxm": 2.0, "a100_80g_sxm": 40.0}
    )


def test_utilisation_history_from_real_prometheus(prometheus, node_k8s_n1):
    url, end = prometheus
    at = datetime.fromtimestamp(end, tz=UTC)
    real = PrometheusAdapter(url, timeout_s=10)
    history = utilisation.history_for(
        utilisation.history_reading_read(now=at, range_key="24h", metrics=real), ALL
    )
    assert history.error is None
    assert history.unplaced == 2  # gpu-a100-01 and gpu-4090-01 (Slurm test nodes): not here
    series = {s.gpu_model_slug: s.values for s in history.series}
    assert set(series) == {"l40s", "h100_sxm", "a100_80g_sxm"}
    assert series["l40s"][-1] == pytest.approx(85.0)
    assert series["l40s"][-8] == pytest.approx(42.5)  # 35 minutes back: both cards
    assert series["h100_sxm"][-1] == pytest.approx(2.0)
    assert series["a100_80g_sxm"][-1] == pytest.approx(40.0)
    # 3 h of history in a 24 h chart: the older steps have no data, never 0
    assert series["l40s"][: 289 - 37] == [None] * (289 - 37)
    fake = utilisation.history_for(
        utilisation.history_reading_read(now=at, range_key="24h", metrics=fake_from_history(end)),
        ALL,
    )
    assert {s.gpu_model_slug: s.values for s in fake.series} == series
    week = utilisation.history_for(
        utilisation.history_reading_read(now=at, range_key="7d", metrics=real), ALL
    )
    assert week.error is None and len(week.timestamps) == 337
    assert timedelta(seconds=week.range.step_s) == timedelta(minutes=30)
    real.close()
