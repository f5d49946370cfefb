"""Kubernetes Node objects of the two MIG strategies (issue 38), as GPU Feature Discovery and the
device plugin publish them, and their import into a pool. Where their shape comes from:

* labels: github:NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md (commit
  0719b2a452860ba95947ee7648b8ac0eea388790), *Generated Labels*: ``nvidia.com/gpu.count`` /
  ``.memory`` / ``.product``; *MIG 'single' strategy*: ``gpu.product`` overridden to
  ``<model>-MIG-<profile>``, ``gpu.count`` the number of MIG devices, ``gpu.memory`` the memory
  of each; *MIG 'mixed' strategy*: ``nvidia.com/mig-<profile>.count`` per MIG device type;
* allocatable under *mixed*: cards not in MIG mode as ``nvidia.com/gpu``, slices as
  ``nvidia.com/mig-<profile>`` (the maintainer's answer and the node in NVIDIA/gpu-operator#637);
* H100 NVL profile ``1g.12gb``: 7 instances per card of 10.75 GiB = 11008 MiB
  (``nvidia-smi mig -lgip`` on an H100 NVL, NVIDIA/gpu-operator#900);
* A100 80GB: 7 compute and 8 memory slices per card, ``1g.10gb`` takes one of each, ``2g.20gb``
  two of each (NVIDIA MIG user guide), so card 7's 3 × 1g.10gb + 2 × 2g.20gb is 7 compute and
  7 memory slices, a layout the card holds.

By hand:
* ``a100-mixed``: 8 × A100 SXM4 80GB; allocatable ``nvidia.com/gpu: 6``, ``mig-1g.10gb: 9``,
  ``mig-2g.20gb: 2``: 8 − 6 = 2 cards in MIG mode (GPUs 6 and 7; the importer deals the 11
  slices out as 6 + 5), so 6 whole A100 schedulable;
* ``h100nvl-single``: ``NVIDIA-H100-NVL-MIG-1g.12gb`` × 14 = 2 cards of 7 slices, both in MIG
  mode, so 0 whole H100 NVL schedulable.
"""

from __future__ import annotations

import json

from pools.inventory.services.import_files import inventory_import_file

READY = [{"type": "Ready", "status": "True"}]
DRIVER = {"nvidia.com/cuda.driver-version.full": "550.54.15"}


def mixed_a100_node() -> dict:
    """8 × A100 SXM4 80GB under the *mixed* strategy, GPUs 6 and 7 in MIG mode."""
    return {
        "kind": "Node",
        "metadata": {
            "name": "a100-mixed",
            "labels": {
                **DRIVER,
                "nvidia.com/mig.strategy": "mixed",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/gpu.count": "8",
                "nvidia.com/gpu.memory": "81920",
                "nvidia.com/mig-1g.10gb.count": "9",
                "nvidia.com/mig-2g.20gb.count": "2",
            },
        },
        "status": {
            "allocatable": {
                "cpu": "128",
                "nvidia.com/gpu": "6",
                "nvidia.com/mig-1g.10gb": "9",
                "nvidia.com/mig-2g.20gb": "2",
            },
            "conditions": READY,
        },
    }


def single_h100_nvl_node() -> dict:
    """2 × H100 NVL under the *single* strategy, every card cut into 7 × 1g.12gb."""
    return {
        "kind": "Node",
        "metadata": {
            "name": "h100nvl-single",
            "labels": {
                **DRIVER,
                "nvidia.com/mig.strategy": "single",
                "nvidia.com/mig.config": "all-1g.12gb",
                "nvidia.com/gpu.product": "NVIDIA-H100-NVL-MIG-1g.12gb",
                "nvidia.com/gpu.count": "14",
                "nvidia.com/gpu.memory": "11008",
            },
        },
        "status": {
            "allocatable": {"cpu": "64", "nvidia.com/gpu": "14"},
            "conditions": READY,
        },
    }


def import_nodes(pool, *nodes: dict) -> None:
    """Import ``nodes`` (a NodeList) through the real Kubernetes importer into ``pool``."""
    data = json.dumps({"kind": "NodeList", "items": list(nodes)}).encode()
    report = inventory_import_file(data=data, source="kubernetes", pool=pool)
    assert not report.issues, report.issues


def mig_fleet():
    """Kubernetes pool ``infer`` ("Inference") holding both nodes, imported."""
    from factories import PoolFactory

    from pools.common.choices import Scheduler

    pool = PoolFactory(slug="infer", name="Inference", scheduler=Scheduler.KUBERNETES)
    import_nodes(pool, mixed_a100_node(), single_h100_nvl_node())
    return pool
