from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_adapters.slurm.gres import (
    GPU,
    GresItem,
    parse_gres,
    parse_gres_strict,
    parse_tres,
)


def gpu_counts_by_type(items):
    """The parsed ``gpu`` entries summed per type (untyped under ``None``); ``None`` stays."""
    if items is None:
        return None
    counts = {}
    for item in items:
        if item.name == GPU:
            counts[item.type] = counts.get(item.type, 0) + item.count
    return counts


def gpu_total(items):
    """The parsed ``gpu`` entries summed; ``None`` (unknown) stays ``None``."""
    return None if items is None else sum(i.count for i in items if i.name == GPU)


# --- C06: parenthesised socket / index suffixes ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:a100:4(S:0-1)", GresItem("gpu", "a100", 4, None)),
        ("gpu:8(S:0-3)", GresItem("gpu", None, 8, None)),
        ("gpu:k80:4(IDX:0-3)", GresItem("gpu", "k80", 4, (0, 1, 2, 3))),
        ("gpu:tesla:3(IDX:0,2-3)", GresItem("gpu", "tesla", 3, (0, 2, 3))),
        ("gpu:tesla:0(IDX:N/A)", GresItem("gpu", "tesla", 0, ())),
    ],
)
def test_c06_suffixes_are_stripped_before_the_count(tricky_inputs, text, expected):
    assert text in tricky_inputs["C06"]["input"]
    assert parse_gres(text) == (expected,)


def test_c06_totals_and_index_lengths():
    assert gpu_counts_by_type(parse_gres("gpu:a100:4(S:0-1)")) == {"a100": 4}
    assert gpu_counts_by_type(parse_gres("gpu:8(S:0-3)")) == {None: 8}
    (tesla,) = parse_gres("gpu:tesla:3(IDX:0,2-3)")
    assert len(tesla.indexes) == tesla.count == 3
    # The socket range is affinity: no digit of "S:0-1" may leak into the count.
    assert gpu_total(parse_gres("gpu:a100:4(S:0-1)")) == 4
    assert gpu_total(parse_gres("gpu:8(S:0-3)")) == 8


# --- C07: several GPU types and non-GPU GRES ------------------------------------------------


def test_c07_every_line_totals(tricky_inputs):
    lines = tricky_inputs["C07"]["input"].splitlines()
    assert [gpu_total(parse_gres(line)) for line in lines] == [4, 2, 2, 4, 0, 8]


def test_c07_per_type_breakdown_is_kept():
    assert gpu_counts_by_type(parse_gres("gpu:tesla:2,gpu:kepler:2")) == {"tesla": 2, "kepler": 2}
    assert gpu_counts_by_type(parse_gres("gpu:l40s:1(IDX:0),gpu:rtx4090:1(IDX:1)")) == {
        "l40s": 1,
        "rtx4090": 1,
    }
    assert gpu_counts_by_type(parse_gres("gpu:h100:8(S:0-1),tmp:3500G")) == {"h100": 8}


def test_c07_non_gpu_gres_are_kept_as_items():
    assert parse_gres("gpu:tesla:2,mps:200") == (
        GresItem("gpu", "tesla", 2),
        GresItem("mps", None, 200),
    )
    assert parse_gres("gpu:4,shard:64") == (GresItem("gpu", None, 4), GresItem("shard", None, 64))
    assert parse_gres("tmp:844G") == (GresItem("tmp", None, 844 * 1024**3),)
    assert parse_gres("gpu:l40s:1(IDX:0),gpu:rtx4090:1(IDX:1)") == (
        GresItem("gpu", "l40s", 1, (0,)),
        GresItem("gpu", "rtx4090", 1, (1,)),
    )


# --- C09: the three spellings of "nothing" --------------------------------------------------


def test_c09_null_means_no_gres(tricky_inputs):
    assert "(null)" in tricky_inputs["C09"]["input"]
    assert parse_gres("(null)") == ()
    assert gpu_total(parse_gres("(null)")) == 0
    assert gpu_counts_by_type(parse_gres("(null)")) == {}


def test_c09_gpu_zero_is_zero(tricky_inputs):
    assert "gpu:0" in tricky_inputs["C09"]["input"]
    assert parse_gres("gpu:0") == (GresItem("gpu", None, 0),)
    assert gpu_total(parse_gres("gpu:0")) == 0


def test_c09_null_type_is_untyped(tricky_inputs):
    case_input = tricky_inputs["C09"]["input"]
    assert "gpu:(null):4(S:0)" in case_input and "gpu:(null):2(IDX:0-1)" in case_input
    assert parse_gres("gpu:(null):4(S:0)") == (GresItem("gpu", None, 4, None),)
    assert gpu_counts_by_type(parse_gres("gpu:(null):4(S:0)")) == {None: 4}
    assert parse_gres("gpu:(null):2(IDX:0-1)") == (GresItem("gpu", None, 2, (0, 1)),)
    assert gpu_total(parse_gres("gpu:(null):2(IDX:0-1)")) == 2


@pytest.mark.parametrize("text", ["N/A", "", "  ", None])
def test_c09_na_and_empty_are_unknown_not_zero(text):
    assert parse_gres(text) is None
    assert gpu_total(parse_gres(text)) is None
    assert gpu_counts_by_type(parse_gres(text)) is None


# --- other shapes and malformed strings ----------------------------------------------------


def test_slurmrestd_shapes_from_the_test_cluster():
    assert parse_gres("gpu:a100:4") == (GresItem("gpu", "a100", 4),)
    assert parse_gres("gpu:a100:0(IDX:N/A)") == (GresItem("gpu", "a100", 0, ()),)
    assert parse_gres("gpu:a100:1(IDX:0)") == (GresItem("gpu", "a100", 1, (0,)),)


def test_type_without_count_means_one():
    assert parse_gres("gpu:a100") == (GresItem("gpu", "a100", 1),)
    assert parse_gres("gpu") == (GresItem("gpu", None, 1),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu:a100:four", "bad GRES count"),
        ("gpu:a100:4(S:0-1", "unbalanced"),
        ("gpu:a100:4)", "unbalanced"),
        ("gpu:a:b:c", "too many ':'"),
        ("gpu:a100:4,,gpu:2", "empty GRES entry"),
        ("gpu:a100:4(IDX:3-1)", "bad IDX range"),
        ("gpu:a100:2(IDX:x)", "bad IDX list"),
        ("gpu:a100:4(S:0)(S:1)", "bad parenthesised suffix"),
        ("gpu::4", "bad GRES type"),
        ("4:gpu", "bad GRES name"),
    ],
)
def test_malformed_gres(text, message):
    assert parse_gres(text) is None
    with pytest.raises(ValueError, match=message):
        parse_gres_strict(text)


@given(st.text(max_size=60))
def test_parse_gres_never_raises(text):
    result = parse_gres(text)
    assert result is None or all(isinstance(item, GresItem) for item in result)


_gres_type = st.one_of(
    st.none(), st.just("(null)"), st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
)
_index_suffix = st.lists(st.integers(0, 15), min_size=1, max_size=4).map(
    lambda indexes: "(IDX:" + ",".join(map(str, indexes)) + ")"
)
_suffix = st.one_of(st.just(""), st.just("(S:0-1)"), st.just("(IDX:N/A)"), _index_suffix)


@st.composite
def _gres_entries(draw):
    name = draw(st.sampled_from(["gpu", "gpu", "mps", "shard", "tmp"]))
    gres_type = draw(_gres_type)
    count = draw(st.integers(0, 4096))
    head = name if gres_type is None else f"{name}:{gres_type}"
    return name, count, f"{head}:{count}{draw(_suffix)}"


@given(st.lists(_gres_entries(), min_size=1, max_size=6))
def test_every_entry_is_read_with_its_name_and_count(entries):
    items = parse_gres(",".join(text for _, _, text in entries))
    assert [(item.name, item.count) for item in items] == [(n, c) for n, c, _ in entries]


# --- TRES -----------------------------------------------------------------------------------


def test_tres_node_string_from_slurmrestd():
    assert parse_tres("cpu=8,mem=16000M,billing=8,gres/gpu=4,gres/gpu:a100=4") == {
        "cpu": Decimal(8),
        "mem": Decimal(16000),
        "billing": Decimal(8),
        "gres/gpu": Decimal(4),
        "gres/gpu:a100": Decimal(4),
    }


def test_tres_partition_string():
    tres = parse_tres(
        "cpu=16,mem=32000M,node=2,billing=16,gres/gpu=6,gres/gpu:a100=4,gres/gpu:rtx4090=2"
    )
    assert tres["gres/gpu"] == 6
    assert tres["gres/gpu:a100"] + tres["gres/gpu:rtx4090"] == 6
    assert tres["node"] == 2


def test_tres_memory_is_mib_with_binary_suffixes():
    assert parse_tres("mem=64G")["mem"] == 64 * 1024
    assert parse_tres("mem=515456M")["mem"] == 515_456
    assert parse_tres("mem=187.50G")["mem"] == Decimal("187.5") * 1024


def test_tres_counts_may_be_fractional_or_suffixed():
    assert parse_tres("billing=1.5,cpu=2")["billing"] == Decimal("1.5")
    assert parse_tres("fs/disk=100G")["fs/disk"] == 100 * 1024**3


def test_tres_null_and_empty():
    assert parse_tres(None) is None
    assert parse_tres("") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cpu", "bad TRES pair"),
        ("cpu=", "bad TRES pair"),
        ("=4", "bad TRES pair"),
        ("cpu=four", "bad TRES amount"),
        ("mem=N/A", "bad TRES amount"),
        ("cpu=NaN", "bad TRES amount"),
        ("cpu=8,cpu=9", "given twice"),
    ],
)
def test_tres_malformed(text, message):
    with pytest.raises(ValueError, match=message):
        parse_tres(text)
