"""Read ``sacct --parsable2`` output into :class:`~scheduler_adapters.records.JobRecord` s.

For sites that export accounting as text (``sacct -a -P -D -S … -E … --format=...``) instead of
running slurmrestd. :class:`SacctFile` offers the adapter Protocol's ``jobs_from_accounting``,
so the file goes through the same importer as the live cluster.

Rules (tricky cases C10, C12):

- Only allocation rows count — ``1001.batch``/``1001.extern`` step rows repeat the job's TRES.
  ``JobIDRaw`` is the job id when the file has it (array tasks ``1001_1``, ``1001_2`` and
  heterogeneous components ``1001+0`` each have their own); without it, two rows of the same job
  id and start are one run printed twice and the second is rejected.
- GPU counts come from ``AllocTRES`` by :func:`billing.pricing.gpu_counts_from_tres`. A job that
  started with an empty or ``N/A`` ``AllocTRES`` has an unknown GPU count: the row is rejected,
  never charged as 0 cards.
- ``Start``/``End`` are wall-clock times of the machine that ran sacct (``SLURM_TIME_FORMAT``,
  default ``%Y-%m-%dT%H:%M:%S``) and are read in the cluster's ``zone``; ``None``/``Unknown`` are
  missing, never an error.
- The duration is ``ElapsedRaw`` (integer seconds; else ``Elapsed``, parsed) and the end is
  ``start + elapsed``. That settles an ``End`` in a DST fall-back hour (America/New_York
  2026-11-01 01:30 happens twice) and meters a job still running when sacct ran up to that
  moment, so importing the same file again changes nothing. An ambiguous ``Start`` is settled by
  the reading of ``End`` that gives the elapsed time.
- Without an elapsed time the run is ``End − Start``. A wall time that happens twice is read
  as its first occurrence (PEP 495 ``fold=0``, the DST offset) and one that does not exist (the
  spring-forward gap: the zone is probably wrong) by ``fold=0`` too, the offset before the
  change; either is reported for the line, the row is still imported.
- A ``JobName`` (or another free-text column, :data:`FREE_TEXT_COLUMNS`) holding the delimiter
  gives a line with more fields than the header. When it is the only free-text column the
  extra fields can only be its own: they are joined back and the line is read, with a
  ``delimiter_in_field`` note naming it. With several free-text columns it is rejected.
- A field holding a newline splits a record over lines: a line with too few fields is joined
  with the next ones while those cannot start a record (their job id column holds no job id),
  with a ``newline_in_field`` note.
- Any other line with more or fewer fields than the header, or a value that cannot be read, is
  rejected with its 1-based line number; the other lines are still read.
- ``sacct --json`` (the text starts with ``{``) is Slurm's data_parser output: the same
  ``jobs[]`` as slurmrestd's ``GET /slurmdb/<version>/jobs``, read by that version's dialect
  (:func:`read_sacct_json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal
from zoneinfo import ZoneInfo

from billing.pricing import gpu_counts_from_tres, parse_slurm_duration
from pools.common.validators import DATE_RANGE_MESSAGE, MAX_REQUEST_CARDS, date_in_range
from scheduler_adapters.documents import TooDeep, load_json
from scheduler_adapters.errors import UnexpectedResponse
from scheduler_adapters.records import JobRecord, JobState
from scheduler_adapters.slurm.dialects import DIALECTS, known_versions
from scheduler_adapters.slurm.gres import parse_tres

UTC_ZONE = ZoneInfo("UTC")
DEFAULT_COLUMNS = ("JobID", "State", "Account", "Partition", "Submit", "Start", "End",
                   "ElapsedRaw", "AllocTRES")  # fmt: skip
DEFAULT_DELIMITER = "|"
_MISSING_TIME = {"", "NONE", "UNKNOWN", "N/A"}
_UNKNOWN_TRES = {"", "N/A"}
_ID_COLUMNS = ("JobIDRaw", "JobID")
_DIGITS = re.compile(r"[0-9]+")
#: sacct --format fields whose text users or admins choose, so they may hold the delimiter or a
#: newline (sacct prints them as they are); every other field is Slurm's own vocabulary.
FREE_TEXT_COLUMNS = frozenset({
    "JobName", "Comment", "AdminComment", "SystemComment", "WorkDir", "SubmitLine",
    "Constraints", "Extra", "Container", "StdIn", "StdOut", "StdErr",
})  # fmt: skip
# JobID / JobIDRaw as sacct prints them: 1001, 1001_7, 1001_[1-3%2], 1001+0, 1001.batch.
_JOB_ID = re.compile(r"\d+(_\d+|_\[[^\]]*\]|\+\d+)?(\.[\w-]+)?")

# Longest run a line may claim: a year (366 days). Sites cap jobs at days or weeks (MaxTime);
# an ElapsedRaw of 10**20 s is a corrupt line, and would overflow the end time besides.
MAX_ELAPSED_S = 366 * 24 * 3600


class SacctUnusable(ValueError):
    """The text as a whole cannot be metered (its header lacks a column the meter needs)."""


@dataclass(frozen=True)
class SacctLineIssue:
    """A line that was rejected (``rejected``) or imported with a reading worth a look."""

    line: int
    code: str
    detail: str
    rejected: bool

    def as_issue(self) -> dict[str, object]:
        return {"line": self.line, "code": self.code, "detail": self.detail}


@dataclass
class SacctRead:
    records: list[JobRecord] = field(default_factory=list)
    issues: list[SacctLineIssue] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return sum(1 for issue in self.issues if issue.rejected)


class _Rejected(ValueError):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def read_sacct(
    text: str,
    *,
    columns: Sequence[str] | None = None,
    zone: tzinfo = UTC_ZONE,
    delimiter: str = DEFAULT_DELIMITER,
    time_format: str | None = None,
) -> SacctRead:
    """One record per allocation row, and the lines that were rejected or need a look.

    A first line naming the columns (sacct without ``-n``) is used as the header; otherwise
    ``columns`` (default :data:`DEFAULT_COLUMNS`). ``sacct -p`` (a delimiter after the last
    field too) reads like ``-P``. ``time_format`` is ``SLURM_TIME_FORMAT`` as a ``strptime``
    format; ``None`` reads ISO 8601 (sacct's default). Raises :class:`SacctUnusable` when the
    header lacks a job id, ``Start``, ``AllocTRES``, or all of ``End``/``ElapsedRaw``/``Elapsed``.
    """
    # split("\n"), not splitlines(): a job name may hold \x0b, \x1c or U+2028, which
    # splitlines() would treat as line ends and so shift every later line number.
    numbered = [
        (number, line.removesuffix("\r"))
        for number, line in enumerate(text.split("\n"), start=1)
        if line.strip() and not line.startswith("$")  # "$ sacct …", the command echoed
    ]
    names = list(columns or DEFAULT_COLUMNS)
    if numbered and set(numbered[0][1].split(delimiter)) & set(_ID_COLUMNS):
        names, numbered = numbered[0][1].split(delimiter), numbered[1:]
    elif numbered and numbered[0][1].startswith("JobID"):
        raise SacctUnusable(
            f"the header {numbered[0][1]!r} does not split on the delimiter {delimiter!r}; "
            "pass the one sacct was given (--delimiter)"
        )
    trailing = bool(names) and names[-1] == ""  # sacct -p ends every line with the delimiter
    if trailing:
        names = names[:-1]
    _check_columns(names)
    read = SacctRead()
    seen: dict[tuple[int, datetime | None], int] = {}
    for number, fields, notes in _rows(numbered, names, delimiter, trailing):
        try:
            if len(fields) > len(names):
                fields = _rejoined(fields, names, delimiter, notes)
            if len(fields) != len(names):
                raise _field_count(len(fields), len(names), delimiter)
            row = dict(zip(names, fields, strict=True))
            if "." in (row.get("JobID") or row.get("JobIDRaw", "")):
                continue  # a step (batch, extern, 0, …): its TRES repeat the job's
            record = _record(row, zone, time_format, notes)
            key = (record.job_id, record.start)
            if record.start is not None and key in seen:  # never-ran rows charge nothing
                raise _Rejected(
                    "duplicate_job",
                    f"job {record.job_id} with the same start is already on line {seen[key]} "
                    "(array tasks or heterogeneous components: add JobIDRaw to --format)",
                )
        except _Rejected as problem:
            read.issues.append(SacctLineIssue(number, problem.code, problem.detail, True))
            continue
        seen[key] = number
        read.records.append(record)
        read.issues.extend(SacctLineIssue(number, code, detail, False) for code, detail in notes)
    return read


def _rows(
    numbered: list[tuple[int, str]], names: Sequence[str], delimiter: str, trailing: bool
) -> Iterator[tuple[int, list[str], list[tuple[str, str]]]]:
    """``(first line number, fields, notes)`` per record.

    A line with fewer fields than the header is joined (with the ``\n`` sacct printed) to the
    lines after it while it still has too few and the next line cannot start a record: its
    job id column holds no job id. The join is noted for the record's first line.
    """
    position = _id_position(names)
    index = 0
    while index < len(numbered):
        number, line = numbered[index]
        index += 1
        joined = 0
        while (
            len(_split(line, delimiter, trailing)) < len(names)
            and index < len(numbered)
            and not _starts_record(numbered[index][1], delimiter, position)
        ):
            line = f"{line}\n{numbered[index][1]}"
            index += 1
            joined += 1
        notes: list[tuple[str, str]] = []
        if joined:
            notes.append((
                "newline_in_field",
                f"lines {number}-{number + joined} are one record: a field holds a newline "
                "(the next line could not start a record); read joined",
            ))  # fmt: skip
        yield number, _split(line, delimiter, trailing), notes


def _split(line: str, delimiter: str, trailing: bool) -> list[str]:
    return (line.removesuffix(delimiter) if trailing else line).split(delimiter)


def _id_position(names: Sequence[str]) -> int:
    return next(i for i, name in enumerate(names) if name in _ID_COLUMNS)


def _starts_record(line: str, delimiter: str, position: int) -> bool:
    fields = line.split(delimiter)
    return len(fields) > position and _JOB_ID.fullmatch(fields[position].strip()) is not None


def _rejoined(
    fields: list[str], names: Sequence[str], delimiter: str, notes: list[tuple[str, str]]
) -> list[str]:
    """Put the delimiters a free-text column held back into it, when it is the only one.

    Every other column is Slurm's own (ids, states, times, TRES) and never holds the
    delimiter, so the extra fields can only have come from the free-text column: it is fields
    ``i .. i + extra`` joined again. With several free-text columns the split is a guess:
    the fields are returned as they are (and the line rejected).
    """
    free = [i for i, name in enumerate(names) if name in FREE_TEXT_COLUMNS]
    if len(free) != 1:
        return fields
    i, extra = free[0], len(fields) - len(names)
    value = delimiter.join(fields[i : i + extra + 1])
    notes.append((
        "delimiter_in_field",
        f"{names[i]} holds the delimiter {delimiter!r} ({extra} time(s)): read as {value!r}, "
        "the only free-text column",
    ))  # fmt: skip
    return [*fields[:i], value, *fields[i + extra + 1 :]]


def read_sacct_json(text: str) -> SacctRead:
    """Records of ``sacct --json`` output.

    The output names its shape in ``meta.plugin.data_parser`` (``"data_parser/v0.0.41"``;
    22.05's v0.0.38 in ``meta.plugin.type``, ``"openapi/dbv0.0.38"``) and is read by that
    version's dialect, as slurmrestd's answer is. Times are epoch seconds, so no time zone
    is involved. Raises :class:`SacctUnusable` for text that is not JSON, a version the
    adapter does not speak, or a shape that version does not have.
    """
    try:
        payload = load_json(text)
    except json.JSONDecodeError as problem:
        raise SacctUnusable(f"not JSON (line {problem.lineno}: {problem.msg})") from None
    except TooDeep as problem:
        raise SacctUnusable(f"not readable JSON: {problem}") from None
    version = _data_parser_version(payload)
    if version not in DIALECTS:
        raise SacctUnusable(
            f"sacct --json output of data parser {version or 'unknown'!r}; this portal reads "
            f"{known_versions()}: export with sacct --json=<one of them> or as sacct -P text"
        )
    try:
        records = DIALECTS[version].read_accounting_jobs(payload)
    except UnexpectedResponse as problem:
        raise SacctUnusable(f"sacct --json ({version}): {problem}") from None
    except (OverflowError, ValueError) as problem:  # e.g. an epoch of 1e20 s: no datetime
        raise SacctUnusable(f"sacct --json ({version}): a value out of range: {problem}") from None
    return SacctRead(records=sorted(records, key=lambda r: r.job_id))


def _data_parser_version(payload: object) -> str | None:
    meta = payload.get("meta") if isinstance(payload, dict) else None
    plugin = meta.get("plugin") if isinstance(meta, dict) else None
    if not isinstance(plugin, dict):
        return None
    for key, prefix in (("data_parser", "data_parser/"), ("type", "openapi/db")):
        value = plugin.get(key)
        if isinstance(value, str) and value.startswith(prefix):
            return value.removeprefix(prefix)
    return None


def _check_columns(names: Sequence[str]) -> None:
    missing = []
    if not set(names) & set(_ID_COLUMNS):
        missing.append("JobID")
    missing.extend(name for name in ("Start", "AllocTRES") if name not in names)
    if not set(names) & {"End", "ElapsedRaw", "Elapsed"}:
        missing.append("ElapsedRaw")
    if missing:
        raise SacctUnusable(
            f"the sacct columns lack {', '.join(missing)} "
            f"(found {', '.join(names) or 'none'}); use --format=JobID,JobIDRaw,State,Account,"
            "Partition,Start,End,ElapsedRaw,AllocTRES"
        )


def _field_count(found: int, expected: int, delimiter: str) -> _Rejected:
    if found > expected:
        return _Rejected(
            "too_many_fields",
            f"{found} fields where the header has {expected}: a free-text field contains the "
            f"delimiter {delimiter!r} and there is more than one free-text column to put it "
            "back in; export with sacct --delimiter=<a character no field holds> and pass the "
            "same --delimiter",
        )
    return _Rejected("too_few_fields", f"{found} fields where the header has {expected}")


def _record(
    row: dict[str, str], zone: tzinfo, time_format: str | None, notes: list[tuple[str, str]]
) -> JobRecord:
    job_id = _job_id(row)
    start_wall = _wall(row, "Start", time_format)
    end_wall = _wall(row, "End", time_format)
    elapsed = _elapsed(row)
    start, end, others = _run(start_wall, end_wall, elapsed, zone, notes)
    gpus: dict[str | None, Decimal] = {}
    if start is not None:
        text = row["AllocTRES"].strip()
        if text.upper() in _UNKNOWN_TRES:
            raise _Rejected(
                "unknown_gpu_count",
                f"AllocTRES is {text or 'empty'!r} for a job that started: GPU count unknown, "
                "not charged",
            )
        try:
            tres = parse_tres(text) or {}
        except ValueError as problem:
            raise _Rejected("unreadable_value", f"AllocTRES: {problem}") from None
        _check_gpu_counts(tres)
        gpus = gpu_counts_from_tres(tres)
    submit_wall = _wall(row, "Submit", time_format)
    return JobRecord(
        job_id=job_id,
        name=row.get("JobName") or None,
        account=row.get("Account") or None,
        user=row.get("User") or None,
        partition=row.get("Partition") or None,
        state=_state(row.get("State", "")),
        state_reason=None,
        gpus_requested={},
        gpus_allocated=gpus,
        submit=None if submit_wall is None else _first_reading(submit_wall, zone),
        start=start,
        end=end,
        elapsed_s=elapsed,
        start_other_reading=others[0],
        end_other_reading=others[1],
    )


def _check_gpu_counts(tres: dict[str, Decimal]) -> None:
    """A GPU count below 0 or above :data:`pools.common.validators.MAX_REQUEST_CARDS` (more cards
    than the largest clusters hold) is a corrupt line, not a bill."""
    for name, count in tres.items():
        if name.startswith("gres/gpu") and not 0 <= count <= MAX_REQUEST_CARDS:
            raise _Rejected(
                "out_of_range",
                f"AllocTRES {name}={count}: a GPU count is 0 to {MAX_REQUEST_CARDS:,}",
            )


def _job_id(row: dict[str, str]) -> int:
    raw = row.get("JobIDRaw", "").strip()
    text = raw or row.get("JobID", "").strip()
    # JobID prints array tasks as 1001_7 / 1001_[1-3] and het components as 1001+0
    head = text if raw else text.split("_")[0].split("+")[0]
    if not _DIGITS.fullmatch(head):  # str.isdigit() takes '²', which int() refuses
        raise _Rejected("unreadable_value", f"job id {text!r} is not a number")
    return int(head)


def _wall(row: dict[str, str], column: str, time_format: str | None) -> datetime | None:
    text = row.get(column, "").strip()
    if text.upper() in _MISSING_TIME:
        return None
    try:
        wall = datetime.strptime(text, time_format) if time_format else datetime.fromisoformat(text)
    except ValueError:
        shape = time_format or "ISO 8601, %Y-%m-%dT%H:%M:%S"
        raise _Rejected("unreadable_value", f"{column} {text!r} is not a time ({shape})") from None
    if not date_in_range(wall):
        raise _Rejected("out_of_range", f"{column} {text!r}: {DATE_RANGE_MESSAGE}")
    return wall


def _elapsed(row: dict[str, str]) -> int | None:
    raw = row.get("ElapsedRaw", "").strip()
    if raw:
        if not _DIGITS.fullmatch(raw):
            raise _Rejected("unreadable_value", f"ElapsedRaw {raw!r} is not a whole number")
        return _bounded_elapsed("ElapsedRaw", int(raw))
    try:
        seconds = parse_slurm_duration(row.get("Elapsed"))
    except ValueError as problem:
        raise _Rejected("unreadable_value", f"Elapsed: {problem}") from None
    return None if seconds is None else _bounded_elapsed("Elapsed", int(seconds))


def _bounded_elapsed(column: str, seconds: int) -> int:
    if seconds > MAX_ELAPSED_S:
        raise _Rejected(
            "out_of_range", f"{column} {seconds} s is longer than a year ({MAX_ELAPSED_S:,} s)"
        )
    return seconds


def _readings(wall: datetime, zone: tzinfo) -> list[datetime]:
    """The UTC instants a wall-clock time can be in ``zone``, earliest first: one, two (the
    hour repeated when DST ends) or none (skipped when it starts)."""
    if wall.tzinfo is not None:
        return [wall.astimezone(UTC)]
    found: list[datetime] = []
    for fold in (0, 1):
        # compare in UTC: datetimes sharing a tzinfo compare and subtract ignoring fold
        instant = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == wall and instant not in found:
            found.append(instant)
    return sorted(found)


def _first_reading(wall: datetime, zone: tzinfo) -> datetime:
    """PEP 495 ``fold=0``: the first of a repeated time, the offset before a skipped one."""
    if wall.tzinfo is not None:
        return wall.astimezone(UTC)
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


def _run(
    start_wall: datetime | None,
    end_wall: datetime | None,
    elapsed: int | None,
    zone: tzinfo,
    notes: list[tuple[str, str]],
) -> tuple[datetime | None, datetime | None, tuple[datetime | None, datetime | None]]:
    """``(start, end, (other start, other end))`` as UTC instants (see the module's rules for
    DST); the others are the second readings of a repeated start/end that nothing settled."""
    unsettled: tuple[datetime | None, datetime | None] = (None, None)
    if start_wall is None:  # never ran: nothing is charged, so the end needs no care
        return None, None if end_wall is None else _first_reading(end_wall, zone), unsettled
    starts = _readings(start_wall, zone)
    if elapsed is not None:
        duration = timedelta(seconds=elapsed)
        ends = _readings(end_wall, zone) if end_wall is not None else []
        fitting = [s for s in starts if any(e - s == duration for e in ends)]
        if len(starts) == 1:
            start = starts[0]
        elif fitting:
            # both fit only when the whole run lies in the repeated hour: the charge is the
            # same either way, so the first reading is taken without a note
            start = fitting[0]
        else:
            start = _noted(start_wall, "Start", zone, notes, hint="")
        return start, start + duration, unsettled
    hint = "; add ElapsedRaw to the sacct format to settle it"
    start = _noted(start_wall, "Start", zone, notes, hint=hint)
    end = None if end_wall is None else _noted(end_wall, "End", zone, notes, hint=hint)
    return start, end, (_second_reading(start_wall, zone), _second_reading(end_wall, zone))


def _second_reading(wall: datetime | None, zone: tzinfo) -> datetime | None:
    """The later UTC instant of a wall time that happened twice, else ``None``."""
    readings = [] if wall is None else _readings(wall, zone)
    return readings[1] if len(readings) == 2 else None


def _noted(
    wall: datetime, column: str, zone: tzinfo, notes: list[tuple[str, str]], *, hint: str
) -> datetime:
    """``wall`` read by :func:`_first_reading`, with a note when that was a choice."""
    readings = _readings(wall, zone)
    chosen = _first_reading(wall, zone)
    if len(readings) == 1:
        return chosen
    offset = chosen.astimezone(zone).strftime("%z")
    shown = wall.strftime("%Y-%m-%dT%H:%M:%S")
    if readings:
        notes.append((
            "ambiguous_time",
            f"{column} {shown} happens twice in {zone} (DST ends): read as the first, "
            f"UTC{offset}{hint}",
        ))  # fmt: skip
    else:
        notes.append((
            "nonexistent_time",
            f"{column} {shown} does not exist in {zone} (skipped when DST starts; is the "
            f"time zone right?): read with the offset before the change, UTC{offset}",
        ))  # fmt: skip
    return chosen


def _state(text: str) -> JobState | None:
    word = text.split()[0].upper() if text.strip() else ""  # "CANCELLED by 0"
    try:
        return JobState(word)
    except ValueError:
        return None


class SacctFile:
    """``jobs_from_accounting`` over sacct text (``-P``, or ``--json``), for
    :func:`usage_import_slurm`; ``issues`` are the lines :func:`read_sacct` rejected or noted."""

    def __init__(
        self,
        text: str,
        *,
        zone: tzinfo = UTC_ZONE,
        delimiter: str = DEFAULT_DELIMITER,
        time_format: str | None = None,
    ) -> None:
        if text.lstrip().startswith("{"):
            read = read_sacct_json(text)
        else:
            read = read_sacct(text, zone=zone, delimiter=delimiter, time_format=time_format)
        self.records = read.records
        self.issues = read.issues
        self.rejected = read.rejected

    def jobs_from_accounting(self, start, end, *, accounts=None) -> tuple[JobRecord, ...]:
        return tuple(
            r
            for r in sorted(self.records, key=lambda r: r.job_id)
            if (r.end is None or r.end >= start)
            and (r.start is None or r.start <= end)
            and (accounts is None or r.account in accounts)
        )
