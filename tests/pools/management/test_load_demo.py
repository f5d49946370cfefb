"""``manage.py load_demo``: users, teams, pools and a fleet through the real importers; twice."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from itertools import pairwise

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from pools.inventory import selectors
from pools.inventory.models import Node, Pool
from pools.recurring.models import RecurringReservation
from pools.tenancy.models import Membership, Team

pytestmark = pytest.mark.django_db


def load_demo(capsys) -> str:
    call_command("load_demo")
    return capsys.readouterr().out


def created_counts(out: str) -> list[int]:
    return [int(n) for n in re.findall(r": (\d+) created,", out)]


def test_load_demo_twice_creates_nothing_the_second_time(capsys):
    first = load_demo(capsys)
    nodes = Node.objects.count()

    second = load_demo(capsys)

    assert sum(created_counts(first)) > 0
    counts = created_counts(second)
    assert counts and set(counts) == {0}
    assert " 0 rejected" in second and re.search(r"[1-9]\d* rejected", second) is None
    assert Node.objects.count() == nodes


def test_the_demo_data(capsys):
    load_demo(capsys)

    assert set(Pool.objects.values_list("slug", flat=True)) == {
        "train-slurm",
        "infer-k8s",
        "dev-4090",
        "burst-cloud",  # issue 35: the rented burst pool
    }
    assert list(Pool.objects.filter(burst=True).values_list("slug", flat=True)) == ["burst-cloud"]
    users = get_user_model().objects
    assert set(users.values_list("username", flat=True)) == {"admin", "alice", "bob"}
    for name in ("admin", "alice", "bob"):
        assert users.get(username=name).check_password("demo")
    admin = users.get(username="admin")
    assert admin.is_staff and admin.is_superuser
    assert set(Team.objects.values_list("slug", flat=True)) == {"nlp", "vision", "platform"}
    assert list(
        Membership.objects.order_by("team__slug").values_list(
            "team__slug", "user__username", "role"
        )
    ) == [("nlp", "alice", "member"), ("vision", "bob", "manager")]
    # pools.management.demo: 2 legacy Slurm nodes with 4 cards of GRES type "p100" each.
    assert selectors.unrecognised_model_list() == [
        {"raw_model_name": "p100", "model_candidates": [], "gpu_count": 8, "node_count": 2}
    ]
    # The course: 8 L40S every weekday 09:00-18:00 Europe/Berlin, twelve weeks from Monday.
    (course,) = RecurringReservation.objects.all()
    assert (course.team.slug, course.card_count, course.recurrence, course.time_zone) == (
        "nlp", 8, "weekday", "Europe/Berlin")  # fmt: skip
    assert course.first_date.weekday() == 0 and (course.last_date - course.first_date).days == 81
    # 6 lab captures + 14 training + 10 dev + 2 legacy + 14 inference + 2 burst nodes.
    assert Node.objects.count() == 48
    assert Node.objects.filter(pool__slug="infer-k8s").count() == 14
    assert Node.objects.filter(pool__slug="burst-cloud").count() == 2
    assert (
        Node.objects.filter(hostname__startswith="dev-4090d", gpus__gpu_model__slug="rtx4090d")
        .distinct()
        .count()
        == 2
    )


def test_the_demo_has_an_elastic_allocation_with_history(capsys):
    from pools.elastic.models import ElasticPolicy, ScaleEvent

    out = load_demo(capsys)
    policy = ElasticPolicy.objects.select_related("allocation__team").get()
    assert policy.allocation.team.slug == "vision"
    assert (policy.allocation.card_count, policy.ceiling_cards) == (4, 12)
    events = ScaleEvent.objects.filter(policy=policy)
    assert events.filter(action="up").exists() and events.filter(action="down").exists()
    assert all(4 <= e.cards_to <= 12 for e in events)
    assert "elastic allocation #" in out
    # issue 35: it bursts once - one run of decisions whose cards above 8 sit in the rented
    # burst pool, nothing there before or after it
    placed = list(
        events.order_by("effective_at", "id").values_list(
            "cards_to", "burst_cards_to", "burst_pool__slug"
        )
    )
    runs = "".join("b" if burst else "." for _, burst, _ in placed)
    assert runs.count("b") >= 1 and "b.b" not in runs and runs.strip(".").count(".") == 0
    assert {(cards - 8, pool) for cards, burst, pool in placed if burst} == {
        (burst, "burst-cloud") for _, burst, _ in placed if burst
    }
    assert "burst once: up to 2 card(s) in Burst (rented cloud)" in out


def test_demo_burst_once_is_the_first_run_above_the_home_pool():
    from types import SimpleNamespace

    from pools.management.demo import demo_burst_once

    # cards 6 -> 10 -> 12 -> 8 -> 10: the first run above 8 is 10, 12 (2, 4 in the burst pool);
    # the later 10 stays home (the pool had room again)
    changes = [SimpleNamespace(cards_to=n) for n in (6, 10, 12, 8, 10)]
    assert demo_burst_once(changes, home_cards=8) == [0, 2, 4, 0, 0]


def test_the_demo_elastic_history_is_what_the_loop_recorded_and_decided(capsys):
    """Three days of readings, one a minute; the events follow from them: the what-if of the
    allocation's own policy over its recorded readings (the demo has no Prometheus) decides
    exactly the demo's scale events, and the cards each reading records are the cards those
    events held. The demo traffic (pools.management.demo) peaks 09:00-12:00 and 14:00-17:00 UTC at
    7.5 cards' worth of work: up 4 -> 6 -> 8 -> 10 from 09:05 every 15 min (10 cards: 75 %, no
    longer above the threshold), down to 8 at 12:30 (2.6 cards' worth is 26 % of 10), up to
    10 at 14:05, down 10 -> 8 -> 6 -> 4 from 17:30 every 30 min."""
    from pools.elastic.models import ElasticPolicy, SignalReading
    from pools.elastic.services import elastic_whatif

    load_demo(capsys)
    policy = ElasticPolicy.objects.get()
    readings = list(SignalReading.objects.filter(policy=policy).order_by("read_at"))
    assert len(readings) == 3 * 24 * 60
    assert all(b.read_at - a.read_at == timedelta(minutes=1) for a, b in pairwise(readings))
    run = elastic_whatif(policy=policy, days=7, source="recorded")
    assert (run.source, run.samples) == ("recorded", len(readings))
    # the loop's own: platform's guarantee may hand cards back at the end (next test)
    events = list(policy.events.filter(source="loop").order_by("decided_at"))
    assert [(d.at, str(d.action), d.cards_from, d.cards_to) for d in run.result.events] == [
        (e.decided_at.timestamp(), e.action, e.cards_from, e.cards_to) for e in events
    ]
    # from the first midnight (UTC) on, every day is the same (before it, the history may
    # begin inside a peak: it depends on when the demo is loaded)
    first = readings[0].read_at.astimezone(UTC)
    midnight = first.replace(hour=0, minute=0) + timedelta(days=1)
    by_day = sorted(
        {(e.decided_at.astimezone(UTC).strftime("%H:%M"), e.cards_to)
         for e in events if e.decided_at >= midnight}
    )  # fmt: skip
    assert by_day == [("09:05", 6), ("09:20", 8), ("09:35", 10), ("12:30", 8), ("14:05", 10),
                      ("17:30", 8), ("18:00", 6), ("18:30", 4)]  # fmt: skip
    held = {r.read_at: r.cards_held for r in readings}
    for event in events:
        assert held[event.decided_at] == event.cards_to
    assert policy.cards_held == min(readings[-1].cards_held, 8)
    # applied as the demo pool's quota backend (the ResourceQuota) can: with no Kubernetes
    # connection, in the portal only, and the events say so
    assert {(e.applied, e.apply_note) for e in events} == {
        (False, "Portal only: no Kubernetes connection is configured.")
    }


def test_the_demo_what_if_sends_the_peaks_above_8_cards_to_the_burst_pool(capsys):
    """The inference pool is full now: 36 usable L40S (40, less one node of 4 down) hold
    nlp's 8, vision's floor of 4 and platform's 20, leaving 4 to lend, so vision's home pool
    holds 4 + 4 = 8 of its cards (any it borrowed above 8 were handed back to platform's
    guarantee). The history holds 10 cards at each peak (09:35-12:30 and 14:05-17:30 UTC):
    in the what-if the cards above 8 go to the burst pool, card-minute for card-minute of the
    readings (each holds its cards until the next)."""
    from decimal import ROUND_HALF_UP, Decimal

    from pools.elastic.models import ElasticPolicy, SignalReading
    from pools.elastic.services import elastic_burst_whatif, elastic_whatif

    out = load_demo(capsys)
    assert "inference pool: platform holds 20 L40S until" in out
    policy = ElasticPolicy.objects.get()
    assert policy.cards_held <= 8
    readings = list(SignalReading.objects.filter(policy=policy).order_by("read_at"))
    above = sum(max(0, r.cards_held - 8) for r in readings[:-1])  # card-minutes
    assert above >= 2 * (175 + 205)  # at least one whole day's two peaks in three days
    found = elastic_burst_whatif(
        policy=policy, run=elastic_whatif(policy=policy, days=7, source="recorded")
    )
    assert (found["burst_pool"], found["home_cards"]) == ("burst-cloud", 8)
    hours = found["money"]["with_burst"]["burst_pool_card_hours"]
    assert hours == (Decimal(above) / 60).quantize(Decimal("0.001"), ROUND_HALF_UP)


def test_load_demo_records_a_healthy_and_an_overloaded_serving_allocation(capsys):
    """Two serving allocations with rollups from their start: vision's vLLM endpoint keeps a
    short queue and room in its KV cache; nlp's SGLang serving queues tens of requests at the
    peaks with a full KV cache, and its free framebuffer falls through the days."""
    from pools.serving.models import ServingRollup

    out = load_demo(capsys)
    assert re.search(r"serving rollups: [1-9]\d* rows", out)
    rows = {
        slug: list(
            ServingRollup.objects.filter(
                allocation__team__slug=slug, allocation__pool__slug="infer-k8s"
            ).order_by("bucket_start")
        )
        for slug in ("nlp", "vision")
    }
    healthy, troubled = rows["vision"], rows["nlp"]
    assert {r.engine for r in healthy} == {"vllm"} and {r.engine for r in troubled} == {"sglang"}
    assert max(r.requests_waiting for r in healthy) < 5
    assert max(r.kv_cache_usage_pct for r in healthy) < 80
    assert max(r.requests_waiting for r in troubled) > 20
    assert max(r.kv_cache_usage_pct for r in troubled) == 100
    assert troubled[0].fb_free_mib > 2 * troubled[-1].fb_free_mib
    # L40S are PCIe cards without NVLink: its series are missing, so those stay unknown
    nvlink = ["nvlink_tx_bytes_s: DCGM_FI_PROF_NVLINK_TX_BYTES",
              "nvlink_rx_bytes_s: DCGM_FI_PROF_NVLINK_RX_BYTES"]  # fmt: skip
    assert all(r.ttft_p95_s is not None and r.missing == nvlink for r in healthy + troubled)
    assert {r.nvlink_bytes_s for r in healthy + troubled} == {None}
    # Tokens come from the sizing engine at each bucket's batch (vision's on the cards its
    # scale events held), so calibration finds the healthy service as sized; nlp's SGLang
    # loses up to 40 % of its peak-hour work to retractions and reads below.
    from pools.serving.models import ServingCalibrationDay

    days = ServingCalibrationDay.objects.select_related("allocation__team")
    vision = [d for d in days if d.allocation.team.slug == "vision"]
    nlp = [d for d in days if d.allocation.team.slug == "nlp"]
    assert vision and nlp
    assert all(0.95 <= d.ratio <= 1.05 and d.position == "inside" for d in vision)
    assert max(d.ratio for d in nlp) <= 1.05 and min(d.ratio for d in nlp) < 0.9
    before = ServingRollup.objects.count()
    load_demo(capsys)
    assert ServingRollup.objects.count() == before
