"""``billing.sacct``: sacct -P text read in the cluster's zone, ElapsedRaw, rejected lines."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from billing.sacct import SacctUnusable, read_sacct
from scheduler_adapters.records import JobState

NEW_YORK = ZoneInfo("America/New_York")
HEADER = "JobID|JobName|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES"
TRES = "billing=64,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1"


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def sacct(*rows: str, header: str = HEADER) -> str:
    return "\n".join([header, *rows]) + "\n"


def issues(read):
    return [(i.line, i.code, i.rejected) for i in read.issues]


def test_wall_clock_times_are_read_in_the_given_zone():
    # 2026-10-02 10:00 EDT (UTC-4) is 14:00Z; 2 h later is 16:00Z
    read = read_sacct(
        sacct(
            f"3001|train|COMPLETED|nlp|train|2026-10-02T10:00:00|2026-10-02T12:00:00|7200|{TRES}"
        ),
        zone=NEW_YORK,
    )
    (job,) = read.records
    assert (job.start, job.end, job.elapsed_s) == (utc(2026, 10, 2, 14), utc(2026, 10, 2, 16), 7200)
    assert job.gpus_allocated == {"a100": Decimal(2)}
    assert read.issues == []


def test_elapsed_raw_spans_the_repeated_hour_when_dst_ends():
    # 2026-11-01 America/New_York: 02:00 EDT becomes 01:00 EST, so 00:30 EDT (04:30Z) to
    # 03:30 EST (08:30Z) is 4 h of real time although the wall clock moved 3 h.
    read = read_sacct(
        sacct(f"3002|x|COMPLETED|nlp|train|2026-11-01T00:30:00|2026-11-01T03:30:00|14400|{TRES}"),
        zone=NEW_YORK,
    )
    (job,) = read.records
    assert (job.start, job.end) == (utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 8, 30))
    assert read.issues == []


def test_elapsed_raw_settles_an_end_in_the_fall_back_hour():
    # End 01:30 happens twice (05:30Z EDT, 06:30Z EST); 00:30 EDT = 04:30Z + 7200 s = 06:30Z,
    # the second one. Nothing to report: the duration is Slurm's own.
    read = read_sacct(
        sacct(f"3003|x|COMPLETED|nlp|train|2026-11-01T00:30:00|2026-11-01T01:30:00|7200|{TRES}"),
        zone=NEW_YORK,
    )
    (job,) = read.records
    assert (job.start, job.end) == (utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 6, 30))
    assert read.issues == []


@pytest.mark.parametrize(
    ("elapsed", "start"),
    [(9000, utc(2026, 11, 1, 5, 30)), (5400, utc(2026, 11, 1, 6, 30))],
)
def test_elapsed_raw_picks_the_reading_of_an_ambiguous_start(elapsed, start):
    # End 03:00 EST = 08:00Z; Start 01:30 is 05:30Z (EDT) or 06:30Z (EST):
    # 08:00Z − 9000 s = 05:30Z, 08:00Z − 5400 s = 06:30Z.
    read = read_sacct(
        sacct(
            f"3004|x|COMPLETED|nlp|train|2026-11-01T01:30:00|2026-11-01T03:00:00|{elapsed}|{TRES}"
        ),
        zone=NEW_YORK,
    )
    (job,) = read.records
    assert (job.start, job.end) == (start, utc(2026, 11, 1, 8))
    assert read.issues == []


def test_without_elapsed_an_ambiguous_end_is_read_as_the_first_and_reported():
    header = "JobID|State|Account|Partition|Start|End|AllocTRES"
    read = read_sacct(
        sacct(f"3005|COMPLETED|nlp|train|2026-11-01T00:30:00|2026-11-01T01:30:00|{TRES}",
              header=header),
        zone=NEW_YORK,
    )  # fmt: skip
    (job,) = read.records
    # fold=0: 01:30 EDT = 05:30Z, so 1 h (not the 2 h it may have been)
    assert (job.start, job.end) == (utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 5, 30))
    assert issues(read) == [(2, "ambiguous_time", False)]
    assert "End 2026-11-01T01:30:00 happens twice" in read.issues[0].detail
    assert "UTC-0400" in read.issues[0].detail


def test_a_time_in_the_spring_forward_gap_is_reported():
    # 2026-03-08 02:30 does not exist in New York; fold=0 reads it with EST (UTC-5): 07:30Z
    header = "JobID|State|Account|Partition|Start|End|AllocTRES"
    read = read_sacct(
        sacct(f"3006|COMPLETED|nlp|train|2026-03-08T02:30:00|2026-03-08T04:30:00|{TRES}",
              header=header),
        zone=NEW_YORK,
    )  # fmt: skip
    (job,) = read.records
    assert (job.start, job.end) == (utc(2026, 3, 8, 7, 30), utc(2026, 3, 8, 8, 30))
    assert issues(read) == [(2, "nonexistent_time", False)]


def test_a_running_job_is_metered_up_to_when_sacct_ran():
    read = read_sacct(
        sacct(f"3007|x|RUNNING|nlp|train|2026-10-02T00:00:00|Unknown|3600|{TRES}"), zone=UTC
    )
    (job,) = read.records
    assert job.state == JobState.RUNNING
    assert (job.start, job.end) == (utc(2026, 10, 2), utc(2026, 10, 2, 1))


def test_bad_lines_are_rejected_with_their_line_numbers_and_the_rest_is_read():
    text = sacct(
        f"4001|ok|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|{TRES}",
        "",  # blank lines still count: line numbers are the file's
        f"4002|a|b|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|{TRES}",
        "4003|short|COMPLETED|nlp",
        f"4004|x|COMPLETED|nlp|train|yesterday|2026-10-02T01:00:00|3600|{TRES}",
        f"4005|x|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|1h|{TRES}",
        "4006|x|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|gres/gpu=two",
        "4007|x|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|N/A",
        "4008|x|CANCELLED by 0|nlp|train|None|2026-10-02T01:00:00|0|",  # never ran: fine
        f"4009|ok|COMPLETED|nlp|train|2026-10-03T00:00:00|2026-10-03T01:00:00|3600|{TRES}",
    )
    read = read_sacct(text)
    # Line 4's JobName "a|b" is recovered (JobName is the only free-text column; issue 38);
    # line 5 is short, and line 6 starts a record, so they are not one record split by a newline.
    assert [r.job_id for r in read.records] == [4001, 4002, 4008, 4009]
    assert issues(read) == [
        (4, "delimiter_in_field", False),
        (5, "too_few_fields", True),
        (6, "unreadable_value", True),
        (7, "unreadable_value", True),
        (8, "unreadable_value", True),
        (9, "unknown_gpu_count", True),
    ]
    assert read.rejected == 5
    assert read.records[1].name == "a|b"


def test_an_empty_alloc_tres_is_unknown_not_zero_cards():
    read = read_sacct(
        sacct("4010|x|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|")
    )
    assert read.records == []
    assert issues(read) == [(2, "unknown_gpu_count", True)]


def test_a_cpu_only_job_has_no_cards():
    read = read_sacct(
        sacct("4011|x|COMPLETED|nlp|cpu|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|cpu=4,node=1")
    )
    assert [r.gpus_allocated for r in read.records] == [{}]


def test_array_tasks_use_job_id_raw_and_without_it_a_repeat_is_rejected():
    row = "|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|" + TRES
    with_raw = read_sacct(
        sacct(f"5000_1|5001{row}", f"5000_2|5002{row}", f"5000_2.batch|5002.batch{row}",
              header="JobID|JobIDRaw|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES"),
    )  # fmt: skip
    assert [r.job_id for r in with_raw.records] == [5001, 5002]
    without = read_sacct(
        sacct(f"5000_1{row}", f"5000_2{row}",
              header="JobID|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES"),
    )  # fmt: skip
    assert [r.job_id for r in without.records] == [5000]
    assert issues(without) == [(3, "duplicate_job", True)]
    assert "line 2" in without.issues[0].detail
    pending = "|PENDING|nlp|train|Unknown|Unknown|0|"
    never_ran = read_sacct(
        sacct(f"5000_[3-4]{pending}", f"5000_[5-6]{pending}",
              header="JobID|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES"),
    )  # fmt: skip
    assert (len(never_ran.records), never_ran.issues) == (2, [])  # nothing to charge twice


def test_crlf_line_ends():
    read = read_sacct(
        sacct(
            f"6003|x|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T01:00:00|3600|{TRES}"
        ).replace("\n", "\r\n")
    )
    assert [(r.job_id, r.gpus_allocated) for r in read.records] == [(6003, {"a100": 2})]


def test_other_delimiters_trailing_delimiter_and_time_format():
    text = (
        "JobID;JobName;State;Account;Partition;Start;End;ElapsedRaw;AllocTRES;\n"
        f"6001;a|b;COMPLETED;nlp;train;10/02/2026 10:00;10/02/2026 11:00;3600;{TRES};\n"
    )
    read = read_sacct(text, delimiter=";", time_format="%m/%d/%Y %H:%M", zone=NEW_YORK)
    (job,) = read.records
    assert (job.name, job.start, job.end) == ("a|b", utc(2026, 10, 2, 14), utc(2026, 10, 2, 15))


def test_headerless_text_uses_the_default_columns():
    read = read_sacct(
        f"6002|COMPLETED|nlp|train|2026-10-01T23:00:00|2026-10-02T00:00:00|2026-10-02T01:00:00|"
        f"3600|{TRES}\n"
    )
    (job,) = read.records
    assert (job.job_id, job.submit, job.start) == (6002, utc(2026, 10, 1, 23), utc(2026, 10, 2))


def test_a_header_without_the_columns_the_meter_needs_is_unusable():
    with pytest.raises(SacctUnusable, match="lack Start, AllocTRES"):
        read_sacct("JobID|State|End\n1|COMPLETED|2026-10-02T01:00:00\n")
    with pytest.raises(SacctUnusable, match="does not split"):
        read_sacct("JobID;State;Start\n", delimiter="|")


def test_absurd_durations_dates_and_gpu_counts_are_rejected_per_line_and_the_rest_read():
    """Issue 27, item 6: these lines aborted the whole file (OverflowError) or were billed.
    A year is 366 x 86,400 = 31,622,400 s: 31,622,401 is over it, 31,622,400 is kept."""
    run = "2026-10-02T00:00:00|2026-10-02T01:00:00"
    text = sacct(
        f"5001|ok|COMPLETED|nlp|train|{run}|3600|{TRES}",
        f"5002|x|COMPLETED|nlp|train|{run}|{10**20}|{TRES}",
        f"5003|x|COMPLETED|nlp|train|{run}|31622401|{TRES}",
        f"5004|x|COMPLETED|nlp|train|{run}|3600|gres/gpu=-4",
        f"5005|x|COMPLETED|nlp|train|{run}|3600|gres/gpu:a100=99999999999,gres/gpu=99999999999",
        f"5006|x|COMPLETED|nlp|train|9999-12-31T23:00:00|9999-12-31T23:30:00|1800|{TRES}",
        f"5007|x|COMPLETED|nlp|train|0001-01-01T00:00:00|{run[20:]}|3600|{TRES}",
        f"5008|ok|COMPLETED|nlp|train|2026-10-03T00:00:00|2026-10-03T01:00:00|31622400|{TRES}",
    )
    read = read_sacct(text)
    assert [r.job_id for r in read.records] == [5001, 5008]
    assert issues(read) == [(line, "out_of_range", True) for line in range(3, 9)]
    assert read.issues[0].detail == (
        "ElapsedRaw 100000000000000000000 s is longer than a year (31,622,400 s)"
    )
    assert read.issues[2].detail == "AllocTRES gres/gpu=-4: a GPU count is 0 to 100,000"
    assert "Dates run from 2000-01-01 to 2100-12-31." in read.issues[4].detail
