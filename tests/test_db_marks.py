"""The ``postgresql`` mark fails a test off PostgreSQL instead of skipping it."""

from __future__ import annotations

from unittest import mock

import pytest
from db_marks import require_postgresql
from django.db import connection


class _Item:
    nodeid = "tests/pools/jobs/test_outbox.py::test_x"

    def __init__(self, *marks: str):
        self.marks = marks

    def get_closest_marker(self, name):
        return pytest.mark.postgresql.mark if name in self.marks else None


def test_a_marked_test_fails_on_sqlite():
    with mock.patch.object(connection, "vendor", "sqlite"):
        with pytest.raises(pytest.fail.Exception, match="needs PostgreSQL, not sqlite"):
            require_postgresql(_Item("postgresql"))


def test_a_marked_test_runs_on_postgresql_and_an_unmarked_one_anywhere():
    with mock.patch.object(connection, "vendor", "postgresql"):
        require_postgresql(_Item("postgresql"))
    with mock.patch.object(connection, "vendor", "sqlite"):
        require_postgresql(_Item())


@pytest.mark.postgresql
def test_the_mark_lets_this_suite_run_on_postgresql():
    assert connection.vendor == "postgresql"
