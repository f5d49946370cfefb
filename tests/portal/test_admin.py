"""The Django admin writes through the rules: changes are audit events with before/after, a
pool's binding fields are fixed while allocations hold cards, a referenced pool cannot be
deleted, and usage records are read-only."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.test import Client
from factories import AllocationFactory, NodeFactory

from billing.models import RateCard, UsageRecord
from pools.audit.models import AuditEvent
from pools.common.choices import AllocationStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser_page(django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("su", password="pw"))
    return client


def test_an_admin_change_to_a_pool_is_an_audit_event_with_before_and_after(
    superuser_page, infer_pool
):
    url = f"/admin/pools/pool/{infer_pool.pk}/change/"
    page = superuser_page.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items()}
    data["overcommit_ratio"] = "1.50"
    response = superuser_page.post(url, data)
    assert response.status_code == 302, response.content[:500]
    event = AuditEvent.objects.get(action="pool.changed", object_id=str(infer_pool.pk))
    assert event.reason == "Django admin"
    assert Decimal(event.before["overcommit_ratio"]) == Decimal("1.00")
    assert Decimal(event.after["overcommit_ratio"]) == Decimal("1.50")


def test_binding_fields_are_read_only_while_allocations_hold_cards(superuser_page, infer_pool):
    url = f"/admin/pools/pool/{infer_pool.pk}/change/"
    assert "slug" in superuser_page.get(url).context["adminform"].form.fields
    AllocationFactory(pool=infer_pool, status=AllocationStatus.ACTIVE)
    form = superuser_page.get(url).context["adminform"].form
    assert not {"scheduler", "slug", "slurm_partition"} & set(form.fields)
    # ... and the pool cannot be deleted while anything refers to it.
    assert superuser_page.get(f"/admin/pools/pool/{infer_pool.pk}/delete/").status_code == 403


def test_a_node_hostname_is_fixed_once_the_node_exists(superuser_page):
    """Placements and reservations name nodes by hostname: the admin may add a node with one,
    not rename it."""
    node = NodeFactory(hostname="dgx-1")
    form = superuser_page.get(f"/admin/pools/node/{node.pk}/change/").context["adminform"].form
    assert "hostname" not in form.fields and "pool" in form.fields
    assert (
        "hostname" in superuser_page.get("/admin/pools/node/add/").context["adminform"].form.fields
    )


def test_rate_card_changes_are_audited_with_their_entries(superuser_page):
    response = superuser_page.post(
        "/admin/billing/ratecard/add/",
        {
            "name": "2027",
            "currency": "EUR",
            "effective_from": "2027-01-01",
            "effective_to": "",
            "entries-TOTAL_FORMS": "0",
            "entries-INITIAL_FORMS": "0",
            "entries-MIN_NUM_FORMS": "0",
            "entries-MAX_NUM_FORMS": "1000",
        },
    )
    assert response.status_code == 302, response.content[:800]
    card = RateCard.objects.get(name="2027")
    assert card.effective_from == date(2027, 1, 1)
    event = AuditEvent.objects.get(action="ratecard.created", object_id=str(card.pk))
    assert event.before is None
    assert event.after["name"] == "2027" and event.after["entries"] == []


def test_usage_records_cannot_be_added_or_changed_in_the_admin(superuser_page):
    assert superuser_page.get("/admin/billing/usagerecord/add/").status_code == 403
    assert UsageRecord.objects.count() == 0
