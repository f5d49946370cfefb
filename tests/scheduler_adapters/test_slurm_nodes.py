import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_adapters.slurm.nodes import parse_slurm_nodes, slurm_node_state
from scheduler_adapters.types import GpuHealth, InventorySource, NodeState, ParseIssue

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / "nodes_v0.0.38.json"


def _node(name="gpu-01", **fields):
    return {"name": name, "state": "idle", "state_flags": [], "gres": "gpu:a100:4", **fields}


def _by_name(result):
    return {node.hostname: node for node in result.nodes}


def test_v0038_fixture():
    result = parse_slurm_nodes(FIXTURE.read_text())

    assert result.issues == ()
    assert [node.hostname for node in result.nodes] == [
        "gpu-a100-01",
        "gpu-4090-01",
        "gpu-a100-02",
        "cpu-01",
    ]
    nodes = _by_name(result)

    a100 = nodes["gpu-a100-01"]
    assert a100.source is InventorySource.SLURM
    assert a100.state is NodeState.UP
    assert a100.state_reason is None
    assert a100.partitions == ("gpu",)
    assert [(gpu.index, gpu.model_name) for gpu in a100.gpus] == [
        (0, "a100"),
        (1, "a100"),
        (2, "a100"),
        (3, "a100"),
    ]
    assert all(gpu.health is GpuHealth.UNKNOWN for gpu in a100.gpus)
    assert a100.driver_version is None and a100.cuda_version is None

    rtx = nodes["gpu-4090-01"]
    assert rtx.state is NodeState.UP  # "mixed"
    assert [(gpu.index, gpu.model_name) for gpu in rtx.gpus] == [(0, "rtx4090"), (1, "rtx4090")]

    drained = nodes["gpu-a100-02"]
    assert drained.state is NodeState.DRAIN
    assert drained.state_reason == "ECC errors on GPU 2"
    assert len(drained.gpus) == 4

    cpu = nodes["cpu-01"]
    assert cpu.gpus == ()
    assert cpu.state is NodeState.UP
    assert cpu.partitions == ("cpu",)


def test_dict_payload_gives_the_same_result_as_text():
    assert parse_slurm_nodes(json.loads(FIXTURE.read_text())) == parse_slurm_nodes(
        FIXTURE.read_text()
    )


def test_hostname_is_the_slurm_node_name_not_the_hostname_field():
    result = parse_slurm_nodes({"nodes": [_node("gpu-a100-01", hostname="localhost")]})
    assert result.nodes[0].hostname == "gpu-a100-01"


def test_v0041_shape_with_state_list_and_wrapped_numbers():
    payload = {
        "nodes": [
            {
                "name": "gpu-h100-01",
                "state": ["IDLE", "DRAIN"],
                "gres": "gpu:h100:8(S:0-1),tmp:3500G",
                "gres_used": "gpu:h100:0(IDX:N/A),tmp:0",
                "cpus": 128,
                "free_mem": {"set": True, "infinite": False, "number": 1_500_000},
                "boot_time": {"set": True, "infinite": False, "number": 1_717_200_000},
                "reason": "firmware update",
                "partitions": ["gpu", "long"],
            },
            {"name": "gpu-h100-02", "state": ["MIXED"], "gres": "gpu:h100:8(S:0-1)"},
        ],
        "errors": [],
        "warnings": [],
    }
    result = parse_slurm_nodes(payload)
    assert result.issues == ()
    first, second = result.nodes
    assert first.state is NodeState.DRAIN
    assert first.state_reason == "firmware update"
    assert first.partitions == ("gpu", "long")
    assert [gpu.model_name for gpu in first.gpus] == ["h100"] * 8
    assert [gpu.index for gpu in first.gpus] == list(range(8))
    assert second.state is NodeState.UP


def test_c15_node(tricky_inputs):
    payload = tricky_inputs["C15"]["input"].split("\njob fragment:")[0]
    result = parse_slurm_nodes(payload)
    (node,) = result.nodes
    assert node.hostname == "gpu-node-01"
    assert [gpu.model_name for gpu in node.gpus] == ["a100"] * 4
    # The C15 sample has no state at all: unknown, and said so.
    assert node.state is None
    assert result.issues == (
        ParseIssue("node state missing", field="nodes[0].state", node="gpu-node-01"),
    )


@pytest.mark.parametrize(
    ("state", "flags", "expected"),
    [
        ("idle", [], NodeState.UP),
        ("mixed", [], NodeState.UP),
        ("allocated", [], NodeState.UP),
        ("idle", ["COMPLETING"], NodeState.UP),
        ("idle", ["RESERVED"], NodeState.UP),
        ("idle", ["POWERED_DOWN", "CLOUD"], NodeState.UP),
        ("idle", ["DRAIN"], NodeState.DRAIN),
        ("allocated", ["DRAIN"], NodeState.DRAIN),
        ("down", [], NodeState.DOWN),
        ("idle", ["NOT_RESPONDING"], NodeState.DOWN),
        ("idle", ["FAIL"], NodeState.DOWN),
        ("down", ["DRAIN"], NodeState.DOWN),
        ("idle", ["INVALID_REG"], NodeState.DOWN),
        ("future", [], NodeState.DOWN),
        ("idle", ["MAINTENANCE"], NodeState.MAINTENANCE),
        ("idle", ["MAINTENANCE", "DRAIN"], NodeState.MAINTENANCE),
        (["IDLE", "DRAIN"], None, NodeState.DRAIN),
        (["MIXED", "COMPLETING"], None, NodeState.UP),
        (["DOWN", "NOT_RESPONDING"], None, NodeState.DOWN),
        ("IDLE+DRAIN", None, NodeState.DRAIN),
        ("DRAINED", None, NodeState.DRAIN),
        ("draining", None, NodeState.DRAIN),
        ("MAINT", None, NodeState.MAINTENANCE),
        ("idle*", None, NodeState.DOWN),
    ],
)
def test_state_mapping(state, flags, expected):
    assert slurm_node_state(state, flags) == (expected, None)


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ("unknown", "Slurm reports the node state as UNKNOWN"),
        ("bogus", "unrecognised node state 'BOGUS'"),
        (None, "node state missing"),
        ([], "node state missing"),
    ],
)
def test_unmapped_states_are_none_with_an_issue(state, problem):
    assert slurm_node_state(state) == (None, problem)
    result = parse_slurm_nodes({"nodes": [_node(state=state, state_flags=None)]})
    assert result.nodes[0].state is None
    assert result.issues == (ParseIssue(problem, field="nodes[0].state", node="gpu-01"),)


def test_node_without_name_is_reported_and_the_rest_kept():
    payload = {"nodes": [_node("a"), {"state": "idle", "gres": "gpu:a100:4"}, _node("c"), 7]}
    result = parse_slurm_nodes(payload)
    assert [node.hostname for node in result.nodes] == ["a", "c"]
    assert result.issues == (
        ParseIssue("node has no name", field="nodes[1].name"),
        ParseIssue("node entry is not an object", field="nodes[3]"),
    )


def test_unreadable_gres_is_reported_with_its_path_and_the_rest_kept():
    payload = {"nodes": [_node("a"), _node("b"), _node("c"), _node("d", gres="gpu:a100:4(S:0-1")]}
    result = parse_slurm_nodes(payload)
    assert [node.hostname for node in result.nodes] == ["a", "b", "c"]
    (issue,) = result.issues
    assert issue.field == "nodes[3].gres"
    assert issue.node == "d"
    assert "unbalanced" in issue.message


@pytest.mark.parametrize("gres", ["N/A", None, "   "])
def test_unknown_gres_leaves_the_node_out(gres):
    result = parse_slurm_nodes({"nodes": [_node("a", gres=gres)]})
    assert result.nodes == ()
    (issue,) = result.issues
    assert issue.field == "nodes[0].gres"
    assert "GPU inventory unknown" in issue.message


def test_missing_gres_key_leaves_the_node_out():
    entry = _node("a")
    del entry["gres"]
    result = parse_slurm_nodes({"nodes": [entry]})
    assert result.nodes == ()
    assert result.issues[0].field == "nodes[0].gres"


@pytest.mark.parametrize("gres", ["(null)", ""])
def test_cpu_node_has_zero_gpus(gres):
    result = parse_slurm_nodes({"nodes": [_node("cpu-01", gres=gres)]})
    assert result.issues == ()
    assert result.nodes[0].gpus == ()


def test_gpu_order_and_models_follow_the_gres_string():
    gres = "gpu:l40s:1(S:0),gpu:rtx4090:1(S:1),mps:200"
    (node,) = parse_slurm_nodes({"nodes": [_node(gres=gres)]}).nodes
    assert [(gpu.index, gpu.model_name) for gpu in node.gpus] == [(0, "l40s"), (1, "rtx4090")]


@pytest.mark.parametrize("gres", ["gpu:8", "gpu:(null):8(S:0-1)"])
def test_untyped_gpus_have_no_model(gres):
    (node,) = parse_slurm_nodes({"nodes": [_node(gres=gres)]}).nodes
    assert [gpu.model_name for gpu in node.gpus] == [None] * 8


def test_implausible_gpu_count_is_an_issue_not_a_billion_cards():
    result = parse_slurm_nodes({"nodes": [_node(gres="gpu:4G")]})
    assert result.nodes == ()
    assert "implausible GPU count" in result.issues[0].message


def test_partitions_and_reason_shapes():
    payload = {
        "nodes": [
            _node("a", partitions="gpu,debug", reason=""),
            _node("b", partitions=None, reason="  "),
            _node("c", partitions=[1, 2], reason=None),
        ]
    }
    result = parse_slurm_nodes(payload)
    a, b, c = result.nodes
    assert a.partitions == ("gpu", "debug") and a.state_reason is None
    assert b.partitions == () and b.state_reason is None
    assert c.partitions == ()
    assert result.issues == (
        ParseIssue("partitions is not a list of names", field="nodes[2].partitions", node="c"),
    )


def test_invalid_json_is_one_issue_and_no_nodes():
    result = parse_slurm_nodes('{"nodes": [\n{"name": "a",}]}')
    assert result.nodes == ()
    (issue,) = result.issues
    assert issue.message.startswith("invalid JSON")
    assert issue.line == 2


@pytest.mark.parametrize(
    ("payload", "field"), [("[]", None), ({"meta": {}}, "nodes"), ({"nodes": {}}, "nodes")]
)
def test_wrong_top_level_shape(payload, field):
    result = parse_slurm_nodes(payload)
    assert result.nodes == ()
    assert [issue.field for issue in result.issues] == [field]


def test_slurmrestd_errors_are_reported():
    payload = {
        "nodes": [_node("a")],
        "errors": [
            {"error_number": 2002, "error": "Access/permission denied", "source": "x"},
            {"description": "Missing required field 'user'", "source": "_parser_run"},
        ],
    }
    result = parse_slurm_nodes(payload)
    assert [node.hostname for node in result.nodes] == ["a"]
    assert result.issues == (
        ParseIssue("slurmrestd error 2002: Access/permission denied", field="errors[0]"),
        ParseIssue("Missing required field 'user'", field="errors[1]"),
    )


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["gpu:a100:4", "(null)", "N/A", "idle", "DRAIN", "gpu:4G"]),
)
_slurm_node = st.fixed_dictionaries(
    {},
    optional={
        "name": _scalars,
        "state": st.one_of(_scalars, st.lists(_scalars, max_size=3)),
        "state_flags": st.one_of(_scalars, st.lists(_scalars, max_size=3)),
        "gres": st.one_of(_scalars, st.text(alphabet="gpu:a10(S)IDX,N/-", max_size=24)),
        "partitions": st.one_of(_scalars, st.lists(_scalars, max_size=2)),
        "reason": _scalars,
    },
)


@given(
    st.lists(st.one_of(_slurm_node, _scalars), max_size=4), st.one_of(_scalars, st.lists(_scalars))
)
def test_parser_never_raises_on_odd_entries(entries, errors):
    result = parse_slurm_nodes({"nodes": entries, "errors": errors})
    assert len(result.nodes) <= len(entries)


# --- issue 18 kind 2: allocated cards from the node's GRES used ---------------------------------
# skypilot-org/skypilot#10319: on a cluster whose AccountingStorageTRES lacks gres/gpu, node
# "Gres gpu:h100:8" reads "AllocTRES=cpu=64,mem=400G,billing=64" (no GPU) while
# "GresUsed=gpu:h100:5(IDX:0-4)": slurmctld keeps GRES used whatever accounting tracks.


@pytest.mark.parametrize(
    ("gres_used", "allocated"),
    [
        ("gpu:h100:5(IDX:0-4)", 5),
        ("gpu:h100:0(IDX:N/A)", 0),
        ("gpu:0", 0),
        ("", 0),
        ("N/A", None),
    ],
)
def test_allocated_cards_come_from_gres_used(gres_used, allocated):
    node = _node("h100-01", gres="gpu:h100:8(S:0-1)", gres_used=gres_used,
                 tres_used="cpu=64,mem=400G,billing=64")  # fmt: skip
    result = parse_slurm_nodes({"nodes": [node]})
    (snap,) = result.nodes
    assert (len(snap.gpus), snap.gpus_allocated) == (8, allocated)
    assert result.issues == ()


def test_without_gres_used_allocation_is_unknown_and_more_used_than_cards_is_reported():
    (snap,) = parse_slurm_nodes({"nodes": [_node("a", gres="gpu:h100:8")]}).nodes
    assert snap.gpus_allocated is None
    result = parse_slurm_nodes({"nodes": [_node("b", gres="gpu:h100:2", gres_used="gpu:h100:3")]})
    assert result.nodes[0].gpus_allocated is None
    assert [i.field for i in result.issues] == ["nodes[0].gres_used"]


@pytest.mark.parametrize("gres", ["gpu:1g.10gb:4G", "gpu:a100:60,gpu:1g.10gb:35"])
def test_implausible_mig_slices_are_an_issue(gres):
    """4 Gi slices, or 60 cards + 35 × 1g.10gb (5 more cards: 65 > 64): no node, an issue."""
    result = parse_slurm_nodes({"nodes": [_node(gres=gres)]})
    assert result.nodes == ()
    assert "implausible GPU count" in result.issues[0].message
