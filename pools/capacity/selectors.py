"""Read-side queries of requests, allocations and the audit trail: who may see what, joined."""

from __future__ import annotations

import functools
import hashlib
import operator
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import (
    Case,
    Count,
    F,
    Func,
    IntegerField,
    Prefetch,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.db.models.query import RawQuerySet
from django.utils.module_loading import import_string

from pools.capacity.arithmetic import card_hours, peaks_per_span
from pools.capacity.availability import peaks_by_pool_model
from pools.capacity.generation import allocations_generation
from pools.capacity.models import Allocation, CapacityRequest, SchedulerDrift
from pools.capacity.slices import card_share
from pools.common.generation import cached
from pools.tenancy.models import Team
from pools.tenancy.roles import sees_every_team


def capacity_request_list(*, user, decider: bool = True) -> QuerySet[CapacityRequest]:
    """Requests the user may see (their teams', or all for pool admins), related rows joined;
    allocations (nested by the API with their team, pool and model) in one more query, not
    joined: three more joins on every page cost more to plan than the query takes to run.

    ``decider=False`` leaves out the join of who decided (read lazily, one query per decided
    request, if anything asks): for lists that never show it -- the approval queue, whose
    requests are undecided, and *My teams*. The eighth relation is what makes planning dear:
    PostgreSQL searches every join order up to ``join_collapse_limit`` (8) relations, and a
    member's list (with the membership semi-join) took 35-57 ms to plan and 0.4 ms to run at
    100,800 GPUs under load 10; without it, 6 ms to plan (issue #29 item 7)."""
    allocations = Allocation.objects.select_related("team", "pool", "gpu_model", "workload_class")
    related = ["team", "requested_by", "pool", "gpu_model", "workload_class"]
    qs = CapacityRequest.objects.select_related(
        *related, *(["decided_by"] if decider else [])
    ).prefetch_related(
        Prefetch("allocation", queryset=allocations), "workload_class__gpu_models"
    )  # the class's models: its rule (pools.classes.rules), read by the explainer
    return qs.visible_to(user)


def _own_columns(model) -> list[str]:
    return [f.name for f in model._meta.concrete_fields]


def capacity_request_api_list(*, user) -> QuerySet[CapacityRequest]:
    """:func:`capacity_request_list` narrowed to the columns the API's list writes: each row's
    own, and of the rows it names only the slug or user name (a GPU model's row alone is 40
    columns, with JSON to parse). For reading only: services get the whole rows."""
    allocations = Allocation.objects.select_related(
        "team", "pool", "gpu_model", "workload_class"
    ).only(
        *_own_columns(Allocation),
        "team__slug",
        "pool__slug",
        "gpu_model__slug",
        "workload_class__slug",
    )
    qs = (
        CapacityRequest.objects.select_related(
            "team", "requested_by", "pool", "gpu_model", "decided_by", "workload_class"
        )
        .only(
            *_own_columns(CapacityRequest),
            "workload_class__slug",
            "team__slug",
            "pool__slug",
            "gpu_model__slug",
            # what a submitted request's budget verdict now reads and says
            "team__name",
            "team__cost_centre",
            "pool__name",
            "gpu_model__name",
            "requested_by__username",
            "decided_by__username",
        )
        .prefetch_related(Prefetch("allocation", queryset=allocations))
    )
    return qs.visible_to(user)


def allocation_list(*, user, names_only: bool = False) -> QuerySet[Allocation]:
    """Allocations the user may see, with team, pool, model and request joined; with
    ``names_only`` (pages that write the names and link the request by id) the request is not
    joined and of team, pool and model only the name is read."""
    qs = Allocation.objects.select_related("team", "pool", "gpu_model", "request", "workload_class")
    if names_only:
        qs = Allocation.objects.select_related("team", "pool", "gpu_model", "workload_class").only(
            *_own_columns(Allocation),
            "team__name",
            "pool__name",
            "gpu_model__name",
            "workload_class__name",
        )
    return qs.visible_to(user)


class InstantsBefore(Func):
    """How many of ``instants`` (aware datetimes, sorted ascending) lie strictly before the
    row's ``field`` (a datetime column), or at or before it with ``inclusive``: 0 to
    ``len(instants)``; the index of the interval between instants that holds ``field``.

    On PostgreSQL ``width_bucket(field, instants)``, a binary search over one array parameter
    (``width_bucket`` counts the thresholds ``<=`` its operand; for "strictly before" the
    operand is ``field - 1 µs``: datetimes have microsecond resolution on both sides);
    elsewhere one ``CASE`` per instant, summed."""

    output_field = IntegerField()

    def __init__(self, field: str, instants: list, *, inclusive: bool = False):
        super().__init__(F(field))
        self.instants, self.inclusive = list(instants), inclusive

    def as_sql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.get_source_expressions()[0])
        if not self.instants:
            return "0", []
        at = [connection.ops.adapt_datetimefield_value(t) for t in self.instants]
        op = ">=" if self.inclusive else ">"
        cases = " + ".join(f"CASE WHEN {column} {op} %s THEN 1 ELSE 0 END" for _ in at)
        return f"({cases})", [p for t in at for p in (*params, t)]

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.get_source_expressions()[0])
        at = [connection.ops.adapt_datetimefield_value(t) for t in self.instants]
        operand = column if self.inclusive else f"{column} - interval '1 microsecond'"
        sql = f"width_bucket({operand}, %s::timestamptz[])"
        return sql, (*params, at)


def cards_held_series(qs: QuerySet, keys: list[str], instants: list) -> dict[tuple, list[int]]:
    """Per value of ``keys`` (fields or annotations of ``qs``, allocations or requests): the
    cards of the rows whose ``[starts_at, ends_at)`` holds each of ``instants`` (aware
    datetimes, any order), in the order given; a key with rows has its list even if all 0.

    One query, one scan: the rows grouped by their keys and by how many instants lie before
    their start and before their end (:class:`InstantsBefore`, twice), turned into counts by a
    running sum here. A row holds the ``j``-th instant (sorted) iff
    ``#{t < starts_at} <= j < #{t < ends_at}``. The cost per row is two binary searches, where
    one conditional sum per instant cost 57 of them per row on the dashboard's plan (and a
    millisecond of Python per instant to build). One scan with both buckets reads the rows once
    where two grouped halves in a ``UNION ALL`` read them twice: at 36,920 allocations in the
    window (the 100,800-GPU bench) about two thirds of the time (130 against 190 ms, run in turn
    on a loaded machine).
    """
    order = sorted(range(len(instants)), key=lambda i: instants[i])
    thresholds = [instants[i] for i in order]
    rows = (
        qs.annotate(
            _from=InstantsBefore("starts_at", thresholds),
            _to=InstantsBefore("ends_at", thresholds),
        )
        .values(*keys, "_from", "_to")
        .annotate(_cards=Sum("card_count"))
        .order_by()
        .values_list(*keys, "_from", "_to", "_cards")
    )
    deltas: dict[tuple, list[int]] = {}
    for *key, since, until, cards in rows:
        row = deltas.setdefault(tuple(key), [0] * (len(instants) + 1))
        row[since] += cards or 0
        row[until] -= cards or 0
    result = {}
    for key, row in deltas.items():
        held, running = [0] * len(instants), 0
        for j, i in enumerate(order):
            running += row[j]
            held[i] = running
        result[key] = held
    return result


TIMELINE_NAMED_TEAMS = 10  # a pool admin's timeline names the teams holding most, sums the rest


@dataclass(frozen=True)
class TimelineSeries:
    """Cards held at each sampled instant by one team (its name ``team`` and its slug
    ``team_slug``; both None: "other teams") in one pool and GPU model."""

    pool_id: int
    gpu_model_id: int
    team: str | None
    team_slug: str | None
    cards: list[int]


TIMELINE_CACHE_S = 15 * 60
"""How long a timeline's held cards are kept at most, whatever the allocations' generation says
(a writer that forgot :func:`pools.capacity.generation.allocations_changed` is late by this, as
the admin dashboard's plan is)."""


def timeline_holdings(
    *, user, start, end, instants: list, team: Team | None = None
) -> list[TimelineSeries]:
    """Cards of the allocations that held cards in ``[start, end)`` (:meth:`pools.capacity.
    models.AllocationQuerySet.held_during`: one ended or reclaimed today counts its hours
    before its end) at each of ``instants`` (aware datetimes), per pool, model and team,
    summed in the database (one conditional sum per instant). A pool and model with such
    allocations has its series even if all are 0. An
    allocation a reclamation changed after ``start`` counts, at each instant, the cards it held
    then (:func:`series_as_held`), as the peaks do (:func:`timeline_peaks`).

    A member sees their own teams by slug and name and every other team's cards as one
    "other teams" series (capacity is shared; names and allocations are not). A pool admin
    sees by slug and name the :data:`TIMELINE_NAMED_TEAMS` teams whose allocations in the
    window hold the most cards, the rest summed, so the chart (and the page) does not grow
    with the number of teams. Three queries (:func:`cards_held_series`, and one for the
    allocations a reclamation changed today; one more when there are any). ``team`` (one the user
    may see, checked by the caller): that team alone is named, every other team's cards are
    "other teams" (capacity is shared: the bars' total is the same).

    The named teams' ids and the sums are kept in the shared cache under the allocations'
    generation (:mod:`pools.capacity.generation`), the window, the instants and whose teams are
    named (every team, or the member's ids), at most :data:`TIMELINE_CACHE_S`: the timeline's
    window starts at midnight, so its instants stand all day, and at 100,800 GPUs its two scans
    of the window's ~37,000 allocations took ~85 ms of the page (issue #29 item 7). Read from
    the cache, a pool admin's named teams' slugs and names are read afresh (one small query; a
    member's already are), so a renamed team is not shown by its old name. Inside a transaction
    summed afresh and not kept (:func:`pools.common.generation.cached`).
    """
    window = Allocation.objects.held_during(start, end).whole_cards()
    every = team is None and sees_every_team(user)
    if team is not None:
        teams = {team.pk: (team.slug, team.name)}
    else:
        teams = {} if every else _slugs_and_names(Team.objects.visible_to(user))
    scope = "every" if every else ",".join(str(pk) for pk in sorted(teams))
    digest = hashlib.sha256(
        "|".join(
            [start.isoformat(), end.isoformat(), *(t.isoformat() for t in instants), scope]
        ).encode()
    ).hexdigest()

    def read() -> tuple[list[int], dict]:
        if every:
            teams.update({t.pk: (t.slug, t.name) for t in _teams_holding_most(window)})
        named = list(teams)
        label = Case(
            When(team__in=named, then="team"), default=Value(0), output_field=IntegerField()
        )
        labelled, keys = window.annotate(label=label), ["pool", "gpu_model", "label"]
        rows = cards_held_series(labelled, keys, instants)
        return named, series_as_held(rows, labelled, keys, instants, since=start)

    key = f"capacity:timeline:{allocations_generation()}:{digest}"
    named, rows = cached(key, read, TIMELINE_CACHE_S, fits=lambda found: isinstance(found, tuple))
    if every and not teams:  # kept: the named teams' slugs and names read afresh
        teams = _slugs_and_names(Team.objects.filter(pk__in=named))
    series = []
    for (pool, model, team), cards in rows.items():
        slug, name = teams.get(team, (None, None))
        series.append(TimelineSeries(pool, model, name, slug, cards))
    return series


def timeline_peaks(
    *, bounds: list, blocked: dict, rows: QuerySet | None = None, scope: str = ""
) -> dict[tuple[int, int], list[tuple[int, datetime]]]:
    """:func:`pools.capacity.availability.peaks_by_pool_model` of ``bounds`` and ``blocked``
    (:func:`pools.capacity.availability.blocked_intervals` of the same span), kept in the shared
    cache under the allocations' generation, the bounds and a digest of ``blocked`` (read afresh
    by the caller, two small queries: a new reservation or maintenance window is a new key), at
    most :data:`TIMELINE_CACHE_S`, as :func:`timeline_holdings`' sums are. At 100,800 GPUs
    reading the window's ~37,000 allocations' intervals and sweeping them cost ~380 ms of CPU
    a page (the noon-sampled timeline's whole page: ~43 ms); kept, the page costs ~51 ms
    (``benchmarks/fleet.py``, in turn on a loaded machine). Inside a transaction read afresh
    and not kept.

    ``rows``: the allocations to count instead of every whole-card one that held cards in the
    bounds (:meth:`pools.capacity.models.AllocationQuerySet.held_during`: the hours before
    an allocation ended or was reclaimed count its cards, as :func:`timeline_holdings`; the admin
    dashboard's plan narrowed to a pool, model or team), named by ``scope`` in the key (empty
    only for the default rows: the timeline and the unfiltered plan share one entry).

    The hours before a reclamation changed an allocation's cards count the cards it held then
    (:func:`peaks_as_held`: one query more, three when one did today), not its latest
    ``card_count``; the shrink or undo writes the allocation, so a new generation's entry."""
    spans = sorted(
        (key, kind, tuple(sorted(intervals))) for key, kinds in blocked.items()
        for kind, intervals in kinds.items()
    )  # fmt: skip
    digest = hashlib.sha256(
        "|".join([*(b.isoformat() for b in bounds), repr(spans), scope]).encode()
    ).hexdigest()
    key = f"capacity:timeline-peaks:{allocations_generation()}:{digest}"
    counted = rows
    if rows is None:
        counted = Allocation.objects.held_during(bounds[0], bounds[-1]).whole_cards()

    def read() -> dict[tuple[int, int], list[tuple[int, datetime]]]:
        peaks = peaks_by_pool_model(bounds=bounds, blocked=blocked, rows=counted)
        return peaks_as_held(rows=counted, bounds=bounds, blocked=blocked, peaks=peaks)

    return cached(key, read, TIMELINE_CACHE_S, fits=lambda found: isinstance(found, dict))


def card_pieces_changed_since(allocations: QuerySet, since: datetime) -> list[tuple[Any, list]]:
    """The allocations of ``allocations`` whose cards a reclamation changed after ``since``,
    each with the pieces ``(start, end, cards)`` of the cards it held over its window: the card
    timeline (:func:`pools.reclamation.card_timeline.card_pieces_changed_since` through the
    function ``settings.ALLOCATION_CARD_PIECES_SINCE`` names; reclamation sits above capacity).
    ``[]`` without one. One query when none changed, two when some did."""
    provider = getattr(settings, "ALLOCATION_CARD_PIECES_SINCE", "")
    if not provider:
        return []
    return [
        (a, [(p.start, p.end, p.cards) for p in pieces])
        for a, pieces in import_string(provider)(allocations=allocations, since=since)
    ]


def _moved(changed: list[tuple[Any, list]]) -> list[tuple[Any, list]]:
    """Those of ``changed`` that held, at some time, other than their ``card_count``."""
    return [(a, ps) for a, ps in changed if any(n != a.card_count for _s, _e, n in ps)]


def peaks_as_held(
    *, rows: QuerySet, bounds: list[datetime], blocked: dict, peaks: dict[tuple, list]
) -> dict[tuple[int, int], list[tuple[int, datetime]]]:
    """``peaks`` (:func:`pools.capacity.availability.peaks_by_pool_model` of ``rows``,
    ``bounds`` and ``blocked``, which counts each allocation's latest ``card_count`` over its
    whole window) with the days before a reclamation's last change swept again with the cards
    each allocation of ``rows`` held at each instant, the card timeline's rule
    (:func:`card_pieces_changed_since`, as billing charges them): a shrink from 4 cards to 1 at
    06:00 held 4 until 06:00, an end undone at 05:00 held none between its reclamation and
    05:00. After its last change an allocation holds its ``card_count``, and changes are never
    in the future, so only the days up to the latest change after ``bounds[0]`` move (the first
    day, in practice), and only their pool × model pairs. One query (the allocations of
    ``rows`` changed after ``bounds[0]``), and two more when there are any: their rows, and the
    allocations of their pool × model pairs over those days. Each instant in ``bounds[0]``'s
    zone, as ``peaks``'."""
    start = bounds[0]
    changed = _moved(card_pieces_changed_since(rows.overlapping(start, bounds[-1]), start))
    if not changed:
        return peaks
    until = max(e for a, ps in changed for _s, e, n in ps if n != a.card_count)
    days = sum(1 for b in bounds[:-1] if b < until)
    pairs = {(a.pool_id, a.gpu_model_id) for a, _ps in changed}
    pieces = {a.pk: ps for a, ps in changed}
    held = (
        rows.overlapping(start, bounds[days])
        .filter(functools.reduce(operator.or_, (Q(pool_id=p, gpu_model_id=m) for p, m in pairs)))
        .only("pool_id", "gpu_model_id", "starts_at", "ends_at", "card_count")
    )
    intervals: dict[tuple, list] = defaultdict(list)
    for a in held:
        intervals[(a.pool_id, a.gpu_model_id)] += pieces.get(
            a.pk, [(a.starts_at, a.ends_at, a.card_count)]
        )
    zone = start.tzinfo
    out = dict(peaks)
    for pair in pairs:
        spans = intervals[pair] + [s for kind in blocked.get(pair, {}).values() for s in kind]
        swept = [(n, at.astimezone(zone)) for n, at in peaks_per_span(spans, bounds[: days + 1])]
        out[pair] = swept + list(peaks.get(pair, [(0, b) for b in bounds[:-1]])[days:])
    return out


def cards_moved_since(allocations: QuerySet, since: datetime) -> list[tuple[Any, list]]:
    """The allocations of ``allocations`` whose cards a reclamation changed after ``since`` to
    another count than their ``card_count`` at some time, each with the pieces ``(start, end,
    cards)`` of the cards it held over its window (:func:`card_pieces_changed_since`). One
    query when none changed, two when some did."""
    return _moved(card_pieces_changed_since(allocations, since))


def intervals_as_held(
    intervals: list[tuple[datetime, datetime, int]],
    allocations: QuerySet,
    *,
    since,
    moved: list[tuple[Any, list]] | None = None,
) -> list[tuple[datetime, datetime, int]]:
    """``intervals`` (``(starts_at, ends_at, cards)``, each allocation of ``allocations`` among
    them with its latest ``card_count`` over its whole window, as
    :func:`pools.capacity.availability.holding_intervals` gives them) with each allocation a
    reclamation changed after ``since`` in the pieces of the cards it held then
    (:func:`cards_moved_since`; ``moved`` when the caller read it already): its own interval
    taken out (one equal to it), its pieces put in. One query when none changed, two when some
    did, none when ``moved`` is given."""
    out = list(intervals)
    if moved is None:
        moved = cards_moved_since(allocations, since)
    for a, pieces in moved:
        whole = (a.starts_at, a.ends_at, a.card_count)
        if whole in out:
            out.remove(whole)
            out += pieces
    return out


def series_as_held(
    series: dict[tuple, list[int]], qs: QuerySet, keys: list[str], instants: list, *, since
) -> dict[tuple, list[int]]:
    """``series`` (:func:`cards_held_series` of ``qs``, ``keys`` and ``instants``, which sums
    each allocation's latest ``card_count`` at every instant of its window) with each
    allocation of ``qs`` a reclamation changed after ``since`` counted, at each instant, with
    the cards it held then (:func:`card_pieces_changed_since`): a shrink from 4 cards to 1 at
    06:00 is 4 at 04:00 and 1 at 07:00. ``keys`` as :func:`cards_held_series` reads them (a
    foreign key by its id). One query when none changed, two when some did."""
    out = {key: list(cards) for key, cards in series.items()}
    for a, pieces in _moved(card_pieces_changed_since(qs, since)):
        row = out.setdefault(tuple(a.serializable_value(k) for k in keys), [0] * len(instants))
        for i, t in enumerate(instants):
            if a.starts_at <= t < a.ends_at:
                held = next((n for s, e, n in pieces if s <= t < e), a.card_count)
                row[i] += held - a.card_count
    return out


def _slugs_and_names(teams: QuerySet[Team]) -> dict[int, tuple[str, str]]:
    """Team id -> (slug, name) of ``teams`` (one query)."""
    return {pk: (slug, name) for pk, slug, name in teams.values_list("pk", "slug", "name")}


def _teams_holding_most(window: QuerySet[Allocation]) -> RawQuerySet[Team]:
    """The :data:`TIMELINE_NAMED_TEAMS` teams whose allocations in ``window`` add up to the most
    cards, ties by name (id, slug and name read). Summed per team id first and joined with the teams
    after: joining every allocation with its team's name before grouping took twice as long
    (36,800 allocations of 9,800 teams at 100,800 GPUs: 65 against 145 ms, loaded machine)."""
    totals = window.values("team").annotate(total=Sum("card_count")).order_by()
    inner, params = totals.values_list("team", "total").query.sql_with_params()
    return Team.objects.raw(
        f"SELECT t.id, t.slug, t.name FROM ({inner}) AS s JOIN {Team._meta.db_table} AS t"
        " ON t.id = s.team ORDER BY s.total DESC, t.name LIMIT %s",
        [*params, TIMELINE_NAMED_TEAMS],
    )


def timeline_allocations(
    *, user, start, end, first: int, team: Team | None = None
) -> tuple[dict, dict]:
    """The user's allocations that held cards in ``[start, end)`` (:meth:`pools.capacity.
    models.AllocationQuerySet.held_during`, as the bars count them): how many per ``(pool id,
    model id)``, and the ``first`` of each by start (team joined, nothing else: the timeline
    links each to its request by id). The rows are read by id (one query) after the ranking
    (:func:`_timeline_ranking`, one query over ids only).

    The ranking -- the counts and the ids kept -- is kept in the shared cache as
    :func:`timeline_holdings`' sums are: under the allocations' generation, the window,
    ``first`` and whose allocations (every team, or the member's team ids: one small query),
    at most :data:`TIMELINE_CACHE_S`. At 100,800 GPUs it ranked the window's ~37,000
    allocations in 34-52 ms of the page (issue #29 item 7); inside a transaction ranked afresh
    and not kept (:func:`pools.common.generation.cached`). The rows are read afresh, so a
    renamed team shows its new name. ``team`` (one the user may see, checked by the caller):
    only its allocations, counted and listed; its id is the cache key's scope."""
    every = sees_every_team(user)
    scope = "every"
    if team is not None:
        scope = f"team:{team.pk}"
    elif not every:
        scope = ",".join(
            str(pk) for pk in sorted(Team.objects.visible_to(user).values_list("pk", flat=True))
        )
    digest = hashlib.sha256(f"{start.isoformat()}|{end.isoformat()}|{first}|{scope}".encode())
    key = f"capacity:timeline-allocations:{allocations_generation()}:{digest.hexdigest()}"
    counts, kept = cached(
        key,
        lambda: _timeline_ranking(user=user, start=start, end=end, first=first, team=team),
        TIMELINE_CACHE_S,
        fits=lambda found: isinstance(found, tuple),
    )
    listed: dict[tuple[int, int], list[Allocation]] = defaultdict(list)
    rows = Allocation.objects.filter(pk__in=kept).select_related("team").order_by("starts_at", "pk")
    for allocation in rows:
        listed[(allocation.pool_id, allocation.gpu_model_id)].append(allocation)
    return counts, listed


def _timeline_ranking(*, user, start, end, first: int, team=None) -> tuple[dict, list[int]]:
    """``({(pool id, model id): the user's allocations that held cards in the window},
    [the ids of the ``first`` of each by start, then id])``. One query over ids only, each
    chart's count a window over the same partition (ranking the whole rows took 5x as long at
    16,000 allocations)."""
    mine = allocation_list(user=user).held_during(start, end).whole_cards()
    if team is not None:
        mine = mine.filter(team=team)
    chart = [F("pool"), F("gpu_model")]
    ranked = (
        mine.annotate(
            rank=Window(RowNumber(), partition_by=chart, order_by=[F("starts_at"), F("pk")]),
            n=Window(Count("id"), partition_by=chart),
        )
        .filter(rank__lte=first)
        .values_list("pk", "pool", "gpu_model", "n")
    )
    counts, kept = {}, []
    for pk, pool, model, n in ranked:
        counts[(pool, model)] = n
        kept.append(pk)
    return counts, kept


def allocations_cost_so_far(allocations, *, now) -> dict:
    """Allocation id -> its reserved cost so far (an object with ``card_hours``, ``amount``,
    ``currency``, ``amount_text`` and ``reason``), from the function
    ``settings.ALLOCATION_COSTS_SO_FAR`` names (billing's, through the statements' price lookup;
    pools do not import billing); ``{}`` without one."""
    provider = getattr(settings, "ALLOCATION_COSTS_SO_FAR", "")
    return import_string(provider)(allocations=allocations, now=now) if provider else {}


def allocations_window_card_hours(allocations) -> dict[int, Decimal]:
    """Allocation id -> card-hours of its whole window (``Decimal``, unrounded), with the cards
    it held at each moment: a reclamation's shrink, end or undo changes them from then on
    (:func:`pools.reclamation.card_timeline.card_pieces` through the function
    ``settings.ALLOCATION_CARD_PIECES`` names; reclamation sits above capacity), the latest
    ``card_count`` without one. A MIG slice counts its share of a card (``g``/7). One query;
    reads each allocation's ``gpu_model`` slug (join it)."""
    allocations = list(allocations)
    provider = getattr(settings, "ALLOCATION_CARD_PIECES", "")
    pieces = import_string(provider)(allocations=allocations) if provider and allocations else {}
    out = {}
    for a in allocations:
        spans = [(p.cards, p.start, p.end) for p in pieces.get(a.pk, ())] or [
            (a.card_count, a.starts_at, a.ends_at)
        ]
        held = sum((card_hours(cards, start, end) for cards, start, end in spans), Decimal(0))
        share = card_share(a.mig_profile, model_key=a.gpu_model.slug)
        out[a.pk] = held * share.numerator / share.denominator
    return out


def unrepaired_drifts() -> QuerySet[SchedulerDrift]:
    """Drifts not repaired that are still the newest of their object (scheduler, team, subject):
    :meth:`pools.capacity.models.SchedulerDriftQuerySet.unrepaired`. Unordered; one query."""
    return SchedulerDrift.objects.unrepaired()
