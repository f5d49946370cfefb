"""``manage.py import_usage --source slurm --sacct-file``: zone, ElapsedRaw, rejected lines,
re-imports; exit 0 all imported, 1 anything reported, 2 unusable arguments."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import call_command

from billing.models import UsageImport, UsageRecord

pytestmark = pytest.mark.django_db

HEADER = "JobID|JobIDRaw|JobName|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES"
TWO_A100 = "billing=64,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1"


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def import_usage(path, *args: str, start="2026-10-01", end="2026-12-01") -> int:
    """Run the command in-process; return its exit status."""
    try:
        call_command(
            "import_usage", "--source", "slurm", "--sacct-file", str(path),
            "--start", start, "--end", end, *args,
        )  # fmt: skip
    except SystemExit as exit_:
        return exit_.code
    return 0


def write(tmp_path, *rows: str, header: str = HEADER):
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def card_hours() -> dict[str, Decimal]:
    return {r.source_id.split(":")[1]: r.quantity / 3600 for r in UsageRecord.objects.all()}


def test_a_job_over_the_fall_back_hour_is_four_hours(team, train_pool, tmp_path, capsys):
    # 2026-11-01 in New York: 00:30 EDT (04:30Z) to 03:30 EST (08:30Z) is 4 h, not the 3 the
    # wall clock shows, because 01:00-02:00 happens twice; 2 cards × 4 h = 8 card-hours.
    path = write(
        tmp_path,
        f"7001|7001|fallback|COMPLETED|nlp|train|2026-11-01T00:30:00|2026-11-01T03:30:00|14400|"
        f"{TWO_A100}",
    )
    status = import_usage(path, "--time-zone", "America/New_York",
                          start="2026-11-01", end="2026-11-02")  # fmt: skip
    assert status == 0
    record = UsageRecord.objects.get()
    assert (record.period_start, record.period_end) == (utc(2026, 11, 1, 4, 30),
                                                        utc(2026, 11, 1, 8, 30))  # fmt: skip
    assert record.quantity == Decimal(28800)  # card-seconds
    assert card_hours() == {"7001": 8}
    assert (
        "1 created, 0 updated, 0 unchanged, 0 flagged, 0 line(s) rejected"
        in capsys.readouterr().out
    )


def test_an_end_in_the_repeated_hour_is_settled_by_elapsed_raw(team, train_pool, tmp_path):
    # End 01:30 is ambiguous; 00:30 EDT (04:30Z) + 7200 s = 06:30Z (01:30 EST): 2 × 2 h = 4
    path = write(
        tmp_path,
        f"7002|7002|x|COMPLETED|nlp|train|2026-11-01T00:30:00|2026-11-01T01:30:00|7200|{TWO_A100}",
    )
    assert import_usage(path, "--time-zone", "America/New_York") == 0
    assert card_hours() == {"7002": 4}


def test_the_zone_defaults_to_the_slurm_connection(team, train_pool, tmp_path, settings):
    settings.SCHEDULERS = {"slurm": {"BACKEND": "fake", "TIME_ZONE": "Europe/Berlin"}}
    # 2026-10-02 10:00 CEST (UTC+2) = 08:00Z
    path = write(
        tmp_path,
        f"7003|7003|x|COMPLETED|nlp|train|2026-10-02T10:00:00|2026-10-02T11:00:00|3600|{TWO_A100}",
    )
    assert import_usage(path) == 0
    assert UsageRecord.objects.get().period_start == utc(2026, 10, 2, 8)


def test_without_a_configured_zone_times_are_utc(team, train_pool, tmp_path, settings):
    settings.SCHEDULERS = {}
    path = write(
        tmp_path,
        f"7004|7004|x|COMPLETED|nlp|train|2026-10-02T10:00:00|2026-10-02T11:00:00|3600|{TWO_A100}",
    )
    assert import_usage(path) == 0
    assert UsageRecord.objects.get().period_start == utc(2026, 10, 2, 10)


def test_a_delimiter_in_a_field_rejects_that_line_only(team, train_pool, tmp_path, capsys):
    # JobName and Comment are both free text: which one holds the '|' cannot be known.
    path = write(
        tmp_path,
        f"7005|7005|ok|-|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|"
        f"{TWO_A100}",
        f"7006|7006|a|b|-|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|"
        f"{TWO_A100}",
        f"7007|7007|ok|-|COMPLETED|nlp|train|2026-10-03T00:00:00|2026-10-03T03:00:00|10800|"
        f"{TWO_A100}",
        header="JobID|JobIDRaw|JobName|Comment|State|Account|Partition|Start|End|ElapsedRaw|"
        "AllocTRES",
    )
    assert import_usage(path) == 1
    # 7005: 2 × 1 h = 2 card-h; 7007: 2 × 3 h = 6 card-h; 7006 (line 3) not imported
    assert card_hours() == {"7005": 2, "7007": 6}
    out = capsys.readouterr().out
    assert "2 created, 0 updated, 0 unchanged, 0 flagged, 1 line(s) rejected" in out
    assert "  line 3: too_many_fields: 12 fields where the header has 11" in out
    (run,) = UsageImport.objects.all()
    assert [(i["line"], i["code"]) for i in run.issues] == [(3, "too_many_fields")]


def test_a_reimport_is_unchanged_and_a_changed_value_is_updated(team, train_pool, tmp_path, capsys):
    rows = [
        f"7008|7008|done|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T02:00:00|7200|"
        f"{TWO_A100}",
        # still running when sacct ran: metered up to then (ElapsedRaw), not up to "now"
        f"7009|7009|run|RUNNING|nlp|train|2026-10-05T00:00:00|Unknown|3600|{TWO_A100}",
    ]
    path = write(tmp_path, *rows)
    assert import_usage(path) == 0
    before = list(UsageRecord.objects.order_by("pk").values())
    assert import_usage(path) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "slurm: 0 created, 0 updated, 2 unchanged, 0 flagged, 0 line(s) rejected"
    assert list(UsageRecord.objects.order_by("pk").values()) == before  # not even updated_at
    assert card_hours() == {"7008": 4, "7009": 2}  # 2 × 2 h, 2 × 1 h

    # a later export: 7009 finished after 3 h (2 × 3 = 6 card-h), 7008 as before
    rows[1] = (
        f"7009|7009|run|COMPLETED|nlp|train|2026-10-05T00:00:00|2026-10-05T03:00:00|10800|"
        f"{TWO_A100}"
    )
    assert import_usage(write(tmp_path, *rows)) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "slurm: 0 created, 1 updated, 1 unchanged, 0 flagged, 0 line(s) rejected"
    )
    assert card_hours() == {"7008": 4, "7009": 6}


def test_a_bad_time_zone_is_exit_2_and_imports_nothing(team, train_pool, tmp_path, capsys):
    path = write(
        tmp_path,
        f"7010|7010|x|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|{TWO_A100}",
    )
    assert import_usage(path, "--time-zone", "Mars/Olympus_Mons") == 2
    assert capsys.readouterr().err.startswith(
        "import_usage: --time-zone 'Mars/Olympus_Mons' is not an IANA time zone"
    )
    assert (UsageRecord.objects.count(), UsageImport.objects.count()) == (0, 0)


def test_a_bad_configured_zone_is_exit_2(team, train_pool, tmp_path, settings, capsys):
    settings.SCHEDULERS = {"slurm": {"BACKEND": "fake", "TIME_ZONE": "EST+5"}}
    path = write(tmp_path)
    assert import_usage(path) == 2
    assert "SCHEDULERS['slurm']['TIME_ZONE'] 'EST+5'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--delimiter", ""), "--delimiter must be"),
        (("--time-format", "%m/%d-%H:%M:%S"), "has no year"),
    ],
)
def test_unusable_file_options_are_exit_2(team, tmp_path, capsys, args, message):
    assert import_usage(write(tmp_path), *args) == 2
    assert message in capsys.readouterr().err


def test_an_unreadable_or_unusable_file_is_exit_2(team, tmp_path, capsys):
    assert import_usage(tmp_path / "missing.txt") == 2
    assert "cannot read" in capsys.readouterr().err
    assert import_usage(write(tmp_path, header="JobID|State|End")) == 2
    assert "lack Start, AllocTRES" in capsys.readouterr().err


def test_file_options_without_a_file_are_exit_2(capsys, db):
    try:
        call_command("import_usage", "--source", "reservation", "--start", "2026-10-01",
                     "--end", "2026-11-01", "--time-zone", "UTC")  # fmt: skip
    except SystemExit as exit_:
        assert exit_.code == 2
    else:
        pytest.fail("no exit status 2")
    assert "go with --sacct-file" in capsys.readouterr().err


def test_another_delimiter_and_time_format(team, train_pool, tmp_path):
    path = tmp_path / "semicolon.txt"
    path.write_text(
        "JobID;JobName;State;Account;Partition;Start;End;ElapsedRaw;AllocTRES\n"
        f"7011;a|b;COMPLETED;nlp;train;10/02/2026 10:00;10/02/2026 11:30;5400;{TWO_A100}\n",
        encoding="utf-8",
    )
    status = import_usage(path, "--delimiter", ";", "--time-format", "%m/%d/%Y %H:%M",
                          "--time-zone", "America/New_York")  # fmt: skip
    assert status == 0
    record = UsageRecord.objects.get()
    # 10:00 EDT = 14:00Z; 2 cards × 1.5 h = 3 card-h
    assert (record.period_start, record.quantity / 3600) == (utc(2026, 10, 2, 14), 3)


def test_a_file_saved_with_a_byte_order_mark(team, train_pool, tmp_path):
    path = tmp_path / "bom.txt"
    header = "JobID|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES"
    row = f"7012|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|{TWO_A100}"
    path.write_text(f"{header}\r\n{row}\r\n", encoding="utf-8-sig")
    assert import_usage(path) == 0
    assert card_hours() == {"7012": 2}


def test_recovered_lines_are_imported_and_said_per_line(team, train_pool, capsys, fixtures_dir):
    """tests/fixtures/sacct/pipe_in_job_name.txt: 8101 'llama-70b|sft' 4 x 4 h = 16 card-h,
    8102 'eval|a|b' 2 x 0.5 h = 1, 8103 1 x 1 h = 1; each recovered line is named."""
    status = import_usage(fixtures_dir / "sacct" / "pipe_in_job_name.txt")

    assert card_hours() == {"8101": 16, "8102": 1, "8103": 1}
    out = capsys.readouterr().out
    assert "0 line(s) rejected" in out
    assert "line 2: delimiter_in_field: JobName holds the delimiter '|' (1 time(s))" in out
    assert "line 5: delimiter_in_field: JobName holds the delimiter '|' (2 time(s))" in out
    assert status == 1  # something was reported: a person reads the note


def test_a_job_split_by_a_newline_is_billed_once(team, train_pool, capsys, fixtures_dir):
    """newline_in_job_name.txt: 8201 (2 x 2 h = 4 card-h) over lines 2-3, 8202 and 8204 1 card-h
    each; 8203 is cut short and rejected."""
    status = import_usage(fixtures_dir / "sacct" / "newline_in_job_name.txt")

    assert card_hours() == {"8201": 4, "8202": 1, "8204": 1}
    out = capsys.readouterr().out
    assert "1 line(s) rejected" in out and "line 2: newline_in_field" in out
    assert status == 1


def test_sacct_json_is_imported(capsys, fixtures_dir):
    """sacct --json (data_parser v0.0.41, recorded): jobs 88 (1 s) and 91 (3 s) ran 1 x a100 each
    in partition gpu for account fx-team: 1 + 3 = 4 card-seconds; 90 and 92 hold no card."""
    from factories import PoolFactory, TeamFactory, node_with_gpus

    TeamFactory(slug="fx-team")
    node_with_gpus(4, hostname="gpu-a100-01", pool=PoolFactory(slug="gpu", slurm_partition="gpu"))

    status = import_usage(
        fixtures_dir / "slurm" / "sacct_json_v0.0.41.json", start="2026-12-01", end="2027-01-01"
    )

    assert status == 0, capsys.readouterr().out
    assert {r.source_id.split(":")[1]: r.quantity for r in UsageRecord.objects.all()} == {
        "88": Decimal(1),
        "91": Decimal(3),
    }


def test_sacct_json_of_an_unknown_data_parser_is_exit_2(tmp_path, capsys, fixtures_dir):
    payload = (fixtures_dir / "slurm" / "sacct_json_v0.0.41.json").read_text()
    path = tmp_path / "sacct.json"
    path.write_text(payload.replace("data_parser/v0.0.41", "data_parser/v0.0.99"))

    assert import_usage(path) == 2
    assert "data parser 'v0.0.99'" in capsys.readouterr().err
    assert not UsageRecord.objects.exists()
