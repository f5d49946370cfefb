import json
import math
from datetime import UTC, datetime

import pytest

from scheduler_adapters.slurm.gres import parse_gres
from scheduler_adapters.slurm.values import (
    INFINITE,
    INFINITE64,
    NO_VAL,
    NO_VAL64,
    UNLIMITED,
    unwrap,
    unwrap_timestamp,
)


def _c15_node(case: dict) -> dict:
    node_json = case["input"].split("\njob fragment:")[0]
    return json.loads(node_json)["nodes"][0]


def test_sentinel_constants_are_slurms():
    assert NO_VAL == 0xFFFFFFFE  # 4,294,967,294
    assert INFINITE == 0xFFFFFFFF  # 4,294,967,295
    assert NO_VAL64 == 2**64 - 2
    assert INFINITE64 == 2**64 - 1


def test_c15_node_fields(tricky_inputs):
    node = _c15_node(tricky_inputs["C15"])
    assert unwrap(node["cpus"]) == 64
    assert unwrap(node["real_memory"]) == 515_000
    assert unwrap(node["cpu_load"]) is None  # NO_VAL, not 42949672.94 after /100
    assert unwrap(node["free_mem"]) is None  # {set: false}: unknown, not 0 MiB
    assert unwrap(node["boot_time"]) == 1_717_200_000
    assert unwrap_timestamp(node["boot_time"]) == datetime(2024, 6, 1, tzinfo=UTC)
    assert [(g.name, g.count) for g in parse_gres(node["gres"])] == [("gpu", 4)]
    assert [(g.name, g.count) for g in parse_gres(node["gres_used"])] == [("gpu", 2)]


def test_c15_infinite_time_limit_is_unlimited_not_zero(tricky_inputs):
    fragment = '"time":{"limit":{"set":true,"infinite":true,"number":0}}'
    assert fragment in tricky_inputs["C15"]["input"]
    limit = json.loads("{" + fragment + "}")["time"]["limit"]
    assert unwrap(limit) == UNLIMITED
    assert unwrap(limit) != 0


def test_c15_v0037_signed_sentinels(tricky_inputs):
    assert '"free_memory":-2' in tricky_inputs["C15"]["input"]
    assert unwrap(-2, signed32=True) is None
    assert unwrap(-1, signed32=True) == UNLIMITED
    assert unwrap(4_294_967_294, signed32=True) is None
    # Without the flag a negative number is just a number.
    assert unwrap(-2) == -2


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (0, 0),
        (64, 64),
        (1.5, 1.5),  # TRES counts may be floats
        (None, None),
        (NO_VAL, None),
        (NO_VAL64, None),
        (float(NO_VAL), None),
        (INFINITE, UNLIMITED),
        (INFINITE64, UNLIMITED),
        (float("inf"), UNLIMITED),
        (float("nan"), None),
        ({"set": True, "infinite": False, "number": 12}, 12),
        ({"set": True, "infinite": False, "number": NO_VAL}, None),
        ({"set": False, "infinite": False, "number": 0}, None),
        ({"set": False, "infinite": True, "number": 0}, UNLIMITED),
        ({"set": True, "infinite": True, "number": 0}, UNLIMITED),
        ({"number": 7}, 7),
    ],
)
def test_unwrap(raw, expected):
    result = unwrap(raw)
    if expected is None:
        assert result is None
    else:
        assert result == expected


def test_unlimited_compares_above_every_limit():
    assert UNLIMITED > INFINITE64
    assert min(UNLIMITED, 5) == 5
    assert math.isinf(unwrap(INFINITE))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("12", "not a slurmrestd number"),
        (True, "not a slurmrestd number"),
        ([1], "not a slurmrestd number"),
        ({}, "not a slurmrestd number object"),
        ({"set": True, "infinite": False}, "has no 'number'"),
        ({"set": True, "value": 3}, "not a slurmrestd number object"),
        ({"set": True, "number": "3"}, "not a slurmrestd number"),
    ],
)
def test_unwrap_rejects_other_shapes(raw, message):
    with pytest.raises(ValueError, match=message):
        unwrap(raw)


@pytest.mark.parametrize(
    "raw", [0, None, NO_VAL, {"set": False, "infinite": False, "number": 0}, INFINITE]
)
def test_unset_timestamps_are_none(raw):
    assert unwrap_timestamp(raw) is None


@pytest.mark.parametrize("raw", [2**63, {"set": True, "infinite": False, "number": 2**62}])
def test_a_timestamp_no_datetime_holds_is_a_value_error(raw):
    """Seconds past year 9999 (here 2**62 and 2**63 s) are refused as an unreadable value, so
    the readers name the field; they raised OverflowError."""
    with pytest.raises(ValueError, match="epoch seconds out of range"):
        unwrap_timestamp(raw)


def test_plain_timestamp():
    assert unwrap_timestamp(1_795_964_673) == datetime.fromtimestamp(1_795_964_673, tz=UTC)
