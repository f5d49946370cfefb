"""The shape fitter and stranded capacity: hand-worked cases first, then properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.capacity.placement import (
    NodeFree,
    Placement,
    Shape,
    ShapeError,
    fit_shape,
    stranded_cards,
)

EIGHT = frozenset(range(8))


def nvswitch(name: str, free: set[int]) -> NodeFree:
    """An 8-card NVSwitch board (one domain of all eight, as the DGX A100 capture reads)."""
    return NodeFree(name, frozenset(free), (EIGHT,))


def test_the_issue_scenario_is_refused_with_the_largest_shape_that_fits():
    # 8 free A100 spread 2 per node over 4 NVSwitch nodes; TP=8 asks 1 node x 8 cards
    nodes = [nvswitch(f"a100-{i}", {0, 1}) for i in range(1, 5)]
    result = fit_shape(nodes, Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True))
    assert result.fits is False
    assert result.placements == ()
    # most cards per node any node gives: 2; nodes that give 2: 4; 4 x 2 = the 8 asked
    assert result.largest == Shape(cards_per_node=2, nodes=4, one_nvlink_domain=True)
    assert result.largest_single_node == Shape(cards_per_node=2, nodes=1, one_nvlink_domain=True)
    assert result.message() == (
        "1 node × 8 cards, one NVLink domain does not fit: no node has 8 free cards in one "
        "NVLink domain for the whole window (most free on one node: 2; 8 free in all). "
        "The largest shape that does is 4 nodes × 2 cards each, one NVLink domain "
        "(on one node: 1 node × 2 cards, one NVLink domain)."
    )
    # the same cards as "any 8" fit: the card-count invariant alone would have said yes
    assert fit_shape(nodes, Shape.any(8)).fits is True


def test_best_fit_takes_the_tightest_node_and_keeps_the_empty_one_whole():
    nodes = [nvswitch("a", set(range(8))), nvswitch("b", {6, 7}), nvswitch("c", {0, 1, 2, 3})]
    two = fit_shape(nodes, Shape(cards_per_node=2, nodes=1))
    assert two.placements == (Placement("b", (6, 7)),)  # leftover 0, not 6 on a
    four = fit_shape(nodes, Shape(cards_per_node=4, nodes=1))
    assert four.placements == (Placement("c", (0, 1, 2, 3)),)
    two_by_four = fit_shape(nodes, Shape(cards_per_node=4, nodes=2))
    assert two_by_four.placements == (Placement("c", (0, 1, 2, 3)), Placement("a", (0, 1, 2, 3)))
    assert two_by_four.nodes == ("c", "a")
    eight = fit_shape(nodes, Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True))
    assert eight.placements == (Placement("a", tuple(range(8))),)


def test_ties_break_by_node_name_whatever_the_input_order():
    nodes = [nvswitch("n2", {0, 1}), nvswitch("n1", {4, 5}), nvswitch("n3", {2, 3})]
    assert fit_shape(nodes, Shape(2, 1)).placements == (Placement("n1", (4, 5)),)
    assert fit_shape(list(reversed(nodes)), Shape(2, 1)).placements == (Placement("n1", (4, 5)),)


def test_bridged_pair_box_one_domain_needs_both_cards_of_the_pair():
    # the RTX A6000 capture: GPU0-GPU1 bridged, GPU2 alone
    domains = (frozenset({0, 1}), frozenset({2}))
    whole = NodeFree("ws", frozenset({0, 1, 2}), domains)
    assert fit_shape([whole], Shape(2, 1, True)).placements == (Placement("ws", (0, 1)),)
    one_of_pair_busy = NodeFree("ws", frozenset({1, 2}), domains)
    refused = fit_shape([one_of_pair_busy], Shape(2, 1, True))
    assert refused.fits is False
    assert refused.largest == Shape(1, 1, True)  # ceil(2 / 1) = 2 nodes allowed, 1 node exists
    # without the domain rule the two free cards are a 1 x 2 over PCIe
    assert fit_shape([one_of_pair_busy], Shape(2, 1)).placements == (Placement("ws", (1, 2)),)
    # best fit picks the smaller domain for a single card: GPU2, keeping the pair whole
    assert fit_shape([whole], Shape(1, 1)).placements == (Placement("ws", (2,)),)


def test_unknown_domains_never_satisfy_one_domain():
    node = NodeFree("blind", frozenset(range(8)), None)
    result = fit_shape([node], Shape(8, 1, True))
    assert result.fits is False
    assert "unknown NVLink domains" in result.reason
    assert result.largest == Shape(1, 1, True)
    assert fit_shape([node], Shape(8, 1)).fits is True  # no domain asked: the count is enough


def test_not_enough_nodes_says_how_many():
    nodes = [nvswitch("a", set(range(8))), nvswitch("b", {0, 1, 2})]
    result = fit_shape(nodes, Shape(4, 2))
    assert result.fits is False
    assert result.reason == "only 1 node of the 2 asked can each hold 4"
    assert result.largest == Shape(4, 1)


def test_any_shape_prefers_one_node_then_fewest_nodes():
    nodes = [nvswitch("a", {0, 1, 2}), nvswitch("b", {0, 1, 2, 3, 4}), nvswitch("c", {7})]
    assert fit_shape(nodes, Shape.any(3)).placements == (Placement("a", (0, 1, 2)),)
    spread = fit_shape(nodes, Shape.any(7))
    assert spread.placements == (Placement("b", (0, 1, 2, 3, 4)), Placement("a", (0, 1)))
    too_many = fit_shape(nodes, Shape.any(10))
    assert too_many.fits is False and too_many.largest == Shape.any(9)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Shape(0, 1),
        lambda: Shape(8, 0),
        lambda: Shape(8, None),
        lambda: Shape(True, 1),
        lambda: Shape.any(0),
        lambda: Shape(cards_per_node=None, nodes=None, one_nvlink_domain=True, any_cards=4),
        lambda: NodeFree("x", frozenset({0, 1}), (frozenset({0, 1}), frozenset({1}))),
        lambda: NodeFree("x", frozenset({3}), (frozenset({0, 1}),)),
        lambda: NodeFree("x", frozenset({-1})),
    ],
)
def test_bad_shapes_and_nodes_are_refused(make):
    with pytest.raises(ShapeError):
        make()


def test_two_nodes_with_one_name_are_refused():
    with pytest.raises(ShapeError):
        fit_shape([nvswitch("a", {0}), nvswitch("a", {1})], Shape(1, 1))


def test_stranded_on_nvswitch_pcie_and_bridged_nodes():
    nodes = [
        nvswitch("dgx-1", {0, 1, 2, 3, 4, 5}),  # 2 allocated: 6 free, no 1 x 8
        nvswitch("dgx-2", set(range(8))),  # whole: 0 stranded
        NodeFree("pcie", frozenset({0, 3, 5}), tuple(frozenset({i}) for i in range(8))),
        NodeFree("ws", frozenset({1, 2}), (frozenset({0, 1}), frozenset({2}))),
        NodeFree("blind", frozenset({0, 1}), None),
    ]
    report = stranded_cards(nodes)
    assert report.free == 6 + 8 + 3 + 2 + 2
    # dgx-1: 6 mod 8 = 6; dgx-2: 0; pcie: target 1, 0; ws: pair domain 1 mod 2 = 1, GPU2 target 1
    assert report.stranded == 6 + 0 + 0 + 1 + 0
    assert report.unknown_topology == 2
    # for 2-card groups: dgx 6 mod 2 + 8 mod 2 = 0; pcie 3 (domains of one); ws 1 + 1
    # for 4: dgx 6 mod 4 = 2; pcie 3; ws 2;  for 8: dgx 6; pcie 3; ws 2
    assert report.stranded_for == {1: 0, 2: 0 + 3 + 2, 4: 2 + 3 + 2, 8: 6 + 3 + 2}
    by_node = {row.node: row for row in report.nodes}
    assert (by_node["dgx-1"].target_cards, by_node["dgx-1"].cards_to_free) == (8, 2)
    assert (by_node["ws"].target_cards, by_node["ws"].cards_to_free) == (2, 1)
    assert by_node["dgx-2"].cards_to_free is None and by_node["blind"].target_cards is None
    # cheapest whole group to win back first
    assert [row.node for row in report.nodes][:2] == ["ws", "dgx-1"]


node_strategy = st.builds(
    lambda name, free, paired: NodeFree(
        name,
        frozenset(free),
        (frozenset(range(0, 4)), frozenset(range(4, 8))) if paired else (EIGHT,),
    ),
    st.sampled_from([f"n{i}" for i in range(6)]),
    st.sets(st.integers(0, 7)),
    st.booleans(),
)
shape_strategy = st.builds(
    Shape, st.integers(1, 8), st.integers(1, 4), st.booleans(), st.none(), st.booleans()
)


@settings(max_examples=300, deadline=None)
@given(st.lists(node_strategy, max_size=6, unique_by=lambda n: n.name), shape_strategy)
def test_properties_of_fit(nodes, shape):
    result = fit_shape(nodes, shape)
    by_name = {n.name: n for n in nodes}
    assert fit_shape(list(reversed(nodes)), shape) == result  # deterministic
    if result.fits:
        assert len(result.placements) == shape.nodes
        if not shape.shared_nodes:
            assert len(set(result.nodes)) == shape.nodes
        used: set[tuple[str, int]] = set()
        for placement in result.placements:
            node = by_name[placement.node]
            assert len(placement.gpus) == shape.cards_per_node
            assert set(placement.gpus) <= node.free
            cards = {(placement.node, gpu) for gpu in placement.gpus}
            assert not cards & used  # no card given twice
            used |= cards
            if shape.one_nvlink_domain:
                assert any(set(placement.gpus) <= d for d in node.domains)
    else:
        assert result.largest is None or fit_shape(nodes, result.largest).fits
        assert result.largest is None or result.largest.cards_per_node <= shape.cards_per_node
        if result.largest is not None and result.largest.cards_per_node < shape.cards_per_node:
            bigger = Shape(
                result.largest.cards_per_node + 1,
                1,
                shape.one_nvlink_domain,
                shared_nodes=shape.shared_nodes,
            )
            assert not fit_shape(nodes, bigger).fits  # nothing with more cards per node fits


@settings(max_examples=200, deadline=None)
@given(st.lists(node_strategy, max_size=6, unique_by=lambda n: n.name))
def test_properties_of_stranding(nodes):
    report = stranded_cards(nodes)
    assert 0 <= report.stranded <= report.free
    assert report.stranded_for[1] == 0
    # sizes divide each other, so a card stranded for 2 is stranded for 4 and for 8
    assert report.stranded_for[2] <= report.stranded_for[4] <= report.stranded_for[8]
    assert report.stranded == sum(row.stranded for row in report.nodes)


def test_free_for_window_and_stranded_card_hours_by_hand():
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from pools.capacity.placement import Hold, NodeCards, free_for_window, stranded_card_hours

    t0 = datetime(2026, 12, 7, tzinfo=UTC)
    day = timedelta(days=1)
    nodes = [NodeCards("dgx-1", EIGHT, (EIGHT,)), NodeCards("dgx-2", EIGHT, (EIGHT,))]
    holds = [
        Hold("dgx-1", frozenset({0, 1}), t0, t0 + 2 * day),  # 2 cards for the first two days
        Hold("dgx-2", frozenset(range(8)), t0 + day, t0 + 3 * day),  # whole node, days 2-3
    ]
    # a request for days 1-4 may use only cards free throughout: dgx-1 2..7, dgx-2 none
    free = free_for_window(nodes, holds, t0, t0 + 4 * day)
    assert [(n.name, sorted(n.free)) for n in free] == [("dgx-1", list(range(2, 8))), ("dgx-2", [])]
    # half-open: a window starting when a hold ends does not meet it
    assert free_for_window(nodes, holds, t0 + 3 * day, t0 + 4 * day)[1].free == EIGHT

    hours = stranded_card_hours(nodes, holds, t0, t0 + 4 * day)
    # dgx-1: 6 free (stranded for 8) for 48 h, then 8 free for 48 h -> 288 stranded card-hours
    # dgx-2: 8 free 24 h, 0 free 48 h, 8 free 24 h -> nothing stranded
    assert hours.card_hours == Decimal(6 * 48)
    assert hours.free_card_hours == Decimal(6 * 48 + 8 * 48 + 8 * 24 + 8 * 24)
    # for 4-card groups: 6 mod 4 = 2 cards for 48 h; for 2 and 1 nothing
    assert hours.card_hours_for == {1: 0, 2: 0, 4: Decimal(96), 8: Decimal(288)}
    assert hours.by_node == (("dgx-1", Decimal(288)),)
    assert hours.unknown_topology_card_hours == 0
    # a 90-minute horizon: 6 cards x 1.5 h, exact in Decimal
    short = stranded_card_hours(nodes, holds, t0, t0 + timedelta(minutes=90))
    assert short.card_hours == Decimal("9")


def test_replica_groups_may_share_a_node_training_groups_may_not():
    from pools.capacity.placement import shape_from_sizing

    one_dgx = [nvswitch("dgx", set(range(8)))]
    replicas = shape_from_sizing(tensor_parallel=2, replicas=4)
    assert replicas == Shape(2, 4, one_nvlink_domain=True, shared_nodes=True)
    fit = fit_shape(one_dgx, replicas)
    assert fit.placements == tuple(Placement("dgx", (i, i + 1)) for i in (0, 2, 4, 6))
    # the same groups as a training job want four nodes of their own
    training = shape_from_sizing(tensor_parallel=2, replicas=4, training=True)
    assert training == Shape(2, 4, one_nvlink_domain=True)
    refused = fit_shape(one_dgx, training)
    assert refused.fits is False and refused.largest == Shape(2, 1, True)
    # bridged pairs (the A6000 box): a pair per group; the lone card never joins one
    pairs = [NodeFree("ws", frozenset({0, 1, 2}), (frozenset({0, 1}), frozenset({2})))]
    two = fit_shape(pairs, Shape(2, 2, True, shared_nodes=True))
    assert two.fits is False
    assert two.reason == "only 1 group of 2 cards in one NVLink domain fit of the 2 asked"
    assert two.largest == Shape(2, 1, True, shared_nodes=True)
    assert two.message().endswith(
        "The largest shape that does is 1 group × 2 cards (groups may share a node), "
        "one NVLink domain."
    )
    assert shape_from_sizing(tensor_parallel=1, replicas=3) == Shape.any(3)
    with pytest.raises(ShapeError):
        shape_from_sizing(tensor_parallel=0, replicas=1)


alike_strategy = st.lists(
    st.tuples(node_strategy, st.integers(0, 3)), max_size=4, unique_by=lambda t: t[0].name
)


@settings(max_examples=300, deadline=None)
@given(alike_strategy, st.one_of(shape_strategy, st.integers(1, 30).map(Shape.any)))
def test_groups_of_alike_nodes_fit_as_the_nodes_one_by_one(specs, shape):
    from pools.capacity.placement import NodeGroup, fit_groups, group_nodes

    # each node with up to 3 look-alikes (same free cards and domains, other names)
    nodes = [
        NodeFree(f"{node.name}-{copy}", node.free, node.domains)
        for node, copies in specs
        for copy in range(copies + 1)
    ]
    one_by_one = fit_groups([NodeGroup((n.name,), n.free, n.domains) for n in nodes], shape)
    groups = group_nodes(nodes)
    assert len(groups) <= len(specs)
    assert fit_groups(groups, shape) == one_by_one
    assert fit_shape(nodes, shape) == one_by_one


def test_take_cards_splits_the_nodes_touched_from_their_group():
    from pools.capacity.placement import NodeGroup, take_cards

    group = NodeGroup(("a", "b", "c"), EIGHT, (EIGHT,))
    after = take_cards([group], {"b": (0, 1)})
    assert after == [
        NodeGroup(("a", "c"), EIGHT, (EIGHT,)),
        NodeGroup(("b",), frozenset(range(2, 8)), (EIGHT,)),
    ]
    with pytest.raises(ShapeError, match="two nodes share a name"):
        fit_shape([nvswitch("a", set()), nvswitch("a", {1})], Shape.any(1))
