"""``nvidia-smi topo -m`` / ``nvlink -s`` into NVLink domains, on real published captures
(``tests/fixtures/nvidia-smi/topo/README.md`` names each source). Expected domains are read off
the printed matrices by eye: every ``NV#`` cell joins two cards, nothing else does."""

from __future__ import annotations

import pytest

from pools.inventory.topology import parse_topology

TOPO = "nvidia-smi/topo"


def _read(fixtures_dir, name: str) -> str:
    return (fixtures_dir / name).read_text(encoding="utf-8", errors="replace")


def _domains(host) -> list[list[int]] | None:
    if host.domains is None:
        return None
    return [sorted(d.gpus) for d in host.domains]


def test_dgx_a100_is_one_nvswitch_domain_of_eight(fixtures_dir):
    host = parse_topology(_read(fixtures_dir, f"{TOPO}/dgx-a100__nvswitch-nv12.txt"))
    assert host.gpus == (0, 1, 2, 3, 4, 5, 6, 7)
    assert _domains(host) == [[0, 1, 2, 3, 4, 5, 6, 7]]
    domain = host.domains[0]
    assert domain.all_to_all is True and domain.links_per_pair == 12  # NV12 in all 56 cells
    assert host.matrix.nvlinks[(0, 7)] == 12
    assert len(host.matrix.nvlinks) == 28  # 8 choose 2 pairs
    # NIC rows are skipped, the old-style mlx5 column names kept; affinities per GPU as printed
    assert host.matrix.nics == tuple(f"mlx5_{i}" for i in range(12))
    assert host.matrix.cpu_affinity[4] == "112-127,240-255"
    assert host.matrix.numa_affinity[6] == "5"
    assert host.matrix.links[(0, 2)] == "NV12"
    assert host.issues == ()


def test_four_h100_nv6_all_to_all_with_space_columns(fixtures_dir):
    host = parse_topology(_read(fixtures_dir, f"{TOPO}/h100-x4__nv6-all-to-all.txt"))
    assert _domains(host) == [[0, 1, 2, 3]]
    assert host.domains[0].links_per_pair == 6
    assert host.matrix.cpu_affinity[1] == "4,12,20,28"
    assert host.matrix.numa_affinity[2] == "7"
    assert host.matrix.nics == ("NIC0", "NIC1", "NIC2", "NIC3")  # no NIC legend in this copy


def test_eight_gpu_pcie_box_has_eight_singleton_domains(fixtures_dir):
    host = parse_topology(_read(fixtures_dir, f"{TOPO}/pcie-8gpu__no-nvlink.txt"))
    assert _domains(host) == [[i] for i in range(8)]
    assert all(d.links_per_pair is None for d in host.domains)
    assert host.matrix.nvlinks == {}
    assert host.matrix.links[(0, 1)] == "PIX" and host.matrix.links[(0, 2)] == "PXB"
    assert host.matrix.links[(3, 4)] == "SYS"
    assert host.matrix.cpu_affinity[5] == "14-27"
    assert host.matrix.numa_affinity[5] is None  # the old layout has no NUMA column
    assert host.matrix.nics == ("mlx5_0",)


def test_l40s_pcie_with_nic_legend(fixtures_dir):
    host = parse_topology(_read(fixtures_dir, f"{TOPO}/l40s-x4__pcie-nic-legend.txt"))
    assert _domains(host) == [[0], [1], [2], [3]]
    assert host.matrix.nics == ("mlx5_0", "mlx5_1")  # NIC0/NIC1 resolved through the legend
    assert host.matrix.links[(0, 1)] == "NODE"
    assert host.matrix.cpu_affinity[3] == "96-191,288-383"


def test_a6000_bridge_pair_and_a_lone_card(fixtures_dir):
    host = parse_topology(_read(fixtures_dir, f"{TOPO}/rtx-a6000-x3__nvlink-bridge-pair.txt"))
    assert _domains(host) == [[0, 1], [2]]
    assert host.domains[0].links_per_pair == 4
    status = host.nvlink_status
    assert (status[0].state, status[0].active_links) == ("active", 4)
    assert status[0].link_gbps == (14.062, 14.062, 14.062, 14.062)
    assert status[1].uuid == "GPU-39fc2446-cb50-2067-2867-d95efd470a2c"
    assert (status[2].state, status[2].active_links) == ("none", 0)
    assert host.issues == ()


@pytest.mark.parametrize(
    ("capture", "state", "links"),
    [
        ("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt", "active", 18),
        ("linux-x86_64__nvidia-h200__590.48.01.txt", "active", 18),
        ("linux-x86_64__nvidia-l40s__595.80.txt", "none", 0),  # "does not have or support"
        ("linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt", "none", 0),
        ("linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt", "none", 0),  # inActive
        ("linux-x86_64__nvidia-h100-mig__590.48.01.txt", "unknown", 0),  # MIG hides links
    ],
)
def test_exporter_single_card_captures(fixtures_dir, capture, state, links):
    """One card per matrix (an H100 with 18 links up but alone in its VM is still a domain of
    one); the sections end at the exporter's ``####`` rules, so nothing after them is read."""
    host = parse_topology(_read(fixtures_dir, f"nvidia-smi/{capture}"))
    assert _domains(host) == [[0]]
    assert (host.nvlink_status[0].state, host.nvlink_status[0].active_links) == (state, links)
    assert host.issues == ()


def test_matrix_link_denied_by_nvlink_status_is_not_joined():
    text = (
        "# $ nvidia-smi topo -m\n"
        "\tGPU0\tGPU1\tCPU Affinity\n"
        "GPU0\t X \tNV4\t0-7\n"
        "GPU1\tNV4\t X \t0-7\n"
        "# $ nvidia-smi nvlink -s\n"
        "GPU 0: NVIDIA RTX A6000 (UUID: GPU-a)\n"
        "\t Link 0: 14.062 GB/s\n"
        "GPU 1: NVIDIA RTX A6000 (UUID: GPU-b)\n"
        "NVML: Unable to retrieve NVLink information as all links are inActive\n"
    )
    host = parse_topology(text)
    assert _domains(host) == [[0], [1]]
    assert any("not counted as joined" in issue.message for issue in host.issues)


def test_unreadable_or_one_sided_cells_never_join():
    text = "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV2\t??\nGPU1\tPIX\t X \tNV1\nGPU2\t??\tNV1\t X \n"
    host = parse_topology(text)
    assert _domains(host) == [[0], [1, 2]]  # 0-1 is NV2 one way, PIX the other: not joined
    messages = " ".join(issue.message for issue in host.issues)
    assert "'??' is not a known link" in messages
    assert "GPU0-GPU1 is 'NV2' one way and 'PIX' the other" in messages


def test_nothing_known_is_unknown_not_connected():
    assert parse_topology("").domains is None
    status_only = parse_topology(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n\t Link 0: 26.562 GB/s\n"
    )
    assert status_only.gpus == (0, 1)
    assert status_only.domains is None  # links up, but to whom: only the matrix says
    none_up = parse_topology(
        "GPU 0: NVIDIA L40S (UUID: GPU-a)\nDevice does not have or support Nvlink\n"
        "GPU 1: NVIDIA L40S (UUID: GPU-b)\nDevice does not have or support Nvlink\n"
    )
    assert _domains(none_up) == [[0], [1]]  # no card has a link: each alone, a fact


def test_missing_row_leaves_its_pairs_out():
    host = parse_topology("\tGPU0\tGPU1\nGPU0\t X \tNV12\n")
    assert _domains(host) == [[0], [1]]
    assert any("no row for GPU1" in issue.message for issue in host.issues)


def test_catalogue_fallback_only_says_what_the_catalogue_knows():
    from pools.inventory.topology import catalogue_domains

    # GeForce RTX 4090: the catalogue has no NVLink for it, so each card is alone
    assert catalogue_domains([0, 1, 2], form_factor="pcie", nvlink_gbps=None) == (
        frozenset({0}),
        frozenset({1}),
        frozenset({2}),
    )
    # A100 SXM4 80GB (600 GB/s) on an 8-card HGX board: one domain
    assert catalogue_domains(range(8), form_factor="sxm", nvlink_gbps=600) == (frozenset(range(8)),)
    assert catalogue_domains(range(4), form_factor="sxm", nvlink_gbps=600) == (frozenset(range(4)),)
    # 2 SXM cards (a slice of a board), H100 NVL pairs: unknown, never assumed joined
    assert catalogue_domains([0, 1], form_factor="sxm", nvlink_gbps=900) is None
    assert catalogue_domains(range(4), form_factor="nvl", nvlink_gbps=600) is None
    assert catalogue_domains([], form_factor="sxm", nvlink_gbps=600) == ()
