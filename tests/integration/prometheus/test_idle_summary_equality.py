"""The idle scan's reduced reading (:meth:`PrometheusAdapter.gpu_usage_summary`: one value per
device and reduction, computed by Prometheus) gives the very verdicts of the per-step reading
(:meth:`PrometheusAdapter.gpu_usage`, 31+ values per device, judged in Python), on a real
Prometheus holding seeded random dcgm-exporter history: every label trap, scrape intervals
that are not the 60 s step (15 to 90 s, jittered), gaps, stale exporters, ``NaN``/``+Inf``
samples, time-sliced pods (two series of one device), exporter rollouts (the ``Hostname``
changes), MIG cards with a parent ``DEV_GPU_UTIL`` of 0, consumer cards without profiling
metrics, profiling series with holes where ``DEV_GPU_UTIL`` goes on, lower-case metric names,
values at the 30 % threshold; windows of 10, 30 and 60 min ending on and off the minute."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from integration.prometheus.server import backfilled_prometheus, openmetrics

from pools.reclamation.evaluate import (
    Thresholds,
    Verdict,
    evaluate_group,
    evaluate_instance,
    instance_verdict,
    utilisation_sparkline,
)
from scheduler_adapters.prometheus import PrometheusAdapter

pytestmark = pytest.mark.integration

SEED = 20261205
HISTORY_S = 100 * 60
WINDOWS = (600, 1800, 3600)
PROF, DEV, FB = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"


def _history(end: int, rng: random.Random) -> tuple[str, int]:
    """OpenMetrics text of 96 random devices (some of several series; the last 6 one series
    each, in namespace ``team-clean``) and their count."""
    families: dict[str, list[str]] = defaultdict(list)

    def labels(**pairs: str) -> str:
        return ",".join(f'{k}="{v}"' for k, v in pairs.items() if v is not None)

    def series(metric, label_text, value_at, *, begin, stop, interval, offset):
        t = begin + offset
        while t <= stop:
            value = value_at(t)
            if value is not None:
                families[metric].append(f"{metric}{{{label_text}}} {value} {t}")
            t += interval

    def regime():
        kind = rng.choice(["busy", "idle", "quiet", "edge", "exact", "mixed"])
        return {
            "busy": lambda: round(rng.uniform(0.3, 1.0), 3),
            "idle": lambda: round(rng.uniform(0.0, 0.04), 3),
            "quiet": lambda: 0.0,
            "edge": lambda: round(rng.uniform(0.28, 0.32), 3),
            "exact": lambda: 0.3,
            "mixed": lambda: rng.choice([0.0, 0.9, round(rng.uniform(0, 1), 3)]),
        }[kind]

    def presence(begin: int):
        """A sample at t or not: holes, a stale tail, a late start, NaN and +Inf now and then."""
        hole_at = rng.randint(begin, end) if rng.random() < 0.3 else None
        hole_len = rng.choice([120, 300, 360, 900, 1500])
        stale = (
            rng.choice([0, 200, 300, 420, 610, 630, 650, 700, 1200]) if rng.random() < 0.3 else 0
        )
        late = rng.choice([0, 0, 0, 900, 2400, 3300]) if rng.random() < 0.2 else 0
        odd = rng.random() < 0.15

        def keep(t: int, value):
            if hole_at is not None and hole_at <= t < hole_at + hole_len:
                return None
            if t > end - stale or t < end - HISTORY_S + late:
                return None
            if odd and rng.random() < 0.08:
                return rng.choice(["NaN", "+Inf"])
            return value

        return keep

    begin = end - HISTORY_S

    def device(i: int, clean: bool = False) -> None:
        kind = rng.choice(
            ["plain"] * 6
            + ["sliced", "rollout", "mig", "consumer", "prof_holes", "device", "lower", "old"]
        )
        if clean:  # a namespace of one-series cards: the scan's sparkline from its sum
            kind = "plain"
        uuid = f"GPU-{i:04d}-{rng.randrange(16**6):06x}"
        namespace = "team-clean" if clean else rng.choice(["team-a", "team-b", "team-c", "team-d"])
        host = f"node-{i // 8:02d}"
        honor = rng.random() < 0.6
        interval = rng.choice([15, 30, 45, 60, 60, 90])
        offset = rng.randrange(interval)
        keep = presence(begin)
        if clean:  # no gap, no NaN
            keep = lambda t, value: value  # noqa: E731
        util, fb_level = regime(), rng.choice([0, 0, 40, 64, 65, 900, 30000])
        with_fb = rng.random() < 0.9

        def base(pod=None, hostname=host, gi=None, profile=None, kind=kind, uuid=uuid, **extra):
            ns_labels: dict[str, str | None]
            if kind == "device":
                ns_labels = {}
            elif kind == "old":  # --use-old-namespace
                ns_labels = {"pod_namespace": namespace, "pod_name": pod or f"{namespace}-0"}
            elif honor:
                ns_labels = {"namespace": namespace, "pod": pod or f"{namespace}-0"}
            else:
                ns_labels = {
                    "exported_namespace": namespace,
                    "exported_pod": pod or f"{namespace}-0",
                    "namespace": "gpu-operator",
                    "pod": f"dcgm-exporter-{i:03d}",
                }
            host_key = "hostname" if i % 3 else "Hostname"
            return labels(
                gpu=str(i % 8),
                **({"uuid": uuid} if kind == "old" else {"UUID": uuid}),
                modelName="NVIDIA A100-SXM4-80GB",
                **{host_key: hostname},
                GPU_I_ID=gi,
                GPU_I_PROFILE=profile,
                **ns_labels,
                **extra,
                job="dcgm",
                instance=f"10.0.{i}.1:9400",
            )

        def emit(metric, text, value_at=None, **timing):
            value_at = value_at or (lambda t: keep(t, util()))
            timing = {"begin": begin, "stop": end, "interval": interval, "offset": offset} | timing
            series(metric, text, value_at, **timing)

        def fb_of(t):
            return keep(t, fb_level)

        if kind in ("plain", "device", "old"):
            emit(PROF, base())
            emit(DEV, base(), lambda t: keep(t, round(util() * 100)))
            if with_fb:
                emit(FB, base(), fb_of)
        elif kind == "lower":
            emit(PROF.lower(), base())
            if with_fb:
                emit(FB.lower(), base(), fb_of)
        elif kind == "sliced":  # two pods on one card: the device's value copied to each
            for pod in (f"{namespace}-x", f"{namespace}-y"):
                emit(PROF, base(pod=pod))
                emit(FB, base(pod=pod), fb_of)
        elif kind == "rollout":  # the exporter pod (its Hostname) changes mid-history
            switch = rng.randint(end - 3000, end - 200)
            emit(PROF, base(hostname=f"dcgm-old-{i}"), stop=switch)
            emit(FB, base(hostname=f"dcgm-old-{i}"), fb_of, stop=switch)
            emit(PROF, base(hostname=f"dcgm-new-{i}"), begin=switch + 30)
            emit(FB, base(hostname=f"dcgm-new-{i}"), fb_of, begin=switch + 30)
        elif kind == "mig":
            emit(DEV, base(), lambda t: keep(t, 0))  # unsupported under MIG: reads 0
            for gi in ("1", "2"):
                emit(PROF, base(gi=gi, profile="3g.40gb"))
                emit(FB, base(gi=gi, profile="3g.40gb"), fb_of)
        elif kind == "consumer":  # no profiling metrics at all
            emit(DEV, base(), lambda t: keep(t, round(util() * 100)))
            emit(FB, base(), fb_of)
        else:  # prof_holes: profiling stops for a while, DEV_GPU_UTIL goes on
            gap = rng.randint(end - 3000, end - 600)
            emit(PROF, base(), lambda t: None if gap <= t < gap + 600 else keep(t, util()))
            emit(DEV, base(), lambda t: keep(t, round(util() * 100)))
            emit(FB, base(), fb_of)

    for i in range(90):
        device(i)
    for i in range(90, 96):
        device(i, clean=True)
    for lines in families.values():  # OpenMetrics: each series' samples in time order
        lines.sort(key=lambda line: (line.rsplit(" ", 2)[0], float(line.rsplit(" ", 1)[1])))
    return openmetrics(dict(families)), 96


@pytest.fixture(scope="module")
def random_prometheus(tmp_path_factory):
    end = int(time.time()) // 60 * 60 - 60
    history, _ = _history(end, random.Random(SEED))
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus-random"), history) as url:
        yield url, end


@pytest.mark.parametrize("off_minute_s", [0, 17, 59])
def test_reduced_verdicts_equal_the_per_step_verdicts(random_prometheus, off_minute_s):
    url, end = random_prometheus
    now = datetime.fromtimestamp(end - off_minute_s, tz=UTC)
    adapter = PrometheusAdapter(url, timeout_s=30)
    per_step = adapter.gpu_usage(start=now - timedelta(seconds=max(WINDOWS)), end=now, step_s=60)
    # as the scan asks: its policies' lowest coverage and their thresholds
    reduced = adapter.gpu_usage_summary(
        end=now, windows_s=WINDOWS, step_s=60, min_coverage=0.9, near_pct=[30.0]
    )
    adapter.close()
    old = {d.key: d for d in per_step}
    new = {d.key: d for d in reduced}
    assert len(old) == len(per_step) and len(new) == len(reduced)
    assert set(new) == set(old)
    at = now.timestamp()
    seen: Counter = Counter()
    for key, o in old.items():
        n = new[key]
        for name in ("hostname", "gpu", "model_name", "mig_profile", "pods", "hpc_jobs"):
            assert getattr(n, name) == getattr(o, name), (key, name)
        assert n.util_source == o.util_source, key
        for window in WINDOWS:
            t = Thresholds(window_s=window)
            a = evaluate_instance(o.util_pct, o.fb_used_mib, end=at, t=t)
            b = instance_verdict(n.stats(end=at, window_s=window, step_s=60), end=at, t=t)
            assert b[0] == a[0] and b[1] == a[1], (key, window, a, b)  # verdict, certainly idle
            assert (b[2] is None) == (a[2] is None), (key, window)
            if a[2] is not None:  # the mean: sums in another order may differ in the last bit
                assert b[2] == pytest.approx(a[2], rel=1e-12), (key, window)
            assert (b[3], b[4], b[5]) == (a[3], a[4], a[5]), (key, window)  # peak, cover, MiB
            if a[0] == Verdict.UNKNOWN:  # else "mean x %", whose last digit may round apart
                assert b[6] == a[6], (key, window)
            seen[a[0]] += 1
            seen["certain"] += a[1]
            seen[a[6].split(" ")[0]] += 1  # "samples", "newest", "no", "mean"
    # the history exercises every verdict and every reason for unknown
    assert seen[Verdict.BUSY] and seen[Verdict.IDLE] and seen["certain"], seen
    assert seen["samples"] and seen["newest"] and seen["no"], seen
    per_step_read = 0
    for namespace in {k[2] for k in old}:
        t = Thresholds()
        mine_old = [d for d in per_step if d.namespace == namespace]
        mine_new = [d for d in reduced if d.namespace == namespace]
        a = evaluate_group(mine_old, held=len({d.uuid for d in mine_old}), end=at, t=t)
        b = evaluate_group(mine_new, held=len({d.uuid for d in mine_new}), end=at, t=t)
        assert (a.verdict, a.cards_busy, a.cards_known, a.certainly_idle) == (
            b.verdict,
            b.cards_busy,
            b.cards_known,
            b.certainly_idle,
        )
        per_step_read += sum(not d.reduced for d in mine_new)
    assert per_step_read < len(reduced), "most devices reduced by Prometheus"


def test_namespace_sparkline_equals_the_per_card_one(random_prometheus):
    """The scan's sparkline of a namespace whose cards all have profiling metrics, from two
    aggregated range queries, is the per-card computation on the per-step reading, to the
    0.1 % it is rounded to (Prometheus sums the cards in another order, so a mean at
    exactly x.x5 may round the other way)."""
    url, end = random_prometheus
    now = datetime.fromtimestamp(end - 17, tz=UTC)
    t = Thresholds()
    adapter = PrometheusAdapter(url, timeout_s=30)
    per_step = adapter.gpu_usage(start=now - timedelta(seconds=t.window_s), end=now, step_s=60)
    lines = adapter.utilisation_by_namespace(
        start=now - timedelta(seconds=t.window_s), end=now, step_s=60
    )
    summary = adapter.gpu_usage_summary(end=now, windows_s=[t.window_s], min_coverage=0.9)
    adapter.close()
    compared = 0
    for namespace, line in lines.items():
        mine = [d for d in per_step if d.namespace == namespace and d.util_source]
        if not all(
            d.util_source == "prof" and d.reduced and d.gpu_instance_id is None
            for d in summary
            if d.namespace == namespace and d.util_source
        ):
            continue  # the scan's condition: else it reads the cards per step
        expected = utilisation_sparkline(mine, end=now.timestamp(), t=t)
        assert [p[0] for p in expected] == [s.timestamp for s in line]
        # expected is rounded to 0.1 %: within half of that (and a float's last bit)
        assert [p[1] for p in expected] == [pytest.approx(s.value, abs=0.05 + 1e-9) for s in line]
        compared += 1
    assert compared


def test_namespace_lines_of_some_namespaces_are_theirs_among_all(random_prometheus):
    """The idle scan asks the namespace lines of its idle groups' namespaces only: those
    lines are the fleet-wide answer's lines of the same namespaces (to a float's last bits:
    Prometheus may add the series in another order), whichever
    label names the namespace (``exported_namespace``, ``pod_namespace``, ``namespace``); a
    name that is a regex of others (``.`` for ``-``), absent, or the exporter's own namespace
    selects nothing."""
    url, end = random_prometheus
    now = datetime.fromtimestamp(end - 17, tz=UTC)
    adapter = PrometheusAdapter(url, timeout_s=30)
    window = {"start": now - timedelta(seconds=1800), "end": now, "step_s": 60}
    every = adapter.utilisation_by_namespace(**window)
    some = sorted(every)[::2]
    assert len(some) >= 3
    decoys = {n.replace("-", ".") for n in sorted(every)[1::2]} | {"team-absent"}
    # the exporter's own namespace when Prometheus renamed the workload's (honorLabels:
    # false): its series are their exported namespace's, never counted twice
    decoys.add("gpu-operator")
    asked = adapter.utilisation_by_namespace(**window, namespaces=[*some, *decoys])
    none = adapter.utilisation_by_namespace(**window, namespaces=[])
    adapter.close()
    assert sorted(asked) == some
    for namespace in some:
        assert [s.timestamp for s in asked[namespace]] == [s.timestamp for s in every[namespace]]
        assert [s.value for s in asked[namespace]] == [
            pytest.approx(s.value, rel=1e-12, abs=1e-12) for s in every[namespace]
        ]
    assert none == {}
