"""Prometheus answers for the serving rollup, built by hand: one :class:`Series` per term the
family queries ask for (labels ``signal``, ``engine``, ``metric``, the target's, ``le``), and a
stub that answers each family's query with them (or times out, as the adapter does)."""

from __future__ import annotations

from collections import defaultdict

from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.prometheus import Sample, Series
from scheduler_adapters.serving_metrics import SIGNAL_BY_KEY, family_queries

AT = 1_780_000_200.0  # any instant; answers carry the evaluation time


def term(signal, engine, metric, value, *, namespace="team-nlp", allocation="", le=None):
    labels = {"signal": signal, "engine": engine, "metric": metric, "namespace": namespace}
    if allocation:
        labels["portal_allocation"] = allocation
    if le is not None:
        labels["le"] = le
    return Series("", tuple(sorted(labels.items())), (Sample(AT, value),))


def histogram(signal, engine, metric, cumulative: dict[str, float], **target):
    return [term(signal, engine, metric, v, le=le, **target) for le, v in cumulative.items()]


class StubPrometheus:
    """Answers :func:`family_queries`' expressions with the series given per family (by the
    ``signal`` label); anything else is refused as Prometheus would not know it. ``down``:
    every query times out (:class:`SchedulerUnavailable`). Counts the requests it got."""

    def __init__(self, series=(), *, down=False):
        self.by_family = defaultdict(list)
        for item in series:
            self.by_family[SIGNAL_BY_KEY[item.label("signal")].family].append(item)
        self.families = {expr: family for family, expr in family_queries().items()}
        self.down = down
        self.requests = 0

    def query(self, expr, *, at):
        self.requests += 1
        if self.down:
            raise SchedulerUnavailable("Prometheus did not answer in time", operation="query")
        return tuple(self.by_family[self.families[expr]])

    def close(self):
        pass
