"""Issue 38, item 3: sacct exports as sites write them — a ``|`` or a newline inside JobName,
and ``sacct --json``. Fixtures: tests/fixtures/sacct/ (README there: sacct -P's shape) and
tests/fixtures/slurm/sacct_json_v0.0.41.json (the recorded Slurm 24.11.5 slurmdbd answer of
data_parser v0.0.41, the same document ``sacct --json`` prints)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from billing.sacct import SacctFile, SacctUnusable, read_sacct, read_sacct_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def text(name: str) -> str:
    return (FIXTURES / "sacct" / name).read_text(encoding="utf-8")


def notes(read):
    return [(i.line, i.code, i.rejected) for i in read.issues]


def test_a_pipe_in_job_name_is_put_back_when_job_name_is_the_only_free_text_column():
    """pipe_in_job_name.txt: 8101 'llama-70b|sft' (11 fields for 10 columns), 8102 'eval|a|b'
    (12 fields); every other column is Slurm's own, so the extra fields are the name's.
    Cards: 8101 4 x 4 h = 16 card-h, 8102 2 x 0.5 h = 1, 8103 1 x 1 h = 1."""
    read = read_sacct(text("pipe_in_job_name.txt"))

    assert [(r.job_id, r.name) for r in read.records] == [
        (8101, "llama-70b|sft"),
        (8102, "eval|a|b"),
        (8103, "sweep lr=3e-4"),
    ]
    assert notes(read) == [(2, "delimiter_in_field", False), (5, "delimiter_in_field", False)]
    assert "JobName holds the delimiter '|' (2 time(s)): read as 'eval|a|b'" in (
        read.issues[1].detail
    )
    hours = {r.job_id: r.gpus_allocated["a100"] * r.elapsed_s / Decimal(3600) for r in read.records}
    assert hours == {8101: 16, 8102: 1, 8103: 1}


def test_with_two_free_text_columns_the_line_is_rejected_not_guessed():
    read = read_sacct(text("pipe_with_two_free_text_columns.txt"))

    assert read.records == []
    assert notes(read) == [(2, "too_many_fields", True)]
    assert "more than one free-text column" in read.issues[0].detail


def test_a_newline_in_job_name_joins_the_record_and_a_cut_line_stays_rejected():
    """newline_in_job_name.txt: line 2 '8201|8201|ft' has 3 of 10 fields and line 3
    ('llama|COMPLETED|…') cannot start a record (no job id first): one record named 'ft\\nllama',
    2 cards x 2 h = 4 card-h. Line 6 '8203|…|nlp' is short too, but line 7 starts job 8204:
    it is rejected, not joined."""
    read = read_sacct(text("newline_in_job_name.txt"))

    assert [(r.job_id, r.name) for r in read.records] == [
        (8201, "ft\nllama"),
        (8202, "plain"),
        (8204, "next"),
    ]
    first = read.records[0]
    assert first.gpus_allocated["a100"] * first.elapsed_s == 4 * 3600
    assert first.start == datetime(2026, 10, 6, 9, tzinfo=UTC)
    assert notes(read) == [(2, "newline_in_field", False), (6, "too_few_fields", True)]
    assert "lines 2-3 are one record" in read.issues[0].detail


def test_sacct_json_is_read_by_its_data_parser():
    """The recorded v0.0.41 answer: jobs 88 (COMPLETED, 1 x a100, start 1796155318 =
    2026-12-01T20:01:58Z, elapsed 1 s), 90 (no GPU), 91 (1 x a100, 3 s), 92 (cancelled)."""
    read = read_sacct_json((FIXTURES / "slurm" / "sacct_json_v0.0.41.json").read_text())

    assert [r.job_id for r in read.records] == [88, 90, 91, 92]
    job = read.records[0]
    assert (job.account, job.partition, dict(job.gpus_allocated), job.elapsed_s) == (
        "fx-team",
        "gpu",
        {"a100": 1},
        1,
    )
    assert job.start == datetime(2026, 12, 1, 20, 1, 58, tzinfo=UTC)
    assert read.issues == []


def test_sacct_file_takes_json_as_it_is():
    adapter = SacctFile((FIXTURES / "slurm" / "sacct_json_v0.0.41.json").read_text())

    jobs = adapter.jobs_from_accounting(
        datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)
    )
    assert [j.job_id for j in jobs] == [88, 90, 91, 92]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["meta"]["plugin"].update(data_parser="data_parser/v0.0.99"), "'v0.0.99'"),
        (lambda d: d["meta"].pop("plugin"), "'unknown'"),
        (lambda d: d["jobs"][0].update(state="COMPLETED"), "jobs[0].state"),
    ],
)
def test_unreadable_json_is_unusable_with_the_reason(change, message):
    payload = json.loads((FIXTURES / "slurm" / "sacct_json_v0.0.41.json").read_text())
    change(payload)

    with pytest.raises(SacctUnusable, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_sacct_json(json.dumps(payload))


def test_text_that_is_not_json_is_unusable():
    with pytest.raises(SacctUnusable, match="not JSON"):
        read_sacct_json('{"meta": ')
