"""QA (h-qa): DRA ResourceSlices whose device memory is a quantity the schema admits but no card
has (issue #28 item 5).

``kubernetes_validate`` (the schema the fake API server checks) accepts each value below as a
``resource.k8s.io/v1`` device capacity (measured for 1.34), so a server may send it:

* ``-80Gi``: read as memory_total_mib = -81920 (-80 × 1024); a card's memory is never
  negative: expected None (unknown) and an issue, or the device refused;
* ``99999999999999999Ei`` and ``1e309``: ``dra_cards`` raises ``decimal.InvalidOperation``
  (DivisionImpossible) and the whole node listing — every node of the cluster — is lost;
  expected: that device's memory unknown (or the device refused), the other cards read.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import kubernetes_validate
import pytest

from scheduler_adapters.kubernetes_dra import dra_cards

FIXTURE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes" / "dra_resourceslices.json"
)
SLICES = json.loads(FIXTURE.read_text())["items"]


def with_memory(value: str) -> list[dict]:
    """The recorded slices with gpu-a100-01's device gpu-0 (generation 2) given ``value``."""
    slices = copy.deepcopy(SLICES)
    slices[1]["spec"]["devices"][0]["capacity"]["memory"] = {"value": value}
    kubernetes_validate.validate(slices[1], "1.34", strict=True)
    return slices


@pytest.mark.parametrize("value", ["-80Gi", "99999999999999999Ei", "1e309"])
def test_an_impossible_memory_quantity_never_becomes_a_card_memory(value):
    cards, _ = dra_cards(with_memory(value))

    a100 = cards["gpu-a100-01"]
    # gpu-0 carries no usable memory figure; gpu-1..gpu-3 keep 80Gi = 81920 MiB
    memories = [g.memory_total_mib for g in a100 if g.memory_total_mib is not None]
    assert all(m > 0 for m in memories)
    assert memories.count(81920) == 3


@pytest.mark.parametrize("value", ["-80Gi", "0", "17Ti", "99999999999999999Ei", "1e309"])
def test_the_impossible_memory_is_reported_naming_the_device(value):
    """16 TiB is the ceiling (``MAX_CARD_MEMORY_MIB``): 17Ti is above it, 0 and -80Gi are not
    above 0. Only gpu-0's memory is lost: the node keeps its 4 cards."""
    issues = []
    cards, _ = dra_cards(with_memory(value), issues)

    assert len(cards["gpu-a100-01"]) == 4
    [issue] = issues
    assert issue.node == "gpu-a100-01"
    assert issue.field == "devices[gpu-0].capacity.memory"
    assert "ResourceSlice gpu-a100-01-gpu.nvidia.com-k2m9q device gpu-0" in issue.message
