"""Reading JSON and YAML documents that come from files people upload: nesting is bounded.

Python's JSON decoder and PyYAML's composer recurse once per level, so a file of 100,000 ``[``
ends in ``RecursionError`` (a 500), not a parse error. The deepest real inputs are far
shallower: a slurmrestd ``/nodes`` answer or a ``kubectl get nodes -o json`` NodeList is about
8 levels deep (``items[].status.conditions[].…``); :data:`MAX_DEPTH` leaves room for any of them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

MAX_DEPTH = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class TooDeep(ValueError):
    """The document nests deeper than :data:`MAX_DEPTH` levels."""

    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_DEPTH} levels")


def bracket_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text``, outside double-quoted strings (JSON, and
    YAML's flow style)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def load_json(text: str) -> Any:
    """``json.loads`` that raises :class:`TooDeep` instead of recursing past
    :data:`MAX_DEPTH` (``json.JSONDecodeError`` as usual for bad JSON)."""
    if bracket_depth(text) > MAX_DEPTH:
        raise TooDeep
    return json.loads(text)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` bounded the same way: flow collections by bracket depth, and block
    nesting (indentation) by the recursion it would need (``yaml.YAMLError`` as usual)."""
    if bracket_depth(text) > MAX_DEPTH:
        raise TooDeep
    try:
        return yaml.safe_load(text)
    except RecursionError as exc:
        raise TooDeep from exc
