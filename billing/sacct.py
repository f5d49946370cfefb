"""Read ``sacct --parsable2`` output into :class:`~scheduler_adapters.records.JobRecord` s.

For sites that export accounting as text (``sacct -a -P -D -S … -E … --format=...``) instead of
running slurmrestd. :class:`SacctFile` offers the adapter Protocol's ``jobs_from_accounting``,
so the file goes through the same importer as the live cluster.

Rules (tricky cases C10, C12): only allocation rows count — ``1001.batch``/``1001.extern`` step
rows repeat the job's TRES; GPU counts come from ``AllocTRES`` by
:func:`billing.pricing.gpu_counts_from_tres`; durations prefer ``ElapsedRaw`` (integer seconds)
and fall back to parsing ``Elapsed``; ``Start``/``End`` of ``None``/``Unknown`` are missing,
never an error. Times without an offset are read in the cluster's zone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo

from billing.pricing import gpu_counts_from_tres, parse_slurm_duration
from scheduler_adapters.records import JobRecord, JobState
from scheduler_adapters.slurm.gres import parse_tres

UTC_ZONE = ZoneInfo("UTC")
DEFAULT_COLUMNS = ("JobID", "State", "Account", "Partition", "Submit", "Start", "End",
                   "ElapsedRaw", "AllocTRES")  # fmt: skip
_MISSING_TIME = {"", "NONE", "UNKNOWN", "N/A"}


def _time(text: str, zone: tzinfo) -> datetime | None:
    if text.strip().upper() in _MISSING_TIME:
        return None
    value = datetime.fromisoformat(text.strip())
    return value if value.tzinfo else value.replace(tzinfo=zone)


def _state(text: str) -> JobState | None:
    word = text.split()[0].upper() if text.strip() else ""  # "CANCELLED by 0"
    try:
        return JobState(word)
    except ValueError:
        return None


def read_sacct(
    text: str, *, columns: Sequence[str] | None = None, zone: tzinfo = UTC_ZONE
) -> list[JobRecord]:
    """One record per allocation row. A first line naming the columns (sacct without ``-n``)
    is used as the header; otherwise ``columns`` (default :data:`DEFAULT_COLUMNS`)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("$")]
    if lines and lines[0].split("|")[0] == "JobID":
        columns, lines = lines[0].split("|"), lines[1:]
    names = list(columns or DEFAULT_COLUMNS)
    records = []
    for line in lines:
        row = dict(zip(names, line.split("|"), strict=False))
        job_id = row.get("JobID", "")
        if "." in job_id:
            continue  # a step (batch, extern, 0, …): its TRES repeat the job's
        tres = parse_tres(row.get("AllocTRES", "")) or {}
        start = _time(row.get("Start", ""), zone)
        end = _time(row.get("End", ""), zone)
        raw = row.get("ElapsedRaw", "").strip()
        elapsed = int(raw) if raw.isdigit() else parse_slurm_duration(row.get("Elapsed"))
        records.append(
            JobRecord(
                job_id=int(job_id.split("_")[0].split("+")[0]),
                name=row.get("JobName") or None,
                account=row.get("Account") or None,
                user=row.get("User") or None,
                partition=row.get("Partition") or None,
                state=_state(row.get("State", "")),
                state_reason=None,
                gpus_requested={},
                gpus_allocated=gpu_counts_from_tres(tres) if start else {},
                submit=_time(row.get("Submit", ""), zone),
                start=start,
                end=end,
                elapsed_s=None if elapsed is None else int(elapsed),
            )
        )
    return records


class SacctFile:
    """``jobs_from_accounting`` over sacct text, for :func:`usage_import_slurm`."""

    def __init__(self, text: str, *, zone: tzinfo = UTC_ZONE) -> None:
        self.records = read_sacct(text, zone=zone)

    def jobs_from_accounting(self, start, end, *, accounts=None) -> tuple[JobRecord, ...]:
        return tuple(
            r
            for r in sorted(self.records, key=lambda r: r.job_id)
            if (r.end is None or r.end >= start)
            and (r.start is None or r.start <= end)
            and (accounts is None or r.account in accounts)
        )
