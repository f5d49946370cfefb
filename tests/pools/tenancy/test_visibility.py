"""``visible_to(user)`` on every team-owned model: a pool admin sees both teams' rows, a member
of ``nlp`` only nlp's, a user in no team and an anonymous user none; in one query each (the
memberships are a subquery, not a list read first)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from factories import (
    AllocationFactory,
    AuditEventFactory,
    CapacityRequestFactory,
    ElasticPolicyFactory,
    ExemptionFactory,
    IdleFindingFactory,
    MembershipFactory,
    ScaleEventFactory,
    SignalReadingFactory,
    SizingEstimateFactory,
    StatementFactory,
    StatementLineFactory,
    TeamFactory,
    UsageRecordFactory,
    UserFactory,
)

from billing.models import Statement, StatementLine, UsageRecord
from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation, CapacityRequest
from pools.elastic.models import ElasticPolicy, ScaleEvent, SignalReading
from pools.reclamation.models import Exemption, IdleFinding
from pools.sizing.models import SizingEstimate
from pools.tenancy.models import Team

pytestmark = pytest.mark.django_db


def _one_row_per_team(model, nlp, vision):
    """One row of ``model`` owned by each team: ``{team slug: pk}``."""
    make = {
        Team: lambda team: team,
        CapacityRequest: lambda team: CapacityRequestFactory(team=team),
        Allocation: lambda team: AllocationFactory(team=team),
        IdleFinding: lambda team: IdleFindingFactory(allocation__team=team),
        ElasticPolicy: lambda team: ElasticPolicyFactory(allocation__team=team),
        ScaleEvent: lambda team: ScaleEventFactory(policy__allocation__team=team),
        SignalReading: lambda team: SignalReadingFactory(policy__allocation__team=team),
        UsageRecord: lambda team: UsageRecordFactory(team=team),
        Statement: lambda team: StatementFactory(team=team),
        StatementLine: lambda team: StatementLineFactory(statement__team=team),
        SizingEstimate: lambda team: SizingEstimateFactory(team=team),
    }[model]
    return {team.slug: make(team).pk for team in (nlp, vision)}


@pytest.fixture
def teams():
    return TeamFactory(slug="nlp"), TeamFactory(slug="vision")


@pytest.fixture
def users(teams):
    nlp, _ = teams
    alice = UserFactory(username="alice")
    MembershipFactory(team=nlp, user=alice)
    return {
        "admin": UserFactory(username="admin", is_staff=True),
        "alice": alice,
        "nobody": UserFactory(username="nobody"),
        "anonymous": AnonymousUser(),
    }


@pytest.mark.parametrize(
    "model",
    [
        Team,
        CapacityRequest,
        Allocation,
        IdleFinding,
        ElasticPolicy,
        ScaleEvent,
        SignalReading,
        UsageRecord,
        Statement,
        StatementLine,
        SizingEstimate,
    ],
)
def test_each_team_owned_model_shows_a_member_their_teams_rows_only(
    model, teams, users, django_assert_num_queries
):
    rows = _one_row_per_team(model, *teams)
    seen = {}
    for name, user in users.items():
        with django_assert_num_queries(0 if name == "anonymous" else 1):
            seen[name] = set(model.objects.visible_to(user).values_list("pk", flat=True))
    assert seen == {
        "admin": {rows["nlp"], rows["vision"]},
        "alice": {rows["nlp"]},
        "nobody": set(),
        "anonymous": set(),
    }


def test_an_exemption_is_seen_through_its_team_or_its_allocations_team(teams, users):
    nlp, vision = teams
    by_team = ExemptionFactory(team=nlp)
    by_allocation = ExemptionFactory(team=None, allocation=AllocationFactory(team=nlp))
    ExemptionFactory(team=vision)
    ExemptionFactory(team=None, allocation=AllocationFactory(team=vision))
    seen = set(Exemption.objects.visible_to(users["alice"]).values_list("pk", flat=True))
    assert seen == {by_team.pk, by_allocation.pk}
    assert Exemption.objects.visible_to(users["admin"]).count() == 4


def test_an_estimate_is_seen_by_whoever_made_it_shared_or_not(teams, users):
    own = SizingEstimateFactory(created_by=users["nobody"], team=None)
    SizingEstimateFactory(team=None)  # someone else's, unshared
    seen = set(SizingEstimate.objects.visible_to(users["nobody"]).values_list("pk", flat=True))
    assert seen == {own.pk}


def test_audit_events_of_a_teams_requests_and_allocations_only(teams, users):
    nlp, vision = teams
    mine, theirs = AllocationFactory(team=nlp), AllocationFactory(team=vision)

    def event(obj):
        return AuditEventFactory(
            object_type=obj._meta.label_lower, object_id=str(obj.pk), action="x"
        ).pk

    visible = {event(mine), event(mine.request)}
    hidden = {event(theirs), event(theirs.request), event(nlp)}  # a team's own row: admins'
    assert set(AuditEvent.objects.visible_to(users["alice"]).values_list("pk", flat=True)) == (
        visible
    )
    assert set(AuditEvent.objects.visible_to(users["admin"]).values_list("pk", flat=True)) == (
        visible | hidden
    )
    assert not AuditEvent.objects.visible_to(users["anonymous"]).exists()
