"""Elastic capacity at fleet size against a real Prometheus (issue #19, "Measured"); prints a table.

History, streamed to an OpenMetrics file and backfilled with ``promtool tsdb
create-blocks-from openmetrics`` before Prometheus starts (``scripts/services/prometheus.sh``):

- ``BENCH_ALLOCATIONS`` (2,000) namespaces ``team-0000`` ..., each an elastic allocation with two
  cards behind dcgm-exporter (``honorLabels: false``: the workload's namespace in
  ``exported_namespace``) and one vLLM pod (latency histogram sum/count, queue gauge, token
  counters), the last 40 minutes every 60 s; a quarter of them hot (util 90 %, 1.2 s: they
  scale up), a quarter cold (10 %: they scale down), the rest steady (50 %, 400 ms);
- ``team-whatif``: the same series for 30 days every 60 s, a daily peak 10:00-12:00 UTC.

Measured:

1. **one scaling pass**: utilisation, mean latency and request rate of every namespace over
   the last 35 minutes (the longest rule window plus a margin) in one
   :meth:`PrometheusAdapter.inference_signals` call (four range queries,
   ``pools.elastic.signals.SCAN_METRICS``), then one :func:`pools.elastic.policy.evaluate` and
   the newest reading (what the loop records) per allocation; wall seconds (p50 and max of
   ``BENCH_RUNS``), PromQL requests, decisions by action. Target < 5 s, queries independent of
   the number of allocations.
2. **30-day what-if** for one allocation: its utilisation and latency over 30 days at 60 s
   (chunked range queries narrowed to its namespace) and :func:`pools.elastic.whatif.replay`;
   target < 3 s.

Run: ``.venv/bin/python benchmarks/elastic.py`` (Debian's ``prometheus``/``promtool``). The
portal's database is not involved: the pass measures Prometheus and the decisions, which are
what grows with the fleet (the loop's own writes are one bulk INSERT of readings per pool).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pools.elastic.policy import ScalingPolicy, evaluate  # noqa: E402
from pools.elastic.signals import SCAN_METRICS, metric_samples, newest_reading  # noqa: E402
from pools.elastic.whatif import replay  # noqa: E402
from scheduler_adapters.prometheus import PrometheusAdapter  # noqa: E402

SCRIPT = ROOT / "scripts" / "services" / "prometheus.sh"
ALLOCATIONS = int(os.environ.get("BENCH_ALLOCATIONS", "2000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
# BENCH_WHATIF_DAYS=0 skips the what-if history (30 days of 2 h blocks take most of the backfill)
WHATIF_DAYS = int(os.environ.get("BENCH_WHATIF_DAYS", "30"))
STEP = 60
POLICY = ScalingPolicy(floor_cards=2, ceiling_cards=8, step_cards=2)


def _kind(index: int) -> tuple[float, float]:
    """(utilisation %, latency s) of allocation ``index``."""
    return [(90.0, 1.2), (10.0, 0.2), (50.0, 0.4), (50.0, 0.4)][index % 4]


def _write_history(path: Path, end: int) -> int:
    families = [
        "DCGM_FI_DEV_GPU_UTIL",
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:num_requests_waiting",
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total",
    ]
    recent = range(end - 40 * 60, end + 1, STEP)
    month = range(end - WHATIF_DAYS * 86_400 - 600, end + 1, STEP) if WHATIF_DAYS else range(0)
    lines = 0
    with path.open("w", encoding="utf-8") as out:
        for family in families:
            out.write(f"# HELP {family} {family}\n# TYPE {family} gauge\n")
            for index in range(ALLOCATIONS + (1 if WHATIF_DAYS else 0)):
                whatif = index == ALLOCATIONS
                ns = "team-whatif" if whatif else f"team-{index:04d}"
                stamps = month if whatif else recent

                def level(t: int, index=index, whatif=whatif) -> tuple[float, float]:
                    if whatif:
                        hour = (t % 86_400) / 3600
                        return (90.0, 1.2) if 10 <= hour < 12 else (20.0, 0.3)
                    return _kind(index)

                if family == "DCGM_FI_DEV_GPU_UTIL":
                    for gpu in (0, 1):
                        labels = (
                            f'namespace="gpu-operator",pod="dcgm-{index % 50}",'
                            f'UUID="GPU-{index:05d}-{gpu}",gpu="{gpu}",'
                            f'exported_namespace="{ns}",exported_pod="{ns}-vllm-{gpu}"'
                        )
                        rows = [f"{family}{{{labels}}} {level(t)[0]:g} {t}\n" for t in stamps]
                        out.writelines(rows)
                        lines += len(rows)
                    continue
                labels = f'namespace="{ns}",pod="{ns}-vllm-0",model_name="m"'
                total = 0.0
                rows = []
                for k, t in enumerate(stamps):
                    util, latency = level(t)
                    if family.endswith("_sum"):
                        total += 10 * STEP * latency if k else 0.0
                        value = f"{total:.1f}"
                    elif family.endswith("_count"):
                        value = str(10 * STEP * k)
                    elif family.endswith("waiting"):
                        value = "5" if util > 75 else "0"
                    elif "generation" in family:
                        value = str(100 * STEP * k)
                    else:
                        value = str(300 * STEP * k)
                    rows.append(f"{family}{{{labels}}} {value} {t}\n")
                out.writelines(rows)
                lines += len(rows)
        out.write("# EOF\n")
    return lines


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Counting(PrometheusAdapter):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = 0

    def query_range(self, *args, **kwargs):
        self.requests += 1
        return super().query_range(*args, **kwargs)


def main() -> None:
    end = int(time.time()) // 60 * 60 - 120
    workdir = Path(tempfile.mkdtemp(prefix="bench-elastic-"))
    history = workdir / "elastic.om"
    started = time.perf_counter()
    lines = _write_history(history, end)
    written_s = time.perf_counter() - started
    env = {**os.environ, "PROM_PORT": str(_free_port()), "PROM_DIR": str(workdir),
           "PROM_BACKFILL": str(history)}  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=1800
    )
    if result.returncode:
        sys.exit(result.stderr + result.stdout)
    backfill_s = time.perf_counter() - started
    url = f"http://127.0.0.1:{env['PROM_PORT']}"
    now = datetime.fromtimestamp(end, UTC)
    try:
        passes, requests, actions = [], 0, Counter()
        for _ in range(RUNS):
            metrics = Counting(url, timeout_s=60)
            t = time.perf_counter()
            signals = metrics.inference_signals(
                start=now - timedelta(minutes=35),
                end=now,
                step_s=STEP,
                metrics=SCAN_METRICS,  # what the loop reads
            )
            teams = [ns for ns in signals if ns.startswith("team-") and ns != "team-whatif"]
            decisions = [
                # the history gives every namespace two cards, both reporting
                evaluate(
                    POLICY,
                    metric_samples(signals[ns], cards_held=2),
                    cards_now=4,
                    now=float(end),
                )
                for ns in teams
            ]
            recorded = [newest_reading(signals[ns], cards_held=2) for ns in teams]
            assert all(r is not None and r.request_s is not None for r in recorded)
            passes.append(time.perf_counter() - t)
            requests = metrics.requests
            metrics.close()
            actions = Counter(str(d.action) for d in decisions)
        if not WHATIF_DAYS:
            return _report(lines, written_s, backfill_s, passes, requests, actions, None)
        metrics = Counting(url, timeout_s=60)
        t = time.perf_counter()
        month = metrics.inference_signals(
            start=now - timedelta(days=WHATIF_DAYS),
            end=now,
            step_s=STEP,
            namespaces=["team-whatif"],
            metrics=("util_pct", "cards_reporting", "latency_s"),
        )
        fetched_s = time.perf_counter() - t
        whatif = replay(POLICY, metric_samples(month["team-whatif"], cards_held=2))
        whatif_s = time.perf_counter() - t
        whatif_requests = metrics.requests
        metrics.close()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=60, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    _report(
        lines, written_s, backfill_s, passes, requests, actions,
        (fetched_s, whatif_s, whatif_requests, whatif),
    )  # fmt: skip


def _report(lines, written_s, backfill_s, passes, requests, actions, whatif_numbers) -> None:
    print(f"history: {lines:,} samples written in {written_s:.1f} s, "
          f"backfilled + started in {backfill_s:.1f} s")  # fmt: skip
    print("| measurement | value | target |")
    print("|---|---|---|")
    print(f"| scaling pass, {ALLOCATIONS} allocations, p50 | {statistics.median(passes):.2f} s "
          "| < 5 s |")  # fmt: skip
    print(f"| scaling pass, max of {RUNS} | {max(passes):.2f} s | < 5 s |")
    print(f"| PromQL requests per pass | {requests} | independent of the fleet |")
    print(f"| decisions | {dict(sorted(actions.items()))} | 1/4 up, 1/4 down |")
    if whatif_numbers is None:
        return
    fetched_s, whatif_s, whatif_requests, whatif = whatif_numbers
    print(f"| {WHATIF_DAYS}-day what-if (fetch {fetched_s:.2f} s + replay) | {whatif_s:.2f} s "
          "| < 3 s |")  # fmt: skip
    print(f"| what-if PromQL requests | {whatif_requests} | |")
    print(f"| what-if result | {whatif.scale_ups} ups, {whatif.scale_downs} downs, "
          f"{whatif.min_cards}-{whatif.max_cards} cards, {whatif.card_hours:.1f} card-hours "
          f"({whatif.saved_card_hours:.1f} fewer than {whatif.fixed_cards} fixed), "
          f"{whatif.breach_minutes:.0f} breach min | |")  # fmt: skip


if __name__ == "__main__":
    main()
