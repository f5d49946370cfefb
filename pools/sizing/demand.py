"""Traffic to demand: peak requests/s, equivalent output tokens, replicas and cards.

The seeds' capacity rule (``shared/seeds``, "token-demand sizing"): cards = peak equivalent output
tok/s / per-card tok/s, where an input token counts as ``input_weight`` (0.5) output tokens. Here
the prompt-cache hit share of the input is not counted (it needs no prefill), and the peak window
is its real length in seconds: 4 hours is 14,400 s (the seed's "about 40,000 s" is a slip).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pools.sizing import SizingInputError

#: Default weight of an input token in output-token equivalents, from the seed document.
INPUT_WEIGHT = 0.5

#: Above this peak rate the traffic is treated as a typo, not a plan: 10**6 requests/s is
#: 8.64e10 requests a day, more than ten times the daily searches of the largest web search
#: engine, and every request would carry an LLM generation.
MAX_PEAK_REQUESTS_PER_S = 1e6

SECONDS_PER_HOUR = 3600


def _ceil(value: float) -> int:
    # Float quotients like 0.3 / 0.1 land a hair above a whole number; that is the number.
    nearest = round(value)
    if abs(value - nearest) <= 1e-9 * abs(value):
        return int(nearest)
    return math.ceil(value)


def _check_range(name: str, value: float, low: float, high: float, *, low_open: bool) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise SizingInputError(
            f"{name} must be a number in {bound}, got {value!r}",
            reason="out_of_range",
            field=name,
        )


def _check_tokens(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SizingInputError(
            f"{name} must be a positive integer, got {value!r}", reason="not_positive", field=name
        )


@dataclass(frozen=True)
class Demand:
    """Peak demand with every step of the arithmetic.

    ``requests_in_peak`` = requests/day × peak share; ``peak_window_s`` = peak hours × 3,600;
    ``peak_requests_per_s`` = their quotient. ``equivalent_output_tokens_per_request`` =
    output + input × (1 - prompt-cache hit rate) × input weight; ``peak_equivalent_output_tok_s``
    = requests/s × that; ``peak_output_tok_s`` counts generated tokens only.
    """

    requests_per_day: float | None
    peak_share: float | None
    peak_hours: float | None
    requests_in_peak: float | None
    peak_window_s: float | None
    peak_requests_per_s: float
    input_tokens: int
    output_tokens: int
    input_weight: float
    prompt_cache_hit_rate: float
    equivalent_output_tokens_per_request: float
    peak_equivalent_output_tok_s: float
    peak_output_tok_s: float


def equivalent_output_tokens(
    *, input_tokens: int, output_tokens: int, input_weight: float, prompt_cache_hit_rate: float
) -> float:
    """Output tokens + input tokens × (1 - cache hit rate) × input weight, per request.

    5,000 in / 1,500 out, weight 0.5, no cache: 1,500 + 2,500 = 4,000.
    """
    return output_tokens + input_tokens * (1 - prompt_cache_hit_rate) * input_weight


def _demand(
    *,
    peak_requests_per_s: float,
    input_tokens: int,
    output_tokens: int,
    input_weight: float,
    prompt_cache_hit_rate: float,
    requests_per_day: float | None = None,
    peak_share: float | None = None,
    peak_hours: float | None = None,
    requests_in_peak: float | None = None,
    peak_window_s: float | None = None,
) -> Demand:
    _check_tokens("input_len", input_tokens)
    _check_tokens("output_len", output_tokens)
    low, high, low_open = TRAFFIC_BOUNDS["input_weight"]
    _check_range("input_weight", input_weight, low, high, low_open=low_open)
    _check_range("prompt_cache_hit_rate", prompt_cache_hit_rate, 0.0, 1.0, low_open=False)
    if prompt_cache_hit_rate >= 1:
        raise SizingInputError(
            "prompt_cache_hit_rate must be below 1 (some input is always new)",
            reason="out_of_range",
            field="prompt_cache_hit_rate",
        )
    if peak_requests_per_s > MAX_PEAK_REQUESTS_PER_S:
        raise SizingInputError(
            f"peak of {peak_requests_per_s:,.0f} requests/s is beyond any real deployment "
            f"(limit {MAX_PEAK_REQUESTS_PER_S:,.0f}); check the traffic figures",
            reason="absurd_traffic",
            field="requests_per_day",
        )
    per_request = equivalent_output_tokens(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        input_weight=input_weight,
        prompt_cache_hit_rate=prompt_cache_hit_rate,
    )
    return Demand(
        requests_per_day=requests_per_day,
        peak_share=peak_share,
        peak_hours=peak_hours,
        requests_in_peak=requests_in_peak,
        peak_window_s=peak_window_s,
        peak_requests_per_s=peak_requests_per_s,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        input_weight=input_weight,
        prompt_cache_hit_rate=prompt_cache_hit_rate,
        equivalent_output_tokens_per_request=per_request,
        peak_equivalent_output_tok_s=peak_requests_per_s * per_request,
        peak_output_tok_s=peak_requests_per_s * output_tokens,
    )


#: The traffic inputs' bounds: ``(low, high, low_open)``, the high end closed.
TRAFFIC_BOUNDS = {
    "requests_per_day": (0.0, 1e15, True),
    "peak_share": (0.0, 1.0, True),
    "peak_hours": (0.0, 24.0, True),
    "input_weight": (0.0, 4.0, False),
}


def traffic_errors(values: Mapping[str, object]) -> dict[str, str]:
    """``{field: message}`` for every traffic input of ``values`` given out of its
    :data:`TRAFFIC_BOUNDS` (one answer for all; :func:`demand_from_traffic` stops at the first);
    a field left out (``None``) is not checked."""
    errors = {}
    for name, (low, high, low_open) in TRAFFIC_BOUNDS.items():
        if values.get(name) is None:
            continue
        try:
            _check_range(name, values[name], low, high, low_open=low_open)
        except SizingInputError as exc:
            errors[name] = exc.message
    return errors


def demand_from_traffic(
    *,
    requests_per_day: float,
    input_tokens: int,
    output_tokens: int,
    peak_share: float = 1.0,
    peak_hours: float = 24.0,
    input_weight: float = INPUT_WEIGHT,
    prompt_cache_hit_rate: float = 0.0,
) -> Demand:
    """Peak demand of ``requests_per_day`` of which ``peak_share`` arrive in ``peak_hours``.

    The seed's customer-service agent: 100,000 requests/day, all in a 4-hour peak → 100,000 /
    14,400 s = 6.944 requests/s; 5,000 in / 1,500 out at weight 0.5 → 4,000 equivalent tokens per
    request → 27,778 equivalent output tok/s.

    Raises :class:`SizingInputError`: ``out_of_range`` for requests/day <= 0, a share outside
    (0, 1], hours outside (0, 24], a cache hit rate outside [0, 1), a weight outside [0, 4];
    ``not_positive`` for token counts; ``absurd_traffic`` above
    :data:`MAX_PEAK_REQUESTS_PER_S`.
    """
    for name, value in (
        ("requests_per_day", requests_per_day),
        ("peak_share", peak_share),
        ("peak_hours", peak_hours),
    ):
        low, high, low_open = TRAFFIC_BOUNDS[name]
        _check_range(name, value, low, high, low_open=low_open)
    in_peak = requests_per_day * peak_share
    window_s = peak_hours * SECONDS_PER_HOUR
    return _demand(
        peak_requests_per_s=in_peak / window_s,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        input_weight=input_weight,
        prompt_cache_hit_rate=prompt_cache_hit_rate,
        requests_per_day=requests_per_day,
        peak_share=peak_share,
        peak_hours=peak_hours,
        requests_in_peak=in_peak,
        peak_window_s=window_s,
    )


def demand_from_output_rate(
    *,
    output_tok_s: float,
    input_tokens: int,
    output_tokens: int,
    input_weight: float = INPUT_WEIGHT,
    prompt_cache_hit_rate: float = 0.0,
) -> Demand:
    """Peak demand stated as generated tokens per second (e.g. "2,000 tok/s").

    peak requests/s = output tok/s / output tokens per request. Raises like
    :func:`demand_from_traffic` (``out_of_range`` for a rate <= 0).
    """
    _check_range("output_tok_s", output_tok_s, 0.0, 1e12, low_open=True)
    _check_tokens("output_len", output_tokens)
    return _demand(
        peak_requests_per_s=output_tok_s / output_tokens,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        input_weight=input_weight,
        prompt_cache_hit_rate=prompt_cache_hit_rate,
    )


def cards_for_rate(*, equivalent_tok_s: float, per_card_tok_s: float) -> int:
    """The seeds' rule: ceil(equivalent output tok/s / tok/s one card delivers).

    27,778 tok/s at 60 tok/s per card → 463 cards. Raises :class:`SizingInputError`
    (``out_of_range``) for a negative demand or a per-card rate <= 0.
    """
    _check_range("equivalent_tok_s", equivalent_tok_s, 0.0, 1e15, low_open=False)
    _check_range("per_card_tok_s", per_card_tok_s, 0.0, 1e12, low_open=True)
    return _ceil(equivalent_tok_s / per_card_tok_s)


def replicas_for_demand(*, peak_requests_per_s: float, replica_requests_per_s: float) -> int:
    """Replicas to serve the peak: ceil(peak requests/s / requests/s one replica serves), >= 1.

    Raises :class:`SizingInputError` (``out_of_range``) for a negative peak or a replica rate
    <= 0.
    """
    _check_range("peak_requests_per_s", peak_requests_per_s, 0.0, 1e12, low_open=False)
    _check_range("replica_requests_per_s", replica_requests_per_s, 0.0, 1e12, low_open=True)
    return max(1, _ceil(peak_requests_per_s / replica_requests_per_s))
