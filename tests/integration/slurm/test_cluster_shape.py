"""The tier's reading of the cluster it is pointed at (issue 27 item 11), on another site's
``scontrol show nodes --oneliner`` (unit tier: no cluster needed). Node names, partitions and GPU
GRES come from the listing, never from the test clusters' ``gpu-h100-01``; a shape the cluster
cannot offer skips, naming what it has."""

from __future__ import annotations

from collections import Counter

import pytest
from integration.slurm.slurm_cluster import parse_scontrol_nodes

# A site with a DGX (8 x H100, GRES with sockets), a mixed node (2 a100 + 2 l40s), a node with
# untyped GRES in two partitions, and a CPU node.
ANOTHER_SITE = (
    "NodeName=dgx-a-07 Arch=x86_64 CoresPerSocket=56 Gres=gpu:h100:8(S:0-1) NodeAddr=10.1.0.7 "
    "OS=Linux 5.15.0-97-generic #107-Ubuntu SMP Partitions=train RealMemory=2000000 State=IDLE\n"
    """\
NodeName=mix-02 Gres=gpu:a100:2,gpu:l40s:2 Partitions=train,debug State=MIXED
NodeName=old-03 Gres=gpu:4 Partitions=debug,legacy State=IDLE
NodeName=cpu-01 Gres=(null) Partitions=debug State=IDLE
"""
)


def test_node_names_partitions_and_gres_come_from_the_listing():
    shape = parse_scontrol_nodes(ANOTHER_SITE)
    assert shape.hostnames == {"dgx-a-07", "mix-02", "old-03", "cpu-01"}
    assert shape.cards() == Counter(
        {
            ("train", "h100"): 8,
            ("train", "a100"): 2,
            ("train", "l40s"): 2,
            ("debug", "a100"): 2,
            ("debug", "l40s"): 2,
            ("debug", None): 4,
            ("legacy", None): 4,
        }
    )
    assert shape.require_node("train", cards=8) == ("dgx-a-07", "h100")
    assert shape.most_on_one_node("train", "a100") == 2


def test_a_shape_the_cluster_cannot_offer_skips_saying_what_it_has():
    shape = parse_scontrol_nodes(ANOTHER_SITE)
    with pytest.raises(pytest.skip.Exception) as four_a100:
        shape.require("train", "a100", 4)
    assert str(four_a100.value) == (
        "needs 4 gpu:a100 card(s) on one node of partition 'train'; the cluster has "
        "dgx-a-07 8 h100; mix-02 2 a100, 2 l40s"
    )
    with pytest.raises(pytest.skip.Exception, match="no node in 'gpu'"):
        shape.require_node("gpu", cards=8)
    with pytest.raises(pytest.skip.Exception, match="old-03 4 untyped"):
        shape.require_node("legacy", cards=2)  # untyped cards have no type to ask for
