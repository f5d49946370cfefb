"""Utilisation on the capacity dashboard, on a fleet whose readings are worked out by hand, with
FakePrometheus holding raw dcgm-exporter series (60 s scrapes) that it evaluates like Prometheus.

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

import json
import socket
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import GpuFactory, NodeFactory, PoolFactory

from pools.capacity.generation import GENERATION_KEY as ALLOCATIONS_GENERATION_KEY
from pools.common.choices import Scheduler
from pools.dashboards import capacity as dashboard
from pools.dashboards import utilisation
from pools.dashboards.demand_history import GENERATION_KEY
from pools.dashboards.stranded import SNAPSHOT_KEY
from pools.inventory.models import GpuModel
from pools.reclamation.models import ReclamationPolicy
from scheduler_adapters.prometheus import GPU_UTIL, GR_ENGINE_ACTIVE, Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a multiple of every chart step
ALL = dashboard.DashboardFilters()
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


def test_in_use_counts_cards_at_or_above_the_threshold(fleet):
    reading = utilisation.utilisation_now(filters=ALL, now=NOW, metrics=fleet["fake"])
    assert reading.error is None
    assert in_use(reading, "infer", "l40s") == (4, 8, 8)
    assert in_use(reading, "infer", "l40s", "R550") == (4, 8, 8)
    assert in_use(reading, "infer", "a100_80g_sxm") == (1, 1, 2)  # MIG (80 + 0) / 2 = 40
    assert in_use(reading, "dev", "rtx4090") == (1, 1, 1)  # DEV, no PROF on consumer cards
    card = {g.index: g.pk for g in fleet["infer"].nodes.get(hostname="gpu-a").gpus.all()}
    assert reading.by_gpu[card[1]] == pytest.approx(30.0)  # max of pods 30 % and 5 %
    assert reading.by_gpu[card[4]] == pytest.approx(10.0)  # the window's mean, not the hour's
    assert len(fleet["fake"].queries) == 2


def test_threshold_comes_from_the_pools_reclamation_policy(fleet):
    ReclamationPolicy.objects.create(pool=fleet["infer"], idle_below_pct=Decimal("50"))
    reading = utilisation.utilisation_now(filters=ALL, now=NOW, metrics=fleet["fake"])
    assert in_use(reading, "infer", "l40s") == (2, 8, 8)  # 85 and 100 only
    assert in_use(reading, "infer", "a100_80g_sxm") == (0, 1, 2)  # 40 < 50
    assert in_use(reading, "dev", "rtx4090") == (1, 1, 1)  # no policy: 30 %


def test_rows_get_in_use_and_filters_narrow_it(fleet):
    rows = dashboard.capacity_rows(filters=ALL, now=NOW)
    utilisation.apply_in_use(rows, utilisation.utilisation_now(filters=ALL, now=NOW,
                                                               metrics=fleet["fake"]))  # fmt: skip
    by_model = {r.gpu_model_slug: r for r in rows}
    assert by_model["l40s"].in_use.busy == 4
    assert [(g.driver_group, g.in_use.busy) for g in by_model["a100_80g_sxm"].groups] == [
        ("R570", 1)
    ]
    only_dev = dashboard.DashboardFilters(pool="dev")
    reading = utilisation.utilisation_now(filters=only_dev, now=NOW, metrics=fleet["fake"])
    assert set(reading.rows) == {("dev", "rtx4090")}


def test_no_reading_is_unknown_never_zero(fleet):
    down = utilisation.utilisation_now(filters=ALL, now=NOW, metrics=FakePrometheus(down=True))
    assert down.error.startswith("Prometheus could not be read: ")
    assert "cannot reach Prometheus" in down.error
    rows = dashboard.capacity_rows(filters=ALL, now=NOW)
    utilisation.apply_in_use(rows, down)
    assert {r.in_use for r in rows} == {None}
    off = utilisation.utilisation_now(filters=ALL, now=NOW)  # PROMETHEUS_URL is empty in tests
    assert off.error == utilisation.NOT_CONFIGURED and not off.configured
    silent = utilisation.utilisation_now(filters=ALL, now=NOW, metrics=FakePrometheus())
    assert in_use(silent, "infer", "l40s") == (0, 0, 8)  # reporting 0: shown as unknown


def test_history_means_per_pool_and_model_by_hand(fleet):
    history = utilisation.utilisation_history(
        filters=ALL, now=NOW + timedelta(seconds=299), range_key="24h", metrics=fleet["fake"]
    )
    assert history.error is None
    assert (history.start, history.end) == (NOW - timedelta(hours=24), NOW)  # aligned to 5 min
    assert len(history.timestamps) == 289
    series = {(s.pool_slug, s.gpu_model_slug): s for s in history.series}
    assert set(series) == {("infer", "l40s"), ("infer", "a100_80g_sxm"), ("dev", "rtx4090")}
    l40s = series[("infer", "l40s")]
    # last step, window [NOW - 300 s, NOW]: 85, 30, 45, 29.9, 10, 0, 2, 100 → 301.9 / 8
    assert l40s.values[-1] == pytest.approx(37.7)
    # 35 min ago: card 4 still at 100 → (301.9 - 10 + 100) / 8 = 48.99
    assert l40s.values[-8] == pytest.approx(49.0)
    assert l40s.values[:276] == [None] * 276  # no samples more than an hour back: no data, not 0
    assert l40s.cards == 8
    assert series[("infer", "a100_80g_sxm")].values[-1] == pytest.approx(40.0)
    assert series[("dev", "rtx4090")].values[-1] == pytest.approx(50.0)
    assert history.unplaced == 1  # the stranger host
    # 4 range queries + 1 asking which UUIDs the unplaced host name ("stranger") exported
    assert len(fleet["fake"].queries) == 5


def test_history_steps_and_errors(fleet):
    for key, points, step in (("7d", 337, 1800), ("30d", 361, 7200), ("nonsense", 289, 300)):
        history = utilisation.utilisation_history(
            filters=ALL, now=NOW, range_key=key, metrics=FakePrometheus()
        )
        assert (len(history.timestamps), history.range.step_s) == (points, step)
        assert history.series == [] and history.error is None
    down = utilisation.utilisation_history(filters=ALL, now=NOW, metrics=FakePrometheus(down=True))
    assert "cannot reach Prometheus" in down.error and down.configured
    assert utilisation.utilisation_history(filters=ALL, now=NOW).error == utilisation.NOT_CONFIGURED


def test_heatmap_colours_by_utilisation(fleet):
    rows, _ = dashboard.node_heatmap(filters=ALL, now=NOW)
    coloured, error = utilisation.heatmap_utilisation(rows=rows, now=NOW, metrics=fleet["fake"])
    assert error is None
    levels = {r.hostname: [c.util_level for c in r.cells] for r in coloured}
    # 85 u3, 30 u2, 45 u2, 29.9 u1, 10 u1, 0 u0, 2 u0, 100 u4
    assert levels["gpu-a"] == ["u3", "u2", "u2", "u1", "u1", "u0", "u0", "u4"]
    assert levels["gpu-b.example.com"] == ["u2", "nodata"]
    gpu_a = next(r for r in coloured if r.hostname == "gpu-a")
    assert gpu_a.cells[0].title == "GPU 0 · L40S · unknown · 85 % mean, last 30 min"
    same, error = utilisation.heatmap_utilisation(
        rows=rows, now=NOW, metrics=FakePrometheus(down=True)
    )
    assert same == rows and "cannot reach Prometheus" in error


# ---------------------------------------------------------------------------------- the page


@pytest.fixture
def admin(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user("boss", password="pw", is_staff=True))
    return client


@pytest.fixture
def prometheus(monkeypatch, settings):
    """Point the dashboard at a FakePrometheus standing for a configured PROMETHEUS_URL (set:
    with none configured anywhere the page reads no GPU)."""

    def use(fake: FakePrometheus) -> FakePrometheus:
        settings.PROMETHEUS_URL = "http://prometheus.example.org:9090"
        monkeypatch.setattr(utilisation, "dashboard_metrics", lambda url=None: fake)
        return fake

    return use


def test_page_shows_cards_in_use(fleet, admin, prometheus):
    fake = prometheus(FakePrometheus(series=fleet_series(timezone.now())))
    page = admin.get("/dashboard/").content.decode()
    assert "In use: not available." not in page
    assert 'title="4 of 8 cards with a reading at ≥ 30 % mean utilisation' in page
    assert (
        'title="1 of 1 cards with a reading at ≥ 30 % mean utilisation over the last 30 min; '
        '1 of 2 cards have no reading">1</span><small class="muted"> /1</small>' in page
    )
    assert len(fake.queries) == 2  # the chart is not loaded with the page
    lines = b"".join(admin.get("/dashboard/?export=capacity").streaming_content).decode()
    lines = lines.splitlines()
    assert lines[0].split(",")[10:12] == ["in_use", "in_use_reporting"]
    assert next(line for line in lines if ",l40s,all," in line).split(",")[10:12] == ["4", "8"]
    assert next(line for line in lines if ",l40s,R550," in line).split(",")[10:12] == ["4", "8"]
    part = admin.get("/dashboard/?part=utilisation&range=24h", headers={"HX-Request": "true"})
    assert part.status_code == 200 and part["Vary"].count("HX-Request") == 1
    data = part.content.decode().split('id="util-chart-data" type="application/json">')[1]
    chart = json.loads(data.split("</script>")[0])
    assert [d["label"] for d in chart["datasets"]] == [
        "Dev · GeForce RTX 4090", "Infer · A100 SXM4 80GB", "Infer · L40S",
    ]  # fmt: skip
    # page 2, CSV 0 (the page's reading, cached for IN_USE_CACHE_S), chart 4
    assert len(chart["labels"]) == 289 and len(fake.queries) == 2 + 0 + 5
    heat = admin.get("/dashboard/?part=heatmap&heat=util", headers={"HX-Request": "true"})
    grid = heat.content.decode().split('class="heatmap"', 1)[1]
    assert grid.count('class="cell u4"') == 1 and grid.count('class="cell nodata"') == 1


def test_page_when_prometheus_is_down(fleet, admin, prometheus):
    prometheus(FakePrometheus(down=True))
    response = admin.get("/dashboard/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "In use: not available." in page
    assert "cannot reach Prometheus at fake" in page
    part = admin.get("/dashboard/?part=utilisation&range=7d", headers={"HX-Request": "true"})
    assert part.status_code == 200
    assert "Could not load utilisation." in part.content.decode()
    assert (
        'role="alert"' in part.content.decode() and "util-chart-data" not in part.content.decode()
    )
    heat = admin.get("/dashboard/?part=heatmap&heat=util", headers={"HX-Request": "true"})
    assert heat.status_code == 200
    assert "Utilisation colouring not available, cells show state." in heat.content.decode()


def test_page_without_prometheus_says_so(fleet, admin):
    page = admin.get("/dashboard/").content.decode()
    assert "Prometheus is not configured (PROMETHEUS_URL is empty)." in page
    part = admin.get("/dashboard/?part=utilisation", headers={"HX-Request": "true"})
    assert part.status_code == 200 and "No utilisation data." in part.content.decode()


def test_page_when_nothing_listens_at_prometheus_url(fleet, admin, settings):
    with socket.socket() as probe:  # a loopback port nothing listens on: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{port}"
    response = admin.get("/dashboard/")
    assert response.status_code == 200
    page = response.content.decode()
    assert f"cannot reach Prometheus at http://127.0.0.1:{port}" in page
    assert (
        '<div class="value"><span class="muted">—</span></div><div class="label">in use now' in page
    )
    part = admin.get("/dashboard/?part=utilisation", headers={"HX-Request": "true"})
    assert part.status_code == 200 and "Could not load utilisation." in part.content.decode()


def test_queries_do_not_grow_with_the_fleet(fleet, admin, prometheus):
    fake = prometheus(FakePrometheus(series=fleet_series(timezone.now())))

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert admin.get(url, headers={"HX-Request": "true"}).status_code == 200
        return len(queries)

    urls = (
        "/dashboard/",
        "/dashboard/?part=utilisation&range=7d",
        "/dashboard/?part=heatmap&heat=util",
    )
    small = [count(url) for url in urls]
    prometheus_small = len(fake.queries)
    l40s = GpuModel.objects.get(slug="l40s")
    for n in range(20):
        node = NodeFactory(
            hostname=f"more-{n:02d}", pool=fleet["infer"], driver_version="535.129.03"
        )
        for i in range(4):
            GpuFactory(node=node, index=i, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    fake.queries.clear()
    cache.delete(SNAPSHOT_KEY)  # computed again, as by the first view (then stored)
    cache.delete(GENERATION_KEY)  # the forecast's hourly sums too
    cache.delete(ALLOCATIONS_GENERATION_KEY)  # and the plan's held cards
    assert [count(url) for url in urls] == small
    assert len(fake.queries) == prometheus_small == 2 + 5 + 2


def test_a_failed_reading_is_not_retried_on_every_refresh(fleet, admin, prometheus):
    down = prometheus(FakePrometheus(down=True))
    for _ in range(3):  # the page refreshes every minute
        assert "In use: not available." in admin.get("/dashboard/").content.decode()
    assert len(down.queries) == 1  # one attempt per IN_USE_CACHE_S, not one per refresh


def test_heatmap_csv_coloured_by_utilisation_carries_the_readings(fleet, admin, prometheus):
    prometheus(FakePrometheus(series=fleet_series(timezone.now())))
    lines = b"".join(admin.get("/dashboard/?export=heatmap&heat=util").streaming_content)
    rows = [line.split(",") for line in lines.decode().splitlines()[1:]]
    readings = [float(r[6]) for r in rows if r[6]]
    # the same cards as the page's grid: one at >= 90 %, one without a reading
    assert sum(value >= 90 for value in readings) == 1
    assert sum(1 for r in rows if not r[6]) == 1


def test_a_rollout_in_the_window_keeps_the_busier_half_of_a_card():
    """dcgm-exporter PR #129: Hostname is the exporter pod's name, so a rollout in the 30-min
    window splits one card into two series; the card's reading is the busier one, found by UUID,
    and lower-case metric names count the same."""
    from pools.dashboards.utilisation import CardRef, card_utilisation
    from scheduler_adapters.prometheus import Sample, Series

    uuid = "GPU-4c226d4d-8129-a7cf-fecd-daa9018b4b48"  # from PR #129's sample line

    class Metrics:
        def __init__(self):
            self.queries = []

        def query(self, expr, *, at):
            self.queries.append(expr)
            if "GR_ENGINE_ACTIVE" not in expr:
                return ()
            return tuple(
                Series("", (("Hostname", host), ("UUID", uuid), ("gpu", "0")), (Sample(0, v),))
                for host, v in (
                    ("nvidia-dcgm-exporter-cwbcm", 0.62),
                    ("nvidia-dcgm-exporter-x7k2p", 0.05),
                )
            )

    metrics = Metrics()
    readings = card_utilisation(
        metrics=metrics, cards=[CardRef(7, "ip-172-31-54-152", 0, uuid, False)], now=NOW
    )
    assert readings == {7: 62.0}
    assert "dcgm_fi_prof_gr_engine_active" in metrics.queries[0]


def test_history_places_exporter_pod_names_on_the_node_of_their_uuids(fleet):
    """dcgm-exporter PR #129: without NODE_NAME, Hostname is the exporter pod's name
    (``nvidia-dcgm-exporter-cwbcm``); a rollout renames it. Both names' series land on the
    inventory node holding their UUIDs, so the pool's chart keeps the node."""
    renamed = []
    for s in l40s_series():
        labels = dict(s.labels)
        labels["Hostname"] = "nvidia-dcgm-exporter-cwbcm"
        renamed.append(Series(s.metric, tuple(sorted(labels.items())), s.samples))
    fake = FakePrometheus(series=renamed)
    history = utilisation.utilisation_history(
        filters=ALL, now=NOW + timedelta(seconds=299), range_key="24h", metrics=fake
    )
    series = {(s.pool_slug, s.gpu_model_slug): s for s in history.series}
    # the exporter name's UUIDs all sit on gpu-a, so its 8 cards are gpu-a's: as with the real
    # host name, 85, 30, 45, 29.9, 10, 0, 2, 100 -> 301.9 / 8
    assert series[("infer", "l40s")].values[-1] == pytest.approx(37.7)
    assert history.unplaced == 0


def test_a_host_name_two_clusters_share_is_read_by_uuid_only(fleet):
    """Another cluster has a node gpu-a too, its card 0 unknown to Prometheus: it stays
    without a reading (it took gpu-a's index-0 series by name), and gpu-a's own card 7 (no
    UUID, placed by host and index alone) is unknown now, never a namesake's reading; cards
    with UUIDs keep theirs. In use: L40S 85, 30, 45 (100 % of card 7 unknown) -> 3 of 7."""
    from factories import ClusterFactory

    cluster = ClusterFactory(slug="other", kind=Scheduler.KUBERNETES)
    other = PoolFactory(slug="other", name="Other", scheduler=Scheduler.KUBERNETES,
                        cluster=cluster)  # fmt: skip
    namesake = NodeFactory(hostname="gpu-a", pool=other, driver_version="550.54.15")
    twin = GpuFactory(node=namesake, index=0, gpu_model=GpuModel.objects.get(slug="l40s"),
                      raw_model_name="NVIDIA L40S", uuid=None)  # fmt: skip
    reading = utilisation.utilisation_now(filters=ALL, now=NOW, metrics=fleet["fake"])
    assert twin.pk not in reading.by_gpu
    assert in_use(reading, "infer", "l40s") == (3, 7, 8)
    assert in_use(reading, "other", "l40s") == (0, 0, 1)


def test_with_no_prometheus_anywhere_no_gpu_is_read(fleet, django_assert_num_queries):
    """No PROMETHEUS_URL and no cluster's own: one query (is any cluster's set?), not the
    fleet's GPUs (100,800 rows were ~1 s of the admin dashboard at fleet scale)."""
    with django_assert_num_queries(1) as queries:
        off = utilisation.utilisation_now(filters=ALL, now=NOW)
    assert off.error == utilisation.NOT_CONFIGURED
    assert "pools_cluster" in queries[0]["sql"] and "pools_gpu" not in queries[0]["sql"]


def test_in_use_now_is_kept_whole_per_inventory_generation(
    fleet, prometheus, outside_a_transaction, django_assert_num_queries
):
    """Read as a page reads: the second view within IN_USE_CACHE_S reads no GPU row (the
    inventory generation only); an inventory write (a new generation) reads afresh."""
    prometheus(FakePrometheus(series=fleet_series()))
    first = utilisation.utilisation_now(filters=ALL, now=NOW)
    with django_assert_num_queries(1) as queries:  # the generation (PROMETHEUS_URL is set)
        again = utilisation.utilisation_now(filters=ALL, now=NOW)
    assert not any("pools_gpu" in q["sql"] for q in queries.captured_queries)
    assert in_use(again, "infer", "l40s") == in_use(first, "infer", "l40s")

    GpuFactory(node=NodeFactory(hostname="gpu-c", pool=fleet["infer"]), index=0,
               gpu_model=GpuModel.objects.get(slug="l40s"), uuid="GPU-c-0")  # fmt: skip
    after = utilisation.utilisation_now(filters=ALL, now=NOW)
    # one more L40S card in the pool, without a reading: total 8 -> 9
    assert in_use(after, "infer", "l40s")[2] == in_use(first, "infer", "l40s")[2] + 1
