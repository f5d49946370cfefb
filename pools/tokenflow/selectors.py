"""Reading token flow: tasks a user may see, one team and model's flow over a period, a task's
calls, and the advisor's prompt-bloat signals. Every figure comes from the task summaries
(:class:`~pools.tokenflow.models.AgentTask`) or their per-day rollup
(:class:`~pools.tokenflow.models.AgentTaskDay`, for whole days in the billing time zone: what
the page and the API ask), so calls pruned past their retention still count; a task belongs to
the period of its first call."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime

from django.db.models import Count, F, Q, QuerySet, Sum

from pools.tokenflow.flow import SUMMED, FlowSummary
from pools.tokenflow.models import AgentCall, AgentTask, AgentTaskDay


def task_list(*, user) -> QuerySet[AgentTask]:
    """The tasks of the teams ``user`` may see (pools/tenancy ``visible_to``)."""
    return AgentTask.objects.visible_to(user)


def tasks_in(
    tasks: QuerySet[AgentTask], *, team_id: int | None = None, model: str | None = None,
    since: datetime | None = None, until: datetime | None = None,
) -> QuerySet[AgentTask]:  # fmt: skip
    """``tasks`` narrowed to a team, a served model and ``[since, until)`` of the first call."""
    if team_id is not None:
        tasks = tasks.filter(team_id=team_id)
    if model:
        tasks = tasks.filter(served_model=model)
    if since is not None:
        tasks = tasks.filter(first_call_at__gte=since)
    if until is not None:
        tasks = tasks.filter(first_call_at__lt=until)
    return tasks


def task_days_in(
    *, user, team_id: int | None = None, model: str | None = None,
    since: date | None = None, until: date | None = None,
) -> QuerySet[AgentTaskDay]:  # fmt: skip
    """The per-day rollup rows of the teams ``user`` may see, narrowed as :func:`tasks_in`
    narrows tasks, ``[since, until)`` being days (billing time zone) of the first call."""
    days = AgentTaskDay.objects.visible_to(user)
    if team_id is not None:
        days = days.filter(team_id=team_id)
    if model:
        days = days.filter(served_model=model)
    if since is not None:
        days = days.filter(day__gte=since)
    if until is not None:
        days = days.filter(day__lt=until)
    return days


def team_models(*, team_id: int) -> list[str]:
    """The served models the team's tasks called, by name (from the per-day rollup: the same
    set as the tasks', a few rows a day instead of every task)."""
    return _models(AgentTaskDay.objects.filter(team_id=team_id))


def visible_models(*, user) -> list[str]:
    """The served models the tasks of the teams ``user`` may see called, by name."""
    return _models(AgentTaskDay.objects.visible_to(user))


def _models(days: QuerySet[AgentTaskDay]) -> list[str]:
    return list(days.order_by("served_model").values_list("served_model", flat=True).distinct())


def _task_sums() -> dict:
    """The aggregates :func:`_summary` adds up, over :class:`AgentTask` rows of one group
    (:func:`prompt_bloat_signals_of`)."""
    metered = Q(first_input_tokens__isnull=False)
    return {
        "tasks_n": Count("id"),
        "first_input": Sum("first_input_tokens", filter=metered),
        "last_input": Sum("last_input_tokens", filter=metered),
        "tasks_metered": Count("id", filter=metered),
        **{f"s_{name}": Sum(name) for name in SUMMED if name != "calls"},
    }


def days_summary(days: QuerySet[AgentTaskDay], extra: dict | None = None) -> FlowSummary:
    """The flow figures of the tasks the rollup rows ``days`` add up (grouped by a task's
    number of calls, so the calls-per-task histogram comes from the same scan), in one query
    over the rollup (a few rows a day instead of every task). ``extra``: more
    summable aggregates over the same rows (``{name: Sum(...)}``), returned in
    :attr:`FlowSummary.extra` (billing's money totals; ``None`` when no group had a value)."""
    groups = (
        days.order_by()
        .values(calls=F("task_calls"))
        .annotate(
            tasks_n=Sum("tasks"),
            first_input=Sum("first_input_tokens"),
            last_input=Sum("last_input_tokens"),
            tasks_metered=Sum("tasks_metered"),
            **{f"s_{name}": Sum(name) for name in SUMMED if name != "calls"},
            **{f"x_{name}": value for name, value in (extra or {}).items()},
        )
    )
    return _summary(groups, list(extra or {}))


def _summary(groups, extra: list[str]) -> FlowSummary:
    """Add up the rows of :func:`days_summary` (one per calls count)."""
    totals: dict[str, float] = {name: 0 for name in SUMMED}
    more: dict = dict.fromkeys(extra)
    counts, n_tasks, first, last, n_metered = {}, 0, 0, 0, 0
    for row in groups:
        counts[row["calls"]] = row["tasks_n"]
        n_tasks += row["tasks_n"]
        n_metered += row["tasks_metered"]
        first += row["first_input"] or 0
        last += row["last_input"] or 0
        totals["calls"] += row["calls"] * row["tasks_n"]
        for name in SUMMED:
            if name != "calls":
                totals[name] += row[f"s_{name}"] or 0
        for name in extra:
            if (value := row[f"x_{name}"]) is not None:
                more[name] = value if more[name] is None else more[name] + value
    return FlowSummary(
        tasks=n_tasks,
        sums=totals,
        first_input_sum=first,
        last_input_sum=last,
        tasks_metered=n_metered,
        calls_per_task=counts,
        extra=more,
    )


def prompt_bloat_signals(team_id: int, model: str, since, until) -> dict | None:
    """For the advisor's rule 5 (prompt and tool-return bloat, seed ``004`` §4.1 and §5.1
    row 5): the team's tasks on ``model`` whose first call is in ``[since, until)``, as
    ``{tasks, calls_per_task_mean, input_tokens_first_call_mean, input_tokens_last_call_mean,
    tool_return_tokens_mean, cached_share, retry_share}`` (tokens per call, shares 0–1; each
    ``None`` when unknown — no metered call, no tool-return count, no outcome given), or
    ``None`` when there are no such tasks."""
    found = prompt_bloat_signals_of(team_ids=[team_id], since=since, until=until, model=model)
    return found.get((team_id, model))


def prompt_bloat_signals_of(
    *, team_ids: Iterable[int], since: datetime, until: datetime, model: str | None = None
) -> dict[tuple[int, str], dict]:
    """:func:`prompt_bloat_signals` of every served model (or only ``model``) of each of
    ``team_ids`` that has tasks with a first call in ``[since, until)``, keyed ``(team id,
    served model)``, in one query (grouped by team, model and calls a task; each group's rows
    added up as :func:`days_summary` adds its own): the advisor pass reads them for 2,000
    allocations at once. Pairs without tasks are absent."""
    tasks = AgentTask.objects.filter(team_id__in=list(team_ids))
    rows = (
        tasks_in(tasks, model=model, since=since, until=until)
        .order_by()
        .values("team_id", "served_model", "calls")
        .annotate(**_task_sums())
    )
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["team_id"], row["served_model"]].append(row)
    return {key: _summary(rows, []).bloat_signals() for key, rows in groups.items()}


def task_calls(*, task: AgentTask) -> QuerySet[AgentCall]:
    """The task's stored calls (those within retention), in call order."""
    return AgentCall.objects.filter(
        team_id=task.team_id, served_model=task.served_model, task_id=task.task_id
    ).order_by("called_at", "call_index", "pk")
