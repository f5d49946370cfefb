"""All-reduce times from the measured NVLink bus bandwidth shares (pools.sizing.collectives)."""

import math

import pytest

from pools.sizing.collectives import ALLREDUCE_SIZES, measured_allreduce_share
from pools.sizing.gpus import gpu_spec
from pools.sizing.throughput import allreduce_s


def test_a_measured_size_reads_its_share_and_sizes_between_interpolate_on_log_axes():
    # Eight Blackwell cards, 16 MiB: the table's 0.3886.
    assert measured_allreduce_share(
        architecture="Blackwell", cards=8, message_bytes=16 * 2**20
    ) == pytest.approx(0.3886)
    # Eight Hopper cards, 8 MiB: halfway between 4 MiB (0.3333) and 16 MiB (0.5363) on the log
    # axis: the geometric mean.
    assert measured_allreduce_share(
        architecture="Hopper", cards=8, message_bytes=8 * 2**20
    ) == pytest.approx(math.sqrt(0.3333 * 0.5363))


def test_outside_the_table_the_latency_floor_and_the_largest_share_hold():
    # 512 bytes on two Hopper cards take the 1 KiB time: half the 1 KiB share.
    assert measured_allreduce_share(
        architecture="Hopper", cards=2, message_bytes=512
    ) == pytest.approx(0.0008435 / 2)
    assert measured_allreduce_share(
        architecture="Ampere", cards=4, message_bytes=2**30
    ) == pytest.approx(0.6967)
    assert ALLREDUCE_SIZES[0] == 1024 and ALLREDUCE_SIZES[-1] == 256 * 2**20


def test_unmeasured_group_sizes_take_the_next_measured_count_and_volta_has_none():
    three = measured_allreduce_share(architecture="Hopper", cards=3, message_bytes=2**20)
    assert three == pytest.approx(0.2714)  # the 4-card curve at 1 MiB
    nvl72 = measured_allreduce_share(architecture="Blackwell", cards=16, message_bytes=2**20)
    assert nvl72 == pytest.approx(0.1159)  # the 8-card curve
    assert measured_allreduce_share(architecture="Volta", cards=8, message_bytes=2**20) is None


def test_a_full_batch_all_reduce_on_eight_b200_takes_what_the_tables_measured():
    """A 3,000-token step of a 8,192-wide model: 49,152,000 bytes on eight B200. The share
    between 16 MiB (0.3886) and 64 MiB (0.4736) at log4(49,152,000 / 16,777,216) = 0.77538 of
    the way: exp(ln 0.3886 + 0.77538 x ln(0.4736 / 0.3886)) = 0.45302; 1.75 x 49,152,000 /
    (900e9 x 0.45302) = 211.0 us. The tables measured 147 us at 32 MiB and 279 us at 64 MiB on
    a B200; the ring formula at 0.822 of NVLink said 126.3 us."""
    message = 3000 * 8192 * 2
    position = math.log(message / 2**24) / math.log(4)
    share = math.exp(math.log(0.3886) + position * math.log(0.4736 / 0.3886))
    assert share == pytest.approx(0.45302, rel=1e-4)

    seconds = allreduce_s(message_bytes=message, tp=8, gpu=gpu_spec("b200"))

    assert seconds == pytest.approx(1.75 * message / (900e9 * share))
    assert seconds == pytest.approx(211.0e-6, rel=1e-3)
    assert 147e-6 < seconds < 279e-6


def test_bridged_pairs_and_cards_without_nvlink_keep_the_ring_formula():
    # H100 NVL: a bridged pair, not an NVSwitch system - latency + ring traffic at 0.822 of
    # 300 GB/s; L40S over PCIe at half of 32 GB/s.
    nvl = allreduce_s(message_bytes=1e6, tp=2, gpu=gpu_spec("h100_nvl"))
    assert nvl == pytest.approx(10e-6 + 1e6 / (300e9 * 370 / 450))
    pcie = allreduce_s(message_bytes=1e6, tp=2, gpu=gpu_spec("l40s"))
    assert pcie == pytest.approx(50e-6 + 1e6 / 16e9)
