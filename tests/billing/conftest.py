"""Billing fixtures: a rate card, an accounting stub, and JobRecord building."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from scheduler_adapters.records import JobRecord, JobState


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def job(job_id, start, end, gpus, *, account="nlp", partition="train", state=None):
    """A JobRecord as accounting reports it (``gpus``: ``{gres type: cards}``)."""
    state = state or (JobState.COMPLETED if end else JobState.RUNNING)
    return JobRecord(
        job_id=job_id, name="j", account=account, user="u", partition=partition, state=state,
        state_reason=None, gpus_requested=gpus, gpus_allocated=gpus if start else {},
        submit=start or end, start=start, end=end,
        elapsed_s=int((end - start).total_seconds()) if start and end else None,
    )  # fmt: skip


class Accounting:
    """Any object with ``jobs_from_accounting`` will do for the importer."""

    def __init__(self, records):
        self.records = list(records)

    def jobs_from_accounting(self, start, end, *, accounts=None):
        return tuple(self.records)


@pytest.fixture
def a100(db):
    from pools.models import GpuModel

    return GpuModel.objects.get(slug="a100_80g_sxm")


@pytest.fixture
def rates(db, a100, l40s):
    """EUR card from 2024-01-01: A100 reserved 2.00 / used 3.00, L40S 8.00 / 8.00, H100 10.00,
    served model ``qwen`` input 2.00, cached 0.50, output 8.00 per million tokens."""
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create
    from pools.models import GpuModel

    h100 = GpuModel.objects.get(slug="h100_sxm")
    return rate_card_create(
        name="test", currency="EUR", effective_from=date(2024, 1, 1),
        gpu_prices={
            (a100.pk, RateKind.GPU_RESERVED): Decimal("2.00"),
            (a100.pk, RateKind.GPU_USED): Decimal("3.00"),
            (l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00"),
            (l40s.pk, RateKind.GPU_USED): Decimal("8.00"),
            (h100.pk, RateKind.GPU_USED): Decimal("10.00"),
        },
        token_prices={
            ("qwen", RateKind.TOKEN_INPUT): Decimal("2.00"),
            ("qwen", RateKind.TOKEN_CACHED_INPUT): Decimal("0.50"),
            ("qwen", RateKind.TOKEN_OUTPUT): Decimal("8.00"),
        },
    )  # fmt: skip
