"""Nesting bounds on uploaded JSON and YAML (issue 27, item 6): a file nested past 64 levels is
one parse issue, never a RecursionError; real inputs (8-odd levels) read as before."""

from __future__ import annotations

import pytest

from scheduler_adapters.documents import MAX_DEPTH, TooDeep, bracket_depth, load_json, load_yaml
from scheduler_adapters.kubernetes_nodes import parse_kubernetes_nodes
from scheduler_adapters.slurm.nodes import parse_slurm_nodes

DEEP_JSON = "[" * 100_000 + "]" * 100_000
# 3,000 levels of block mappings: no bracket at all, only indentation
DEEP_BLOCK_YAML = "".join("  " * level + "a:\n" for level in range(3000))


@pytest.mark.parametrize(
    ("text", "depth"),
    [("{}", 1), ('{"a": [1, {"b": []}]}', 4), ('{"a": "[[[[[[", "b": "\\"[["}', 1), ("x", 0)],
)
def test_bracket_depth_skips_strings(text, depth):
    """By hand: ``{"a": [1, {"b": []}]}`` opens { [ { [ before its first close: 4 deep; the
    brackets inside strings (escaped quote included) count for nothing."""
    assert bracket_depth(text) == depth


def test_the_bound_is_inclusive():
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(TooDeep):
        load_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_deep_block_yaml_is_too_deep_not_a_recursion_error():
    with pytest.raises(TooDeep):
        load_yaml(DEEP_BLOCK_YAML)


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_slurm_nodes, DEEP_JSON, "invalid JSON: nested deeper than 64 levels"),
        (parse_kubernetes_nodes, DEEP_JSON, "invalid YAML/JSON: nested deeper than 64 levels"),
        (
            parse_kubernetes_nodes,
            DEEP_BLOCK_YAML,
            "invalid YAML/JSON: nested deeper than 64 levels",
        ),
    ],
)
def test_the_node_parsers_report_a_too_deep_file_as_one_issue(parse, text, message):
    result = parse(text)
    assert result.nodes == ()
    assert [i.message for i in result.issues] == [message]
