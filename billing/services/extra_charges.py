"""Extra charges (issue 35; seed 004 §5.2: rented capacity is billed with storage and network on
top): shared storage in GB-months and network egress in GB, per team (and pool), imported from
a CSV. Priced on statements by the rate card's storage / egress prices, through the statements'
one pricer (:func:`billing.charges.lines_from_sums`).

The CSV (header required, any column order)::

    team,pool,charge,quantity,start,end
    nlp,rented-infer,storage,500,2026-10-01T00:00:00+00:00,2026-10-16T12:00:00+00:00
    nlp,rented-infer,egress,120,2026-10-01,2026-11-01

- ``team``: a team's slug; ``pool``: a pool's slug or empty (no pool: priced at the card's
  storage / egress price for every pool);
- ``charge``: ``storage`` — ``quantity`` GB held over ``[start, end)``, metered as GB-months:
  GB × the share of the billing month held (:func:`billing.pricing.gb_months`; 500 GB for half
  of October = 250 GB-months); ``egress`` — ``quantity`` GB (10^9 bytes) sent over
  ``[start, end)``, shared among the months it spans by their seconds;
- ``start`` / ``end``: ISO 8601 with an offset, or a date (that day's midnight in the billing
  time zone).

A line that cannot be read (unknown team or pool, unknown charge, a quantity that is not a
non-negative number, a time without an offset, an end not after its start, a line repeated
in the file) is reported with its line number and reason; every other line is kept. Records
are keyed by the line's content, so importing the same file again changes nothing.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.utils import timezone

from billing.choices import ChargeBasis, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.models import UsageImport, UsageRecord
from billing.pricing import gb_months, local_midnight, month_seconds, split_at_months
from billing.services.usage_import import ImportReport, usage_import_save, usage_records_upsert
from pools.inventory.models import Pool
from pools.tenancy.models import Team

COLUMNS = ("team", "pool", "charge", "quantity", "start", "end")
CHARGES = {
    "storage": (ChargeBasis.STORAGE, UsageUnit.GB_MONTHS),
    "egress": (ChargeBasis.EGRESS, UsageUnit.GB),
}
MAX_GB = Decimal(10) ** 12  # a petabyte-scale guard: anything above is a typo (bytes for GB)


@dataclass
class ExtraChargesReport:
    """What an import did: ``lines`` read, ``records`` written (``created`` / ``updated`` /
    ``unchanged``), and ``rejected``: ``{"line": n, "error": reason}`` per bad line."""

    lines: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    import_id: int | None = None


def _when(text: str, zone) -> datetime:
    text = text.strip()
    try:
        if len(text) == 10:
            return local_midnight(date.fromisoformat(text), zone)
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 date or time") from None
    if timezone.is_naive(value):
        raise ValueError(f"{text!r} has no UTC offset")
    return value


def _quantity(text: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"quantity {text!r} is not a number") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"quantity {text!r} is not a non-negative number of GB")
    if value > MAX_GB:
        raise ValueError(f"quantity {text!r} GB is implausibly large (bytes instead of GB?)")
    return value


def _elapsed_s(start: datetime, end: datetime) -> int:
    """Seconds from ``start`` to ``end`` in UTC (two times of one ``ZoneInfo`` subtract as wall
    times: 1 Oct to 1 Nov 2026 in Europe/Berlin is 745 h, not 744)."""
    return int((end.astimezone(UTC) - start.astimezone(UTC)).total_seconds())


def _records(row: dict[str, str], team: Team, pool: Pool | None, zone) -> list[UsageRecord]:
    charge = row["charge"].strip().lower()
    if charge not in CHARGES:
        raise ValueError(f"charge {row['charge']!r} is not one of {', '.join(CHARGES)}")
    basis, unit = CHARGES[charge]
    gb = _quantity(row["quantity"])
    start, end = _when(row["start"], zone), _when(row["end"], zone)
    if end <= start:
        raise ValueError("end is not after start")
    total_s = _elapsed_s(start, end)
    key = f"{charge}:{team.slug}:{pool.slug if pool else '-'}:{start.isoformat()}:{end.isoformat()}"
    records = []
    for month, piece_start, piece_end in split_at_months(start, end, zone):
        seconds = _elapsed_s(piece_start, piece_end)
        if unit == UsageUnit.GB_MONTHS:
            quantity = gb_months(gb, seconds, month_seconds(month, zone))
        else:
            quantity = (gb * seconds / total_s).quantize(Decimal("0.000001"))
        records.append(
            UsageRecord(
                team=team, pool=pool, quantity=quantity, unit=unit, basis=basis, month=month,
                period_start=piece_start, period_end=piece_end,
                source=UsageSource.EXTRA_CHARGES_CSV, source_id=f"{key}:{month:%Y-%m}"[:200],
            )
        )  # fmt: skip
    return records


def _line_records(
    row: dict[str, str | None], number: int, lookups: tuple[dict, dict], zone, seen: dict[str, int]
) -> list[UsageRecord]:
    """The records of CSV line ``number`` (``row`` as :class:`csv.DictReader` reads it), its
    team and pool found in ``lookups`` (``({slug: Team}, {slug: Pool})``). ``seen`` maps a
    charge's first record's ``source_id`` to the line it was read on, and is updated. Raises
    ``ValueError`` with the reason when the line cannot be read (module docstring) or repeats
    an earlier one."""
    teams, pools = lookups
    if None in row or any(row.get(c) is None for c in COLUMNS):
        raise ValueError("the line does not have the header's columns")
    team = teams.get(row["team"].strip())
    if team is None:
        raise ValueError(f"no team {row['team']!r}")
    pool_slug = row["pool"].strip()
    pool = pools.get(pool_slug) if pool_slug else None
    if pool_slug and pool is None:
        raise ValueError(f"no pool {pool_slug!r}")
    found = _records(row, team, pool, zone)
    first = seen.setdefault(found[0].source_id, number)
    if first != number:
        raise ValueError(f"the same charge as line {first}")
    return found


def _save(records: list[UsageRecord], report: ExtraChargesReport, now: datetime) -> None:
    """Upsert ``records``, save the :class:`UsageImport` over their span (``now`` when there
    are none) with ``report``'s rejected lines as its issues, and copy the counts and the
    import's id into ``report``."""
    usage = ImportReport(issues=list(report.rejected))
    usage_records_upsert(records, usage, now)
    report.created, report.updated, report.unchanged = usage.created, usage.updated, usage.unchanged
    window_start = min((r.period_start for r in records), default=now)
    window_end = max((r.period_end for r in records), default=now)
    saved: UsageImport = usage_import_save(
        UsageSource.EXTRA_CHARGES_CSV, window_start, window_end, usage
    )
    report.import_id = saved.pk


@transaction.atomic
def extra_charges_import(*, text: str, now: datetime | None = None) -> ExtraChargesReport:
    """Import storage / egress usage from CSV ``text`` (module docstring); bad lines are
    reported and the rest kept. Raises ``ValueError`` when the header lacks a column (nothing
    can be read)."""
    now = now or timezone.now()
    zone = billing_zone()
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"the CSV has no column {', '.join(missing)} (header: {COLUMNS})")
    lookups = ({t.slug: t for t in Team.objects.all()}, {p.slug: p for p in Pool.objects.all()})
    report = ExtraChargesReport()
    records: list[UsageRecord] = []
    seen: dict[str, int] = {}
    for number, row in enumerate(reader, start=2):
        report.lines += 1
        try:
            records.extend(_line_records(row, number, lookups, zone, seen))
        except ValueError as exc:
            report.rejected.append({"line": number, "error": str(exc)})
    _save(records, report, now)
    return report
