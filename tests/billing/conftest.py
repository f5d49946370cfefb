"""Billing fixtures: the test rate card and the A100 model. Helpers live in ``kit.py``."""

from __future__ import annotations

import sys
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # so tests can ``from kit import ...``


@pytest.fixture
def a100(db):
    from pools.inventory.models import GpuModel

    return GpuModel.objects.get(slug="a100_80g_sxm")


@pytest.fixture
def rates(db, a100, l40s):
    """EUR card from 2024-01-01: A100 reserved 2.00 / used 3.00, L40S 8.00 / 8.00, H100 10.00,
    served model ``qwen`` input 2.00, cached 0.50, output 8.00 per million tokens."""
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create
    from pools.inventory.models import GpuModel

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
