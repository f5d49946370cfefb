"""The idle scan's reduced reading, on hand-written Prometheus answers: what the reductions say
is taken as it is, and a device they cannot describe whole is sent to the per-step reading.
(The equality with the per-step reading on a real Prometheus is
tests/integration/prometheus/test_idle_summary_equality.py.)"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx
import pytest

from scheduler_adapters.errors import UnexpectedResponse
from scheduler_adapters.prometheus import (
    GR_ENGINE_ACTIVE,
    PrometheusAdapter,
    device_summaries,
    namespace_selectors,
    summary_queries,
    uuid_selector,
)

END = 1_800_000_000.0
W = 1800  # 31 steps of 60 s


def row(value, **labels):
    return {"metric": labels, "value": [END, str(value)]}


def card(uuid="GPU-1", **extra):
    return {"UUID": uuid, "gpu": "0", "Hostname": "n1", "namespace": "team-a", "pod": "p0"} | extra


def answers(prof=(), fb=(), dev=(), **values):
    """Series answers (full labels) and per-device reductions by ``<metric>_<reduction>``."""
    out = {
        ("prof", "series", W): list(prof),
        ("fb", "series", W): list(fb),
        ("dev", "count", W): list(dev),
    }
    for metric, reduction in (("prof", "sum"), ("prof", "max"), ("fb", "nonfinite"), ("fb", "max")):
        out[(metric, reduction, W)] = list(values.get(f"{metric}_{reduction}", ()))
    return out


def read(a, **kwargs):
    kwargs = {"min_coverage": 0.9, "near_pct": [30.0]} | kwargs
    return device_summaries(a, windows=[W], end=END, step_s=60, **kwargs)


def test_one_series_is_taken_from_the_reductions():
    # 31 steps of ratio 0.02 (2 %): sum 0.62 -> 62 % x steps; framebuffer 0 MiB at 31 steps
    key = card()
    out = read(
        answers(
            prof=[row(31, **key)],
            fb=[row(31, **key)],
            prof_sum=[row(0.62, **key)],
            prof_max=[row(0.02, **key)],
            fb_max=[row(0, **key)],
        )
    )
    assert out.per_step == frozenset()
    (device,) = out.devices
    assert (device.uuid, device.namespace, device.hostname, device.pods) == (
        "GPU-1",
        "team-a",
        "n1",
        ("p0",),
    )
    stats = device.stats(end=END, window_s=W, step_s=60)
    assert (stats.util_points, stats.util_steps) == (31, 31)
    assert stats.util_sum == pytest.approx(62.0)
    assert stats.util_peak == pytest.approx(2.0)
    assert stats.util_newest == END  # every step holds a sample: the last is at the end
    assert (stats.fb_steps, stats.fb_peak) == (31, 0.0)
    assert device.util_source == "prof"
    with pytest.raises(ValueError):
        device.stats(end=END, window_s=600, step_s=60)  # a window it was not read for


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("two_pods", "two series of one device: merged step by step"),
        ("nan", "a NaN step makes the sum NaN: it is no sample"),
        ("gray", "29 of 31 steps: coverage passes and the newest step decides"),
        ("threshold", "mean exactly 30 %: the sum's last bit decides"),
        ("consumer", "DEV_GPU_UTIL only"),
        ("fb_nan", "a NaN framebuffer step: the device is answered by the NaN filter"),
    ],
)
def test_what_the_reductions_cannot_say_is_read_per_step(case, why):
    key = card()
    rows = {
        "prof": [row(31, **key)],
        "fb": [row(31, **key)],
        "prof_sum": [row(0.62, **key)],
        "prof_max": [row(0.02, **key)],
        "fb_max": [row(0, **key)],
    }
    if case == "two_pods":
        rows["prof"].append(row(31, **card(pod="p1")))
    elif case == "nan":
        rows["prof_sum"] = [row("NaN", **key)]
    elif case == "gray":
        rows["prof"] = [row(29, **key)]
    elif case == "threshold":
        rows["prof_sum"] = [row(9.3, **key)]  # 9.3 x 100 / 31 = 30.0
    elif case == "fb_nan":
        rows["fb_nonfinite"] = [row("NaN", **key)]
    elif case == "consumer":
        rows = {"fb": rows["fb"], "fb_max": rows["fb_max"]}
        rows["dev"] = [row(31, **key)]
    out = read(answers(**rows))
    assert out.per_step == {("GPU-1", None, "team-a")}, why
    assert out.devices == ()


def test_under_the_coverage_nothing_more_is_needed():
    # 20 of 31 steps: unknown whatever the newest step, so the reductions suffice
    key = card()
    out = read(answers(prof=[row(20, **key)], prof_sum=[row(10, **key)], prof_max=[row(1, **key)]))
    (device,) = out.devices
    stats = device.stats(end=END, window_s=W, step_s=60)
    assert (stats.util_steps, stats.util_newest, stats.fb_steps) == (20, None, 0)


def test_a_mig_parents_dev_reading_is_ignored_and_instances_kept():
    parent = card(uuid="GPU-m")
    instance = card(uuid="GPU-m", GPU_I_ID="1", GPU_I_PROFILE="3g.40gb")
    out = read(
        answers(
            prof=[row(31, **instance)],
            dev=[row(31, **parent)],
            prof_sum=[row(24.8, **instance)],  # 0.8 x 31
            prof_max=[row(0.8, **instance)],
        )
    )
    assert out.per_step == frozenset()
    (device,) = out.devices
    assert (device.gpu_instance_id, device.mig_profile) == ("1", "3g.40gb")
    assert device.stats(end=END, window_s=W, step_s=60).util_sum == pytest.approx(2480.0)


def test_honor_labels_false_reads_the_workloads_namespace():
    key = card(namespace="gpu-operator", exported_namespace="team-b", exported_pod="w-0")
    out = read(answers(prof=[row(31, **key)], prof_sum=[row(31, **key)], prof_max=[row(1, **key)]))
    (device,) = out.devices
    assert (device.namespace, device.pods) == ("team-b", ("w-0",))


@pytest.mark.parametrize(
    "item",
    [
        {"metric": card(), "value": [END]},  # no value
        {"metric": "UUID=GPU-1", "value": [END, "1"]},  # labels that are no JSON object
        {"metric": ["UUID", "GPU-1"], "value": [END, "1"]},
    ],
)
def test_an_unreadable_answer_is_an_unexpected_response(item):
    with pytest.raises(UnexpectedResponse):
        read(answers(prof=[item]))
    with pytest.raises(UnexpectedResponse):
        read(answers(prof_sum=[item]))


def test_queries_read_plain_selectors_at_steps_aligned_to_the_end():
    queries = summary_queries([1800, 600], step_s=60, shift_ms=17_000)
    # the longest window's series keep every label; the rest are one value per device
    assert queries[("prof", "series", 1800)] == (
        'count_over_time(({__name__=~"DCGM_FI_PROF_GR_ENGINE_ACTIVE|'
        'dcgm_fi_prof_gr_engine_active"} offset -17000ms)[1830s:60s])'
    )
    assert queries[("fb", "max", 600)].startswith("max by (UUID, uuid, GPU_I_ID,")
    assert "[630s:60s]" in queries[("fb", "max", 600)]
    # the framebuffer's sum only says which devices have a NaN or ±Inf step (x * 0 is NaN)
    assert queries[("fb", "nonfinite", 600)].endswith("[630s:60s]) * 0 != 0)")
    assert len(queries) == 3 + 4 + 6  # series x 2 + DEV; 4 more at 1800 s, 6 at 600 s


def test_namespace_selectors_are_plain_regex_matchers_one_per_label():
    selectors = namespace_selectors('{__name__=~"A|a"}', ["team-b", 'te"am.a', "team-b"])
    # names sorted and deduplicated, regex-escaped, then escaped for the PromQL string
    names = 'te\\"am\\\\.a|team\\\\-b'
    assert selectors == {
        "exported_namespace": '{__name__=~"A|a", exported_namespace=~"' + names + '"}',
        "pod_namespace": '{__name__=~"A|a", pod_namespace=~"' + names + '"}',
        "namespace": '{__name__=~"A|a", namespace=~"' + names + '"}',
    }
    for wrong in ([], ["team-a", ""]):
        with pytest.raises(ValueError):
            namespace_selectors('{__name__=~"A|a"}', wrong)


def by_device(labels):
    """The labels a ``max by (UUID, uuid, GPU_I_ID, namespace, ...)`` answer keeps."""
    kept = ("UUID", "uuid", "GPU_I_ID", "namespace", "exported_namespace", "pod_namespace")
    return {k: v for k, v in labels.items() if k in kept + ("exported_pod",)}


def test_a_mixed_fleet_read_whatever_the_order_of_each_answer():
    # Series answers in one order; each per-device answer in the reverse order (another
    # device at every index), as a Prometheus that sorted differently would send them.
    plain = card("GPU-1")
    renamed = card("GPU-2", namespace="gpu-operator", exported_namespace="team-b", exported_pod="w")
    mig1 = card("GPU-m", GPU_I_ID="1", GPU_I_PROFILE="3g.40gb")
    mig2 = card("GPU-m", GPU_I_ID="2", GPU_I_PROFILE="3g.40gb", pod="p2")
    nan = card("GPU-n")
    dup, dup_other_pod = card("GPU-d"), card("GPU-d", pod="p1")
    prof = [plain, renamed, nan, mig1, dup, dup_other_pod, mig2]
    counts = {"GPU-1": 31, "GPU-2": 31, "GPU-n": 31, "GPU-d": 31}
    rows = {
        "prof": [
            row(counts.get(labels["UUID"], 31 if labels.get("GPU_I_ID") == "1" else 20), **labels)
            for labels in prof
        ],  # fmt: skip
        "fb": [row(31, **plain), row(31, **renamed)],
        # the MIG parent (no GPU_I_ID) is ignored; a consumer card (DEV only) is read per step
        "dev": [row(31, **by_device(x)) for x in (plain, card("GPU-m"), card("GPU-c"))],
    }
    sums = {"GPU-1": 0.62, "GPU-2": 3.1, "GPU-n": "NaN", "GPU-d": 31}
    maxes = {"GPU-1": 0.02, "GPU-2": 0.5, "GPU-n": 1, "GPU-d": 1}
    devices = [plain, renamed, nan, mig1, dup, mig2]
    rows["prof_sum"] = [row(sums.get(x["UUID"], 24.8 if x.get("GPU_I_ID") == "1" else 2.0),
                            **by_device(x)) for x in reversed(devices)]  # fmt: skip
    rows["prof_max"] = [row(maxes.get(x["UUID"], 0.8 if x.get("GPU_I_ID") == "1" else 0.1),
                            **by_device(x)) for x in reversed(devices)]  # fmt: skip
    rows["fb_max"] = [row(2048, **by_device(renamed)), row(100, **by_device(plain))]
    # a value without a UUID names no device: skipped unread, even unreadable
    rows["prof_sum"].insert(2, row("garbage", namespace="team-a"))
    out = read(answers(**rows))
    assert out.per_step == {
        ("GPU-n", None, "team-a"),  # a NaN step
        ("GPU-d", None, "team-a"),  # two pods' series
        ("GPU-c", None, "team-a"),  # DEV_GPU_UTIL only
    }
    # in the profiling answer's order (was a set's, a different one in every process)
    assert [d.key for d in out.devices] == [
        ("GPU-1", None, "team-a"),
        ("GPU-2", None, "team-b"),
        ("GPU-m", "1", "team-a"),
        ("GPU-m", "2", "team-a"),
    ]
    got = {
        d.key: (
            d.hostname,
            d.pods,
            d.mig_profile,
            tuple(vars(d.stats(end=END, window_s=W, step_s=60)).values()),
        )
        for d in out.devices
    }
    # (points, steps, sum %, peak %, newest, fb steps, fb peak MiB): sum x 100, max x 100
    assert got == {
        ("GPU-1", None, "team-a"): ("n1", ("p0",), None, (31, 31, 62.0, 2.0, END, 31, 100.0)),
        ("GPU-2", None, "team-b"): ("n1", ("w",), None, (31, 31, 310.0, 50.0, END, 31, 2048.0)),
        ("GPU-m", "1", "team-a"): ("n1", ("p0",), "3g.40gb", (31, 31, 2480.0, 80.0, END, 0, None)),
        # 20 of 31 steps: under the coverage (27.9), no newest step needed
        ("GPU-m", "2", "team-a"): ("n1", ("p2",), "3g.40gb", (20, 20, 200.0, 10.0, None, 0, None)),
    }


def test_each_value_goes_to_its_own_device_when_labels_differ_at_one_index():
    # Two devices whose namespace label is the same: one renamed by honorLabels false (its
    # workload is team-z), so at index 0 the two answers hold different labels and different
    # keys; a key taken by position, or read from ``namespace``, swaps or merges their values.
    a = card("GPU-a", namespace="team-a")
    b = card("GPU-b", namespace="team-a", exported_namespace="team-z", exported_pod="w")
    rows = {
        "prof": [row(31, **a), row(31, **b)],
        "prof_sum": [row(3.1, **by_device(a)), row(6.2, **by_device(b))],
        "prof_max": [row(0.9, **by_device(b)), row(0.1, **by_device(a))],
    }
    out = read(answers(**rows))
    got = {d.key: (d.windows[W].util_sum, d.windows[W].util_peak) for d in out.devices}
    assert got == {
        ("GPU-a", None, "team-a"): (310.0, 10.0),
        ("GPU-b", None, "team-z"): (620.0, 90.0),
    }


def test_several_values_of_one_device_in_a_reduction_keep_the_maximum():
    # two rows with one key (``uuid`` and ``UUID`` spellings of one card): max of 0.02 and 0.05
    key = card()
    old_name = {"uuid": "GPU-1", "namespace": "team-a"}
    rows = {
        "prof": [row(31, **key)],
        "prof_sum": [row(0.62, **by_device(key))],
        "prof_max": [row(0.05, **old_name), row(0.02, **by_device(key))],
    }
    (device,) = read(answers(**rows)).devices
    assert device.windows[W].util_peak == pytest.approx(5.0)


def test_a_nul_in_a_devices_labels_is_read_as_the_replacement_character_over_http():
    """Through the adapter's HTTP reading (Prometheus' JSON writes NUL as ``\\u0000``): a
    device whose ``UUID``, ``namespace``, ``Hostname`` and ``pod`` hold a NUL is read with
    U+FFFD there (PostgreSQL's text refuses NUL: one such series failed every team's scan),
    the clean device beside it as it is; a device with a NUL read per step (two pods) is found
    by its UUID with ``.`` for the NUL and keyed with U+FFFD like the rest."""
    clean, dirty = card(), card("GPU-\x002", namespace="team-\x00b", Hostname="n\x002", pod="p\x00")
    pods = [card("GPU-\x003", pod="p0"), card("GPU-\x003", pod="p1")]
    rows = {
        ("prof", "series", W): [row(31, **clean), row(31, **dirty)]
        + [row(31, **labels) for labels in pods],
        ("fb", "series", W): [row(31, **clean), row(31, **dirty)],
        ("prof", "sum", W): [row(0.62, **clean), row(1.24, **dirty), row(31, **pods[0])],
        ("prof", "max", W): [row(0.02, **clean), row(0.04, **dirty), row(1, **pods[0])],
        ("fb", "max", W): [row(0, **clean), row(0, **dirty)],
    }
    names = {expr: name for name, expr in summary_queries([W], step_s=60, shift_ms=0).items()}
    ranges = []

    def reply(result, *, kind):
        data = {"resultType": kind, "result": result}
        return httpx.Response(200, json={"status": "success", "data": data})

    def answer(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        if request.url.path == "/api/v1/query":
            return reply(rows.get(names[query], []), kind="vector")
        ranges.append(query)
        steps = [[END - 60 * k, "1"] for k in range(31)]  # ratio 1: 100 %
        # the UUID matcher as Prometheus reads it: a PromQL string, then an anchored regex
        (matcher,) = set(re.findall(r'UUID=~"((?:[^"\\]|\\.)*)"', query)) or {None}
        pattern = matcher and re.sub(r"\\(.)", r"\1", matcher)
        result = [
            {"metric": {"__name__": GR_ENGINE_ACTIVE, **labels}, "values": steps}
            for labels in pods
            if query.startswith('{__name__=~"DCGM_FI_PROF')
            and pattern
            and re.fullmatch(pattern, labels["UUID"])
        ]
        return reply(result, kind="matrix")

    prom = PrometheusAdapter("http://prom.test:9090/", transport=httpx.MockTransport(answer))
    devices = prom.gpu_usage_summary(
        end=datetime.fromtimestamp(END, UTC), windows_s=[W], step_s=60, min_coverage=0.9
    )

    by_uuid = {device.uuid: device for device in devices}
    assert set(by_uuid) == {"GPU-1", "GPU-\ufffd2", "GPU-\ufffd3"}
    one, two, three = by_uuid["GPU-1"], by_uuid["GPU-\ufffd2"], by_uuid["GPU-\ufffd3"]
    assert (one.namespace, one.hostname, one.pods) == ("team-a", "n1", ("p0",))
    assert (two.namespace, two.hostname, two.pods) == ("team-\ufffdb", "n\ufffd2", ("p\ufffd",))
    assert three.pods == ("p0", "p1")
    # 31 steps of ratio 0.04 (4 %): 124 %·steps; ratio 1 on every step of the per-step device
    assert two.stats(end=END, window_s=W, step_s=60).util_sum == pytest.approx(124.0)
    assert three.stats(end=END, window_s=W, step_s=60).util_sum == pytest.approx(3100.0)
    assert len(ranges) == 6  # 3 metrics x (UUID, uuid), for the one device read per step


def test_a_uuid_selector_escapes_for_re2_then_promql_and_matches_a_nul_for_u_fffd():
    # 'GPU-1"' : '-' escaped by the regex ('\-'), then that backslash and the quote by PromQL
    assert uuid_selector("UUID", ["GPU-\ufffd2", 'GPU-1"', 'GPU-1"']) == (
        'UUID=~"GPU\\\\-1\\"|GPU\\\\-.2"'
    )
    with pytest.raises(ValueError):
        uuid_selector("uuid", [])
