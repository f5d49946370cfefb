"""Serving signals leave the portal rounded to their unit's precision
(``pools/serving/precision.py``), not with the stored floats' binary noise: the dashboard's
serving CSV and ``/api/v1/serving/`` (newest values and series)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory

from pools.common.choices import AllocationStatus
from pools.serving.fold import SIGNAL_FIELDS
from pools.serving.models import ServingRollup
from pools.serving.precision import PLACES, signal_rounded
from pools.serving.services import bucket_floor

pytestmark = pytest.mark.django_db

NOISY = {
    "kv_cache_usage_pct": 32.800000000000004,  # -> 32.8 (1 place)
    "ttft_p95_s": 0.123456789,  # -> 0.1235 (4 places: 0.1 ms)
    "requests_waiting": 2.3333333333333335,  # -> 2.33 (a mean: 2 places)
    "generation_tokens": 2999.9999999999995,  # -> 3000.0 (a count: 1 place)
    "gpu_util_pct": 71.39999999999999,  # -> 71.4
    "itl_p95_s": 0.0123,  # unchanged
}
ROUNDED = {
    "kv_cache_usage_pct": 32.8,
    "ttft_p95_s": 0.1235,
    "requests_waiting": 2.33,
    "generation_tokens": 3000.0,
    "gpu_util_pct": 71.4,
    "itl_p95_s": 0.0123,
}


def test_every_signal_has_a_precision():
    assert set(PLACES) == set(SIGNAL_FIELDS)
    assert signal_rounded("xid_last", 79.0) == 79.0 and signal_rounded("ttft_p50_s", None) is None


@pytest.fixture
def noisy(team):
    now = timezone.now()
    allocation = AllocationFactory(
        team=team, status=AllocationStatus.ACTIVE, card_count=2,
        starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1),
    )  # fmt: skip
    ServingRollup.objects.create(
        allocation=allocation, bucket_start=bucket_floor(now) - timedelta(minutes=5),
        cards_held=2, engine="vllm", **NOISY,
    )  # fmt: skip
    return allocation


def test_the_api_answers_rounded_values(api_as, team_member, noisy):
    client = api_as(team_member)
    values = client.get(f"/api/v1/serving/{noisy.pk}/").json()["values"]
    (point,) = client.get(f"/api/v1/serving/{noisy.pk}/series/?span=24h").json()["points"]
    body = client.get(f"/api/v1/serving/{noisy.pk}/").content.decode()

    assert {k: values[k] for k in ROUNDED} == ROUNDED
    assert {k: point[k] for k in ROUNDED} == ROUNDED
    assert "32.800000000000004" not in body and "0.123456789" not in body


def test_the_dashboard_serving_csv_is_rounded(admin_page, noisy):
    """The CSV writes each signal as the Serving table shows it (the API keeps the stored
    places, and the table rounds the value as the API answers it): KV cache and utilisation
    whole per cent (32.8 -> 33, 71.4 -> 71), TTFT whole ms (0.1235 s -> 0.124, half-up),
    waiting requests one decimal (2.33 -> 2.3); output tokens are no column of the table and
    keep their stored tenth."""
    response = admin_page.get("/dashboard/?export=serving-allocations")
    header, row = b"".join(response.streaming_content).decode().strip().splitlines()
    cells = dict(zip(header.split(","), row.split(","), strict=True))

    assert cells["kv_cache_usage_pct"] == "33"
    assert cells["ttft_p95_s"] == "0.124"
    assert cells["requests_waiting"] == "2.3"
    assert cells["output_tokens_5min"] == "3000.0"
    assert cells["gpu_util_pct"] == "71"


def test_the_calibration_api_answers_rounded_figures(api_as, team_member, noisy):
    """Figures as a mean and ratios leave them (demo: 35.28504901960784 tok/s per card,
    ratio 0.9986661743691772): concurrency 2 places, tok/s 1, factors and ratio 3."""
    from factories import ServedModelFactory, ServingCalibrationDayFactory

    allocation = noisy  # an allocation the API lists: one with a stored rollup
    ServedModelFactory(allocation=allocation)
    ServingCalibrationDayFactory(
        allocation=allocation, concurrency=2.6666666666666665,
        measured_tok_s_per_card=35.28504901960784, sized_tok_s_per_card=35.33217598152474,
        band_low_factor=0.7170000000000001, band_high_factor=1.4574652777777777,
        ratio=0.9986661743691772,
    )  # fmt: skip
    body = api_as(team_member).get(f"/api/v1/serving/{allocation.pk}/calibration/").json()

    (day,) = body["days"]
    assert {k: day[k] for k in ("concurrency", "measured_tok_s_per_card",
                                "sized_tok_s_per_card", "band_low_factor", "band_high_factor",
                                "ratio")} == {
        "concurrency": 2.67, "measured_tok_s_per_card": 35.3, "sized_tok_s_per_card": 35.3,
        "band_low_factor": 0.717, "band_high_factor": 1.457, "ratio": 0.999,
    }  # fmt: skip


def test_a_signal_the_newest_bucket_lacks_is_a_dash_on_the_page():
    """A Serving table row with this month's efficiency but no newest bucket (``now`` is
    ``{}``): the template hands the filter "" for the missing signal, which was a 500."""
    from pools.templatetags.portal import signal

    assert signal("", "requests_waiting") == "—"
    assert signal(None, "ttft_p95_s") == "—"
    assert signal(0.25, "requests_waiting") == "0.3"


def test_ttft_reads_in_seconds_on_the_panel_the_table_and_the_csv(admin_page, team):
    """One rollup, TTFT p95 0.7975 s and p50 0.2535 s (stored to 4 places): the admin
    dashboard's CSV, the team dashboard's Serving table and its CSV write p95 to whole ms in
    seconds, 0.798 (half-up); an allocation's panel says the same 0.798 s (it said 798 ms) and
    p50 0.254 s; its chart is in seconds too."""
    now = timezone.now()
    allocation = AllocationFactory(
        team=team, status=AllocationStatus.ACTIVE, card_count=2,
        starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1),
    )  # fmt: skip
    ServingRollup.objects.create(
        allocation=allocation, bucket_start=bucket_floor(now) - timedelta(minutes=5),
        cards_held=2, engine="vllm", ttft_p95_s=0.7975, ttft_p50_s=0.2535,
    )  # fmt: skip

    response = admin_page.get("/dashboard/?export=serving-allocations")
    header, row = b"".join(response.streaming_content).decode().strip().splitlines()
    assert dict(zip(header.split(","), row.split(","), strict=True))["ttft_p95_s"] == "0.798"
    team_page = admin_page.get(f"/teams/{team.slug}/dashboard/")
    assert '<td class="num">0.798 s</td>' in team_page.content.decode()
    team_csv = b"".join(admin_page.get(f"/teams/{team.slug}/dashboard/?export=serving")
                        .streaming_content).decode().strip().splitlines()  # fmt: skip
    assert dict(zip(*(line.split(",") for line in team_csv), strict=True))["ttft_p95_s"] == "0.798"
    panel = admin_page.get(f"/allocations/{allocation.pk}/serving/")
    html = panel.content.decode()
    assert "<dt>TTFT p95</dt><dd>0.798 <small>s</small></dd>" in html
    assert "<dt>TTFT p50</dt><dd>0.254 <small>s</small></dd>" in html
    assert " ms" not in html.split("TTFT p50")[1].split("</dd>")[0]
    (chart,) = [c for c in panel.context["charts"]["charts"] if c["title"] == "Time to first token"]
    assert chart["unit"] == "s"
    assert [s["data"] for s in chart["sets"]] == [[0.2535], [0.7975]]
