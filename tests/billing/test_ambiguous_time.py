"""Issue 38, item 3: without ElapsedRaw, a job starting in the hour repeated when DST ends is
billed at the first reading, and the usage record says so (flag ``ambiguous_time`` with the
other reading), as do the statement line and the team's month page.

tests/fixtures/sacct/dst_repeated_hour_without_elapsed.txt (New York, no ElapsedRaw): job 8401,
2 x a100, Start 2026-11-01T01:30 (happens twice), End 05:30 (EST only).
  first reading: 01:30 EDT = 05:30Z -> 05:30 EST = 10:30Z: 5 h x 2 cards = 10 card-hours;
  other reading: 01:30 EST = 06:30Z -> 10:30Z: 4 h x 2 cards = 8 card-hours.
At the test card's A100 used price, 3.00 EUR / card-hour: 30.00 EUR billed (24.00 the other way).
Job 8402 (1 card x 1 h, 2026-11-02) is unambiguous: 3.00 EUR, no flag.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.test import Client

from billing.choices import UsageFlag
from billing.models import UsageRecord
from billing.services.statements import statement_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(team, train_pool, rates, fixtures_dir):
    try:
        call_command(
            "import_usage", "--source", "slurm", "--start", "2026-11-01", "--end", "2026-12-01",
            "--sacct-file", str(fixtures_dir / "sacct" / "dst_repeated_hour_without_elapsed.txt"),
            "--time-zone", "America/New_York",
        )  # fmt: skip
    except SystemExit as exit_:
        assert exit_.code == 1  # the ambiguous Start is reported for its line
    return UsageRecord.objects.order_by("period_start")


def test_the_record_is_flagged_with_both_readings(imported):
    flagged, plain = imported

    assert flagged.flag == UsageFlag.AMBIGUOUS_TIME
    assert (flagged.period_start, flagged.period_end) == (
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
        datetime(2026, 11, 1, 10, 30, tzinfo=UTC),
    )
    assert (flagged.other_reading_start, flagged.other_reading_end) == (
        datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
        datetime(2026, 11, 1, 10, 30, tzinfo=UTC),
    )
    assert flagged.quantity == 10 * 3600 and flagged.other_reading_quantity == 8 * 3600
    assert plain.flag == "" and plain.other_reading_start is None


def test_a_reimport_changes_nothing(imported, fixtures_dir, capsys):
    before = list(imported.values_list("quantity", "flag", "other_reading_start", "updated_at"))
    with pytest.raises(SystemExit):
        call_command(
            "import_usage", "--source", "slurm", "--start", "2026-11-01", "--end", "2026-12-01",
            "--sacct-file", str(fixtures_dir / "sacct" / "dst_repeated_hour_without_elapsed.txt"),
            "--time-zone", "America/New_York",
        )  # fmt: skip

    assert "0 created, 0 updated, 2 unchanged" in capsys.readouterr().out
    after = list(imported.values_list("quantity", "flag", "other_reading_start", "updated_at"))
    assert after == before


def test_the_statement_carries_both_readings(imported, team):
    statement = statement_build(team=team, month=date(2026, 11, 1))

    (line,) = statement.lines.all()
    # 10 + 1 card-hours at 3.00 EUR: 33.00 EUR; the first reading is the one billed.
    assert (line.quantity, line.amount) == (Decimal("11.000000"), Decimal("33.0000"))
    (note,) = [w for w in statement.warnings if w["code"] == "ambiguous_time"]
    assert {k: note[k] for k in ("job_id", "basis", "billed_card_hours", "other_card_hours")} == {
        "job_id": "8401",
        "basis": "used",
        "billed_card_hours": "10.000000",
        "other_card_hours": "8.000000",
    }
    assert (note["billed_start"], note["other_start"]) == (
        "2026-11-01T05:30:00+00:00",
        "2026-11-01T06:30:00+00:00",
    )


def test_the_team_month_page_shows_it_on_the_line(imported, team, team_member):
    statement_build(team=team, month=date(2026, 11, 1))
    client = Client()
    client.force_login(team_member)

    response = client.get("/costs/nlp/2026-11/")

    assert response.status_code == 200
    (line,) = response.context["lines"]
    assert [w["job_id"] for w in line.ambiguous] == ["8401"]
    page = response.content.decode()
    assert "ambiguous time</span> job 8401: 10.000000 card-hours billed at the first reading" in (
        page
    )
    assert "8.000000 at the other (2026-11-01T06:30:00+00:00" in page
    assert "data-ambiguous-time" in page and "Unpriced usage" not in page


def test_the_statement_pdf_says_it_too(imported, team):
    from django.template.loader import render_to_string

    statement = statement_build(team=team, month=date(2026, 11, 1))

    html = render_to_string(
        "billing/statement_pdf.html", {"statement": statement, "lines": statement.lines.all()}
    )
    assert "Job 8401 (used): started or ended in the hour repeated" in html
    assert "10.000000 card-hours; the other reading is 2026-11-01T06:30:00+00:00" in html


def test_the_statement_csv_says_it_on_the_line(imported, team, team_member):
    """The CSV export's ``notes`` cell of the one usage line holds both readings of job 8401
    (10 card-hours billed from 05:30Z, 8 from 06:30Z), as the page and the PDF do."""
    import csv
    import io

    statement_build(team=team, month=date(2026, 11, 1))
    client = Client()
    client.force_login(team_member)

    response = client.get("/costs/nlp/2026-11/?export=csv")

    (row,) = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert row["notes"] == (
        "ambiguous time: job 8401: 10.000000 card-hours billed at the first reading "
        "(2026-11-01T05:30:00+00:00 → 2026-11-01T10:30:00+00:00), 8.000000 at the other "
        "(2026-11-01T06:30:00+00:00 → 2026-11-01T10:30:00+00:00)"
    )
