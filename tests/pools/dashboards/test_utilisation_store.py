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


def test_no_page_of_the_dashboard_makes_an_http_request(fleet, admin, queued, no_http, monkeypatch):
    """Before any reading: the page, each chart range, the heatmap and the CSVs answer at once,
    saying "being read" (never 0), and queue each part once however often they are viewed;
    after the worker's read they show it, still without a request to Prometheus. The clock
    stands at 12:02, inside a step of every chart: a step closing between the read and the
    views (at :00 or :30 on the wall clock) would rightly queue a chart again."""
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW + timedelta(minutes=2))
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


def test_the_30_day_chart_ends_at_utc_midnight_and_the_others_at_their_step():
    """At 2026-11-30 12:07 UTC: the 24 h chart ends at 12:05 (5-min steps), 7 d at 12:00
    (30 min), 30 d at 00:00 that day; at 23:59:59 the 30-day end is still 30 Nov 00:00, at
    1 Dec 00:00 it moves to 1 Dec 00:00. Its 361 points still start on a 2-hour step:
    31 Oct 00:00 (30 days before 30 Nov)."""
    at = NOW + timedelta(minutes=7)
    midnight = NOW.replace(hour=0)
    assert utilisation.history_end(at, "24h") == NOW + timedelta(minutes=5)
    assert utilisation.history_end(at, "7d") == NOW
    assert utilisation.history_end(at, "30d") == midnight
    assert utilisation.history_end(midnight + timedelta(hours=24, seconds=-1), "30d") == midnight
    assert utilisation.history_end(midnight + timedelta(hours=24), "30d") == midnight + timedelta(
        days=1
    )
    reading = utilisation.history_reading_read(now=at, range_key="30d", metrics=FakePrometheus())
    assert (reading.start, reading.end) == (midnight - timedelta(days=30), midnight)
    assert reading.timestamps[0].isoformat() == "2026-10-31T00:00:00+00:00"
    assert len(reading.timestamps) == 361


def test_beat_rereads_a_watched_30_day_chart_once_a_day(fleet):
    """Beat every 2 minutes from 30 Nov 12:00 to 1 Dec 12:00 UTC (721 runs) with only the
    30-day chart watched: read at 12:00 (nothing stored) and when the day rolls over at
    1 Dec 00:00: 2 reads, 8 range queries (4 each: sum and count of PROF and DEV).
    Re-read at every closed 2-hour step it was 13 reads (12:00, 14:00, …, 12:00)."""
    fake = fleet["fake"]
    reads = []
    for tick in range(721):
        at = NOW + tick * REFRESH_EVERY
        cache.set(WATCHED_KEY.format(part="30d"), True)  # a page shows it all day
        if utilisation_refresh(now=at, metrics=fake):
            reads.append(at.strftime("%d %H:%M"))
    assert reads == ["30 12:00", "01 00:00"]
    ranged = [q for q in fake.queries if "modelName, model_name) (avg by (" in q]
    assert len(ranged) == 8  # sum and count, PROF and DEV: 4 a read


def test_a_30_day_chart_a_prometheus_failed_is_tried_again_at_its_next_step(fleet):
    """Prometheus down at 12:10: the failed 30-day reading is tried again when the next
    2-hour step closes (14:00), not the next day; once read, not again that day."""
    cache.set(WATCHED_KEY.format(part="30d"), True)
    tried = NOW + timedelta(minutes=10)
    assert "cannot reach Prometheus" in utilisation_refresh(
        now=tried, metrics=FakePrometheus(down=True)
    ).get("30d", "")
    assert (
        utilisation_refresh(now=NOW + timedelta(hours=2, seconds=-1), metrics=fleet["fake"]) == {}
    )
    two = NOW + timedelta(hours=2)
    assert utilisation_refresh(now=two, metrics=fleet["fake"]) == {"30d": "read"}
    assert utilisation_refresh(now=NOW + timedelta(hours=4), metrics=fleet["fake"]) == {}


def test_the_30_day_chart_says_it_is_renewed_once_a_day(fleet, admin, queued, no_http):
    """The caption under the chart: 30 d "one point per 2 h, renewed once a day (UTC)"; 24 h
    "one point per 5 min" and nothing about renewing (every step)."""
    now = timezone.now()
    fake = FakePrometheus(series=fleet_series(now))
    for part in ("24h", "30d"):
        utilisation_refresh(part=part, now=now, metrics=fake)
    month = page(admin, "/dashboard/?part=utilisation&range=30d")
    day = page(admin, "/dashboard/?part=utilisation&range=24h")
    assert "one point per 2 h, renewed once a day (UTC): each card" in month
    assert "one point per 5 min: each card" in day and "renewed" not in day
