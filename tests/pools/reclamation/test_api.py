"""/api/v1/ idle-findings, reclamation-policies and exemptions (reclamation_support's world:
team nlp's 2 L40S in pool infer, quota 2 on the fake Kubernetes, live policy, an open finding
with no card in use; plus team vision's open finding in the same pool, under a dry run).

Roles: anonymous; alice, nlp's manager; ``member`` (conftest), in no team; root-admin, a pool
admin. Another team's finding is 404 for a member, exactly as a missing one.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import AllocationFactory, TeamFactory
from reclamation_support import fake_k8s, reclamation_world  # noqa: F401  (fixture)
from rest_framework.test import APIClient

from pools.audit.models import AuditEvent
from pools.common.choices import AllocationStatus, IdleFindingState
from pools.inventory.models import Pool
from pools.reclamation.models import Exemption, IdleFinding, ReclamationPolicy

pytestmark = pytest.mark.django_db

FINDINGS = "/api/v1/idle-findings/"
POLICIES = "/api/v1/reclamation-policies/"
EXEMPTIONS = "/api/v1/exemptions/"


@pytest.fixture
def world(fake_k8s, django_user_model, django_capture_on_commit_callbacks):  # noqa: F811
    world = reclamation_world(fake_k8s, django_user_model, django_capture_on_commit_callbacks)
    vision = TeamFactory(slug="vision")
    other = AllocationFactory(
        team=vision,
        pool=world["pool"],
        gpu_model=world["l40s"],
        card_count=1,
        status=AllocationStatus.ACTIVE,
        starts_at=world["now"] - timedelta(days=1),
        ends_at=world["now"] + timedelta(days=1),
    )
    world["other_finding"] = IdleFinding.objects.create(
        allocation=other,
        first_seen_at=world["now"] - timedelta(hours=3),
        last_seen_at=world["now"] - timedelta(hours=2),
        dry_run=True,
        mean_util_pct=Decimal("4.00"),
        card_count=1,
        cards_in_use=0,
    )
    world["vision"] = vision
    return world


@pytest.fixture
def alice_api(world):
    client = APIClient()
    client.force_authenticate(world["alice"])
    return client


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def nothing_changed(world) -> None:
    finding = IdleFinding.objects.get(pk=world["finding"].pk)
    assert (finding.state, finding.cards_reclaimed) == (IdleFindingState.OPEN, 0)
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 2)
    assert world["k8s"].get_gpu_quota("nlp").cards == 2
    assert not AuditEvent.objects.exists()
    assert not Exemption.objects.exists()


# idle-findings: reading


def test_anonymous_is_refused_everywhere(world):
    client = APIClient()
    for url in (FINDINGS, POLICIES, EXEMPTIONS, f"{FINDINGS}{world['finding'].pk}/"):
        assert client.get(url).status_code == 401
    assert client.post(f"{FINDINGS}{world['finding'].pk}/reclaim-now/").status_code == 401
    nothing_changed(world)


def test_a_member_sees_their_teams_findings_only(world, alice_api, member_api, admin_api):
    mine, other = world["finding"].pk, world["other_finding"].pk
    assert ids(alice_api.get(FINDINGS)) == [mine]
    assert ids(member_api.get(FINDINGS)) == []
    assert ids(admin_api.get(FINDINGS)) == [mine, other]  # newest last_seen first
    assert alice_api.get(f"{FINDINGS}{other}/").status_code == 404
    assert alice_api.get(f"{FINDINGS}999999/").status_code == 404
    row = alice_api.get(f"{FINDINGS}{mine}/").json()
    assert row["team"] == "nlp" and row["pool"] == "infer" and row["gpu_model"] == "l40s"
    assert (row["state"], row["card_count"], row["cards_in_use"], row["mean_util_pct"]) == (
        "open",
        2,
        0,
        "1.50",
    )


def test_findings_filters_and_ordering(world, admin_api):
    mine, other = world["finding"].pk, world["other_finding"].pk
    assert ids(admin_api.get(FINDINGS, {"team": "vision"})) == [other]
    assert ids(admin_api.get(FINDINGS, {"pool": "infer"})) == [mine, other]
    assert ids(admin_api.get(FINDINGS, {"pool": "nowhere"})) == []
    assert ids(admin_api.get(FINDINGS, {"dry_run": "true"})) == [other]
    assert ids(admin_api.get(FINDINGS, {"dry_run": "false"})) == [mine]
    assert ids(admin_api.get(FINDINGS, {"state": "dismissed"})) == []
    assert ids(admin_api.get(FINDINGS, {"state": ["open", "dismissed"]})) == [mine, other]
    assert ids(admin_api.get(FINDINGS, {"ordering": "mean_util"})) == [mine, other]
    assert ids(admin_api.get(FINDINGS, {"ordering": "-mean_util"})) == [other, mine]
    page = admin_api.get(FINDINGS, {"page_size": 1}).json()
    assert page["count"] == 2 and len(page["results"]) == 1 and page["next"]
    bad = admin_api.get(FINDINGS, {"state": "sleepy"})
    assert bad.status_code == 400 and "state" in bad.json()["errors"]


# idle-findings: actions


def test_reclaim_now_by_an_admin(world, admin_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_api.post(f"{FINDINGS}{world['finding'].pk}/reclaim-now/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["state"], body["cards_reclaimed"], body["cards_in_use"]) == ("reclaimed", 2, 0)
    world["allocation"].refresh_from_db()
    assert world["allocation"].status == AllocationStatus.RECLAIMED
    assert world["k8s"].get_gpu_quota("nlp").cards == 0

    with django_capture_on_commit_callbacks(execute=True):
        undone = admin_api.post(f"{FINDINGS}{world['finding'].pk}/undo/")
    assert undone.status_code == 200 and undone.json()["state"] == "undone"
    world["allocation"].refresh_from_db()
    assert (world["allocation"].status, world["allocation"].card_count) == ("active", 2)
    assert world["k8s"].get_gpu_quota("nlp").cards == 2


def test_reclaim_now_refusals(world, admin_api, alice_api):
    url = f"{FINDINGS}{world['finding'].pk}/reclaim-now/"
    denied = alice_api.post(url)
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    dry = admin_api.post(f"{FINDINGS}{world['other_finding'].pk}/reclaim-now/")
    assert dry.status_code == 409
    assert dry.json()["code"] == "invalid_transition"
    assert "switch off dry run first" in dry.json()["detail"]
    assert alice_api.post(f"{FINDINGS}{world['other_finding'].pk}/reclaim-now/").status_code == 404
    nothing_changed(world)


def test_dismiss(world, admin_api, alice_api):
    url = f"{FINDINGS}{world['finding'].pk}/dismiss/"
    assert alice_api.post(url, {"reason": "x"}).status_code == 403
    missing = admin_api.post(url, {}, format="json")
    assert missing.status_code == 400
    assert missing.json()["code"] == "invalid_input" and "reason" in missing.json()["errors"]
    nothing_changed(world)
    done = admin_api.post(url, {"reason": "known batch gap"}, format="json")
    assert done.status_code == 200
    assert (done.json()["state"], done.json()["note"]) == ("dismissed", "known batch gap")
    again = admin_api.post(url, {"reason": "again"}, format="json")
    assert again.status_code == 409 and again.json()["data"] == {
        "status": "dismissed",
        "action": "dismiss",
    }


def test_undo_of_an_open_finding_is_409(world, admin_api):
    response = admin_api.post(f"{FINDINGS}{world['finding'].pk}/undo/")
    assert response.status_code == 409 and response.json()["data"]["action"] == "undo"
    nothing_changed(world)


def test_exempt_the_findings_allocation(world, admin_api, alice_api):
    url = f"{FINDINGS}{world['finding'].pk}/exempt/"
    expires = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    body = {"reason": "demo on Friday", "expires_at": expires.isoformat()}
    assert alice_api.post(url, body, format="json").status_code == 403
    response = admin_api.post(url, body, format="json")
    assert response.status_code == 201, response.content
    exemption = Exemption.objects.get()
    assert (exemption.allocation_id, exemption.team_id, exemption.expires_at) == (
        world["allocation"].pk,
        None,
        expires,
    )
    assert response.json()["allocation"] == world["allocation"].pk
    refused = admin_api.post(f"{FINDINGS}{world['finding'].pk}/reclaim-now/")
    assert refused.status_code == 409 and "allocation is exempt" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": "r", "expires_at": "2030-01-01T00:00:00"}, "expires_at"),  # naive
        ({"reason": "", "expires_at": "2030-01-01T00:00:00Z"}, "reason"),
        ({"reason": "x" * 1001, "expires_at": "2030-01-01T00:00:00Z"}, "reason"),
        ({"reason": "r", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),  # past
        ({"reason": "r", "expires_at": "2099-01-01T00:00:00Z"}, "expires_at"),  # > 365 days
    ],
)
def test_exempt_bad_bodies_are_400_and_change_nothing(world, admin_api, body, field):
    response = admin_api.post(f"{FINDINGS}{world['finding'].pk}/exempt/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_input"
    assert field in response.json()["errors"]
    nothing_changed(world)


# reclamation-policies


def test_policies_read_by_members_written_by_admins(world, alice_api, admin_api):
    listed = alice_api.get(POLICIES)
    assert listed.status_code == 200
    assert [row["pool"] for row in listed.json()["results"]] == ["infer"]
    one = alice_api.get(f"{POLICIES}infer/").json()
    assert (one["window_minutes"], one["grace_hours"], one["dry_run"]) == (30, 24, False)
    assert alice_api.patch(f"{POLICIES}infer/", {"grace_hours": 1}).status_code == 403
    assert alice_api.post(POLICIES, {"pool": "infer"}).status_code == 403
    assert ReclamationPolicy.objects.get().grace_hours == 24

    patched = admin_api.patch(f"{POLICIES}infer/", {"grace_hours": 2, "dry_run": True})
    assert patched.status_code == 200, patched.content
    policy = ReclamationPolicy.objects.get()
    assert (policy.grace_hours, policy.dry_run, policy.window_minutes) == (2, True, 30)
    event = AuditEvent.objects.get(action="reclamation_policy.saved")
    assert event.before["grace_hours"] == "24" and event.after["grace_hours"] == "2"
    assert event.actor.username == "root-admin"
    assert alice_api.get(f"{POLICIES}nowhere/").status_code == 404


def test_policy_create_for_a_pool_without_one(world, admin_api):
    Pool.objects.create(slug="train", name="Train", scheduler="kubernetes")
    response = admin_api.post(
        POLICIES, {"pool": "train", "window_minutes": 60, "dry_run": False}, format="json"
    )
    assert response.status_code == 201, response.content
    policy = ReclamationPolicy.objects.get(pool__slug="train")
    assert (policy.window_minutes, policy.dry_run, policy.grace_hours) == (60, False, 24)
    event = AuditEvent.objects.get(action="reclamation_policy.saved")
    assert event.before is None and event.after["window_minutes"] == "60"
    again = admin_api.post(POLICIES, {"pool": "train"}, format="json")
    assert again.status_code == 400 and "pool" in again.json()["errors"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"window_minutes": 2000}, "window_minutes"),
        ({"window_minutes": 1}, "window_minutes"),
        ({"idle_below_pct": "150"}, "idle_below_pct"),
        ({"min_coverage": "0"}, "min_coverage"),
        ({"certainly_idle_below_pct": "40"}, "non_field_errors"),  # above idle (30)
    ],
)
def test_policy_bad_values_are_400_and_change_nothing(world, admin_api, body, field):
    response = admin_api.patch(f"{POLICIES}infer/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()
    policy = ReclamationPolicy.objects.get()
    assert (policy.window_minutes, policy.idle_below_pct, policy.certainly_idle_below_pct) == (
        30,
        Decimal("30.00"),
        Decimal("5.00"),
    )
    assert not AuditEvent.objects.exists()


# exemptions


def test_exemptions_create_list_and_revoke(world, admin_api, alice_api, member_api):
    expires = (timezone.now() + timedelta(days=3)).replace(microsecond=0)
    body = {"team": "nlp", "reason": "paper deadline", "expires_at": expires.isoformat()}
    assert alice_api.post(EXEMPTIONS, body, format="json").status_code == 403
    created = admin_api.post(EXEMPTIONS, body, format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    assert created.json()["team"] == "nlp" and created.json()["created_by"] == "root-admin"
    assert ids(alice_api.get(EXEMPTIONS)) == [pk]
    assert ids(member_api.get(EXEMPTIONS)) == []
    assert alice_api.delete(f"{EXEMPTIONS}{pk}/").status_code == 403

    assert admin_api.delete(f"{EXEMPTIONS}{pk}/").status_code == 204
    assert Exemption.objects.get().expires_at <= timezone.now()
    assert ids(admin_api.get(EXEMPTIONS)) == []
    assert ids(admin_api.get(EXEMPTIONS, {"all": "1"})) == [pk]
    again = admin_api.delete(f"{EXEMPTIONS}{pk}/")
    assert again.status_code == 409 and again.json()["code"] == "invalid_transition"
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "exemption.granted",
        "exemption.revoked",
    ]


def test_exemption_of_both_team_and_allocation_is_400(world, admin_api):
    body = {
        "team": "nlp",
        "allocation": world["allocation"].pk,
        "reason": "r",
        "expires_at": (timezone.now() + timedelta(days=1)).isoformat(),
    }
    response = admin_api.post(EXEMPTIONS, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input" and "team" in response.json()["errors"]
    nothing_changed(world)


def test_another_teams_exemption_is_invisible_to_a_member(world, admin_api, alice_api):
    expires = (timezone.now() + timedelta(days=3)).isoformat()
    created = admin_api.post(
        EXEMPTIONS, {"team": "vision", "reason": "r", "expires_at": expires}, format="json"
    )
    pk = created.json()["id"]
    assert ids(alice_api.get(EXEMPTIONS)) == []
    assert alice_api.get(f"{EXEMPTIONS}{pk}/").status_code == 404
    assert alice_api.delete(f"{EXEMPTIONS}{pk}/").status_code == 404


def test_dismiss_checks_permission_before_the_body(world, alice_api):
    """A member may not dismiss: a 403 whatever the body, never a 400 telling them what a valid
    one looks like (issue 27, item 10)."""
    url = f"{FINDINGS}{world['finding'].pk}/dismiss/"
    assert alice_api.post(url, {}, format="json").status_code == 403
    nothing_changed(world)
