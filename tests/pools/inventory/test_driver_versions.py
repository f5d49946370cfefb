"""Driver/CUDA version parsing and the release-notes table (tricky input C02)."""

import json
from pathlib import Path

import pytest

from pools.inventory.catalogue import load_cuda_driver_table
from pools.inventory.driver_versions import (
    driver_branch,
    max_cuda_for_driver,
    parse_cuda_version,
    parse_driver_version,
)

TABLE = load_cuda_driver_table()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("418.87.01", (418, 87, 1)),
        ("535.54.03", (535, 54, 3)),
        ("535.129.03", (535, 129, 3)),
        ("570.26", (570, 26)),
        (" 595.71.05\n", (595, 71, 5)),
    ],
)
def test_parse_driver_version(raw, expected):
    assert parse_driver_version(raw) == expected


def test_three_part_versions_order_as_tuples_not_floats():
    newer, older = "535.129.03", "535.54.03"
    assert parse_driver_version(newer) > parse_driver_version(older)
    # The float reading gets the order backwards, which is why it must never be used.
    assert float("535.129") < float("535.54")
    with pytest.raises(ValueError):
        float("418.87.01")


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "N/A",
        "[N/A]",
        "abc",
        "535",
        "535.",
        ".535",
        "535..54",
        "535.54.03a",
        "535,54",
        "5 35.54",
    ],
)
def test_parse_driver_version_rejects_garbage(raw):
    with pytest.raises(ValueError):
        parse_driver_version(raw)


def test_driver_branch():
    assert driver_branch("535.129.03") == 535
    assert driver_branch("570.26") == 570
    with pytest.raises(ValueError):
        driver_branch("unknown")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("12.2", (12, 2)),
        ("13.0", (13, 0)),
        ("12.4.1", (12, 4)),
        (" 11.8 ", (11, 8)),
        ("N/A", None),
        ("[N/A]", None),
        ("[Not Supported]", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_cuda_version(raw, expected):
    assert parse_cuda_version(raw) == expected


@pytest.mark.parametrize("raw", ["12", "12.x", "cuda 12.2", "12.2.3.4", "twelve"])
def test_parse_cuda_version_rejects_garbage(raw):
    with pytest.raises(ValueError):
        parse_cuda_version(raw)


def test_table_carries_its_source_and_the_design_anchors():
    document = json.loads(
        (
            Path(__file__).parents[3] / "pools" / "inventory" / "catalogue" / "cuda_drivers.json"
        ).read_text()
    )
    assert document["source"].startswith("https://docs.nvidia.com/cuda/cuda-toolkit-release-notes")
    floors = {row["cuda"]: row["min_driver"] for row in TABLE}
    # DESIGN.md quotes these four from NVIDIA's CUDA release notes.
    assert floors["12.2"] == "535.54.03"
    assert floors["12.4"] == "550.54.14"
    assert floors["12.8"] == "570.26"
    assert floors["13.0"] == "580.65.06"


def test_table_covers_cuda_11_0_to_13_0_with_rising_floors():
    cudas = [parse_cuda_version(row["cuda"]) for row in TABLE]
    expected = [(11, minor) for minor in range(9)] + [(12, m) for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)]
    assert cudas[: len(expected) + 1] == [*expected, (13, 0)]
    floors = [parse_driver_version(row["min_driver"]) for row in TABLE]
    assert floors == sorted(floors)
    assert len(set(floors)) == len(floors)
    assert all(isinstance(row["min_driver"], str) for row in TABLE)


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        ("535.129.03", (12, 2)),
        ("535.54.03", (12, 2)),
        ("535.54.02", (12, 1)),
        ("550.54.14", (12, 4)),
        ("550.54.15", (12, 4)),
        ("570.86.10", (12, 8)),
        ("570.26", (12, 8)),
        ("580.65.06", (13, 0)),
        # The banners of the real captures in shared/fixtures/nvidia-smi/.
        ("590.48.01", (13, 1)),
        ("595.71.05", (13, 2)),
        ("595.80", (13, 2)),
        # Older than every row: the table cannot say.
        ("418.87.01", None),
    ],
)
def test_max_cuda_for_driver(driver, expected):
    assert max_cuda_for_driver(driver, TABLE) == expected


def test_max_cuda_does_not_depend_on_row_order():
    assert max_cuda_for_driver("550.54.15", list(reversed(TABLE))) == (12, 4)


def test_max_cuda_rejects_garbage_driver():
    with pytest.raises(ValueError):
        max_cuda_for_driver("N/A", TABLE)
