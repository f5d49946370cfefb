"""FakePrometheus evaluates the PromQL the capacity dashboard sends as Prometheus 2.x does:
``avg_over_time`` over ``[t - range, t]``, ``<op> by (...)`` keeping only the listed labels that
have a value, no metric name after either. Values worked out by hand below."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler_adapters.errors import SchedulerRejected, SchedulerUnavailable
from scheduler_adapters.prometheus import Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T = AT.timestamp()


def series(metric: str, labels: dict[str, str], points: list[tuple[float, float]]) -> Series:
    """``points``: (seconds before AT, value)."""
    return Series(
        metric,
        tuple(sorted(labels.items())),
        tuple(Sample(T - ago, v) for ago, v in sorted(points, reverse=True)),
    )


@pytest.fixture
def fake() -> FakePrometheus:
    return FakePrometheus(
        series=[
            # host a, card 0: two pods (time-sliced); card 1: one series
            series("U", {"host": "a", "gpu": "0", "pod": "p1"}, [(0, 10), (60, 20), (120, 90)]),
            series("U", {"host": "a", "gpu": "0", "pod": "p2"}, [(0, 40), (60, 40)]),
            series("U", {"host": "a", "gpu": "1"}, [(0, 6), (60, 2)]),
            series("U", {"host": "b", "gpu": "0"}, [(400, 50)]),  # stopped 400 s ago
            series("V", {"host": "a", "gpu": "0"}, [(0, 1)]),
        ]
    )


def values(result) -> dict[tuple, float]:
    return {item.labels: item.samples[0].value for item in result}


def test_avg_over_time_includes_both_ends_and_drops_the_name(fake):
    result = fake.query("avg_over_time(U[60s])", at=AT)
    assert {item.metric for item in result} == {""}
    assert values(result) == {
        (("gpu", "0"), ("host", "a"), ("pod", "p1")): 15.0,  # (10 + 20) / 2
        (("gpu", "0"), ("host", "a"), ("pod", "p2")): 40.0,
        (("gpu", "1"), ("host", "a")): 4.0,  # (6 + 2) / 2
    }


def test_nested_aggregations_keep_only_listed_labels_with_values(fake):
    per_card = "max by (host, gpu) (avg_over_time(U[120s]))"
    # card a/0: max(pod p1 (10+20+90)/3 = 40, pod p2 40) = 40; a/1: 4
    assert values(fake.query(per_card, at=AT)) == {
        (("gpu", "0"), ("host", "a")): 40.0,
        (("gpu", "1"), ("host", "a")): 4.0,
    }
    assert values(fake.query(f"sum by (host) ({per_card})", at=AT)) == {(("host", "a"),): 44.0}
    assert values(fake.query(f"count by (host, nothing) ({per_card})", at=AT)) == {
        (("host", "a"),): 2.0
    }
    assert values(fake.query(f"avg by () ({per_card})", at=AT)) == {(): 22.0}


def test_range_query_evaluates_each_step(fake):
    result = fake.query_range(
        'sum by (host) (avg_over_time(U{gpu="1"}[60s]))',
        start=AT - timedelta(seconds=120),
        end=AT,
        step_s=60,
    )
    # steps at -120 (no sample of gpu 1 in [-180, -120]), -60 (2), 0 ((6 + 2) / 2)
    assert [(s.timestamp - T, s.value) for s in result[0].samples] == [(-60.0, 2.0), (0.0, 4.0)]
    assert [item.labels for item in result] == [(("host", "a"),)]
    assert fake.queries == ['sum by (host) (avg_over_time(U{gpu="1"}[60s]))']


def test_refuses_what_prometheus_refuses_and_is_down_when_told(fake):
    with pytest.raises(SchedulerRejected):
        fake.query("avg_over_time(U)", at=AT)  # needs a range
    with pytest.raises(SchedulerRejected):
        fake.query("sum by (host) (U[60s])", at=AT)  # range vector in an aggregation
    with pytest.raises(SchedulerUnavailable):
        FakePrometheus(down=True).query("sum by (host) (U)", at=AT)
