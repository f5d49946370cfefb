"""Pure billing arithmetic, with every expected value worked out by hand in the comment."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from billing import pricing

BERLIN = ZoneInfo("Europe/Berlin")


def test_month_split_utc():
    # 23:30 31 Oct → 01:30 1 Nov: 30 min + 90 min? no: 23:30→00:00 = 0.5 h, 00:00→01:30 = 1.5 h
    pieces = pricing.split_at_months(
        datetime(2026, 10, 31, 23, 30, tzinfo=UTC), datetime(2026, 11, 1, 1, 30, tzinfo=UTC), UTC
    )
    assert [(m, b - a) for m, a, b in pieces] == [
        (
            date(2026, 10, 1),
            datetime(2026, 11, 1, tzinfo=UTC) - datetime(2026, 10, 31, 23, 30, tzinfo=UTC),
        ),  # noqa: E501
        (
            date(2026, 11, 1),
            datetime(2026, 11, 1, 1, 30, tzinfo=UTC) - datetime(2026, 11, 1, tzinfo=UTC),
        ),  # noqa: E501
    ]


def test_month_split_follows_the_billing_zone():
    # C24 in Asia/Shanghai: 31 Jan 22:00Z → 1 Feb 03:30Z is 1 Feb 06:00 → 11:30 local: all Feb.
    pieces = pricing.split_at_months(
        datetime(2024, 1, 31, 22, tzinfo=UTC), datetime(2024, 2, 1, 3, 30, tzinfo=UTC),
        ZoneInfo("Asia/Shanghai"),
    )  # fmt: skip
    assert [m for m, _, _ in pieces] == [date(2024, 2, 1)]


@pytest.mark.parametrize(
    ("day", "hours"),
    [(date(2025, 3, 30), Decimal(23)), (date(2025, 10, 26), Decimal(25)), (date(2025, 6, 1), 24)],
)
def test_dst_days_have_23_or_25_hours(day, hours):
    start = pricing.local_midnight(day, BERLIN)
    end = pricing.local_midnight(date.fromordinal(day.toordinal() + 1), BERLIN)
    assert pricing.whole_seconds(start, end) == hours * 3600


def test_october_2025_in_berlin_has_745_hours():
    # 31 days × 24 h + 1 h (clocks go back on 26 Oct) = 745 h
    start, end = pricing.month_bounds(date(2025, 10, 1), BERLIN)
    assert pricing.whole_seconds(start, end) == 745 * 3600
    assert start == datetime(2025, 9, 30, 22, tzinfo=UTC)  # 00:00 CEST = 22:00Z
    assert end == datetime(2025, 10, 31, 23, tzinfo=UTC)  # 00:00 CET = 23:00Z


def test_split_at_rate_dates():
    a, b = datetime(2026, 10, 14, 23, tzinfo=UTC), datetime(2026, 10, 15, 1, tzinfo=UTC)
    cut = datetime(2026, 10, 15, tzinfo=UTC)
    assert pricing.split_at(a, b, [cut, datetime(2026, 11, 1, tzinfo=UTC)]) == [(a, cut), (cut, b)]


@pytest.mark.parametrize(
    ("start", "end", "code"),
    [
        (None, datetime(2024, 6, 1, 10, 5, tzinfo=UTC), "not_started"),  # C28 8101
        (datetime(2024, 6, 1, 13, tzinfo=UTC), datetime(2024, 6, 1, 13, tzinfo=UTC), "zero_length"),
        # C28 pod: started 12:00:42 (node clock), finished 12:00:00 (controller clock): -42 s
        (
            datetime(2024, 6, 1, 12, 0, 42, tzinfo=UTC),
            datetime(2024, 6, 1, 12, tzinfo=UTC),
            "clock_skew",
        ),  # noqa: E501
    ],
)
def test_unusable_intervals_are_refused_with_a_reason(start, end, code):
    with pytest.raises(pricing.UnusableInterval) as info:
        pricing.meter_interval(start, end)
    assert info.value.code == code
    if code == "clock_skew":
        assert info.value.seconds == -42


def test_naive_datetimes_are_refused():
    with pytest.raises(ValueError, match="naive"):
        pricing.meter_interval(datetime(2024, 1, 1), datetime(2024, 1, 2))


@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        (Decimal("16.797778"), "EUR", Decimal("16.80")),
        (Decimal("0.125"), "USD", Decimal("0.13")),  # half-up, not banker's 0.12
        (Decimal("-0.125"), "EUR", Decimal("-0.13")),
        (Decimal("1234.5"), "JPY", Decimal("1235")),
        (Decimal("0.0005"), "KWD", Decimal("0.001")),
    ],
)
def test_round_money_half_up_to_minor_unit(amount, currency, expected):
    assert pricing.round_money(amount, currency) == expected


def test_c26_per_second_then_round_once(tricky_inputs):
    assert "16.80" in tricky_inputs["C26"]["expected"]
    # (300 + 3599 + 3660) s = 7559 s = 2.099722 card-h × 8.00 = 16.797778 → 16.80
    assert pricing.card_hours_rounded(Decimal(7559)) == Decimal("2.099722")
    assert pricing.card_hour_amount(Decimal(7559), Decimal("8.00"), "EUR") == Decimal("16.80")
    # rounding each job first happens to agree here (0.67 + 8.00 + 8.13) but drifts with many
    # short jobs: 100 jobs of 10 s = 1000 s × 8.00 / 3600 = 2.22 as one line, 100 × 0.02 per job
    assert pricing.card_hour_amount(Decimal(1000), Decimal(8), "EUR") == Decimal("2.22")
    assert 100 * pricing.card_hour_amount(Decimal(10), Decimal(8), "EUR") == Decimal("2.00")
    assert "once" in pricing.rounding_note("EUR")


def test_c29_prompt_tokens_include_cached(tricky_inputs):
    assert tricky_inputs["C29"]["id"] == "C29"
    split = pricing.split_prompt_tokens(120000, 8000, 100000)
    assert (split.uncached_input, split.cached_input, split.output) == (20000, 100000, 8000)
    assert split.total == 128000  # not 228,000
    exact = (Decimal(20000) * 2 + Decimal(100000) * Decimal("0.5") + Decimal(8000) * 8) / 10**6
    assert exact == Decimal("0.154")  # the buggy double count would be 0.354


def test_c29_more_cached_than_prompt_clamps_to_zero():
    split = pricing.split_prompt_tokens(100, 5, 150)
    assert (split.uncached_input, split.cached_input) == (0, 100)


def test_token_counter_reset_mid_window():
    t = datetime(2026, 10, 1, tzinfo=UTC)
    # 100 → 250 (+150), restart, 30 (+30), 80 (+50): 230, not 250 − 100 = 150 or negative
    samples = [(t, Decimal(100)), (t, Decimal(250)), (t, Decimal(30)), (t, Decimal(80))]
    assert pricing.counter_increase(samples) == 230


def test_c10_gpu_counts_from_tres(tricky_inputs):
    from scheduler_adapters.slurm.gres import parse_tres

    assert "untyped key" in tricky_inputs["C10"]["expected"]
    tres = parse_tres("billing=64,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1")
    assert pricing.gpu_counts_from_tres(tres) == {"a100": 2}  # 2 cards, not 4
    tres = parse_tres("billing=128,cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=1000G,node=2")
    assert pricing.gpu_counts_from_tres(tres) == {"h100": 8}  # job total, not × 2 nodes
    assert pricing.gpu_counts_from_tres(parse_tres("gres/gpu=2")) == {None: 2}
    assert pricing.gpu_counts_from_tres(parse_tres("gres/gpu:l40s=3")) == {"l40s": 3}
    assert pricing.mig_share("a100_3g.20gb") == ("a100", pytest.approx(3 / 7))
    assert pricing.mig_share("a100") is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-02:03:04", Decimal(93784)),  # 86400 + 7200 + 180 + 4
        ("45-00:00:00", Decimal(3888000)),  # 45 × 86400, day > 31
        ("00:00:52", Decimal(52)),
        ("00:36.857", Decimal("36.857")),  # MM:SS.mmm, not 36 h
        ("45:30", Decimal(2730)),  # MM:SS
        ("12:25:02", Decimal(44702)),
        ("2-01:24:56", Decimal(177896)),  # 172800 + 3600 + 1440 + 56
        ("UNLIMITED", None),
        ("NOT_SET", None),
    ],
)
def test_c12_slurm_durations(text, seconds, tricky_inputs):
    assert tricky_inputs["C12"]["id"] == "C12"
    assert pricing.parse_slurm_duration(text) == seconds


def test_c12_unreadable_duration_raises():
    with pytest.raises(ValueError):
        pricing.parse_slurm_duration("two hours")
