"""The demo's "cost so far" on My teams leads to a statement that says the same: the demo
builds this month's draft for every team after importing the month's usage so far, and its
total is the sum of its lines, as the My teams card and the team's month page show it."""

from __future__ import annotations

import re
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from billing.choices import StatementStatus
from billing.conf import billing_zone
from billing.demo import demo_billing_load
from billing.models import Statement
from billing.pricing import month_of
from pools.tenancy.selectors import pool_admin_users

pytestmark = pytest.mark.django_db


def _amount(text: str) -> Decimal:
    """``1 384.52 EUR`` (money as the pages write it, grouped by a thin space) -> 1384.52."""
    return Decimal(re.sub(r"[^\d.\-]", "", text))


def test_the_demo_has_this_months_draft_and_my_teams_agrees_with_it():
    call_command("load_demo", stdout=StringIO())
    demo_billing_load(months=1)
    month = month_of(timezone.now(), billing_zone())
    draft = Statement.objects.get(team__slug="nlp", month=month)
    assert draft.status == StatementStatus.DRAFT
    # the lines' amounts added up here, not the statement's own total
    by_hand = sum((line.amount for line in draft.lines.all()), Decimal(0))
    assert by_hand > 0  # the month's L40S reservation and jobs so far
    assert draft.total_amount == by_hand

    client = Client()
    client.force_login(pool_admin_users().first())  # sees every team
    page = client.get("/teams/mine/").content.decode()
    card = re.search(r">NLP</a>.*?data-cost-so-far>([^<]+)<", page, re.S)
    assert card is not None and _amount(card.group(1)) == by_hand

    month_page = client.get(f"/costs/nlp/{month:%Y-%m}/").content.decode()
    total = re.search(r'<div class="value">([^<]+)</div><div class="label">total', month_page)
    assert total is not None and _amount(total.group(1)) == by_hand
    # every demo team has this month's draft, not only the one with burst lines
    assert set(Statement.objects.filter(month=month).values_list("team__slug", flat=True)) == {
        *Statement.objects.values_list("team__slug", flat=True)
    }
