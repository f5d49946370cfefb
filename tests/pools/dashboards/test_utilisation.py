"""Utilisation on the capacity dashboard, on the fleet of :mod:`utilisation_support` (its
readings worked out by hand there)."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import GpuFactory, NodeFactory, PoolFactory
from utilisation_support import NOW, fleet_series, in_use, l40s_series

from pools.capacity.generation import GENERATION_KEY as ALLOCATIONS_GENERATION_KEY
from pools.common.choices import Scheduler
from pools.dashboards import capacity as dashboard
from pools.dashboards import utilisation
from pools.dashboards.demand_history import GENERATION_KEY
from pools.dashboards.stranded import SNAPSHOT_KEY
from pools.dashboards.utilisation_store import (
    QUEUED_KEY,
    READING_KEY,
    in_use_stored,
    utilisation_refresh,
)
from pools.inventory.models import GpuModel
from pools.reclamation.models import ReclamationPolicy
from scheduler_adapters.prometheus import Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db
ALL = dashboard.DashboardFilters()


def read_now(filters=ALL, *, metrics=None, now=NOW) -> utilisation.UtilisationNow:
    """Cards in use as a page shows them: the fleet's reading narrowed to ``filters``."""
    return utilisation.in_use_for(
        utilisation.cards_reading_read(now=now, metrics=metrics), filters, now=now
    )


def read_history(filters=ALL, *, metrics=None, now=NOW, range_key="24h"):
    """The chart as a page shows it: the fleet's reading of the range narrowed to ``filters``."""
    reading = utilisation.history_reading_read(now=now, range_key=range_key, metrics=metrics)
    return utilisation.history_for(reading, filters)


def test_in_use_counts_cards_at_or_above_the_threshold(fleet):
    fleet_reading = utilisation.cards_reading_read(now=NOW, metrics=fleet["fake"])
    reading = utilisation.in_use_for(fleet_reading, ALL, now=NOW)
    assert reading.error is None and reading.read_at == NOW
    assert in_use(reading, "infer", "l40s") == (4, 8, 8)
    assert in_use(reading, "infer", "l40s", "R550") == (4, 8, 8)
    assert in_use(reading, "infer", "a100_80g_sxm") == (1, 1, 2)  # MIG (80 + 0) / 2 = 40
    assert in_use(reading, "dev", "rtx4090") == (1, 1, 1)  # DEV, no PROF on consumer cards
    card = {g.index: g.pk for g in fleet["infer"].nodes.get(hostname="gpu-a").gpus.all()}
    assert fleet_reading.by_gpu[card[1]] == pytest.approx(30.0)  # max of pods 30 % and 5 %
    assert fleet_reading.by_gpu[card[4]] == pytest.approx(10.0)  # the window's mean, not the hour's
    assert len(fleet["fake"].queries) == 2


def test_threshold_comes_from_the_pools_reclamation_policy(fleet):
    ReclamationPolicy.objects.create(pool=fleet["infer"], idle_below_pct=Decimal("50"))
    reading = read_now(metrics=fleet["fake"])
    assert in_use(reading, "infer", "l40s") == (2, 8, 8)  # 85 and 100 only
    assert in_use(reading, "infer", "a100_80g_sxm") == (0, 1, 2)  # 40 < 50
    assert in_use(reading, "dev", "rtx4090") == (1, 1, 1)  # no policy: 30 %


def test_rows_get_in_use_and_filters_narrow_it(fleet):
    rows = dashboard.capacity_rows(filters=ALL, now=NOW)
    utilisation.apply_in_use(rows, read_now(metrics=fleet["fake"]))
    by_model = {r.gpu_model_slug: r for r in rows}
    assert by_model["l40s"].in_use.busy == 4
    assert [(g.driver_group, g.in_use.busy) for g in by_model["a100_80g_sxm"].groups] == [
        ("R570", 1)
    ]
    only_dev = dashboard.DashboardFilters(pool="dev")
    reading = read_now(only_dev, metrics=fleet["fake"])
    assert set(reading.rows) == {("dev", "rtx4090")}


def test_no_reading_is_unknown_never_zero(fleet):
    down = read_now(ALL, metrics=FakePrometheus(down=True))
    assert down.error.startswith("Prometheus could not be read: ")
    assert "cannot reach Prometheus" in down.error
    rows = dashboard.capacity_rows(filters=ALL, now=NOW)
    utilisation.apply_in_use(rows, down)
    assert {r.in_use for r in rows} == {None}
    off = read_now()  # PROMETHEUS_URL is empty in tests
    assert off.error == utilisation.NOT_CONFIGURED and not off.configured
    silent = read_now(ALL, metrics=FakePrometheus())
    assert in_use(silent, "infer", "l40s") == (0, 0, 8)  # reporting 0: shown as unknown


def test_history_means_per_pool_and_model_by_hand(fleet):
    history = read_history(now=NOW + timedelta(seconds=299), metrics=fleet["fake"])
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
        history = read_history(range_key=key, metrics=FakePrometheus())
        assert (len(history.timestamps), history.range.step_s) == (points, step)
        assert history.series == [] and history.error is None
    down = read_history(metrics=FakePrometheus(down=True))
    assert "cannot reach Prometheus" in down.error and down.configured
    assert read_history().error == utilisation.NOT_CONFIGURED


def test_heatmap_colours_by_utilisation(fleet):
    rows, _ = dashboard.node_heatmap(filters=ALL, now=NOW)
    reading = utilisation.cards_reading_read(now=NOW, metrics=fleet["fake"])
    coloured, error = utilisation.heatmap_utilisation(rows=rows, reading=reading)
    assert error is None
    levels = {r.hostname: [c.util_level for c in r.cells] for r in coloured}
    # 85 u3, 30 u2, 45 u2, 29.9 u1, 10 u1, 0 u0, 2 u0, 100 u4
    assert levels["gpu-a"] == ["u3", "u2", "u2", "u1", "u1", "u0", "u0", "u4"]
    assert levels["gpu-b.example.com"] == ["u2", "nodata"]
    gpu_a = next(r for r in coloured if r.hostname == "gpu-a")
    assert gpu_a.cells[0].title == "GPU 0 · L40S · unknown · 85 % mean, last 30 min"
    down = utilisation.cards_reading_read(now=NOW, metrics=FakePrometheus(down=True))
    same, error = utilisation.heatmap_utilisation(rows=rows, reading=down)
    assert same == rows and "cannot reach Prometheus" in error


# ---------------------------------------------------------------------------------- the page


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
    # page 2 (tasks run eagerly in tests: the first view's read), CSV 0 (the stored
    # reading), chart 4 + 1 (which UUIDs the host no node has exported)
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
    """With the readings stored (as beat keeps them), the page, the chart and the heatmap
    run the same queries at 11 and 91 cards, and ask Prometheus nothing."""
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
    for part in ("cards", "7d"):
        utilisation_refresh(part=part, metrics=fake)
    fake.queries.clear()
    small = [count(url) for url in urls]
    l40s = GpuModel.objects.get(slug="l40s")
    for n in range(20):
        node = NodeFactory(
            hostname=f"more-{n:02d}", pool=fleet["infer"], driver_version="535.129.03"
        )
        for i in range(4):
            GpuFactory(node=node, index=i, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    cache.delete(SNAPSHOT_KEY)  # computed again, as by the first view (then stored)
    cache.delete(GENERATION_KEY)  # the forecast's hourly sums too
    cache.delete(ALLOCATIONS_GENERATION_KEY)  # and the plan's held cards
    for part in ("cards", "7d"):
        cache.delete(READING_KEY.format(part=part))
        utilisation_refresh(part=part, metrics=fake)
    fake.queries.clear()
    assert [count(url) for url in urls] == small
    assert fake.queries == []


def test_a_failed_reading_is_not_retried_on_every_refresh(fleet, admin, prometheus):
    down = prometheus(FakePrometheus(down=True))
    for _ in range(3):  # the page refreshes every minute
        assert "In use: not available." in admin.get("/dashboard/").content.decode()
    # the failed attempt is stored like a reading: read again once stale, not per refresh
    assert len(down.queries) == 1


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
    from scheduler_adapters.prometheus import Series

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
    history = read_history(now=NOW + timedelta(seconds=299), metrics=fake)
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
    fleet_reading = utilisation.cards_reading_read(now=NOW, metrics=fleet["fake"])
    reading = utilisation.in_use_for(fleet_reading, ALL, now=NOW)
    assert twin.pk not in fleet_reading.by_gpu
    assert in_use(reading, "infer", "l40s") == (3, 7, 8)
    assert in_use(reading, "other", "l40s") == (0, 0, 1)


def test_with_no_prometheus_anywhere_no_gpu_is_read(fleet, django_assert_num_queries):
    """No PROMETHEUS_URL and no cluster's own: one query (is any cluster's set?), not the
    fleet's GPUs (100,800 rows were ~1 s of the admin dashboard at fleet scale); the page's
    read is that query too, and queues nothing."""
    with django_assert_num_queries(1) as queries:
        off = utilisation.cards_reading_read(now=NOW)
    assert off.error == utilisation.NOT_CONFIGURED
    assert "pools_cluster" in queries[0]["sql"] and "pools_gpu" not in queries[0]["sql"]
    with django_assert_num_queries(1):
        page = in_use_stored(filters=ALL, now=NOW)
    assert page.error == utilisation.NOT_CONFIGURED and not page.pending
    assert cache.get(QUEUED_KEY.format(part="cards")) is None
