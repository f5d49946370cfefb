"""Fixtures of the committed-sum tests (``test_committed_*.py``): both paths of the sum, a clock
on 10 March 2026 and nlp's 4 reserved A100 imported up to 11:00. None is autouse: ``vendor``
parametrises only the tests that ask for it."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from factories import AllocationFactory

from billing.budgets import enforcement
from billing.services.usage_import import usage_import_reservations

DAY = datetime(2026, 3, 10, tzinfo=UTC)
MARCH = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(params=["postgresql", "sqlite"])
def vendor(request, monkeypatch):
    """The committed sum's path: one SQL statement, or the rows summed in Python."""
    if request.param == "sqlite":
        monkeypatch.setattr(enforcement, "connection", SimpleNamespace(vendor="sqlite"))
    return request.param


@pytest.fixture
def clock(monkeypatch, settings):
    """``clock(hour, minute)`` sets ``timezone.now`` to that time on 10 March 2026 (UTC)."""
    settings.BILLING_TIME_ZONE = "UTC"

    def at(hour: int, minute: int = 0) -> datetime:
        now = DAY.replace(hour=hour, minute=minute)
        monkeypatch.setattr("django.utils.timezone.now", lambda: now)
        return now

    return at


@pytest.fixture
def held(team, train_pool, a100, clock):
    """The 4 A100 08:00 -> 20:00, imported up to 11:00."""
    allocation = AllocationFactory(
        team=team, pool=train_pool, gpu_model=a100, card_count=4, status="active",
        pricing_method="reserved", starts_at=DAY.replace(hour=8), ends_at=DAY.replace(hour=20),
    )  # fmt: skip
    eleven = clock(11)
    usage_import_reservations(start=MARCH, end=eleven, now=eleven)
    return allocation
