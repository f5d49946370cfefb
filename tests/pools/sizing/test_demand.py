"""Traffic to demand: the seeds' customer-service agent, worked by hand, and bad traffic."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.sizing import SizingInputError
from pools.sizing.demand import (
    MAX_PEAK_REQUESTS_PER_S,
    cards_for_rate,
    demand_from_output_rate,
    demand_from_traffic,
    equivalent_output_tokens,
    replicas_for_demand,
)


def customer_service_agent():
    return demand_from_traffic(
        requests_per_day=100_000,
        peak_share=1.0,
        peak_hours=4,
        input_tokens=5_000,
        output_tokens=1_500,
        input_weight=0.5,
    )


def test_the_peak_window_is_14400_seconds_not_the_seeds_40000():
    demand = customer_service_agent()

    assert demand.peak_window_s == 4 * 3_600 == 14_400
    assert demand.requests_in_peak == 100_000


def test_peak_requests_per_second():
    demand = customer_service_agent()

    assert demand.peak_requests_per_s == pytest.approx(100_000 / 14_400)
    assert demand.peak_requests_per_s == pytest.approx(6.944, abs=0.0005)


def test_equivalent_output_tokens_per_request_and_per_second():
    demand = customer_service_agent()

    assert demand.equivalent_output_tokens_per_request == 1_500 + 5_000 * 0.5 == 4_000
    assert demand.peak_equivalent_output_tok_s == pytest.approx(100_000 / 14_400 * 4_000)
    assert round(demand.peak_equivalent_output_tok_s) == 27_778
    assert demand.peak_output_tok_s == pytest.approx(100_000 / 14_400 * 1_500)


def test_at_the_seeds_60_tokens_per_card_it_takes_463_cards():
    demand = customer_service_agent()

    cards = cards_for_rate(equivalent_tok_s=demand.peak_equivalent_output_tok_s, per_card_tok_s=60)

    assert cards == math.ceil(27_777.78 / 60) == 463


def test_prompt_cache_hits_lower_the_input_weight():
    assert (
        equivalent_output_tokens(
            input_tokens=5_000, output_tokens=1_500, input_weight=0.5, prompt_cache_hit_rate=0.5
        )
        == 1_500 + 5_000 * 0.5 * 0.5
    )


def test_part_of_the_day_in_the_peak():
    demand = demand_from_traffic(
        requests_per_day=240_000, peak_share=0.3, peak_hours=2, input_tokens=100, output_tokens=10
    )

    assert demand.requests_in_peak == pytest.approx(72_000)
    assert demand.peak_requests_per_s == pytest.approx(72_000 / 7_200)


def test_demand_from_an_output_rate():
    demand = demand_from_output_rate(output_tok_s=2_000, input_tokens=2_000, output_tokens=500)

    assert demand.peak_requests_per_s == 4
    assert demand.peak_equivalent_output_tok_s == 4 * (500 + 2_000 * 0.5)


def test_replicas_round_up_but_exact_quotients_stay_exact():
    assert replicas_for_demand(peak_requests_per_s=6.0, replica_requests_per_s=2.0) == 3
    assert replicas_for_demand(peak_requests_per_s=0.1 + 0.2, replica_requests_per_s=0.3) == 1
    assert replicas_for_demand(peak_requests_per_s=6.1, replica_requests_per_s=2.0) == 4
    assert replicas_for_demand(peak_requests_per_s=0.0, replica_requests_per_s=2.0) == 1


def test_absurd_traffic_is_refused_with_the_rate_it_implies():
    with pytest.raises(SizingInputError) as error:
        demand_from_traffic(requests_per_day=10**12, input_tokens=100, output_tokens=100)

    assert error.value.data == {"reason": "absurd_traffic", "field": "requests_per_day"}
    assert "11,574,074 requests/s" in error.value.message
    assert MAX_PEAK_REQUESTS_PER_S == 1e6


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"requests_per_day": 0}, "requests_per_day"),
        ({"requests_per_day": -5}, "requests_per_day"),
        ({"requests_per_day": float("nan")}, "requests_per_day"),
        ({"peak_share": 0}, "peak_share"),
        ({"peak_share": 1.5}, "peak_share"),
        ({"peak_hours": 0}, "peak_hours"),
        ({"peak_hours": 25}, "peak_hours"),
        ({"input_tokens": 0}, "input_len"),
        ({"output_tokens": -1}, "output_len"),
        ({"prompt_cache_hit_rate": 1.0}, "prompt_cache_hit_rate"),
        ({"prompt_cache_hit_rate": -0.1}, "prompt_cache_hit_rate"),
        ({"input_weight": -0.5}, "input_weight"),
    ],
)
def test_bad_traffic_is_refused(changes, field):
    arguments = {"requests_per_day": 1_000, "input_tokens": 100, "output_tokens": 100}
    arguments.update(changes)

    with pytest.raises(SizingInputError) as error:
        demand_from_traffic(**arguments)

    assert error.value.data["field"] == field


def test_a_per_card_rate_of_zero_is_refused():
    with pytest.raises(SizingInputError):
        cards_for_rate(equivalent_tok_s=100, per_card_tok_s=0)


@settings(max_examples=300, deadline=None)
@given(
    requests_per_day=st.floats(min_value=1e-3, max_value=1e10, allow_nan=False),
    peak_share=st.floats(min_value=1e-3, max_value=1.0),
    peak_hours=st.floats(min_value=0.1, max_value=24.0),
    input_tokens=st.integers(min_value=1, max_value=200_000),
    output_tokens=st.integers(min_value=1, max_value=50_000),
    cache=st.floats(min_value=0.0, max_value=0.99),
    per_card=st.floats(min_value=0.01, max_value=1e5),
    replica_rps=st.floats(min_value=1e-3, max_value=1e4),
)
def test_card_counts_are_non_negative_integers(
    requests_per_day,
    peak_share,
    peak_hours,
    input_tokens,
    output_tokens,
    cache,
    per_card,
    replica_rps,
):
    try:
        demand = demand_from_traffic(
            requests_per_day=requests_per_day,
            peak_share=peak_share,
            peak_hours=peak_hours,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            prompt_cache_hit_rate=cache,
        )
    except SizingInputError as error:
        assert error.data["reason"] == "absurd_traffic"
        return

    cards = cards_for_rate(
        equivalent_tok_s=demand.peak_equivalent_output_tok_s, per_card_tok_s=per_card
    )
    replicas = replicas_for_demand(
        peak_requests_per_s=demand.peak_requests_per_s, replica_requests_per_s=replica_rps
    )

    assert isinstance(cards, int) and cards >= 0
    assert isinstance(replicas, int) and replicas >= 1
    assert cards * per_card >= demand.peak_equivalent_output_tok_s * (1 - 1e-9)
    assert math.isfinite(demand.peak_equivalent_output_tok_s)
