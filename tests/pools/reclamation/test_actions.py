"""exemption_grant / exemption_revoke / idle_finding_reclaim_now (reclamation_support's world:
2 L40S of team nlp in pool infer, quota 2 on the fake Kubernetes, an open finding warned an
hour ago, so the 24 h grace and the 15 min cooldown are both still running)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from reclamation_support import fake_k8s, reclamation_world  # noqa: F401  (fixture)

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus, IdleFindingState
from pools.common.errors import InvalidInput, InvalidTransition, PermissionDenied
from pools.reclamation.models import Exemption, IdleFinding, ReclamationPolicy
from pools.reclamation.services.actions import (
    exemption_grant,
    exemption_revoke,
    idle_finding_reclaim_now,
)
from pools.reclamation.services.scan import reclamation_undo

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_user("admin", is_staff=True)


@pytest.fixture
def world(fake_k8s, django_user_model, django_capture_on_commit_callbacks):  # noqa: F811
    return reclamation_world(fake_k8s, django_user_model, django_capture_on_commit_callbacks)


@pytest.fixture
def world_one_in_use(fake_k8s, django_user_model, django_capture_on_commit_callbacks):  # noqa: F811
    return reclamation_world(
        fake_k8s, django_user_model, django_capture_on_commit_callbacks, in_use=1
    )


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("action", flat=True))


# exemption_grant


def test_grant_exempts_a_team_and_is_audited(world, admin):
    expires = timezone.now() + timedelta(days=3)
    exemption = exemption_grant(
        actor=admin, reason="  paper deadline ", expires_at=expires, team=world["team"]
    )
    exemption.refresh_from_db()
    assert (exemption.team_id, exemption.allocation_id) == (world["team"].pk, None)
    assert (exemption.reason, exemption.expires_at, exemption.created_by) == (
        "paper deadline",
        expires,
        admin,
    )
    event = AuditEvent.objects.get(action="exemption.granted")
    assert event.actor == admin and event.reason == "paper deadline"
    assert event.after["team"] == world["team"].pk


def test_grant_exempts_an_allocation(world, admin):
    exemption = exemption_grant(
        actor=admin,
        reason="benchmark",
        expires_at=timezone.now() + timedelta(days=365) - timedelta(minutes=1),
        allocation=world["allocation"],
    )
    assert (exemption.team_id, exemption.allocation_id) == (None, world["allocation"].pk)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"reason": "", "days": 1}, "reason"),
        ({"reason": "   ", "days": 1}, "reason"),
        ({"reason": "x" * 1001, "days": 1}, "reason"),
        ({"reason": "ok", "days": -1}, "expires_at"),
        ({"reason": "ok", "days": 366}, "expires_at"),
        ({"reason": "ok", "days": 1, "naive": True}, "expires_at"),
        ({"reason": "ok", "days": 1, "both": True}, "team"),
        ({"reason": "ok", "days": 1, "neither": True}, "team"),
    ],
)
def test_grant_refuses_bad_input_and_changes_nothing(world, admin, kwargs, field):
    expires = timezone.now() + timedelta(days=kwargs["days"])
    if kwargs.get("naive"):
        expires = expires.replace(tzinfo=None)
    subject = {"team": world["team"]}
    if kwargs.get("both"):
        subject["allocation"] = world["allocation"]
    if kwargs.get("neither"):
        subject = {}
    with pytest.raises(InvalidInput) as refused:
        exemption_grant(actor=admin, reason=kwargs["reason"], expires_at=expires, **subject)
    assert refused.value.data["field"] == field
    assert not Exemption.objects.exists()
    assert actions() == []


def test_grant_refused_for_a_member(world):
    with pytest.raises(PermissionDenied):
        exemption_grant(
            actor=world["alice"],
            reason="mine",
            expires_at=timezone.now() + timedelta(days=1),
            team=world["team"],
        )
    assert not Exemption.objects.exists()


# exemption_revoke


def test_revoke_ends_it_now_and_a_second_revoke_is_refused(world, admin):
    exemption = exemption_grant(
        actor=admin, reason="r", expires_at=timezone.now() + timedelta(days=2), team=world["team"]
    )
    before = timezone.now()
    exemption_revoke(exemption=exemption, actor=admin)
    exemption.refresh_from_db()
    assert before <= exemption.expires_at <= timezone.now()
    assert actions() == ["exemption.granted", "exemption.revoked"]
    with pytest.raises(InvalidTransition) as refused:
        exemption_revoke(exemption=exemption, actor=admin)
    assert refused.value.data["action"] == "revoke"
    assert actions() == ["exemption.granted", "exemption.revoked"]


def test_revoke_refused_for_a_member(world, admin):
    expires = timezone.now() + timedelta(days=2)
    exemption = exemption_grant(actor=admin, reason="r", expires_at=expires, team=world["team"])
    with pytest.raises(PermissionDenied):
        exemption_revoke(exemption=exemption, actor=world["alice"])
    exemption.refresh_from_db()
    assert exemption.expires_at == expires


# idle_finding_reclaim_now


def test_reclaim_now_ends_an_unused_allocation_and_lowers_the_quota(
    world, admin, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        finding = idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.RECLAIMED
    assert allocation.ends_at <= timezone.now()
    finding.refresh_from_db()
    assert (finding.state, finding.card_count, finding.cards_reclaimed, finding.cards_in_use) == (
        IdleFindingState.RECLAIMED,
        2,
        2,
        0,
    )
    assert finding.note.startswith("reclaimed now by admin") and finding.note.endswith("end it")
    assert world["k8s"].get_gpu_quota("nlp").cards == 0
    assert actions() == ["allocation.reclaimed", "idle_finding.reclaimed"]
    assert set(AuditEvent.objects.values_list("actor__username", flat=True)) == {"admin"}
    assert len(mail.outbox) == 1 and "2 card(s)" in mail.outbox[0].subject


def test_reclaim_now_leaves_the_e_mail_to_a_task(
    world, admin, monkeypatch, django_capture_on_commit_callbacks
):
    """Reclaim now is a request: it queues the team's e-mail (no mail server in the request)
    and the task sends it: one message, 2 cards reclaimed, to the team's one address."""
    from pools.jobs import IDLE_RECLAIMED_EMAIL
    from pools.reclamation import tasks
    from pools.reclamation.services import scan

    queued = []
    monkeypatch.setattr(scan, "enqueue_on_commit", lambda name, *args: queued.append((name, *args)))
    with django_capture_on_commit_callbacks(execute=True):
        finding = idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    assert mail.outbox == [] and queued[-1] == (IDLE_RECLAIMED_EMAIL, finding.pk)
    assert tasks.idle_reclaimed_email_task(finding.pk) == 1
    assert len(mail.outbox) == 1 and "2 card(s)" in mail.outbox[0].subject
    assert mail.outbox[0].to == ["alice@example.com"]
    assert tasks.idle_reclaimed_email_task(finding.pk + 10_000) == 0  # gone: nothing sent


def test_reclaim_now_shrinks_to_the_cards_in_use_and_can_be_undone(
    world_one_in_use, admin, django_capture_on_commit_callbacks
):
    world = world_one_in_use
    with django_capture_on_commit_callbacks(execute=True):
        finding = idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 1)
    assert (finding.cards_reclaimed, finding.cards_in_use) == (1, 1)
    assert finding.note.endswith("shrink it from 2 to 1 cards")
    assert world["k8s"].get_gpu_quota("nlp").cards == 1
    assert actions() == ["allocation.shrunk", "idle_finding.reclaimed"]

    with django_capture_on_commit_callbacks(execute=True):
        reclamation_undo(finding=finding, actor=admin)
    allocation.refresh_from_db()
    assert allocation.card_count == 2
    assert world["k8s"].get_gpu_quota("nlp").cards == 2


def test_reclaiming_a_finding_again_after_its_undo_says_so_in_plain_words(
    world_one_in_use, admin, django_capture_on_commit_callbacks
):
    """Reclaim, undo, reclaim again (a second click on a stale page): refused, and the message
    reads as a sentence for every state ("A undone finding cannot be reclaimed." before)."""
    with django_capture_on_commit_callbacks(execute=True):
        finding = idle_finding_reclaim_now(finding=world_one_in_use["finding"], actor=admin)
        reclamation_undo(finding=finding, actor=admin)

    with pytest.raises(InvalidTransition) as refused:
        idle_finding_reclaim_now(finding=finding, actor=admin)

    assert refused.value.message == (
        f"Only an open finding can be reclaimed; finding #{finding.pk} is undone."
    )
    assert refused.value.data["status"] == IdleFindingState.UNDONE


def assert_nothing_changed(world) -> None:
    finding = IdleFinding.objects.get(pk=world["finding"].pk)
    assert (finding.state, finding.cards_reclaimed, finding.reclaimed_at) == ("open", 0, None)
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 2)
    assert world["k8s"].get_gpu_quota("nlp").cards == 2
    assert not AuditEvent.objects.filter(action__startswith="idle_finding").exists()
    assert not AuditEvent.objects.filter(action__startswith="allocation").exists()


@pytest.mark.parametrize("subject", ["team", "allocation"])
def test_reclaim_now_refused_while_exempt(world, admin, subject):
    exemption_grant(
        actor=admin,
        reason="paper deadline",
        expires_at=timezone.now() + timedelta(days=2),
        **{subject: world[subject]},
    )
    with pytest.raises(InvalidTransition) as refused:
        idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    assert f"The {subject} is exempt until" in refused.value.message
    assert "paper deadline" in refused.value.message
    assert refused.value.data["exemption"] == Exemption.objects.get().pk
    assert_nothing_changed(world)


def test_reclaim_now_allowed_once_the_exemption_is_revoked(
    world, admin, django_capture_on_commit_callbacks
):
    exemption = exemption_grant(
        actor=admin, reason="r", expires_at=timezone.now() + timedelta(days=2), team=world["team"]
    )
    exemption_revoke(exemption=exemption, actor=admin)
    with django_capture_on_commit_callbacks(execute=True):
        finding = idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    assert finding.state == IdleFindingState.RECLAIMED


def test_reclaim_now_refused_under_a_dry_run_policy(world, admin):
    ReclamationPolicy.objects.filter(pk=world["policy"].pk).update(dry_run=True)
    with pytest.raises(InvalidTransition) as refused:
        idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    assert "switch off dry run first" in refused.value.message
    assert_nothing_changed(world)


def test_reclaim_now_refused_for_a_dry_run_finding_under_a_live_policy(world, admin):
    IdleFinding.objects.filter(pk=world["finding"].pk).update(dry_run=True)
    with pytest.raises(InvalidTransition) as refused:
        idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    assert "switch off dry run first" in refused.value.message
    assert refused.value.data["dry_run"] is True


def test_reclaim_now_refused_for_a_member(world):
    with pytest.raises(PermissionDenied):
        idle_finding_reclaim_now(finding=world["finding"], actor=world["alice"])
    assert_nothing_changed(world)


@pytest.mark.parametrize("state", ["dismissed", "resolved"])
def test_reclaim_now_refused_for_a_closed_finding(world, admin, state):
    IdleFinding.objects.filter(pk=world["finding"].pk).update(state=state)
    with pytest.raises(InvalidTransition) as refused:
        idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    assert refused.value.data == {"status": state, "action": "reclaim_now"}
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 2)


def test_reclaim_now_refused_when_the_allocation_ended(world, admin):
    Allocation.objects.filter(pk=world["allocation"].pk).update(status=AllocationStatus.ENDED)
    with pytest.raises(InvalidTransition) as refused:
        idle_finding_reclaim_now(finding=world["finding"], actor=admin)
    assert refused.value.data["allocation_status"] == "ended"
    assert IdleFinding.objects.get().state == IdleFindingState.OPEN
    assert actions() == []
