"""Idle findings and reclamation policy pages: scoping, CSV, policy edit, dismiss."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, TeamFactory

from pools.choices import IdleFindingState, TeamRole
from pools.models import AuditEvent, IdleFinding, Membership, ReclamationPolicy

pytestmark = pytest.mark.django_db


@pytest.fixture
def findings(member):
    mine = TeamFactory(slug="nlp", name="NLP")
    Membership.objects.create(team=mine, user=member, role=TeamRole.MEMBER)
    other = TeamFactory(slug="vision", name="Vision")
    now = timezone.now()

    def finding(team, cards, in_use):
        allocation = AllocationFactory(
            team=team,
            card_count=cards,
            status="active",
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=6),
        )
        return IdleFinding.objects.create(
            allocation=allocation,
            state=IdleFindingState.OPEN,
            first_seen_at=now,
            last_seen_at=now,
            card_count=cards,
            cards_in_use=in_use,
            mean_util_pct=2,
            peak_util_pct=4,
        )

    return finding(mine, 4, 1), finding(other, 8, 0)


def test_a_member_sees_only_their_teams_findings(member_page, findings):
    mine, other = findings
    body = member_page.get("/idle/").content.decode()
    assert f"#{mine.allocation_id}<" in body
    assert f"#{other.allocation_id}<" not in body


def test_an_admin_sees_every_finding_and_exports_csv(admin_page, findings):
    response = admin_page.get("/idle/?export=csv")
    lines = b"".join(response.streaming_content).decode().strip().splitlines()
    assert response["Content-Type"].startswith("text/csv")
    assert lines[0].startswith("finding,allocation,team,pool,gpu_model,state")
    assert sorted(line.split(",")[2] for line in lines[1:]) == ["nlp", "vision"]


def test_dismiss_needs_a_reason_and_is_for_admins(admin_page, member_page, findings):
    mine, _ = findings
    assert member_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": "x"}).status_code == 403
    admin_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": ""})
    assert IdleFinding.objects.get(pk=mine.pk).state == IdleFindingState.OPEN
    admin_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": "waiting for a dataset"})
    assert IdleFinding.objects.get(pk=mine.pk).state == IdleFindingState.DISMISSED


def test_policy_edit_saves_with_an_audit_event_and_rejects_inconsistent_thresholds(
    admin_page, findings
):
    pool = findings[0].allocation.pool
    fields = {
        "kind": "policy",
        "pool_slug": pool.slug,
        "idle_below_pct": "25",
        "certainly_idle_below_pct": "5",
        "process_memory_max_mib": "64",
        "window_minutes": "45",
        "min_coverage": "0.9",
        "grace_hours": "12",
        "cooldown_minutes": "15",
    }
    bad = admin_page.post("/idle/policies/", {**fields, "certainly_idle_below_pct": "40"})
    assert bad.status_code == 200
    assert not ReclamationPolicy.objects.filter(pool=pool).exists()

    admin_page.post("/idle/policies/", fields)
    policy = ReclamationPolicy.objects.get(pool=pool)
    assert (policy.window_minutes, policy.grace_hours, policy.dry_run) == (45, 12, False)
    assert AuditEvent.objects.filter(action="reclamation_policy.saved").count() == 1


def test_policies_page_is_for_pool_admins(member_page):
    assert member_page.get("/idle/policies/").status_code == 403
