"""Shared fixtures for the scheduler adapter parser tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="session")
def tricky_case() -> Callable[[str], dict[str, Any]]:
    """Look up one case of ``tests/fixtures/tricky_inputs.json`` by id (``"C06"``)."""
    cases = {case["id"]: case for case in json.loads((FIXTURES / "tricky_inputs.json").read_text())}
    return cases.__getitem__
