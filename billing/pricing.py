"""Pure billing arithmetic: time splitting, metering, rounding, token pricing. No ORM.

Rules (each function cites where its formula comes from):

- **Intervals are half-open** ``[start, end)`` and aware. Usage is split at month boundaries and
  at rate-card effective dates, both local midnights in the billing time zone; an hour is 3,600
  real seconds, so a daylight-saving day has 23 or 25 charged hours.
- **Per-second metering**: quantities keep raw seconds (card-seconds); nothing is rounded before
  money. Money is rounded **once per statement line**, half-up, to the currency's minor unit
  (tricky case C26: per-second gives 16.80 where per-job hour ceilings give 32.00).
- **Zero, missing, negative durations** are refused with a reason (C28): a job that never
  started or lasted 0 s costs nothing; an end before its start is clock skew, clamped to 0 and
  flagged for review — never a negative charge.
- **Tokens** (C29): ``prompt_tokens`` as OpenAI-compatible gateways (vLLM, LiteLLM) report it
  *includes* ``prompt_tokens_details.cached_tokens``. Uncached input = prompt − cached (clamped
  at 0) at the input price, cached at the cached-input price, completion at the output price,
  each per million tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from pools.capacity.arithmetic import SECONDS_PER_HOUR, card_seconds_hours
from pools.capacity.slices import is_profile, slice_share
from pools.web.numbers import CARD_HOUR_PLACES

TOKENS_PER_MILLION = Decimal(1_000_000)

# ISO 4217 minor units (https://www.six-group.com/en/products-services/financial-information/
# data-standards.html, list one). Anything not listed has 2.
MINOR_UNITS: Mapping[str, int] = {
    "BHD": 3, "CLP": 0, "IQD": 3, "ISK": 0, "JOD": 3, "JPY": 0, "KRW": 0, "KWD": 3,
    "LYD": 3, "OMR": 3, "PYG": 0, "TND": 3, "UGX": 0, "VND": 0, "XAF": 0, "XOF": 0,
}  # fmt: skip


class UnusableInterval(ValueError):
    """Why a usage interval cannot be charged: ``code`` is ``not_started``, ``zero_length`` or
    ``clock_skew`` (the one to review); ``seconds`` is the signed length when known."""

    def __init__(self, code: str, reason: str, seconds: int | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.seconds = seconds


# --------------------------------------------------------------------------- time


def month_floor(value: date) -> date:
    return value.replace(day=1)


def next_month(month: date) -> date:
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1)


def previous_month(month: date) -> date:
    return (month.replace(day=1) - timedelta(days=1)).replace(day=1)


def local_midnight(day: date, zone: tzinfo) -> datetime:
    """The aware instant a calendar day starts in ``zone``.

    ``datetime.combine(..., tzinfo=ZoneInfo)`` resolves the wall time with PEP 495 ``fold=0``;
    midnight is never skipped by DST in the zones we bill in (Europe and America switch at 01:00
    UTC / 02:00 local), so this is the day's first instant.
    """
    return datetime.combine(day, time(0), tzinfo=zone)


def month_bounds(month: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """``[first local midnight of the month, first of the next month)``."""
    return local_midnight(month_floor(month), zone), local_midnight(next_month(month), zone)


def month_seconds(month: date, zone: tzinfo) -> int:
    """The real length of a billing month in seconds: October 2026 in Europe/Berlin (DST ends
    on the 25th) is 745 h = 2,682,000 s. Subtracted in UTC: two datetimes sharing one
    ``ZoneInfo`` subtract as wall times in Python (31 x 24 h), not as elapsed time."""
    start, end = month_bounds(month, zone)
    return int((end.astimezone(UTC) - start.astimezone(UTC)).total_seconds())


def month_of(instant: datetime, zone: tzinfo) -> date:
    """The billing month (its first day) ``instant`` lies in, read in ``zone``."""
    _require_aware(instant)
    return instant.astimezone(zone).date().replace(day=1)


def split_at(
    start: datetime, end: datetime, boundaries: Iterable[datetime]
) -> list[tuple[datetime, datetime]]:
    """Cut ``[start, end)`` at every boundary strictly inside it; pieces in order, no gaps."""
    cuts = sorted(b for b in boundaries if start < b < end)
    points = [start, *cuts, end]
    return [(a, b) for a, b in zip(points, points[1:], strict=False) if b > a]


def split_at_months(
    start: datetime, end: datetime, zone: tzinfo
) -> list[tuple[date, datetime, datetime]]:
    """``[start, end)`` cut at local month starts in ``zone``: ``(month, piece_start, piece_end)``.

    DESIGN.md "Usage, chargeback and reports": usage spanning a month boundary is split at the
    boundary in the billing time zone (tricky case C24: a job 31 Jan 22:00Z → 1 Feb 03:30Z with
    4 cards is 8 card-h in January and 14 in February in UTC).
    """
    _require_aware(start)
    _require_aware(end)
    boundaries = []
    month = next_month(month_of(start, zone))
    while (boundary := local_midnight(month, zone)) < end:
        boundaries.append(boundary)
        month = next_month(month)
    return [(month_of(a, zone), a, b) for a, b in split_at(start, end, boundaries)]


def whole_seconds(start: datetime, end: datetime) -> int:
    """Whole seconds of ``[start, end)`` read in UTC (0 when ``end <= start``), as
    :func:`~pools.capacity.arithmetic.card_hours` counts them: two aware datetimes of one
    ``ZoneInfo`` subtract as wall-clock times (``datetime`` docs, "aware arithmetic"), which
    would make 30 Mar 2025 in Europe/Berlin 24 h instead of 23 (and 26 Oct 2025 24, not 25)."""
    return max(int((end.astimezone(UTC) - start.astimezone(UTC)).total_seconds()), 0)


def seconds_in_periods(
    start: datetime, end: datetime, periods: Sequence[tuple[datetime, datetime]]
) -> list[int]:
    """Whole seconds of ``[start, end)`` inside each of ``periods`` (half-open, aware), in order;
    0 for a period it does not touch."""
    lo, hi = start.astimezone(UTC), end.astimezone(UTC)
    return [
        whole_seconds(max(lo, a), min(hi, b)) if max(lo, a) < min(hi, b) else 0 for a, b in periods
    ]


def prorate(
    quantity: Decimal, start: datetime, end: datetime, periods: Sequence[tuple[datetime, datetime]]
) -> list[Decimal]:
    """``quantity`` metered over ``[start, end)`` split over rate ``periods`` in proportion to
    its whole seconds inside each: ``quantity × (seconds inside / seconds of the interval)``,
    in ``decimal``'s default context (28 significant digits); 0 where it does not touch.

    DESIGN.md "Usage, chargeback and reports": usage spanning a rate change is prorated by
    seconds. 36 card-seconds over 10:00-10:00:36 cut at 10:00:12 -> 12 and 24. An interval of
    no whole second (a zero-length record) lies whole in the period holding its start.
    """
    length = whole_seconds(start, end)
    if length == 0:
        return [quantity if a <= start < b else Decimal(0) for a, b in periods]
    return [
        quantity * (Decimal(seconds) / length) if seconds else Decimal(0)
        for seconds in seconds_in_periods(start, end, periods)
    ]


def meter_interval(start: datetime | None, end: datetime | None) -> int:
    """Whole seconds of ``[start, end)``; raises :class:`UnusableInterval` when there are none.

    C28: ``start`` missing (a job cancelled while pending, sacct "Start None/Unknown") →
    ``not_started``; ``end == start`` → ``zero_length``; ``end < start`` (start and end read
    from different clocks) → ``clock_skew``. Naive datetimes raise ``ValueError``.
    """
    if start is None:
        raise UnusableInterval("not_started", "the job never started: 0 card-seconds")
    _require_aware(start)
    if end is None:
        raise UnusableInterval("not_started", "no end and no 'now' to meter up to")
    _require_aware(end)
    seconds = (end.astimezone(UTC) - start.astimezone(UTC)).total_seconds()
    if seconds < 0:
        raise UnusableInterval(
            "clock_skew",
            f"ends {-seconds:g} s before it starts (clock skew): clamped to 0, review",
            int(seconds),
        )
    if seconds == 0:
        raise UnusableInterval("zero_length", "zero-length interval: 0 card-seconds", 0)
    return int(seconds)


def _require_aware(value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value!r}: billing needs aware datetimes")


# --------------------------------------------------------------------------- money


def minor_unit(currency: str) -> int:
    return MINOR_UNITS.get(currency.upper(), 2)


def round_money(amount: Decimal, currency: str) -> Decimal:
    """Half-up to the currency's minor unit: ``16.797778 EUR`` → ``16.80``; ``JPY`` → whole yen.

    ``ROUND_HALF_UP`` rounds ties away from zero (Python ``decimal`` docs), which is what
    "half-up" means on invoices for negative adjustments too.
    """
    exponent = Decimal(1).scaleb(-minor_unit(currency))
    return amount.quantize(exponent, rounding=ROUND_HALF_UP)


def format_money(amount: Decimal, currency: str) -> str:
    """The one money format of pages, PDFs and chart labels: rounded half-up to the currency's
    minor unit, thousands grouped with a narrow no-break space (ISO 31-0 / SI grouping, the
    same in every locale), then the ISO 4217 code: ``Decimal("9166.2666")``, ``"EUR"`` ->
    ``"9 166.27 EUR"``. CSVs keep plain numbers with a separate currency column."""
    value = round_money(Decimal(amount), currency)
    return f"{value:,}".replace(",", "\u202f") + f"\u00a0{currency}"


PRICE_UNITS = {
    "card-hours": ("card-hour", Decimal(1)),
    "input-tokens": ("1M input tokens", TOKENS_PER_MILLION),
    "cached-input-tokens": ("1M cached input tokens", TOKENS_PER_MILLION),
    "output-tokens": ("1M output tokens", TOKENS_PER_MILLION),
    # extra charges (issue 35, seed 004 §5.2): storage per GB-month, egress per GB
    "gb-months": ("GB-month", Decimal(1)),
    "gb": ("GB", Decimal(1)),
}
"""What a statement line's ``unit_price`` is per, by its ``unit``: card-hours are priced per
card-hour, tokens per million (C29, :func:`token_amount`)."""


def price_unit(unit: str) -> str:
    """``"input-tokens"`` -> ``"1M input tokens"``, ``"card-hours"`` -> ``"card-hour"``;
    raises ``KeyError`` for a unit no price is quoted in."""
    return PRICE_UNITS[unit][0]


def priced_quantity(quantity: Decimal, unit: str) -> Decimal:
    """The line's quantity in its price unit, so ``priced_quantity × unit_price`` is the amount
    before rounding: 534,907,485 input tokens -> ``534.907485`` (millions)."""
    return Decimal(quantity) / PRICE_UNITS[unit][1]


def quantity_places(unit: str) -> int:
    """Decimals a line's quantity is shown with, on the page and in the CSV: tokens whole,
    card-hours as every page shows them (:data:`pools.web.numbers.CARD_HOUR_PLACES`, 3: 3.6 s
    of one card), GB-months and GB to 3 places (1 MB held a month)."""
    if unit.endswith("tokens"):
        return 0
    return CARD_HOUR_PLACES if unit == "card-hours" else 3


def unit_price_places(unit_price: Decimal, currency: str) -> int:
    """Decimals a unit price is shown with: the currency's minor unit, or more when the price is
    finer (``1.9 EUR`` -> 2 places, ``0.0125 EUR`` -> 4)."""
    return max(minor_unit(currency), -Decimal(unit_price).normalize().as_tuple().exponent)


def rounding_note(currency: str) -> str:
    places = minor_unit(currency)
    step = "1" if places == 0 else "0." + "0" * (places - 1) + "1"
    return f"Per-second metering; each line's amount rounded once, half-up, to {step} {currency}."


def card_hours_rounded(card_seconds: Decimal) -> Decimal:
    """Card-seconds as card-hours kept to 6 places for display (amounts use the raw seconds)."""
    return card_seconds_hours(card_seconds).quantize(Decimal("0.000001"), ROUND_HALF_UP)


def card_hour_amount(card_seconds: Decimal, price_per_card_hour: Decimal, currency: str) -> Decimal:
    """``round(card_seconds × price / 3600)`` — one rounding, from raw seconds (C26)."""
    return round_money(Decimal(card_seconds) * price_per_card_hour / SECONDS_PER_HOUR, currency)


def token_amount(tokens: Decimal, price_per_million: Decimal, currency: str) -> Decimal:
    """``round(tokens × price / 10^6)`` (prices are quoted per million tokens, C29)."""
    return round_money(Decimal(tokens) * price_per_million / TOKENS_PER_MILLION, currency)


def extra_amount(quantity: Decimal, unit_price: Decimal, currency: str) -> Decimal:
    """``round(quantity × price)`` of an extra charge: GB-months of storage at a price per
    GB-month, GB of egress at a price per GB (issue 35). One rounding."""
    return round_money(Decimal(quantity) * unit_price, currency)


def gb_months(gb: Decimal, seconds: int, month_seconds: int) -> Decimal:
    """GB held for ``seconds`` of a billing month ``month_seconds`` long, in GB-months (the
    month's share of the storage, as cloud bills meter it: 500 GB for half of a 30-day month
    -> 250 GB-months), to 6 places, half-up."""
    if month_seconds <= 0:
        raise ValueError("a month has a positive length")
    return (Decimal(gb) * seconds / month_seconds).quantize(Decimal("0.000001"), ROUND_HALF_UP)


@dataclass(frozen=True)
class TokenSplit:
    uncached_input: int
    cached_input: int
    output: int

    @property
    def total(self) -> int:
        """Tokens for quotas: prompt (cached included) + output, counted once (C29: 128,000)."""
        return self.uncached_input + self.cached_input + self.output


def split_prompt_tokens(
    prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> TokenSplit:  # noqa: E501
    """C29 rule: OpenAI-style ``prompt_tokens`` already contains ``cached_tokens``.

    ``120000 prompt, 100000 cached, 8000 completion`` → 20000 uncached + 100000 cached + 8000
    output. The uncached remainder is clamped at 0 (a gateway reporting more cached than prompt
    tokens is wrong, not a credit). Providers that report input *excluding* cache reads
    (Anthropic's ``input_tokens``) must be normalised by the gateway before posting.
    """
    for name, value in (
        ("prompt_tokens", prompt_tokens),
        ("completion_tokens", completion_tokens),
        ("cached_tokens", cached_tokens),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    cached = min(cached_tokens, prompt_tokens)
    return TokenSplit(max(0, prompt_tokens - cached), cached, completion_tokens)


def counter_increase(samples: Sequence[tuple[datetime, Decimal]]) -> Decimal:
    """Increase of a monotonic counter over ordered samples, handling resets.

    Prometheus ``increase()`` semantics without extrapolation (prometheus/promql/functions.go
    ``extrapolatedRate``): a sample lower than the previous one means the counter restarted
    from 0, so its whole value is new increase. ``[100, 250, 30, 80]`` → 150 + 30 + 50 = 230.
    """
    total = Decimal(0)
    for (_, previous), (_, current) in zip(samples, samples[1:], strict=False):
        total += current - previous if current >= previous else current
    return total


# --------------------------------------------------------------------------- Slurm TRES


_MIG_TYPE = re.compile(r"^(?P<base>[A-Za-z0-9]+?)[_-](?P<profile>\dg\.\d+gb)$", re.IGNORECASE)


def mig_share(gres_type: str) -> tuple[str, Fraction] | None:
    """``a100_3g.20gb`` → ``("a100", 3/7)``: the full card a MIG-typed GRES is a slice of, and
    the share of that card it is (C10: 1 slice × 1.5 h = 0.643 A100 card-h, not 1.5). The
    share is :func:`pools.capacity.slices.slice_share`'s, the one a reserved slice allocation
    is billed at (A30: of 4 compute slices, else of 7)."""
    match = _MIG_TYPE.match(gres_type)
    if not match or not is_profile(match["profile"].lower()):
        return None
    base = match["base"].lower()
    return base, slice_share(match["profile"].lower(), model_key=base)


def gpu_counts_from_tres(tres: Mapping[str, Decimal]) -> dict[str | None, Decimal]:
    """GPUs per GRES type from a job's ``AllocTRES`` (``{"gres/gpu": 2, "gres/gpu:a100": 2}``).

    C10: the untyped key ``gres/gpu`` is the job's total (across all its nodes); typed keys are
    a breakdown of the same cards, not more. Untyped cards beyond the typed sum are under
    ``None``. With no untyped key (sites tracking only typed TRES) the typed keys are the total.
    """
    typed = {
        name.removeprefix("gres/gpu:"): Decimal(count)
        for name, count in tres.items()
        if name.startswith("gres/gpu:") and count
    }
    if "gres/gpu" not in tres:
        return typed
    remainder = Decimal(tres["gres/gpu"]) - sum(typed.values(), Decimal(0))
    if remainder > 0:
        typed[None] = remainder
    return typed


_DURATION = re.compile(
    r"^(?:(?P<days>\d+)-)?(?:(?P<hours>\d+):)?(?P<minutes>\d+):(?P<seconds>\d+(?:\.\d+)?)$"
)
_NO_LIMIT = {"UNLIMITED", "NOT_SET", "INVALID", "PARTITION_LIMIT", ""}


def parse_slurm_duration(text: str | None) -> Decimal | None:
    """Seconds in a sacct duration; ``None`` for no limit / not set.

    sacct(1): "[days-]hours:minutes:seconds[.microseconds]"; with two fields it is
    ``MM:SS[.mmm]`` (TotalCPU ``00:36.857`` = 36.857 s, C12); days may exceed 31
    (``45-00:00:00`` = 3,888,000 s, where ``strptime('%d')`` fails). With a day part and two
    fields it is ``D-HH:MM``. Raises ``ValueError`` for anything else.
    """
    if text is None or text.strip().upper() in _NO_LIMIT:
        return None
    value = text.strip()
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"unreadable Slurm duration {text!r}")
    days = int(match["days"] or 0)
    if match["days"] and match["hours"] is None:
        hours, minutes, seconds = int(match["minutes"]), Decimal(match["seconds"]), Decimal(0)
        return Decimal(days * 86400 + hours * 3600) + minutes * 60 + seconds
    hours = int(match["hours"] or 0)
    return Decimal(days * 86400 + hours * 3600 + int(match["minutes"]) * 60) + Decimal(
        match["seconds"]
    )


# --------------------------------------------------------------------------- shared cards


def split_minor_units(total: Decimal, weights: Sequence[Fraction], currency: str) -> list[Decimal]:
    """Split an amount already rounded to the currency's minor unit into parts in proportion
    to ``weights`` (each >= 0, summing to 1) so that the parts add up to ``total`` exactly.

    Largest-remainder (Hamilton) rounding: each part first gets its exact share rounded down
    to the minor unit; the cents still missing (fewer than the number of parts) go one each to
    the parts that lost most to rounding down. So each part is within one minor unit of its
    exact share and the total rounding error is the least possible. Equal remainders: the
    larger weight first (its relative error is the smaller), then the earlier part in
    ``weights`` (callers list tenants by team slug, the idle remainder last).
    ``10.00 EUR`` over ``(1/3, 1/3, 1/3)`` -> ``3.34, 3.33, 3.33``: the first third gets the
    odd cent.
    """
    if any(w < 0 for w in weights) or sum(weights, Fraction(0)) != 1:
        raise ValueError(f"weights must be >= 0 and sum to 1, got {weights!r}")
    scale = 10 ** minor_unit(currency)
    units = Fraction(total) * scale
    if units.denominator != 1:
        raise ValueError(f"{total} {currency} is not rounded to the minor unit")
    exact = [units * w for w in weights]
    floors = [e.numerator // e.denominator for e in exact]
    missing = int(units) - sum(floors)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - floors[i]), -weights[i], i))
    for i in order[:missing]:
        floors[i] += 1
    step = Decimal(1).scaleb(-minor_unit(currency))
    return [(Decimal(f) * step).quantize(step) for f in floors]
