"""Helpers for the billing tests: aware UTC datetimes, job records, an accounting stub."""

from __future__ import annotations

from datetime import UTC, datetime

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
