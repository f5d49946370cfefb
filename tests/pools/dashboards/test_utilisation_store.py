"""The dashboard's utilisation is read from Prometheus by a task and stored; pages show the
stored reading with its age and never ask Prometheus. The fleet and its hand-worked readings
are those of :mod:`test_utilisation` (L40S 4 of 8 busy on R550, A100 1 of 1 reporting of 2 on
R570, RTX 4090 1 of 1 on R570; the chart's last step: L40S 37.7 %, A100 40 %, RTX 4090 50 %).
"""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from celery import current_app
from django.conf import settings as django_settings
from django.core.cache import cache
from django.utils import timezone
from utilisation_support import NOW, fleet_series, in_use

from pools.dashboards import capacity as dashboard
from pools.dashboards import utilisation, utilisation_store
from pools.dashboards.utilisation_store import (
    CARDS_STALE_AFTER,
    QUEUED_KEY,
    REFRESH_EVERY,
    WATCHED_KEY,
    history_stored,
    in_use_stored,
    utilisation_refresh,
)
from pools.jobs import DASHBOARD_UTILISATION
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db
ALL = dashboard.DashboardFilters()


@pytest.fixture
def no_http(monkeypatch):
    """Any HTTP request through httpx (the Prometheus adapter's client) fails the test."""

    def refuse(self, request, **kwargs):
        pytest.fail(f"HTTP request in the request thread: {request.method} {request.url}")

    monkeypatch.setattr(httpx.Client, "send", refuse)


@pytest.fixture
def queued(monkeypatch, settings):
    """Prometheus configured, tasks queued for a worker (recorded here), not run in the
    request; returns the parts queued."""
    settings.PROMETHEUS_URL = "http://prometheus.example.org:9090"
    parts: list[str] = []

    def enqueue(name, *args):
        assert name == DASHBOARD_UTILISATION
        parts.extend(args)

    monkeypatch.setattr(utilisation_store, "enqueue", enqueue)
    return parts


def page(client, url: str) -> str:
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    return (
        response.content.decode()
        if not response.streaming
        else b"".join(response.streaming_content).decode()
    )


def test_no_page_of_the_dashboard_makes_an_http_request(fleet, admin, queued, no_http):
    """Before any reading: the page, each chart range, the heatmap and the CSVs answer at once,
    saying "being read" (never 0), and queue each part once however often they are viewed;
    after the worker's read they show it, still without a request to Prometheus."""
    urls = ("/dashboard/", "/dashboard/?part=utilisation&range=24h",
            "/dashboard/?part=utilisation&range=7d", "/dashboard/?part=heatmap&heat=util",
            "/dashboard/?export=capacity", "/dashboard/?export=heatmap&heat=util")  # fmt: skip
    first = [page(admin, url) for url in urls]
    for url in urls:  # polls and refreshes while the worker reads
        page(admin, url)
    assert queued == ["cards", "24h", "7d"]
    assert "In use: being read from Prometheus…" in first[0]
    assert 'hx-trigger="load delay:3s"' in first[0]  # the body polls until the reading is in
    assert "data-util-pending" in first[1] and 'hx-trigger="load delay:2s"' in first[1]
    assert "data-heat-pending" in first[3] and not re.search(r'class="cell u\d"', first[3])
    capacity = first[4].splitlines()
    assert next(line for line in capacity if ",l40s,all," in line).split(",")[10:12] == ["", ""]

    fake = FakePrometheus(series=fleet_series(timezone.now()))
    read_at = timezone.now()
    for part in ("cards", "24h", "7d"):  # the worker
        assert utilisation_refresh(part=part, now=read_at, metrics=fake) == {part: "read"}
    assert cache.get(QUEUED_KEY.format(part="cards")) is None  # a later stale view may queue
    shown = [page(admin, url) for url in urls]
    assert queued == ["cards", "24h", "7d"]  # fresh: nothing queued again
    assert 'title="4 of 8 cards with a reading at ≥ 30 % mean utilisation' in shown[0]
    assert "data-in-use-as-of" in shown[0] and "data-in-use-pending" not in shown[0]
    assert "util-chart-data" in shown[1] and "Read from Prometheus as of" in shown[1]
    assert shown[3].split('class="heatmap"', 1)[1].count('class="cell u4"') == 1
    capacity = shown[4].splitlines()
    assert next(line for line in capacity if ",l40s,all," in line).split(",")[10:12] == ["4", "8"]


def test_filters_narrow_the_one_fleet_reading(fleet):
    """One fleet-wide reading answers every filter as the filtered read did: by pool, GPU
    model (slug) and driver branch (R570: the A100s and the RTX 4090)."""
    reading = utilisation.cards_reading_read(now=NOW, metrics=fleet["fake"])
    by_model = utilisation.in_use_for(
        reading, dashboard.DashboardFilters(gpu_model="l40s"), now=NOW
    )
    assert set(by_model.rows) == {("infer", "l40s")} and in_use(by_model, "infer", "l40s") == (
        4, 8, 8,
    )  # fmt: skip
    r570 = utilisation.in_use_for(reading, dashboard.DashboardFilters(driver_branch=570), now=NOW)
    assert {key: in_use(r570, *key) for key in r570.rows} == {
        ("infer", "a100_80g_sxm"): (1, 1, 2),
        ("dev", "rtx4090"): (1, 1, 1),
    }
    assert in_use(r570, "infer", "a100_80g_sxm", "R570") == (1, 1, 2)
    dev = utilisation.in_use_for(reading, dashboard.DashboardFilters(pool="dev"), now=NOW)
    assert set(dev.rows) == {("dev", "rtx4090")}

    history = utilisation.history_reading_read(now=NOW, range_key="24h", metrics=fleet["fake"])
    only_dev = utilisation.history_for(history, dashboard.DashboardFilters(pool="dev"))
    assert [(s.pool_slug, s.gpu_model_slug, s.values[-1]) for s in only_dev.series] == [
        ("dev", "rtx4090", 50.0)
    ]
    # host × model series outside the filter: gpu-a's L40S, GPU-B's A100 and the stranger
    assert only_dev.unplaced == 3
    whole = utilisation.history_for(history, ALL)
    assert [s.values[-1] for s in whole.series] == pytest.approx([50.0, 40.0, 37.7])
    assert whole.unplaced == 1


def test_beat_reads_only_what_someone_looked_at(fleet):
    """Nothing watched: nothing read. Cards watched: read on every beat. A chart watched:
    read once its last step has closed (24 h: every 5 minutes)."""
    fake = fleet["fake"]
    assert utilisation_refresh(now=NOW, metrics=fake) == {}
    assert fake.queries == []
    cache.set(WATCHED_KEY.format(part="cards"), True)
    cache.set(WATCHED_KEY.format(part="24h"), True)
    assert utilisation_refresh(now=NOW, metrics=fake) == {"cards": "read", "24h": "read"}
    assert len(fake.queries) == 2 + 5  # PROF, DEV; 4 range queries + the stranger's UUIDs
    assert utilisation_refresh(now=NOW + REFRESH_EVERY, metrics=fake) == {"cards": "read"}
    later = NOW + timedelta(minutes=5)
    assert utilisation_refresh(now=later, metrics=fake) == {"cards": "read", "24h": "read"}


def test_a_page_queues_a_read_once_stale(fleet, queued, no_http):
    """A stored reading younger than CARDS_STALE_AFTER is shown as it is; an older one (beat
    stopped) is shown with its age and a read is queued once; a queued read that finds the
    reading fresh again reads nothing."""
    utilisation_refresh(part="cards", now=NOW, metrics=fleet["fake"])
    shown = in_use_stored(filters=ALL, now=NOW + CARDS_STALE_AFTER - timedelta(seconds=1))
    assert queued == [] and shown.read_at == NOW and in_use(shown, "infer", "l40s") == (4, 8, 8)
    stale = NOW + CARDS_STALE_AFTER
    assert in_use(in_use_stored(filters=ALL, now=stale), "infer", "l40s") == (4, 8, 8)
    in_use_stored(filters=ALL, now=stale)
    assert queued == ["cards"]
    cache.delete(QUEUED_KEY.format(part="cards"))
    assert utilisation_refresh(part="cards", now=NOW + timedelta(minutes=1)) == {}
    chart = history_stored(filters=ALL, now=NOW, range_key="30d")
    assert chart.pending and chart.error is None and queued == ["cards", "30d"]


def test_a_failed_read_shows_its_error_and_when(fleet, admin, queued, no_http):
    """Prometheus down at the last attempt: the page says so with the attempt's time, the
    counts are unknown (—), never 0."""
    attempt = timezone.now() - timedelta(minutes=3)
    down = FakePrometheus(down=True)
    assert (
        "cannot reach Prometheus"
        in utilisation_refresh(part="cards", now=attempt, metrics=down)["cards"]
    )
    body = page(admin, "/dashboard/")
    at = timezone.localtime(attempt).strftime("%H:%M")
    assert "<strong>In use: not available.</strong> Prometheus could not be read: " in body
    assert f">{at}</time>, 3\xa0minutes ago" in body
    assert '<div class="value"><span class="muted">—</span></div><div class="label">in use now' in (
        body
    )
    assert queued == []


def test_the_refresh_is_a_registered_task_on_the_beat_schedule():
    entry = django_settings.CELERY_BEAT_SCHEDULE["dashboard-utilisation"]
    assert entry["task"] == DASHBOARD_UTILISATION in current_app.tasks
    assert entry["schedule"] == REFRESH_EVERY.total_seconds() == 120
