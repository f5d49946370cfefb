"""``visible_to(user)`` on every team-owned model: a pool admin sees both teams' rows, a member
of ``nlp`` only nlp's, a user in no team and an anonymous user none; in one query each (the
memberships are a subquery, not a list read first)."""

from __future__ import annotations

import factories as f
import pytest
from django.apps import apps
from django.contrib.auth.models import AnonymousUser

from billing.budgets.models import Budget
from pools.audit.models import AuditEvent
from pools.reclamation.models import Exemption
from pools.sizing.models import SizingEstimate
from pools.tenancy.models import TeamOwnedQuerySet

pytestmark = pytest.mark.django_db

#: Every model whose rows belong to a team (its default manager's queryset is a
#: TeamOwnedQuerySet), found in the app registry: a new one fails until it is made below.
TEAM_OWNED = sorted(
    (m for m in apps.get_models() if isinstance(m._default_manager.all(), TeamOwnedQuerySet)),
    key=lambda m: m._meta.label,
)

#: model label -> how to make one of its rows for a team.
MAKE = {
    "pools.Team": lambda team: team,
    "pools.CapacityRequest": lambda team: f.CapacityRequestFactory(team=team),
    "pools.Allocation": lambda team: f.AllocationFactory(team=team),
    "pools.RecurringReservation": lambda team: f.RecurringReservationFactory(team=team),
    "pools.TemporaryOverride": lambda team: f.TemporaryOverrideFactory(team=team),
    "pools.AdvisorFinding": lambda team: f.AdvisorFindingFactory(allocation__team=team),
    "pools.ElasticPolicy": lambda team: f.ElasticPolicyFactory(allocation__team=team),
    "pools.ScaleEvent": lambda team: f.ScaleEventFactory(policy__allocation__team=team),
    "pools.SignalReading": lambda team: f.SignalReadingFactory(policy__allocation__team=team),
    "pools.ElasticWhatIf": lambda team: f.ElasticWhatIfFactory(policy__allocation__team=team),
    "pools.BurstOptIn": lambda team: f.BurstOptInFactory(team=team),
    "pools.Exemption": lambda team: f.ExemptionFactory(team=team),
    "pools.IdleFinding": lambda team: f.IdleFindingFactory(allocation__team=team),
    "pools.SizingEstimate": lambda team: f.SizingEstimateFactory(team=team),
    "pools.AgentCall": lambda team: f.AgentCallFactory(team=team),
    "pools.AgentTask": lambda team: f.AgentTaskFactory(team=team),
    "pools.AgentTaskDay": lambda team: f.AgentTaskDayFactory(team=team),
    "pools.PendingWork": lambda team: f.PendingWorkFactory(team=team),
    "billing.UsageRecord": lambda team: f.UsageRecordFactory(team=team),
    "billing.Statement": lambda team: f.StatementFactory(team=team),
    "billing.StatementLine": lambda team: f.StatementLineFactory(statement__team=team),
    "billing.SharedCardUse": lambda team: f.SharedCardUseFactory(team=team),
    "billing.Budget": lambda team: f.BudgetFactory(team=team),
}


def _one_row_per_team(model, nlp, vision):
    """One row of ``model`` owned by each team: ``{team slug: pk}``."""
    return {team.slug: MAKE[model._meta.label](team).pk for team in (nlp, vision)}


def test_every_team_owned_model_is_checked():
    assert sorted(MAKE) == [m._meta.label for m in TEAM_OWNED]


@pytest.fixture
def teams():
    return f.TeamFactory(slug="nlp"), f.TeamFactory(slug="vision")


@pytest.fixture
def users(teams):
    nlp, _ = teams
    alice = f.UserFactory(username="alice")
    f.MembershipFactory(team=nlp, user=alice)
    return {
        "admin": f.UserFactory(username="admin", is_staff=True),
        "alice": alice,
        "nobody": f.UserFactory(username="nobody"),
        "anonymous": AnonymousUser(),
    }


@pytest.mark.parametrize("model", TEAM_OWNED, ids=lambda m: m._meta.label)
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
    by_team = f.ExemptionFactory(team=nlp)
    by_allocation = f.ExemptionFactory(team=None, allocation=f.AllocationFactory(team=nlp))
    f.ExemptionFactory(team=vision)
    f.ExemptionFactory(team=None, allocation=f.AllocationFactory(team=vision))
    seen = set(Exemption.objects.visible_to(users["alice"]).values_list("pk", flat=True))
    assert seen == {by_team.pk, by_allocation.pk}
    assert Exemption.objects.visible_to(users["admin"]).count() == 4


def test_an_estimate_is_seen_by_whoever_made_it_shared_or_not(teams, users):
    own = f.SizingEstimateFactory(created_by=users["nobody"], team=None)
    f.SizingEstimateFactory(team=None)  # someone else's, unshared
    seen = set(SizingEstimate.objects.visible_to(users["nobody"]).values_list("pk", flat=True))
    assert seen == {own.pk}


def test_audit_events_of_a_teams_requests_and_allocations_only(teams, users):
    nlp, vision = teams
    mine, theirs = f.AllocationFactory(team=nlp), f.AllocationFactory(team=vision)

    def event(obj):
        return f.AuditEventFactory(
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


def test_a_cost_centres_budget_is_seen_by_its_teams_and_by_pool_admins(teams, users):
    # alice's team nlp is in cost centre CC-1; a budget of CC-1 (no team) is hers to see, a
    # budget of CC-2 is not, and one of a centre no team has (yet) is still a pool admin's.
    for team, centre in zip(teams, ("CC-1", "CC-2"), strict=True):
        team.cost_centre = centre
        team.save()
    ours = f.BudgetFactory(team=None, cost_centre="CC-1")
    theirs = f.BudgetFactory(team=None, cost_centre="CC-2")
    orphan = f.BudgetFactory(team=None, cost_centre="CC-9")

    def seen(user):
        return set(Budget.objects.visible_to(user).values_list("pk", flat=True))

    assert seen(users["alice"]) == {ours.pk}
    assert seen(users["admin"]) == {ours.pk, theirs.pk, orphan.pk}
    assert seen(users["nobody"]) == seen(users["anonymous"]) == set()
