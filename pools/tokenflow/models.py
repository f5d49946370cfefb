"""Per-call gateway records of agent tasks (:class:`AgentCall`, kept
``settings.TOKENFLOW_CALL_RETENTION_DAYS``) and one running summary per task
(:class:`AgentTask`, kept for good), written together by
:func:`pools.tokenflow.services.record_calls`.

The summary is updated in the same transaction as the calls are inserted, so removing calls past
their retention (:func:`pools.tokenflow.services.tokenflow_prune`) drops detail, never a total.
A task is one team's: the same task id sent by two teams is two tasks (the key is team, served
model, task id). Token counts are whole tokens; ``None`` is unknown, never 0.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from pools.tenancy.models import team_owned
from pools.tokenflow.choices import CallOutcome


class AgentCall(models.Model):
    team = models.ForeignKey("pools.Team", on_delete=models.CASCADE, related_name="agent_calls")
    served_model = models.CharField(max_length=120)
    task_id = models.CharField(max_length=200)
    source_key = models.CharField(max_length=150, help_text="The record's idempotency key.")
    call_index = models.PositiveIntegerField(null=True, blank=True)
    called_at = models.DateTimeField()
    input_tokens = models.BigIntegerField(
        null=True, blank=True, help_text="Prompt tokens, cached ones included; empty: unmetered."
    )
    cached_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    tool_return_tokens = models.BigIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=8, choices=CallOutcome.choices, blank=True)
    latency_s = models.FloatField(null=True, blank=True)
    replayed = models.BooleanField(default=False, help_text="Replayed by the gateway's cache.")

    objects = team_owned("team").as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "source_key"], name="agent_call_once"),
            models.CheckConstraint(
                condition=Q(cached_tokens__lte=models.F("input_tokens"))
                | Q(cached_tokens__isnull=True),
                name="agent_call_cached_within_input",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "served_model", "task_id", "called_at"]),
            models.Index(fields=["called_at"]),
        ]
        ordering = ["team_id", "task_id", "called_at"]

    def __str__(self) -> str:
        return f"{self.task_id} call at {self.called_at:%Y-%m-%d %H:%M:%S}"


class AgentTask(models.Model):
    """One task's totals over all its calls (:class:`pools.tokenflow.flow.TaskTotals`)."""

    team = models.ForeignKey("pools.Team", on_delete=models.CASCADE, related_name="agent_tasks")
    served_model = models.CharField(max_length=120)
    task_id = models.CharField(max_length=200)
    first_call_at = models.DateTimeField()
    last_call_at = models.DateTimeField()
    calls = models.PositiveIntegerField(default=0)
    metered_calls = models.PositiveIntegerField(default=0)
    unmetered_calls = models.PositiveIntegerField(default=0)
    replayed_calls = models.PositiveIntegerField(default=0)
    outcomes_known = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    wasted_input_tokens = models.BigIntegerField(default=0)
    wasted_cached_tokens = models.BigIntegerField(default=0)
    wasted_output_tokens = models.BigIntegerField(default=0)
    tool_return_tokens = models.BigIntegerField(default=0)
    tool_return_calls = models.PositiveIntegerField(default=0)
    latency_s_total = models.FloatField(default=0.0)
    latency_calls = models.PositiveIntegerField(default=0)
    first_metered_at = models.DateTimeField(null=True, blank=True)
    first_metered_index = models.PositiveIntegerField(null=True, blank=True)
    first_input_tokens = models.BigIntegerField(null=True, blank=True)
    last_metered_at = models.DateTimeField(null=True, blank=True)
    last_metered_index = models.PositiveIntegerField(null=True, blank=True)
    last_input_tokens = models.BigIntegerField(null=True, blank=True)

    objects = team_owned("team").as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "served_model", "task_id"], name="agent_task_once_per_team"
            ),
            models.CheckConstraint(
                condition=Q(retries__lte=models.F("calls")) & Q(errors__lte=models.F("calls")),
                name="agent_task_outcomes_within_calls",
            ),
        ]
        indexes = [models.Index(fields=["team", "served_model", "first_call_at"])]
        ordering = ["team_id", "-first_call_at"]

    def __str__(self) -> str:
        return f"task {self.task_id} ({self.calls} calls)"


class AgentTaskDay(models.Model):
    """The tasks of one team and served model whose first call fell on ``day`` (a date in the
    billing time zone, ``settings.BILLING_TIME_ZONE``) and that took ``task_calls`` calls, added
    up: the per-day rollup the token-flow page, its API and its money totals read instead of
    scanning every task. Kept by :func:`pools.tokenflow.services.record_calls` in the same
    transaction as the tasks (a task that grows leaves its old row and joins its new one), so
    it always equals grouping :class:`AgentTask` by these four keys; pruning calls never
    touches it. The sums have :class:`AgentTask`'s column names (tokens, counts, seconds);
    ``first_input_tokens`` / ``last_input_tokens`` are over the ``tasks_metered`` tasks."""

    team = models.ForeignKey("pools.Team", on_delete=models.CASCADE, related_name="+")
    served_model = models.CharField(max_length=120)
    day = models.DateField()
    task_calls = models.PositiveIntegerField(help_text="Calls in each of these tasks.")
    # Signed: record_calls adds and subtracts in one upsert, and PostgreSQL checks a proposed
    # row's constraints before it finds the conflict.
    tasks = models.BigIntegerField(default=0)
    tasks_metered = models.BigIntegerField(default=0)
    metered_calls = models.BigIntegerField(default=0)
    unmetered_calls = models.BigIntegerField(default=0)
    replayed_calls = models.BigIntegerField(default=0)
    outcomes_known = models.BigIntegerField(default=0)
    retries = models.BigIntegerField(default=0)
    errors = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    wasted_input_tokens = models.BigIntegerField(default=0)
    wasted_cached_tokens = models.BigIntegerField(default=0)
    wasted_output_tokens = models.BigIntegerField(default=0)
    tool_return_tokens = models.BigIntegerField(default=0)
    tool_return_calls = models.BigIntegerField(default=0)
    latency_s_total = models.FloatField(default=0.0)
    latency_calls = models.BigIntegerField(default=0)
    first_input_tokens = models.BigIntegerField(default=0)
    last_input_tokens = models.BigIntegerField(default=0)

    objects = team_owned("team").as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "served_model", "day", "task_calls"], name="agent_task_day_once"
            ),
        ]
        ordering = ["team_id", "served_model", "day", "task_calls"]

    def __str__(self) -> str:
        return f"{self.served_model} {self.day}: {self.tasks} tasks of {self.task_calls} calls"
