import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_adapters.kubernetes_nodes import parse_kubernetes_nodes
from scheduler_adapters.types import (
    GpuHealth,
    InventorySource,
    MigDeviceSnapshot,
    NodeState,
    ParseIssue,
)

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "kubernetes" / "nodes.json"
READY = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]


def _node(name="gpu-01", labels=None, allocatable=None, conditions=READY, **extra):
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": allocatable or {}, "conditions": conditions},
        **extra,
    }


def _node_list(*nodes):
    return {"kind": "NodeList", "apiVersion": "v1", "items": list(nodes)}


# --- C17: time-slicing -----------------------------------------------------------------------


def _c17_nodes():
    node_a = _node(
        "node-a",
        labels={
            "nvidia.com/gpu.count": "4",
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090-SHARED",
            "nvidia.com/gpu.memory": "24564",
        },
        allocatable={"nvidia.com/gpu": "16"},
    )
    node_b = _node(
        "node-b",
        labels={
            "nvidia.com/gpu.count": "4",
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090",
            "nvidia.com/gpu.memory": "24564",
        },
        allocatable={"nvidia.com/gpu.shared": "16"},
    )
    node_c = _node(
        "node-c",
        labels={
            "nvidia.com/gpu.count": "1",
            "nvidia.com/gpu.replicas": "16384",
            "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
        },
        allocatable={"nvidia.com/gpu": "16384"},
    )
    return _node_list(node_a, node_b, node_c)


def test_c17_physical_cards_come_from_the_count_label(tricky_inputs):
    case_input = tricky_inputs["C17"]["input"]
    assert 'nvidia.com/gpu: "16"' in case_input and "nvidia.com/gpu.count=4" in case_input
    assert 'nvidia.com/gpu.shared: "16"' in case_input
    assert 'nvidia.com/gpu: "16384"' in case_input

    result = parse_kubernetes_nodes(_c17_nodes())
    assert result.issues == ()
    a, b, c = result.nodes
    assert (len(a.gpus), len(b.gpus), len(c.gpus)) == (4, 4, 1)  # not 16 / 16 / 16384
    assert (a.gpu_replicas, b.gpu_replicas, c.gpu_replicas) == (4, 4, 16384)


def test_c17_shared_suffix_is_removed_from_the_model():
    a, b, c = parse_kubernetes_nodes(_c17_nodes()).nodes
    assert {gpu.model_name for gpu in a.gpus} == {"NVIDIA-GeForce-RTX-4090"}
    assert {gpu.model_name for gpu in b.gpus} == {"NVIDIA-GeForce-RTX-4090"}
    assert {gpu.model_name for gpu in c.gpus} == {"NVIDIA-L40S"}
    assert {gpu.memory_total_mib for gpu in a.gpus} == {24564}


def test_c17_replica_share_arithmetic():
    node_a = parse_kubernetes_nodes(_c17_nodes()).nodes[0]
    pod_hours, requested_replicas = Decimal(10), 1
    card_hours = pod_hours * requested_replicas / node_a.gpu_replicas
    assert card_hours == Decimal("2.5")  # 10 x 1 / 4


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA-A100-SXM4-80GB-SHARED", "NVIDIA-A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
        ("NVIDIA-SHARED-X", "NVIDIA-SHARED-X"),  # only a trailing suffix
        ("NVIDIA-L40S-shared", "NVIDIA-L40S-shared"),  # case-sensitive, as GFD writes it
        ("NVIDIA-L40S-SHARED-SHARED", "NVIDIA-L40S-SHARED"),  # only one suffix
    ],
)
def test_only_a_trailing_shared_suffix_is_removed(product, model):
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.product": product}
    (node,) = parse_kubernetes_nodes(_node(labels=labels)).nodes
    assert node.gpus[0].model_name == model


def test_replicas_without_count_label_leaves_the_node_out():
    nodes = _node_list(
        _node("a", labels={"nvidia.com/gpu.replicas": "4"}, allocatable={"nvidia.com/gpu": "16"}),
        _node("b", allocatable={"nvidia.com/gpu.shared": "8"}),
        _node("c", allocatable={"nvidia.com/gpu": "2"}),
    )
    result = parse_kubernetes_nodes(nodes)
    assert [node.hostname for node in result.nodes] == ["c"]
    assert [(issue.node, issue.field) for issue in result.issues] == [
        ("a", "items[0].metadata.labels.nvidia.com/gpu.count"),
        ("b", "items[1].metadata.labels.nvidia.com/gpu.count"),
    ]


def test_allocatable_is_the_fallback_without_gfd_labels():
    (node,) = parse_kubernetes_nodes(_node(allocatable={"nvidia.com/gpu": "2"})).nodes
    assert [(gpu.index, gpu.model_name) for gpu in node.gpus] == [(0, None), (1, None)]
    assert node.gpu_replicas is None


def test_replicas_of_one_is_not_sharing():
    labels = {"nvidia.com/gpu.replicas": "1"}
    (node,) = parse_kubernetes_nodes(
        _node(labels=labels, allocatable={"nvidia.com/gpu": "2"})
    ).nodes
    assert len(node.gpus) == 2
    assert node.gpu_replicas is None


@pytest.mark.parametrize("quantity", ["500m", "0.5", "-1", "four"])
def test_non_integer_gpu_quantity_skips_that_node_only(quantity):
    nodes = _node_list(
        _node("ok", labels={"nvidia.com/gpu.count": "2"}, allocatable={"nvidia.com/gpu": "2"}),
        _node(
            "bad", labels={"nvidia.com/gpu.count": "2"}, allocatable={"nvidia.com/gpu": quantity}
        ),
    )
    result = parse_kubernetes_nodes(nodes)
    assert [node.hostname for node in result.nodes] == ["ok"]
    (issue,) = result.issues
    assert issue.field == "items[1].status.allocatable.nvidia.com/gpu"
    assert issue.node == "bad"


def test_bad_count_label_skips_the_node():
    result = parse_kubernetes_nodes(_node_list(_node(labels={"nvidia.com/gpu.count": "4.0"})))
    assert result.nodes == ()
    assert result.issues[0].field == "items[0].metadata.labels.nvidia.com/gpu.count"


def test_bad_memory_label_loses_only_the_memory():
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "80GB"}
    result = parse_kubernetes_nodes(_node(labels=labels))
    assert result.nodes[0].gpus[0].memory_total_mib is None
    assert result.issues[0].field == "metadata.labels.nvidia.com/gpu.memory"


def test_c20_memory_label_is_mib(tricky_inputs):
    assert "nvidia.com/gpu.memory=81559" in tricky_inputs["C20"]["input"]
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "81559"}
    (node,) = parse_kubernetes_nodes(_node(labels=labels)).nodes
    assert node.gpus[0].memory_total_mib == 81559
    assert node.gpus[0].memory_total_mib * 1_048_576 == 85_520_809_984  # bytes


# --- the fixture NodeList ------------------------------------------------------------------


def test_fixture_node_list():
    raw = json.loads(FIXTURE.read_text())
    result = parse_kubernetes_nodes(FIXTURE.read_text())
    assert result.issues == ()
    nodes = {node.hostname: node for node in result.nodes}
    assert list(nodes) == [
        "gpu-a100-k8s-01",
        "gpu-4090-k8s-01",
        "gpu-h100-mig-01",
        "gpu-l40s-k8s-02",
        "cpu-k8s-01",
    ]
    for node, item in zip(result.nodes, raw["items"], strict=True):
        assert node.source is InventorySource.KUBERNETES
        assert node.labels == item["metadata"]["labels"]
        assert node.partitions == ()

    a100 = nodes["gpu-a100-k8s-01"]
    assert a100.state is NodeState.UP
    assert [gpu.index for gpu in a100.gpus] == list(range(8))
    assert {gpu.model_name for gpu in a100.gpus} == {"NVIDIA-A100-SXM4-80GB"}
    assert {gpu.memory_total_mib for gpu in a100.gpus} == {81920}
    assert {gpu.mig_mode for gpu in a100.gpus} == {None}
    assert {gpu.health for gpu in a100.gpus} == {GpuHealth.UNKNOWN}
    assert (a100.driver_version, a100.cuda_version) == ("550.127.05", "12.4")
    assert a100.gpu_replicas is None

    rtx = nodes["gpu-4090-k8s-01"]
    assert rtx.state is NodeState.DRAIN  # cordoned
    assert len(rtx.gpus) == 4  # allocatable says 16
    assert rtx.gpus[0].model_name == "NVIDIA-GeForce-RTX-4090"
    assert rtx.gpu_replicas == 4
    # Only the deprecated cuda.driver.* / cuda.runtime.* labels are set on this node.
    assert (rtx.driver_version, rtx.cuda_version) == ("535.129.03", "12.2")

    (h100,) = nodes["gpu-h100-mig-01"].gpus
    assert h100.mig_mode is True
    assert h100.mig_devices == (
        MigDeviceSnapshot(index=0, profile="1g.10gb", memory_total_mib=9856),
        MigDeviceSnapshot(index=1, profile="1g.10gb", memory_total_mib=9856),
        MigDeviceSnapshot(index=2, profile="1g.10gb", memory_total_mib=9856),
        MigDeviceSnapshot(index=3, profile="2g.20gb", memory_total_mib=19968),
        MigDeviceSnapshot(index=4, profile="2g.20gb", memory_total_mib=19968),
    )

    l40s = nodes["gpu-l40s-k8s-02"]
    assert l40s.state is NodeState.DOWN
    assert l40s.state_reason == "Kubelet stopped posting node status."
    assert len(l40s.gpus) == 2

    cpu = nodes["cpu-k8s-01"]
    assert cpu.gpus == ()
    assert cpu.driver_version is None and cpu.cuda_version is None


# --- MIG -----------------------------------------------------------------------------------


def test_mig_devices_on_several_cards_are_placed_within_each_cards_slices():
    """The Node does not say which card holds which instance: 7 x 1g.10gb and 2 x 3g.40gb on 2
    cards. Equal blocks (5 + 4 in profile order) put 2 x 3g + 2 x 1g = 8 compute slices on
    card 1, more than its 7 (MIG user guide). Largest first on the least-loaded card: 3g on
    each card, then the 1g slices alternately: card 0 3 + 4 = 7, card 1 3 + 3 = 6 compute
    slices. Totals are exact; the per-card split is the documented guess."""
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/mig.strategy": "mixed"}
    allocatable = {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"}
    (node,) = parse_kubernetes_nodes(_node(labels=labels, allocatable=allocatable)).nodes
    first, second = node.gpus
    assert [d.profile for d in first.mig_devices] == ["1g.10gb"] * 4 + ["3g.40gb"]
    assert [d.profile for d in second.mig_devices] == ["1g.10gb"] * 3 + ["3g.40gb"]
    assert [d.index for d in second.mig_devices] == [0, 1, 2, 3]
    assert first.mig_mode is True and second.mig_mode is True


def test_mig_count_label_wins_over_replicated_allocatable():
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/mig-1g.10gb.count": "7",
        "nvidia.com/mig-1g.10gb.replicas": "2",
    }
    allocatable = {"nvidia.com/mig-1g.10gb.shared": "14"}
    (node,) = parse_kubernetes_nodes(_node(labels=labels, allocatable=allocatable)).nodes
    assert [d.profile for d in node.gpus[0].mig_devices] == ["1g.10gb"] * 7


def test_more_mig_instances_than_cards_can_hold_skips_the_node():
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed"}
    result = parse_kubernetes_nodes(
        _node(labels=labels, allocatable={"nvidia.com/mig-1g.10gb": "8"})
    )
    assert result.nodes == ()
    assert result.issues[0].field == "status.allocatable.nvidia.com/mig-1g.10gb"


def test_non_integer_mig_quantity_skips_the_node():
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed"}
    allocatable = {"nvidia.com/mig-1g.10gb": "1500m"}
    result = parse_kubernetes_nodes(_node(labels=labels, allocatable=allocatable))
    assert result.nodes == ()
    assert result.issues[0].field == "status.allocatable.nvidia.com/mig-1g.10gb"


def test_single_mig_strategy_is_not_counted_as_cards():
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "7",
    }
    result = parse_kubernetes_nodes(_node(labels=labels, allocatable={"nvidia.com/gpu": "7"}))
    (node,) = result.nodes
    assert node.gpus == ()  # the importer derives the cards (test_kubernetes_mig.py)
    assert (node.mig_single.profile, node.mig_single.count) == ("1g.5gb", 7)


# --- versions and state ----------------------------------------------------------------------


def test_driver_version_prefers_full_then_parts():
    full = {
        "nvidia.com/cuda.driver-version.full": "550.127.05",
        "nvidia.com/cuda.driver.major": "535",
        "nvidia.com/cuda.driver.minor": "129",
        "nvidia.com/cuda.driver.rev": "03",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "2",
    }
    (node,) = parse_kubernetes_nodes(_node(labels=full)).nodes
    assert (node.driver_version, node.cuda_version) == ("550.127.05", "12.4")

    partial = {"nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.runtime.major": "12"}
    (node,) = parse_kubernetes_nodes(_node(labels=partial)).nodes
    assert (node.driver_version, node.cuda_version) == (None, None)


@pytest.mark.parametrize(
    ("ready", "unschedulable", "state", "reason"),
    [
        ("True", False, NodeState.UP, None),
        ("False", False, NodeState.DOWN, "container runtime is down"),
        ("Unknown", False, NodeState.DOWN, "container runtime is down"),
        ("True", True, NodeState.DRAIN, None),
        ("False", True, NodeState.DOWN, "container runtime is down"),
    ],
)
def test_state_from_ready_and_cordon(ready, unschedulable, state, reason):
    conditions = [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": ready, "reason": "KubeletNotReady",
         "message": "container runtime is down"},
    ]  # fmt: skip
    node = _node(conditions=conditions, spec={"unschedulable": unschedulable})
    result = parse_kubernetes_nodes(node)
    assert (result.nodes[0].state, result.nodes[0].state_reason) == (state, reason)
    assert result.issues == ()


def test_missing_ready_condition_is_unknown_with_an_issue():
    result = parse_kubernetes_nodes(_node(conditions=[]))
    assert result.nodes[0].state is None
    assert result.issues == (
        ParseIssue("no Ready condition", field="status.conditions", node="gpu-01"),
    )


# --- input forms -----------------------------------------------------------------------------


def test_single_node_and_plain_list():
    (single,) = parse_kubernetes_nodes(_node("solo")).nodes
    assert single.hostname == "solo"
    result = parse_kubernetes_nodes([_node("x"), {"metadata": {}}])
    assert [node.hostname for node in result.nodes] == ["x"]
    assert result.issues == (ParseIssue("node has no name", field="[1].metadata.name"),)


def test_kubectl_yaml_list_with_unquoted_numbers():
    text = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: gpu-yaml-01
    labels:
      nvidia.com/gpu.count: 2
      nvidia.com/gpu.present: true
      nvidia.com/gpu.product: NVIDIA-L40S
  status:
    allocatable:
      nvidia.com/gpu: 2
    conditions:
    - type: Ready
      status: "True"
- apiVersion: v1
  kind: Pod
  metadata:
    name: not-a-node
"""
    result = parse_kubernetes_nodes(text)
    (node,) = result.nodes
    assert node.hostname == "gpu-yaml-01"
    assert [gpu.model_name for gpu in node.gpus] == ["NVIDIA-L40S", "NVIDIA-L40S"]
    assert node.labels["nvidia.com/gpu.present"] == "true"
    assert result.issues == (ParseIssue("not a Node (kind 'Pod')", field="items[1].kind"),)


def test_yaml_allocatable_with_a_number_for_a_resource_name_is_read():
    """An unquoted resource name that YAML loads as a number (``2: 1``) sits beside the GPU
    resources; the node is read from the rest (it raised TypeError: the names were sorted)."""
    text = """
kind: Node
metadata:
  name: gpu-yaml-02
  labels:
    nvidia.com/gpu.count: 2
    nvidia.com/gpu.product: NVIDIA-L40S
status:
  allocatable:
    2: 1
    nvidia.com/gpu: 2
  conditions:
  - type: Ready
    status: "True"
"""
    result = parse_kubernetes_nodes(text)
    (node,) = result.nodes
    assert node.hostname == "gpu-yaml-02"
    assert [gpu.model_name for gpu in node.gpus] == ["NVIDIA-L40S", "NVIDIA-L40S"]


def test_invalid_yaml_is_one_issue_with_a_line():
    result = parse_kubernetes_nodes("items:\n  - metadata: {name: [unclosed\n")
    assert result.nodes == ()
    (issue,) = result.issues
    assert issue.message.startswith("invalid YAML/JSON")
    assert issue.line is not None


@pytest.mark.parametrize("payload", ["", "42", {"kind": "PodList"}, "just text"])
def test_payloads_that_are_not_nodes(payload):
    result = parse_kubernetes_nodes(payload)
    assert result.nodes == ()
    assert result.issues == (ParseIssue("expected a NodeList, a Node or a list of Nodes"),)


def test_empty_node_list():
    assert parse_kubernetes_nodes({"kind": "NodeList", "items": []}).nodes == ()
    assert parse_kubernetes_nodes({"kind": "NodeList", "items": None}).issues == ()


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["True", "False", "500m", "4", "16", "1e3", "single", "NVIDIA-X-MIG-1g"]),
)
_label_keys = st.sampled_from(
    [
        "nvidia.com/gpu.count",
        "nvidia.com/gpu.replicas",
        "nvidia.com/gpu.product",
        "nvidia.com/gpu.memory",
        "nvidia.com/mig.strategy",
        "nvidia.com/mig-1g.10gb.count",
        "nvidia.com/mig-1g.10gb.replicas",
        "nvidia.com/cuda.driver-version.full",
    ]
)
_resources = st.sampled_from(
    ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"]
)
_condition = st.fixed_dictionaries(
    {"type": st.sampled_from(["Ready", "DiskPressure"]), "status": _scalars},
    optional={"message": _scalars},
)
_k8s_node = st.fixed_dictionaries(
    {},
    optional={
        "kind": _scalars,
        "metadata": st.one_of(
            _scalars,
            st.fixed_dictionaries(
                {},
                optional={
                    "name": _scalars,
                    "labels": st.one_of(_scalars, st.dictionaries(_label_keys, _scalars)),
                },
            ),
        ),
        "status": st.one_of(
            _scalars,
            st.fixed_dictionaries(
                {},
                optional={
                    "allocatable": st.one_of(_scalars, st.dictionaries(_resources, _scalars)),
                    "conditions": st.one_of(_scalars, st.lists(_condition, max_size=2)),
                },
            ),
        ),
        "spec": st.dictionaries(st.just("unschedulable"), _scalars),
    },
)


@given(st.lists(st.one_of(_k8s_node, _scalars), max_size=3))
def test_parser_never_raises_on_odd_nodes(items):
    result = parse_kubernetes_nodes({"kind": "NodeList", "items": items})
    assert len(result.nodes) <= len(items)
