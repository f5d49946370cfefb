"""QA (h-qa): a *mixed*-strategy node whose MIG slices no card could hold (issue #38 item 1).

The importer checks only that a node's slice *count* is at most 7 per MIG card
(``MAX_MIG_DEVICES_PER_GPU``), not the compute slices the profiles take. NVIDIA's MIG user guide
gives each A100/H100 card 7 compute slices and 8 memory slices; a ``<g>g.<m>gb`` profile takes
``g`` compute slices (the rule :func:`scheduler_adapters.kubernetes_nodes.mig_per_card` already
states, and ``_MIG_PROFILE`` only admits g = 1..7). So on ONE H100 80GB card in MIG mode:

* 4 × 2g.20gb = 8 compute slices > 7 (the guide's table: 2g.20gb at most 3 per card);
* 2 × 7g.80gb = 14 > 7 (7g.80gb at most 1);
* 3 × 3g.40gb = 9 > 7 (3g.40gb at most 2);
* 1 × 99g.999gb is no MIG profile at all.

Each is accepted today (201 on the demo, measured: /api/v1/pools/infer-k8s/capacity/ then
offers 4 × 2g.20gb, 2 × 7g.80gb, 3 × 3g.40gb and 1 × 99g.999gb slices of one card each), so
capacity offers slices that do not exist. Expected: the node is refused with an issue naming
the resource, as 1,000 slices on one card already are.
"""

from __future__ import annotations

import pytest

from scheduler_adapters.kubernetes_nodes import parse_kubernetes_nodes

READY = [{"type": "Ready", "status": "True"}]


def one_h100_in_mig_mode(profile: str, count: int) -> dict:
    """1 × H100 80GB HBM3, mixed strategy, no whole card (allocatable nvidia.com/gpu 0)."""
    return {
        "kind": "Node",
        "metadata": {
            "name": "h100-mixed",
            "labels": {
                "nvidia.com/cuda.driver-version.full": "550.54.15",
                "nvidia.com/mig.strategy": "mixed",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "1",
                "nvidia.com/gpu.memory": "81559",
                f"nvidia.com/mig-{profile}.count": str(count),
            },
        },
        "status": {
            "allocatable": {"nvidia.com/gpu": "0", f"nvidia.com/mig-{profile}": str(count)},
            "conditions": READY,
        },
    }


@pytest.mark.parametrize(
    ("profile", "count"),
    [("2g.20gb", 4), ("7g.80gb", 2), ("3g.40gb", 3), ("99g.999gb", 1)],
)
def test_slices_no_card_can_hold_are_refused(profile, count):
    result = parse_kubernetes_nodes(one_h100_in_mig_mode(profile, count))

    assert result.nodes == ()
    assert any(f"mig-{profile}" in (issue.field or "") for issue in result.issues), result.issues


def test_a_layout_the_card_holds_is_read():
    """Control: 3 × 2g.20gb = 6 compute slices ≤ 7 on one card: read, 3 slices."""
    [snap] = parse_kubernetes_nodes(one_h100_in_mig_mode("2g.20gb", 3)).nodes

    assert [len(gpu.mig_devices) for gpu in snap.gpus] == [3]
