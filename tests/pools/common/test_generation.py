"""The generation tokens of pools.common.generation: read, replaced only when a transaction that
wrote commits, and the callers (allocations, requests) on their own keys; ``cached`` reads and
keeps an entry outside a transaction only."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.db import transaction
from factories import AllocationFactory

from pools.capacity import generation as allocations
from pools.common.generation import cached, changed, generation
from pools.dashboards import demand_history

pytestmark = pytest.mark.django_db

KEY = "tests:common-generation"


@pytest.fixture(autouse=True)
def _fresh_key():
    cache.delete(KEY)
    yield
    cache.delete(KEY)


def test_a_token_is_32_hex_digits_and_stays_until_changed():
    first = generation(KEY)
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert generation(KEY) == first


def test_a_lost_key_gets_a_new_token():
    first = generation(KEY)
    cache.delete(KEY)
    assert generation(KEY) != first


def test_changed_replaces_the_token_only_after_the_commit(django_capture_on_commit_callbacks):
    first = generation(KEY)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        changed(KEY)
        assert generation(KEY) == first  # not yet committed
    assert len(callbacks) == 1
    assert generation(KEY) != first


def test_changed_in_a_rolled_back_transaction_keeps_the_token(django_capture_on_commit_callbacks):
    first = generation(KEY)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                changed(KEY)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
    assert callbacks == []
    assert generation(KEY) == first


def test_keys_are_independent(django_capture_on_commit_callbacks):
    other = generation(allocations.GENERATION_KEY)
    first = generation(KEY)
    with django_capture_on_commit_callbacks(execute=True):
        changed(KEY)
    assert generation(allocations.GENERATION_KEY) == other
    assert generation(KEY) != first


def test_saving_an_allocation_moves_its_generation_not_the_requests(
    django_capture_on_commit_callbacks,
):
    allocation = AllocationFactory()
    held, asked = allocations.allocations_generation(), demand_history.requests_generation()
    with django_capture_on_commit_callbacks(execute=True):
        allocation.save()
    assert allocations.allocations_generation() != held
    assert demand_history.requests_generation() == asked


def _counting(values):
    """A reader returning ``values`` one by one, and the list of what it returned."""
    returned = []

    def read():
        returned.append(values[len(returned)])
        return returned[-1]

    return read, returned


def test_cached_outside_a_transaction_reads_once_and_keeps(read_as_a_page):
    read, returned = _counting([10, 20])
    with read_as_a_page():
        assert cached(KEY, read, 60) == 10
        assert cached(KEY, read, 60) == 10
    assert returned == [10]
    assert cache.get(KEY) == 10


def test_cached_inside_a_transaction_reads_each_time_and_keeps_nothing(read_as_a_page):
    read, returned = _counting([10, 20, 30])
    with read_as_a_page():
        assert cached(KEY, read, 60) == 10  # kept
    with transaction.atomic():
        assert cached(KEY, read, 60) == 20  # not the kept 10
    assert cached(KEY, read, 60) == 30  # the test's own transaction is one too
    assert returned == [10, 20, 30]
    assert cache.get(KEY) == 10  # neither 20 nor 30 was kept


def test_cached_reads_again_when_the_entry_does_not_fit(read_as_a_page):
    read, returned = _counting([(5, "new")])
    cache.set(KEY, (9, "later"), 60)
    with read_as_a_page():
        assert cached(KEY, read, 60, fits=lambda found: found[0] <= 5) == (5, "new")
    assert cache.get(KEY) == (5, "new")
