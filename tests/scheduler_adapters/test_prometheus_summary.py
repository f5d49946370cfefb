"""The idle scan's reduced reading, on hand-written Prometheus answers: what the reductions say
is taken as it is, and a device they cannot describe whole is sent to the per-step reading.
(The equality with the per-step reading on a real Prometheus is
tests/integration/prometheus/test_idle_summary_equality.py.)"""

from __future__ import annotations

import pytest

from scheduler_adapters.errors import UnexpectedResponse
from scheduler_adapters.prometheus import device_summaries, namespace_selectors, summary_queries

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


def test_an_unreadable_answer_is_an_unexpected_response():
    with pytest.raises(UnexpectedResponse):
        read(answers(prof=[{"metric": card(), "value": [END]}]))


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
