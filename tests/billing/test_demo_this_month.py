"""The demo's month in progress is what the README says a month in progress is: no statement
until it closes, its cost page previewing the lines it would hold ("not drafted yet") with the
total My teams shows as the cost so far; and the demo's clock accrues its reserved card-hours
as beat's hourly import would, so that money moves while the demo runs."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from billing.conf import billing_zone
from billing.demo import GPU_PRICES, demo_billing_load, demo_usage_accrue
from billing.models import Statement, UsageRecord
from billing.pricing import month_of
from billing.services.statements import statement_preview
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation
from pools.common.choices import PricingMethod
from pools.tenancy.models import Team
from pools.tenancy.selectors import pool_admin_users

pytestmark = pytest.mark.django_db


def _amount(text: str) -> Decimal:
    """``1 384.52 EUR`` (money as the pages write it, grouped by a thin space) -> 1384.52."""
    return Decimal(re.sub(r"[^\d.\-]", "", text))


def _pages(client: Client, month) -> tuple[Decimal, Decimal, str]:
    """(nlp's cost so far on My teams, the total on nlp's month page, that page)."""
    page = client.get("/teams/mine/").content.decode()
    card = re.search(r">NLP</a>.*?data-cost-so-far>([^<]+)<", page, re.S)
    month_page = client.get(f"/costs/nlp/{month:%Y-%m}/").content.decode()
    total = re.search(r'<div class="value">([^<]+)</div><div class="label">total', month_page)
    assert card is not None and total is not None
    return _amount(card.group(1)), _amount(total.group(1)), month_page


def test_the_demo_previews_this_month_and_its_clock_moves_the_money(mid_month):
    call_command("load_demo", stdout=StringIO())
    now = timezone.now()
    drafts = demo_billing_load(months=1, now=now)
    month = month_of(now, billing_zone())
    assert drafts and all(s.month < month for s in drafts)
    assert not Statement.objects.filter(month=month).exists()
    team = Team.objects.get(slug="nlp")
    _preview, lines = statement_preview(team=team, month=month, now=now)
    # the lines' amounts added up here, not the preview's own total
    by_hand = sum((line.amount for line in lines), Decimal(0))
    assert by_hand > 0  # the month's L40S reservation and jobs so far

    client = Client()
    client.force_login(pool_admin_users().first())  # sees every team
    so_far, total, month_page = _pages(client, month)
    assert so_far == total == by_hand
    assert "not drafted yet" in month_page

    # an hour later, by the clock's import: each of nlp's reserved allocations running through
    # that hour adds its cards x 1 h x its model's reserved demo price (billing.demo.GPU_PRICES)
    later = now + timedelta(hours=1)
    running = Allocation.objects.filter(
        team=team, pricing_method=PricingMethod.RESERVED, status__in=CHARGED_STATUSES,
        starts_at__lte=now, ends_at__gte=later,
    ).select_related("gpu_model")  # fmt: skip
    hour = sum(
        (a.card_count * Decimal(GPU_PRICES[a.gpu_model.slug][0]) for a in running), Decimal(0)
    )
    assert hour > 0  # nlp's 8 L40S serving (0.95 EUR) and 4 A100 fine-tune (1.90 EUR)
    assert demo_usage_accrue(now=later) > 0
    moved, moved_total, _ = _pages(client, month)
    assert moved == moved_total
    # each line rounds half-up to the cent: a line's share of the hour may move by 0.01
    assert abs(moved - (by_hand + hour)) <= Decimal("0.01") * len(lines)


def test_the_demo_jobs_inside_nlps_slurm_allocations_are_metered_inside_them(mid_month):
    """nlp's vLLM server on its four A100 (its serving page shows it busy) and its retriever
    evaluation on its four RTX 4090 run as Slurm jobs from their allocations' starts: each
    allocation's usage to the import is its cards x the hours since it started, all of it
    included in the reservation (no charge on top), so the team dashboard's card-hours used
    inside allocations are not 0 while those serving pages show the cards held."""
    call_command("load_demo", stdout=StringIO())
    now = timezone.now()
    demo_billing_load(months=1, now=now)
    for pool in ("train-slurm", "dev-4090"):
        allocation = Allocation.objects.get(
            team__slug="nlp", pool__slug=pool, status__in=("active", "expiring")
        )
        hours = Decimal((now - allocation.starts_at).total_seconds()) / 3600
        records = UsageRecord.objects.filter(source_id__endswith=f":alloc{allocation.pk}")
        included = sum((r.quantity for r in records if r.basis == "included"), Decimal(0))
        # card-seconds, metered to the import's now (a few seconds after ``now``)
        assert included / 3600 == pytest.approx(allocation.card_count * hours, abs=Decimal("0.05"))
        assert not records.exclude(basis="included").exists()
