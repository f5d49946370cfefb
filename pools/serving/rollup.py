"""From one pass's Prometheus answers to one row of values per allocation (pure, no ORM).

Placing a target ``(namespace, portal_allocation)`` on an allocation:

1. a ``portal_allocation`` label naming an open allocation wins;
2. else the namespace, when exactly one open allocation serves in it (``team-<slug>`` holds all
   of a team's Kubernetes allocations, so two of them cannot be told apart without the label);
3. anything else is *unmatched*: counted and listed with the reason, never dropped silently.

Per allocation and signal (:data:`~scheduler_adapters.serving_metrics.SIGNALS`): each engine's
current name is read before its previous one; engines are added up (requests, tokens, memory),
or the larger taken (KV cache use, temperature, XID). A signal no series answered is ``None``
and its metric names go to ``missing``. Latency quantiles come from the summed bucket increases
(:func:`~scheduler_adapters.serving_metrics.histogram_quantile`); where two engines serve in
one allocation, the engine with more requests in the bucket answers (their buckets differ).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler_adapters.serving_metrics import (
    BUSY_COUNT,
    CARD_COUNT,
    COUNTER,
    GAUGE_AVG,
    GAUGE_MAX,
    GAUGE_SUM,
    HISTOGRAM,
    SIGNALS,
    Answers,
    Signal,
    TargetReadings,
    histogram_quantile,
)

QUANTILES = (("p50", 0.5), ("p95", 0.95))
ENGINE_FAMILIES = ("engine_load", "engine_counters", "ttft", "itl", "e2e")


@dataclass(frozen=True)
class Unmatched:
    namespace: str
    allocation_label: str
    reason: str
    series: int

    def as_dict(self) -> dict:
        """As the run stores it: a NUL in a label (label values are any UTF-8) as U+FFFD,
        since PostgreSQL's jsonb refuses ``\\u0000`` (it failed the whole pass)."""
        return {
            "namespace": self.namespace.replace("\x00", "\ufffd"),
            "allocation_label": self.allocation_label.replace("\x00", "\ufffd"),
            "reason": self.reason,
            "series": self.series,
        }


@dataclass
class Values:
    """One allocation's values for one bucket: ``fields`` (model field -> value or ``None``),
    the engines that answered, ``missing`` metric names and ``notes``."""

    fields: dict[str, float | None] = field(default_factory=dict)
    engines: tuple[str, ...] = ()
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def place_targets(
    answers: Answers, *, open_ids: Iterable[int], namespaces: Mapping[int, str]
) -> tuple[dict[int, list[TargetReadings]], list[Unmatched]]:
    """Targets per open allocation id, and what could not be placed (module docstring).
    ``namespaces`` maps allocation id -> its namespace (``None``-free)."""
    ids = set(open_ids)
    by_namespace: dict[str, list[int]] = defaultdict(list)
    for allocation_id in sorted(ids):
        namespace = namespaces.get(allocation_id)
        if namespace:
            by_namespace[namespace].append(allocation_id)
    placed: dict[int, list[TargetReadings]] = defaultdict(list)
    unmatched: list[Unmatched] = []
    for (namespace, label), readings in sorted(answers.targets.items()):
        labelled = int(label) if label.isascii() and label.isdigit() else None
        series = _series_count(readings)
        if labelled is not None and labelled in ids:
            placed[labelled].append(readings)
            continue
        if label and labelled not in ids:
            unmatched.append(Unmatched(namespace, label, "no open allocation has this id", series))
            continue
        candidates = by_namespace.get(namespace, [])
        if len(candidates) == 1:
            placed[candidates[0]].append(readings)
        elif not candidates:
            reason = "no open allocation serves in this namespace" if namespace else "no namespace"
            unmatched.append(Unmatched(namespace, label, reason, series))
        else:
            reason = (
                f"{len(candidates)} open allocations share this namespace; label the pods "
                "gpu-pool-portal/allocation"
            )
            unmatched.append(Unmatched(namespace, label, reason, series))
    return dict(placed), unmatched


def _series_count(readings: TargetReadings) -> int:
    values = sum(len(per) for per in readings.values.values())
    buckets = sum(len(b) for per in readings.buckets.values() for b in per.values())
    return values + buckets


def allocation_values(targets: list[TargetReadings], *, held: int | None = None) -> Values:
    """The values of one allocation holding ``held`` cards from its placed targets (module
    docstring); implausible values unknown (:func:`_implausible_unknown`)."""
    out = Values()
    merged_values, merged_buckets = _merge(targets)
    for target in targets:
        out.notes.extend(target.notes)
    engines: set[str] = set()
    for signal in SIGNALS:
        if signal.kind == HISTOGRAM:
            _quantiles(signal, merged_buckets.get(signal.key, {}), out, engines)
            continue
        value, engine = _combine(signal, merged_values.get(signal.key, {}))
        if value is None:
            out.missing.append(_names(signal))
        elif signal.family in ENGINE_FAMILIES:
            engines.update(engine)
        out.fields[signal.key] = value
    hits, queries = out.fields.pop("prefix_cache_hits"), out.fields.pop("prefix_cache_queries")
    out.fields["prefix_cache_hit_pct"] = (
        None if hits is None or not queries else 100.0 * hits / queries
    )
    if out.fields["cards_busy"] is None and out.fields["cards_reporting"] is not None:
        # `count(x >= t)` answers nothing when no card passes: cards reported, none was busy
        out.fields["cards_busy"] = 0.0
        out.missing = [m for m in out.missing if not m.startswith("cards_busy:")]
    tx, rx = out.fields.pop("nvlink_tx_bytes_s"), out.fields.pop("nvlink_rx_bytes_s")
    out.fields["nvlink_bytes_s"] = None if tx is None and rx is None else (tx or 0.0) + (rx or 0.0)
    out.engines = tuple(sorted(engines))
    _implausible_unknown(out, held)
    return out


#: Largest value a bucket's signal may take, any unit: 10^15 is far above every real reading
#: (NVLink bytes/s of a 72-card NVL72 domain at 1.8 TB/s per card is 1.3e14; framebuffer MiB
#: are ~10^5), and sums of a month of such buckets stay far inside a float (PostgreSQL's
#: ``SUM`` of two 1.7e308 fails with "value out of range: overflow").
VALUE_CEILING = 1e15
#: Most tokens of one kind an allocation's bucket may count: 10^12 in 5 minutes is 3.3 billion
#: tokens/s; tokens per card-hour then stay below 1.2e13 (the API writes 16 digits).
TOKEN_CEILING = 1e12
TOKEN_FIELDS = ("prompt_tokens", "generation_tokens")
CARD_FIELDS = ("cards_reporting", "cards_busy")


def _implausible_unknown(out: Values, held: int | None) -> None:
    """A value no exporter can mean is unknown, with a note naming it: past a float (``inf``;
    the adapter reads ``NaN`` / ``±Inf`` as ``None``, but two engines' 1.7e308 add up to
    ``inf``, as does a KV share of 1e307 x 100), beyond :data:`VALUE_CEILING` or
    :data:`TOKEN_CEILING`, or more cards reporting or busy than the ``held`` ones. Stored,
    such values made the serving reads a 500 (JSON has no Infinity; the efficiency sums
    overflowed, or its shares outgrew their digits)."""
    for key, value in out.fields.items():
        if value is None:
            continue
        if not math.isfinite(value) or abs(value) > VALUE_CEILING:
            why = "past any real reading"
        elif key in TOKEN_FIELDS and value > TOKEN_CEILING:
            why = f"more than {TOKEN_CEILING:.0e} tokens in a bucket"
        elif key in CARD_FIELDS and held is not None and value > held:
            why = f"more cards than the {held} held"
        else:
            continue
        out.fields[key] = None
        out.notes.append(f"{key}: {value:g} is {why}; unknown")


def _merge(targets: list[TargetReadings]):
    """Targets of one allocation merged: values of one (signal, engine, metric) added (a
    namespace's series and a labelled target's are different pods) except where the signal
    takes a mean or a maximum; bucket increases added by ``le``."""
    if len(targets) == 1:  # the usual case: one namespace, nothing to merge
        return targets[0].values, targets[0].buckets
    kinds = {s.key: s.kind for s in SIGNALS}
    values: dict[str, dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    buckets: dict[str, dict[tuple[str, str], dict[float, float]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(float))
    )
    for target in targets:
        for key, per in target.values.items():
            for source, value in per.items():
                values[key][source].append(value)
        for key, per in target.buckets.items():
            for source, counts in per.items():
                for le, count in counts.items():
                    buckets[key][source][le] += count
    flat: dict[str, dict[tuple[str, str], float]] = {}
    for key, per in values.items():
        kind = kinds[key]
        flat[key] = {
            source: (
                sum(items) / len(items)
                if kind == GAUGE_AVG
                else max(items)
                if kind == GAUGE_MAX
                else sum(items)
            )
            for source, items in per.items()
        }
    return flat, buckets


def _preferred(signal: Signal, present: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Per engine, the lowest-ranked metric name that answered (current before previous)."""
    answered = set(present)
    chosen: dict[str, str] = {}
    for metric in sorted(signal.metrics, key=lambda m: m.rank):
        if (metric.engine, metric.name) in answered and metric.engine not in chosen:
            chosen[metric.engine] = metric.name
    return chosen


def _combine(
    signal: Signal, per: Mapping[tuple[str, str], float]
) -> tuple[float | None, tuple[str, ...]]:
    chosen = _preferred(signal, per)
    if not chosen:
        return None, ()
    values = [per[(engine, name)] for engine, name in chosen.items()]
    if signal.kind in (GAUGE_SUM, COUNTER, CARD_COUNT, BUSY_COUNT):
        return sum(values), tuple(chosen)
    return max(values), tuple(chosen)


def _quantiles(signal: Signal, per, out: Values, engines: set[str]) -> None:
    chosen = _preferred(signal, per)
    names = [f"{signal.key}_{label}_s" for label, _q in QUANTILES]
    if not chosen:
        out.missing.append(_names(signal))
        out.fields.update(dict.fromkeys(names))
        return
    totals = {engine: per[(engine, name)].get(float("inf"), 0.0) for engine, name in chosen.items()}
    engine = max(sorted(totals), key=lambda e: totals[e])
    if len(chosen) > 1:
        out.notes.append(f"{signal.key}: quantiles of {engine} (more requests), engines differ")
    buckets = per[(engine, chosen[engine])]
    engines.add(engine)
    for (label, q), name in zip(QUANTILES, names, strict=True):
        value, why = histogram_quantile(q, buckets)
        out.fields[name] = value
        if value is None and why != "no observation":
            out.notes.append(f"{chosen[engine]}: no {label} ({why})")


def _names(signal: Signal) -> str:
    ordered = sorted(signal.metrics, key=lambda m: (m.engine, m.rank))
    return f"{signal.key}: " + " | ".join(dict.fromkeys(m.name for m in ordered))


def held_at(timeline: Sequence[tuple[float, int]], at: float) -> int | None:
    """The cards a step timeline (``(unix s, cards from then on)`` in time order, as
    :func:`pools.elastic.selectors.held_timelines` gives) says were held at ``at``; ``None``
    before its first point."""
    held = None
    for start, cards in timeline:
        if start > at:
            break
        held = cards
    return held
