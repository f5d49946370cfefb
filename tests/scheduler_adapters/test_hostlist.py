"""Slurm host lists, expanded as ``scontrol show hostnames`` (22.05.8) printed them here."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_adapters.slurm.hostlist import MAX_HOSTS, expand_hostlist


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", []),
        ("gpu-a100-01", ["gpu-a100-01"]),
        ("gpu-a100-01,gpu-4090-01", ["gpu-a100-01", "gpu-4090-01"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("node[08-10,7]", ["node08", "node09", "node10", "node7"]),  # width per range
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("dgx[001-002]-ib", ["dgx001-ib", "dgx002-ib"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("a[1],b[2-3],c", ["a1", "b2", "b3", "c"]),
    ],
)
def test_expands_like_scontrol(text, names):
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("node[1-3", "unbalanced '['"),
        ("node1-3]", "unbalanced ']'"),
        ("node[3-1]", "runs backwards"),
        ("node[a-b]", "bad range"),
        ("node[[1]]", "nested"),
        (f"node[0-{MAX_HOSTS + 1}]", "too large"),
    ],
)
def test_bad_host_lists_name_the_problem(text, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[")):
        expand_hostlist(text)


@given(st.lists(st.integers(min_value=0, max_value=999), min_size=1, max_size=30, unique=True))
def test_a_range_list_round_trips(numbers):
    text = "n[" + ",".join(f"{n:03d}" for n in numbers) + "]"
    assert expand_hostlist(text) == [f"n{n:03d}" for n in numbers]
