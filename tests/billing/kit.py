"""Helpers for the billing tests: aware UTC datetimes, job records, an accounting stub, the
idle-cost rows of a month."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from billing import selectors
from scheduler_adapters.records import JobRecord, JobState


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def job(job_id, start, end, gpus, *, account="nlp", partition="train", state=None):
    """A JobRecord as accounting reports it (``gpus``: ``{gres type: cards}``)."""
    state = state or (JobState.COMPLETED if end else JobState.RUNNING)
    return JobRecord(
        job_id=job_id, name="j", account=account, user="u", partition=partition, state=state,
        state_reason=None, gpus_requested=gpus, gpus_allocated=gpus if start else {},
        submit=start or end, start=start, end=end,
        elapsed_s=int((end - start).total_seconds()) if start and end else None,
    )  # fmt: skip


class Accounting:
    """Any object with ``jobs_from_accounting`` will do for the importer."""

    def __init__(self, records):
        self.records = list(records)

    def jobs_from_accounting(self, start, end, *, accounts=None):
        return tuple(self.records)


class AccountingAt:
    """Accounting as slurmdbd answers at ``now``: the jobs in any state at some time of the
    window (sacct ``-S -E``) of ``accounts`` (all: ``None``); a job not started by ``now`` is
    not there yet, one ending after ``now`` is still running (no end)."""

    def __init__(self, records, now):
        self.records, self.now = list(records), now

    def jobs_from_accounting(self, start, end, *, accounts=None):
        seen = []
        for r in self.records:
            if r.start > self.now or (accounts is not None and r.account not in accounts):
                continue
            if r.end is not None and r.end > self.now:
                r = job(r.job_id, r.start, None, dict(r.gpus_allocated), account=r.account,
                        partition=r.partition)  # fmt: skip
            if r.start <= end and (r.end is None or r.end >= start):
                seen.append(r)
        return tuple(seen)


def idle_rows(month: date) -> list[tuple]:
    """The month's idle cost per pool as ``(pool slug, capacity cost, allocated cost, used
    outside allocations cost, idle cost, utilisation)``, in the selector's order."""
    return [
        (r.pool.slug, r.capacity_cost, r.allocated_cost, r.used_outside_cost, r.idle_cost,
         r.utilisation)
        for r in selectors.pool_idle_costs(month=month)
    ]  # fmt: skip


def used_on_2_march(team, gpu_model, hours: int, now: datetime) -> None:
    """``hours`` card-hours of ``gpu_model`` the team used outside reservations on 2 March
    2026 (one Slurm accounting record, written at ``now``), as the budget tests count them."""
    from factories import UsageRecordFactory

    start = datetime(2026, 3, 2, tzinfo=UTC)
    UsageRecordFactory(team=team, gpu_model=gpu_model, quantity=Decimal(hours * 3600),
                       basis="used", source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=3), month=date(2026, 3, 1),
                       created_at=now, updated_at=now)  # fmt: skip
