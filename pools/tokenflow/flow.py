"""Token flow arithmetic (pure: no Django): one model call, a task's running totals, and the
figures the page and the advisor read from them.

Words: a **call** is one gateway record (one model request). It is *metered* when it reported
usage and no gateway cache replayed it (``cache_hit``: no GPU computed it — kept apart as in
billing); *unmetered* when it reported no usage (counted, never 0 tokens). ``input_tokens`` are
the prompt tokens *including* the cached ones (OpenAI usage semantics), so the cached share is
``cached ÷ input``. A **wasted** call is a ``retry`` or an ``error`` (seed ``004`` §4.3: 12 calls
a task, 7 of them spent on correcting tool arguments); its tokens are the wasted tokens.

A task's "first" and "last" call are its earliest and latest *metered* calls by time (ties: the
lower ``call_index``, then the one recorded first), so prompt growth within a task reads as
``last_input_tokens − first_input_tokens`` (``004`` §4.1: every call carries the whole
conversation so far).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from datetime import date, datetime, tzinfo


@dataclass(frozen=True)
class CallRow:
    """One call to store (``record_calls``). Token counts ``None``: the call reported no usage."""

    team_id: int
    served_model: str
    task_id: str
    source_key: str
    called_at: datetime
    input_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    replayed: bool = False
    call_index: int | None = None
    outcome: str | None = None
    latency_s: float | None = None
    tool_return_tokens: int | None = None

    @property
    def task_key(self) -> tuple[int, str, str]:
        return (self.team_id, self.served_model, self.task_id)

    @property
    def metered(self) -> bool:
        return self.input_tokens is not None and not self.replayed


def _order(at: datetime, index: int | None) -> tuple:
    return (at, index if index is not None else 1 << 30)


@dataclass
class TaskTotals:
    """A task's totals; the fields are :class:`~pools.tokenflow.models.AgentTask`'s columns."""

    first_call_at: datetime
    last_call_at: datetime
    calls: int = 0
    metered_calls: int = 0
    unmetered_calls: int = 0
    replayed_calls: int = 0
    outcomes_known: int = 0
    retries: int = 0
    errors: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    wasted_input_tokens: int = 0
    wasted_cached_tokens: int = 0
    wasted_output_tokens: int = 0
    tool_return_tokens: int = 0
    tool_return_calls: int = 0
    latency_s_total: float = 0.0
    latency_calls: int = 0
    first_metered_at: datetime | None = None
    first_metered_index: int | None = None
    first_input_tokens: int | None = None
    last_metered_at: datetime | None = None
    last_metered_index: int | None = None
    last_input_tokens: int | None = None

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def of(cls, call: CallRow) -> TaskTotals:
        """The totals of a task of one call."""
        totals = cls(first_call_at=call.called_at, last_call_at=call.called_at, calls=1)
        wasted = call.outcome in ("retry", "error")
        totals.outcomes_known = int(call.outcome is not None)
        totals.retries = int(call.outcome == "retry")
        totals.errors = int(call.outcome == "error")
        if call.input_tokens is None:
            totals.unmetered_calls = 1
        elif call.replayed:
            totals.replayed_calls = 1
        else:
            totals.metered_calls = 1
            cached, output = call.cached_tokens or 0, call.output_tokens or 0
            totals.input_tokens, totals.cached_tokens = call.input_tokens, cached
            totals.output_tokens = output
            if wasted:
                totals.wasted_input_tokens, totals.wasted_cached_tokens = call.input_tokens, cached
                totals.wasted_output_tokens = output
            totals.first_metered_at = totals.last_metered_at = call.called_at
            totals.first_metered_index = totals.last_metered_index = call.call_index
            totals.first_input_tokens = totals.last_input_tokens = call.input_tokens
        if call.tool_return_tokens is not None:
            totals.tool_return_tokens, totals.tool_return_calls = call.tool_return_tokens, 1
        if call.latency_s is not None:
            totals.latency_s_total, totals.latency_calls = call.latency_s, 1
        return totals

    def add(self, other: TaskTotals) -> None:
        """Fold ``other`` (later-recorded calls of the same task) into these totals."""
        self.first_call_at = min(self.first_call_at, other.first_call_at)
        self.last_call_at = max(self.last_call_at, other.last_call_at)
        for name in SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.first_metered_at is not None and (
            self.first_metered_at is None
            or _order(other.first_metered_at, other.first_metered_index)
            < _order(self.first_metered_at, self.first_metered_index)
        ):
            self.first_metered_at = other.first_metered_at
            self.first_metered_index = other.first_metered_index
            self.first_input_tokens = other.first_input_tokens
        if other.last_metered_at is not None and (
            self.last_metered_at is None
            or _order(other.last_metered_at, other.last_metered_index)
            > _order(self.last_metered_at, self.last_metered_index)
        ):
            self.last_metered_at = other.last_metered_at
            self.last_metered_index = other.last_metered_index
            self.last_input_tokens = other.last_input_tokens


SUMMED = (
    "calls", "metered_calls", "unmetered_calls", "replayed_calls", "outcomes_known", "retries",
    "errors", "input_tokens", "cached_tokens", "output_tokens", "wasted_input_tokens",
    "wasted_cached_tokens", "wasted_output_tokens", "tool_return_tokens", "tool_return_calls",
    "latency_s_total", "latency_calls",
)  # fmt: skip


def fold_calls(calls: list[CallRow]) -> dict[tuple[int, str, str], TaskTotals]:
    """The calls' totals per task key ``(team_id, served_model, task_id)``; the same as
    folding :meth:`TaskTotals.of` each call with :meth:`TaskTotals.add` in order, in one pass
    per task (a 50,000-call batch is folded in well under a second)."""
    groups: dict[tuple[int, str, str], list[CallRow]] = {}
    for call in calls:
        groups.setdefault(call.task_key, []).append(call)
    return {key: _totals(group) for key, group in groups.items()}


def _totals(group: list[CallRow]) -> TaskTotals:
    t = TaskTotals(first_call_at=min(c.called_at for c in group),
                   last_call_at=max(c.called_at for c in group), calls=len(group))  # fmt: skip
    metered = []
    for c in group:
        if c.outcome is not None:
            t.outcomes_known += 1
            t.retries += c.outcome == "retry"
            t.errors += c.outcome == "error"
        if c.input_tokens is None:
            t.unmetered_calls += 1
        elif c.replayed:
            t.replayed_calls += 1
        else:
            metered.append(c)
            cached, output = c.cached_tokens or 0, c.output_tokens or 0
            t.input_tokens += c.input_tokens
            t.cached_tokens += cached
            t.output_tokens += output
            if c.outcome in ("retry", "error"):
                t.wasted_input_tokens += c.input_tokens
                t.wasted_cached_tokens += cached
                t.wasted_output_tokens += output
        if c.tool_return_tokens is not None:
            t.tool_return_tokens += c.tool_return_tokens
            t.tool_return_calls += 1
        if c.latency_s is not None:
            t.latency_s_total += c.latency_s
            t.latency_calls += 1
    t.metered_calls = len(metered)
    if metered:
        first = min(metered, key=lambda c: _order(c.called_at, c.call_index))
        last = max(metered, key=lambda c: _order(c.called_at, c.call_index))
        t.first_metered_at, t.first_metered_index = first.called_at, first.call_index
        t.first_input_tokens = first.input_tokens
        t.last_metered_at, t.last_metered_index = last.called_at, last.call_index
        t.last_input_tokens = last.input_tokens
    return t


def ratio(part: float | None, whole: float | None) -> float | None:
    """``part ÷ whole``; ``None`` when either is unknown or ``whole`` is 0."""
    if part is None or not whole:
        return None
    return part / whole


# Calls per task on the distribution chart: 1, 2, … 15, then 16+ (the article's tasks take 4
# calls when healthy and 12 when retrying, so single calls matter up to there).
DISTRIBUTION_TOP = 16


def distribution(counts: dict[int, int]) -> list[tuple[str, int]]:
    """``{calls in a task: number of tasks}`` as chart bars ``[("1", n), … ("16+", n)]``; bars
    up to the largest count present (at least 1), the last one gathering everything above."""
    if not counts:
        return []
    top = min(max(counts), DISTRIBUTION_TOP)
    bars = [(str(k), counts.get(k, 0)) for k in range(1, top)]
    rest = sum(n for k, n in counts.items() if k >= top)
    bars.append((f"{top}+" if top == DISTRIBUTION_TOP else str(top), rest))
    return bars


def percentile(counts: dict[int, int], share: float) -> int | None:
    """The smallest value ``v`` with at least ``share`` (0–1) of the tasks at ``v`` or below
    (nearest-rank percentile over ``{value: tasks}``); ``None`` without tasks."""
    total = sum(counts.values())
    if not total:
        return None
    rank = max(1, math.ceil(round(share * total, 9)))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    return max(counts)


@dataclass(frozen=True)
class FlowSummary:
    """A set of tasks added up (one team and model over a period, usually); the sums are over
    the tasks' columns, ``first_input_*`` / ``last_input_*`` over the tasks with a metered call,
    ``calls_per_task`` is ``{calls in a task: tasks}``."""

    tasks: int
    sums: dict[str, float]
    first_input_sum: int
    last_input_sum: int
    tasks_metered: int
    calls_per_task: dict[int, int]
    extra: dict = field(default_factory=dict)

    def _sum(self, name: str) -> float:
        return self.sums.get(name) or 0

    @property
    def calls(self) -> int:
        return int(self._sum("calls"))

    @property
    def calls_per_task_mean(self) -> float | None:
        return ratio(self.calls, self.tasks)

    @property
    def input_tokens_per_call(self) -> float | None:
        return ratio(self._sum("input_tokens"), self._sum("metered_calls"))

    @property
    def output_tokens_per_call(self) -> float | None:
        return ratio(self._sum("output_tokens"), self._sum("metered_calls"))

    @property
    def cached_share(self) -> float | None:
        return ratio(self._sum("cached_tokens"), self._sum("input_tokens"))

    @property
    def retry_share(self) -> float | None:
        """Retries ÷ calls whose outcome is known; ``None`` when no outcome is known."""
        return ratio(self._sum("retries"), self._sum("outcomes_known"))

    @property
    def wasted_calls(self) -> int:
        return int(self._sum("retries") + self._sum("errors"))

    @property
    def wasted_share(self) -> float | None:
        """(Retries + errors) ÷ calls whose outcome is known."""
        return ratio(self.wasted_calls, self._sum("outcomes_known"))

    @property
    def latency_mean_s(self) -> float | None:
        return ratio(self._sum("latency_s_total"), self._sum("latency_calls"))

    @property
    def tool_return_tokens_mean(self) -> float | None:
        return ratio(self._sum("tool_return_tokens"), self._sum("tool_return_calls"))

    @property
    def first_call_input_mean(self) -> float | None:
        return ratio(self.first_input_sum, self.tasks_metered)

    @property
    def last_call_input_mean(self) -> float | None:
        return ratio(self.last_input_sum, self.tasks_metered)

    @property
    def calls_per_task_p50(self) -> int | None:
        return percentile(self.calls_per_task, 0.5)

    @property
    def calls_per_task_p90(self) -> int | None:
        return percentile(self.calls_per_task, 0.9)

    @property
    def bars(self) -> list[tuple[str, int]]:
        return distribution(self.calls_per_task)

    def bloat_signals(self) -> dict | None:
        """The advisor's rule-5 inputs (issue #31; h-advisor's ``PromptBloatSignals``), or
        ``None`` without tasks."""
        if not self.tasks:
            return None
        return {
            "tasks": self.tasks,
            "calls_per_task_mean": self.calls_per_task_mean,
            "input_tokens_first_call_mean": self.first_call_input_mean,
            "input_tokens_last_call_mean": self.last_call_input_mean,
            "tool_return_tokens_mean": self.tool_return_tokens_mean,
            "cached_share": self.cached_share,
            "retry_share": self.retry_share,
        }


DAY_SUMS = (
    *(name for name in SUMMED if name != "calls"),
    "tasks", "tasks_metered", "first_input_tokens", "last_input_tokens",
)  # fmt: skip
"""The summed columns of :class:`~pools.tokenflow.models.AgentTaskDay`."""

DayKey = tuple[int, str, date, int]  # team id, served model, day of the first call, calls


def day_figures(totals: TaskTotals) -> dict[str, float]:
    """One task's share of its :class:`~pools.tokenflow.models.AgentTaskDay` row
    (:data:`DAY_SUMS`): its summed columns, one task, and its first and last metered calls'
    input tokens when it has a metered call."""
    metered = totals.first_input_tokens is not None
    figures = {name: getattr(totals, name) for name in SUMMED if name != "calls"}
    figures |= {
        "tasks": 1,
        "tasks_metered": int(metered),
        "first_input_tokens": totals.first_input_tokens if metered else 0,
        "last_input_tokens": totals.last_input_tokens if metered else 0,
    }
    return figures


def fold_days(
    changes: list[tuple[tuple[int, str, str], TaskTotals, int]], zone: tzinfo
) -> dict[DayKey, dict[str, float]]:
    """The per-day rollup's changes: ``changes`` are ``(task key, totals, sign)`` — ``+1``
    a task's totals join their row, ``-1`` a task's earlier totals leave theirs — added up per
    :data:`DayKey` (the day of the first call in ``zone``). Keys whose changes cancel out are
    left out."""
    out: dict[DayKey, dict[str, float]] = {}
    for (team_id, model, _), totals, sign in changes:
        day = totals.first_call_at.astimezone(zone).date()
        row = out.setdefault((team_id, model, day, totals.calls), dict.fromkeys(DAY_SUMS, 0))
        for name, value in day_figures(totals).items():
            row[name] += sign * value
    return {key: row for key, row in out.items() if any(row.values())}
