"""The Serving panel of an allocation: the stored signals as small charts over 24 h or 7 d, the
newest values (unknown ones named), and this month's tokens per card-hour and busy share. One
URL: the whole page, or the ``panel`` fragment the request page loads with htmx."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.http import Http404
from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import patch_vary_headers

from pools.capacity.selectors import allocation_list
from pools.serving import selectors
from pools.serving.efficiency import Usage
from pools.serving.precision import SHOWN_PLACES, shown_number, signal_shown
from pools.web.numbers import grouped

# (chart title, unit, [(field, label, scale)]); token and event counts per bucket become rates
CHARTS = (
    ("Requests", "requests", [("requests_running", "running", 1),
                              ("requests_waiting", "waiting", 1)]),
    ("KV cache and prefix hits", "%", [("kv_cache_usage_pct", "KV cache used", 1),
                                       ("prefix_cache_hit_pct", "prefix-cache hits", 1)]),
    ("Time to first token", "s", [("ttft_p50_s", "p50", 1), ("ttft_p95_s", "p95", 1)]),
    ("Inter-token latency (TPOT)", "ms", [("itl_p50_s", "p50", 1000), ("itl_p95_s", "p95", 1000)]),
    ("End-to-end latency", "s", [("e2e_p50_s", "p50", 1), ("e2e_p95_s", "p95", 1)]),
    ("Tokens per second", "tok/s", [("prompt_tokens", "input", "rate"),
                                    ("generation_tokens", "output", "rate")]),
    ("GPU activity", "%", [("gpu_util_pct", "utilisation", 1), ("sm_active_pct", "SM active", 1),
                           ("dram_active_pct", "DRAM active", 1)]),
    ("Framebuffer", "GiB", [("fb_free_mib", "free", 1 / 1024), ("fb_used_mib", "used", 1 / 1024)]),
    ("Preemptions and failures", "per min", [("preemptions", "preemptions", "per_min"),
                                             ("requests_failed", "failed requests", "per_min")]),
)  # fmt: skip
CURRENT = (
    ("requests_running", "Requests running", "", 1, 1),
    ("requests_waiting", "Requests waiting", "", 1, 1),
    ("kv_cache_usage_pct", "KV cache used", "%", 1, 0),
    ("prefix_cache_hit_pct", "Prefix-cache hits", "%", 1, 0),
    ("ttft_p50_s", "TTFT p50", "s", 1, 3),
    ("ttft_p95_s", "TTFT p95", "s", 1, 3),
    ("itl_p50_s", "TPOT / ITL p50", "ms", 1000, 1),
    ("itl_p95_s", "TPOT / ITL p95", "ms", 1000, 1),
    ("e2e_p95_s", "End-to-end p95", "s", 1, 2),
    ("generation_tokens", "Output", "tok/s", 1 / 300, 0),
    ("prompt_tokens", "Input", "tok/s", 1 / 300, 0),
    ("preemptions", "Preemptions", "in 5 min", 1, 0),
    ("requests_failed", "Failed requests", "in 5 min", 1, 0),
    ("gpu_util_pct", "GPU utilisation", "%", 1, 0),
    ("sm_active_pct", "SM active", "%", 1, 0),
    ("dram_active_pct", "DRAM active", "%", 1, 0),
    ("fb_free_mib", "Framebuffer free", "GiB", 1 / 1024, 1),
    ("temperature_c", "Temperature (max)", "°C", 1, 0),
    ("xid_last", "Last XID", "", 1, 0),
    ("nvlink_bytes_s", "NVLink", "MB/s", 1 / 1e6, 0),
)


def _allocation(request, pk: int):
    try:
        return allocation_list(user=request.user).get(pk=pk)
    except Exception:  # DoesNotExist or a bad id: never say whether it exists
        raise Http404("No such allocation.") from None


def allocation_serving(request, pk: int):
    allocation = _allocation(request, pk)
    span = request.GET.get("span", "24h")
    if span not in selectors.SPANS:
        span = "24h"
    now = timezone.now()
    state = selectors.serving_state(now=now)
    current = selectors.serving_current(allocation_ids=[allocation.pk], state=state).get(
        allocation.pk
    )
    points = selectors.serving_series(allocation_id=allocation.pk, span=span, now=now)
    month_start = _billing_month_start(now)
    usage: Usage | None = selectors.serving_usage(
        allocation_ids=[allocation.pk], start=month_start, end=now + timedelta(minutes=5)
    ).get(allocation.pk)
    # no rollup ever named it: one sentence, not twenty "unknown" under the fleet's newest five
    # minutes (a training allocation, one not started, one ended before the rollups)
    stored = (
        current is not None
        or bool(points)
        or usage is not None
        or selectors.serving_stored(allocation_id=allocation.pk)
    )
    context = {
        "allocation": allocation,
        "span": span,
        "spans": list(selectors.SPANS),
        "state": state,
        "stored": stored,
        "current": _current_rows(current),
        "missing": current["missing"] if current else [],
        "notes": current["notes"] if current else [],
        "engine": current["engine"] if current else "",
        "charts": _charts(points) if points else None,
        "usage": usage,
        "calibration": selectors.serving_calibration(allocation_id=allocation.pk),
    }
    template = "pools/serving/allocation.html"
    response = render(request, f"{template}#panel" if request.htmx else template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _billing_month_start(now: datetime) -> datetime:
    """The first local midnight of ``now``'s month in ``settings.BILLING_TIME_ZONE``: "this
    month" is the month the statement, the team dashboard and their CSVs count (billing's
    ``month_bounds``), not the UTC month (in New York that counted 1 Nov 00:00-04:00 UTC,
    October's, in November's held card-hours)."""
    zone = ZoneInfo(settings.BILLING_TIME_ZONE or "UTC")
    local = now.astimezone(zone)
    return datetime(local.year, local.month, 1, tzinfo=zone).astimezone(UTC)


def _current_rows(row: dict | None) -> list[dict]:
    out = []
    for field, label, unit, scale, places in CURRENT:
        value = None if row is None else row.get(field)
        if value is not None and field in SHOWN_PLACES:
            # rounded where the dashboard's table and its CSV round it, then scaled exactly (a
            # Decimal × 1 or 1000; TPOT 0.01015 s: 0.0102 s there, 10.2 ms here, not 10.1 from
            # the float's 10.149999… ms)
            value = signal_shown(field, value)
        out.append(
            {
                "label": label,
                "unit": unit,
                "value": None if value is None else _shown(value * scale, places),
            }
        )
    return out


def _shown(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, rounded as the dashboards and their CSVs round it
    (:func:`pools.serving.precision.shown_number`), thousands grouped as every page groups them
    (:func:`pools.web.numbers.grouped`: ``1 843``, ``40.4``)."""
    return grouped(shown_number(value, places), places)


def _factor(scale, seconds: int) -> float:
    """A count over ``seconds`` as a rate (per second or per minute), or a plain scale."""
    return {"rate": 1 / seconds, "per_min": 60 / seconds}.get(scale, scale)


def _charts(points: list[dict]) -> dict:
    """Chart.js data: shared x labels (ISO bucket starts) and one entry per chart."""
    labels = [p["at"].isoformat() for p in points]
    charts = []
    for title, unit, fields in CHARTS:
        sets = []
        for field, label, scale in fields:
            # 4 places: TTFT in seconds keeps its stored 0.1 ms (0.7975 s, not 0.797)
            values = [
                None if p[field] is None else round(p[field] * _factor(scale, p["seconds"]), 4)
                for p in points
            ]
            sets.append({"label": label, "data": values})
        if any(v is not None for s in sets for v in s["data"]):
            charts.append({"title": title, "unit": unit, "sets": sets})
    return {"labels": labels, "charts": charts}
