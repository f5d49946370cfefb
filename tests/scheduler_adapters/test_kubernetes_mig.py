"""Issue 18, kind 3: Kubernetes MIG strategies single and mixed.

Sources (data facts only):

* GFD's labelling rules: github:NVIDIA/gpu-feature-discovery internal/lm/mig-strategy.go (commit
  1aab495e528dd892db5d0161f1aa72fe63e7dda6): the full-GPU labels count every card, MIG-enabled
  or not; under *single* the MIG labeler rewrites ``nvidia.com/gpu.count`` / ``.memory`` /
  ``.product`` to the slices (``<model>-MIG-<profile>``); a broken single setup is labelled
  ``<model>-MIG-INVALID`` with count 0 and memory 0. internal/lm/mig-strategy_test.go has the
  cases ("empty mig devices", "mixed mig config", "mixed mig enabled and disabled").
* A real single-strategy node: NVIDIA/gpu-operator#981 (A100 40GB, ``nvidia.com/mig.config:
  all-1g.5gb``, ``nvidia.com/gpu.memory: '4864'``).
* A real mixed node: NVIDIA/gpu-operator#637 (allocatable ``nvidia.com/gpu: 2``,
  ``nvidia.com/mig-1g.10gb: 6``, ``nvidia.com/mig-2g.20gb: 4``, ``nvidia.com/mig-3g.40gb: 0``;
  the maintainer: under mixed the plugin exposes cards not in MIG mode as ``nvidia.com/gpu``).
* Slices per card: NVIDIA's MIG user guide (7 compute, 8 memory slices) and the real
  all-<profile> configs for A100 40GB in NVIDIA/gpu-operator#281 (``1g.5gb: 7``,
  ``2g.10gb: 3``, ``3g.20gb: 2``).
"""

import pytest

from scheduler_adapters.kubernetes_nodes import mig_per_card, parse_kubernetes_nodes

READY = [{"type": "Ready", "status": "True"}]


def node(labels, allocatable, name="mig-01"):
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable, "conditions": READY},
    }


# --- single ------------------------------------------------------------------------------------


def test_single_strategy_reports_slices_and_the_base_model_not_cards():
    # gpu-operator#981: two A100 40GB cards, all-1g.5gb -> 14 slices of 4864 MiB.
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mig.config": "all-1g.5gb",
        "nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "14",
        "nvidia.com/gpu.memory": "4864",
    }
    [snap] = parse_kubernetes_nodes(node(labels, {"nvidia.com/gpu": "14"})).nodes
    assert snap.gpus == ()
    mig = snap.mig_single
    assert (mig.profile, mig.count, mig.memory_mib, mig.base_model) == (
        "1g.5gb",
        14,
        4864,
        "NVIDIA-A100-PCIE-40GB",
    )


def test_mig_invalid_is_a_misconfigured_node_not_a_node_without_gpus():
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID",
        "nvidia.com/gpu.count": "0",
        "nvidia.com/gpu.memory": "0",
    }
    result = parse_kubernetes_nodes(node(labels, {"nvidia.com/gpu": "0"}))
    assert result.nodes == ()
    [issue] = result.issues
    assert issue.field == "metadata.labels.nvidia.com/gpu.product"
    assert issue.message.startswith("misconfigured MIG node")


def test_a_mig_product_without_the_single_strategy_label_is_not_read_as_mig():
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "7",
    }
    result = parse_kubernetes_nodes(node(labels, {"nvidia.com/gpu": "7"}))
    assert result.nodes == ()
    assert "contradict" in result.issues[0].message


@pytest.mark.parametrize(
    ("profile", "memory_gib", "per_card"),
    [
        ("1g.5gb", 40, 7),  # gpu-operator#281 all-1g.5gb
        ("2g.10gb", 40, 3),  # all-2g.10gb
        ("3g.20gb", 40, 2),  # all-3g.20gb
        ("1g.10gb", 40, 4),  # MIG user guide, A100 40GB
        ("1g.10gb", 79.65, 7),  # H100 80GB (nvidia-smi 81559 MiB)
        ("1g.20gb", 79.65, 4),
        ("2g.20gb", 80, 3),
        ("3g.40gb", 80, 2),
        ("4g.40gb", 80, 1),
        ("7g.80gb", 80, 1),
        ("1g.18gb", 140.4, 7),  # H200 (143771 MiB)
        ("1g.35gb", 140.4, 4),
        ("3g.71gb", 140.4, 2),
        ("1g.10gb+me", 80, 1),
        ("1g.80gb", 40, None),  # more memory than the card
        ("9g.5gb", 40, None),
    ],
)
def test_slices_per_card(profile, memory_gib, per_card):
    assert mig_per_card(profile, card_memory_gib=memory_gib) == per_card


# --- mixed -------------------------------------------------------------------------------------


def test_mixed_strategy_counts_whole_cards_apart_from_the_cards_holding_slices():
    # gpu-operator#637's allocatable; a 4-card A100 80GB node (gpu.count counts every card).
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.memory": "81920",
    }
    allocatable = {
        "nvidia.com/gpu": "2",
        "nvidia.com/mig-1g.10gb": "6",
        "nvidia.com/mig-2g.20gb": "4",
        "nvidia.com/mig-3g.40gb": "0",
    }
    [snap] = parse_kubernetes_nodes(node(labels, allocatable)).nodes
    assert [(g.index, g.mig_mode, len(g.mig_devices)) for g in snap.gpus] == [
        (0, False, 0),
        (1, False, 0),
        (2, True, 5),
        (3, True, 5),
    ]
    profiles = [d.profile for g in snap.gpus for d in g.mig_devices]
    assert profiles.count("1g.10gb") == 6 and profiles.count("2g.20gb") == 4
    assert "3g.40gb" not in profiles  # a resource at 0 is no slice
    assert {g.model_name for g in snap.gpus} == {"NVIDIA-A100-SXM4-80GB"}


def test_mig_resources_without_the_mixed_label_are_reported_and_not_read_as_mig():
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    result = parse_kubernetes_nodes(node(labels, {"nvidia.com/mig-1g.10gb": "7"}))
    [snap] = result.nodes
    assert [(g.mig_mode, g.mig_devices) for g in snap.gpus] == [(None, ())]
    [issue] = result.issues
    assert issue.field == "metadata.labels.nvidia.com/mig.strategy"


def test_only_stale_zero_mig_resources_leave_the_cards_whole():
    labels = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "2"}
    allocatable = {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "0"}
    result = parse_kubernetes_nodes(node(labels, allocatable))
    [snap] = result.nodes
    assert [(g.mig_mode, g.mig_devices) for g in snap.gpus] == [(None, ()), (None, ())]
    assert result.issues == ()


def test_slices_with_every_card_advertised_whole_skip_the_node():
    labels = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "2"}
    allocatable = {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "7"}
    result = parse_kubernetes_nodes(node(labels, allocatable))
    assert result.nodes == ()
    assert result.issues[0].field == "status.allocatable.nvidia.com/gpu"


def test_mixed_slices_are_placed_so_each_card_holds_its_own():
    """mig-parted's all-balanced config on 2 H100 80GB (per card 2 x 1g.10gb, 1 x 2g.20gb,
    1 x 3g.40gb = 2 + 2 + 3 = 7 compute, 2 + 2 + 4 = 8 memory slices of 81559 MiB / 8): the
    node is read, and each card ends with exactly 7 compute slices. Equal blocks would put
    1g, 1g, 1g, 1g, 2g (6) on card 0 and 2g, 3g, 3g (8 > 7) on card 1."""
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81559",
    }
    allocatable = {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.10gb": "4",
        "nvidia.com/mig-2g.20gb": "2",
        "nvidia.com/mig-3g.40gb": "2",
    }
    [snap] = parse_kubernetes_nodes(node(labels, allocatable)).nodes
    compute = [sum(int(d.profile[0]) for d in gpu.mig_devices) for gpu in snap.gpus]
    assert compute == [7, 7]


def test_two_media_extension_slices_on_one_card_are_refused():
    """The guide's +me profiles take the card's one set of media engines: 1g.10gb+me fits once
    per card, so 2 of them on 1 card cannot be, though 2 compute slices would fit."""
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.memory": "81559",
    }
    result = parse_kubernetes_nodes(node(labels, {"nvidia.com/mig-1g.10gb+me": "2"}))
    assert result.nodes == ()
    assert result.issues[0].field == "status.allocatable.nvidia.com/mig-1g.10gb+me"


def test_mixed_strategy_slices_are_quotad_per_profile_and_checked():
    """``requests.nvidia.com/mig-<profile>`` per profile beside the cards' total; a profile at 0
    is left out (server-side apply then removes the entry); no MIG profile, no quota."""
    import pytest as _pytest

    from scheduler_adapters.kubernetes_manifests import quota_manifests

    [quota] = quota_manifests(
        "nlp", "team-nlp", {"NVIDIA-A100-SXM4-80GB": 2},
        kueue=False, mig_quota={"1g.10gb": 9, "2g.20gb": 0, "3g.40gb": 1},
    )  # fmt: skip
    assert quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "2",
        "requests.nvidia.com/mig-1g.10gb": "9",
        "requests.nvidia.com/mig-3g.40gb": "1",
    }
    for bad, why in (
        ({"5g.40gb": 1}, "not a MIG profile"),
        ({"1g.10gb+me": 1}, "no quota resource name"),
        ({"1g.10gb": -1}, "whole number"),
    ):
        with _pytest.raises(ValueError, match=why):
            quota_manifests("nlp", "team-nlp", {}, kueue=False, mig_quota=bad)
