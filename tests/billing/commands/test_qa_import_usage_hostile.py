"""QA (h-qa): ``import_usage --sacct-file`` with hostile values in one line.

The rule the module promises (billing/sacct.py docstring): "Any other line with more or fewer
fields than the header, or a value that cannot be read, is rejected with its 1-based line number;
the other lines are still read." Each file below holds one good job (9100: 1 A100 for 1 h =
1 card-hour = 3600 card-seconds) and one hostile line; the good job must be billed and the
hostile line rejected or flagged, the command ending with exit 1 (something reported), never a
traceback that loses the whole file.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone

from billing.models import UsageRecord

pytestmark = pytest.mark.django_db

HEADER = "JobID|JobIDRaw|JobName|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES"
ONE_A100 = "billing=32,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=64G,node=1"
GOOD = f"9100|9100|ok|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|3600|{ONE_A100}"


def import_usage(path, *, start="2026-10-01", end="2026-11-01") -> int:
    try:
        call_command(
            "import_usage", "--source", "slurm", "--sacct-file", str(path),
            "--start", start, "--end", end,
        )  # fmt: skip
    except SystemExit as exit_:
        return exit_.code
    return 0


def write(tmp_path, *rows: str):
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def good_job_billed() -> bool:
    """Job 9100: 1 card × 3600 s = 3600 card-seconds."""
    return list(
        UsageRecord.objects.filter(source_id__startswith="job:9100:").values_list(
            "quantity", flat=True
        )
    ) == [Decimal(3600)]


@pytest.mark.parametrize(
    "hostile",
    [
        # 10**20 s does not fit a timedelta (max 999,999,999 days ≈ 8.64e13 s): OverflowError
        f"9101|9101|x|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|"
        f"{10**20}|{ONE_A100}",
        # 10**12 s ≈ 31,700 years: start + elapsed passes year 9999: OverflowError
        f"9102|9102|x|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|"
        f"{10**12}|{ONE_A100}",
        # '3²': str.isdigit() is True for the superscript two, int() refuses it: ValueError
        f"9103|9103|x|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|3²|{ONE_A100}",
        # the same in the job id column
        f"9104²|9104²|x|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|3600|"
        f"{ONE_A100}",
        # negative GRES count: the usage_quantity_not_neg CHECK raises IntegrityError
        "9105|9105|x|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|3600|"
        "gres/gpu:a100=-4,gres/gpu=-4",
    ],
    ids=["elapsed-1e20", "elapsed-1e12", "elapsed-superscript", "jobid-superscript", "gres-neg"],
)
def test_a_hostile_line_is_rejected_and_the_rest_is_billed(team, train_pool, tmp_path, hostile):
    path = write(tmp_path, GOOD, hostile)

    status = import_usage(path)

    assert status == 1
    assert good_job_billed()
    bad_id = hostile.split("|")[0].rstrip("²")
    assert not UsageRecord.objects.filter(source_id__startswith=f"job:{bad_id}:").exists()


def test_no_usage_is_metered_past_the_time_of_the_import(team, train_pool, tmp_path):
    """ElapsedRaw 31,536,000,000 s (1,000 × 365 days) from 2026-10-07 11:00Z ends in 3026.

    sacct cannot report an elapsed time longer than the job has run, so an end after the
    import's own time is impossible: the line must be rejected (or clipped to now), never billed
    as months of the years 2027-3026 (the old code writes 11,993 monthly records, the last
    for 3026-02, for an import window of October 2026).
    """
    path = write(
        tmp_path,
        GOOD,
        f"9106|9106|x|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|"
        f"31536000000|{ONE_A100}",
    )

    import_usage(path)

    assert good_job_billed()
    assert not UsageRecord.objects.filter(period_end__gt=timezone.now()).exists()


def test_a_count_far_beyond_the_fleet_is_not_billed_unflagged(team, train_pool, tmp_path):
    """AllocTRES gres/gpu:a100=100000000 for 1 h would bill 100,000,000 card-hours
    (3.6e11 card-seconds) for a pool of 8 A100 (the train_pool fixture): the line must be
    rejected or its record flagged for review (issue #27 item 6, 'a huge count is billed')."""
    path = write(
        tmp_path,
        GOOD,
        "9107|9107|x|COMPLETED|nlp|train|2026-10-07T11:00:00|2026-10-07T12:00:00|3600|"
        "gres/gpu:a100=100000000,gres/gpu=100000000",
    )

    import_usage(path)

    assert good_job_billed()
    unflagged = UsageRecord.objects.filter(source_id__startswith="job:9107:", flag="")
    assert not unflagged.exists()


def _sacct_json(fixtures_dir, tmp_path, change) -> object:
    payload = json.loads((fixtures_dir / "slurm" / "sacct_json_v0.0.41.json").read_text())
    text = change(payload)
    path = tmp_path / "sacct.json"
    path.write_text(text if isinstance(text, str) else json.dumps(payload), encoding="utf-8")
    return path


def _start_far_away(payload):
    # epoch 10**20 s is ~3e12 years away: datetime.fromtimestamp raises OverflowError
    payload["jobs"][0]["time"]["start"] = 10**20
    payload["jobs"][0]["time"]["end"] = 10**20 + 5


def _nested_deep(payload):
    # 100,000 nested arrays: json.loads raises RecursionError
    return '{"meta": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("change", [_start_far_away, _nested_deep], ids=["epoch-1e20", "deep"])
def test_unusable_sacct_json_is_exit_2_with_a_message(
    team, train_pool, tmp_path, fixtures_dir, capsys, change
):
    """billing/sacct.py read_sacct_json: 'Raises SacctUnusable for text that is not JSON, a
    version the adapter does not speak, or a shape that version does not have' — which the
    command turns into exit 2 and one line naming the file. The old code lets OverflowError /
    RecursionError escape (a traceback that loses the file and says nothing useful)."""
    path = _sacct_json(fixtures_dir, tmp_path, change)

    status = import_usage(path, start="2026-12-01", end="2027-01-01")

    assert status == 2
    assert "sacct.json" in capsys.readouterr().err
    assert not UsageRecord.objects.exists()
