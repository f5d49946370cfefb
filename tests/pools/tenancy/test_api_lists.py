"""Every list of the API router, read by a member of team ``alpha`` and by a manager of team
``bravo``: no row of the other team appears, not even through a filter naming it, while a pool
admin's list of the same endpoint does hold it (so the check cannot pass on an empty list).

Each team owns one row of every team-owned model (:func:`_team_rows`); a row of the other team
is recognised by its ``id`` (the table :data:`TEAM_OWNED` says which row each endpoint lists)
and by the other team's slug, name and cost centre anywhere in the body. Endpoints listing no
team's rows (the inventory, the pools) are named in :data:`NOT_TEAM_OWNED` with why; a new
router entry in neither table fails :func:`test_every_list_endpoint_is_in_a_table`.
"""

from __future__ import annotations

import pytest
from factories import (
    AdvisorFindingFactory,
    AgentTaskFactory,
    AllocationFactory,
    AuditEventFactory,
    BudgetFactory,
    BurstOptInFactory,
    CapacityRequestFactory,
    ElasticPolicyFactory,
    ExemptionFactory,
    IdleFindingFactory,
    MembershipFactory,
    PendingWorkFactory,
    RecurringReservationFactory,
    ScaleEventFactory,
    ServingRollupFactory,
    SizingEstimateFactory,
    StatementFactory,
    StatementLineFactory,
    TeamFactory,
    TemporaryOverrideFactory,
    UserFactory,
)
from rest_framework.test import APIClient

from pools.common.choices import AllocationStatus, TeamRole
from portal.urls import router

pytestmark = pytest.mark.django_db

#: Router prefix -> the key of :func:`_team_rows` whose row the list shows, and the field of a
#: result that holds that row's id.
TEAM_OWNED = {
    "teams": ("team", "slug"),
    "requests": ("request", "id"),
    "allocations": ("allocation", "id"),
    "recurring-reservations": ("recurring", "id"),
    "overrides": ("override", "id"),
    "audit-events": ("audit", "id"),
    "estimates": ("estimate", "id"),
    "idle-findings": ("idle_finding", "id"),
    "exemptions": ("exemption", "id"),
    "elastic-policies": ("policy", "id"),
    "scale-events": ("scale_event", "id"),
    "burst-opt-ins": ("burst", "id"),
    "serving": ("allocation", "allocation"),
    "advisor/findings": ("advisor", "id"),
    "statements": ("statement", "id"),
    "budgets": ("budget", "id"),
    "pending-work": ("pending", "id"),
    "token-flow/tasks": ("task", "id"),
}

#: Router prefixes whose lists hold no team's rows (still checked for the other team's names).
NOT_TEAM_OWNED = {
    "gpu-models": "the catalogue",
    "driver-groups": "the inventory",
    "pools": "the inventory",
    "clusters": "the inventory",
    "nodes": "the inventory",
    "gpus": "the inventory",
    "inventory/imports": "pool admins only (403 to everyone else)",
    "reclamation-policies": "one per pool",
    "maintenance-windows": "one per pool, driver group or node list",
}


def _list_prefixes() -> list[str]:
    return [prefix for prefix, viewset, _ in router.registry if hasattr(viewset, "list")]


def _team_rows(team, user) -> dict:
    """One row of each team-owned model for ``team`` (``user`` its member), by key."""
    allocation = AllocationFactory(team=team, status=AllocationStatus.ACTIVE, card_count=2)
    request = CapacityRequestFactory(team=team, requested_by=user)
    policy = ElasticPolicyFactory(allocation=allocation)
    ServingRollupFactory(allocation=allocation)
    return {
        "team": team,
        "allocation": allocation,
        "request": request,
        "policy": policy,
        "scale_event": ScaleEventFactory(policy=policy),
        "idle_finding": IdleFindingFactory(allocation=allocation),
        "exemption": ExemptionFactory(team=team),
        "burst": BurstOptInFactory(team=team),
        "advisor": AdvisorFindingFactory(allocation=allocation),
        "statement": StatementLineFactory(statement=StatementFactory(team=team)).statement,
        "budget": BudgetFactory(team=team),
        "pending": PendingWorkFactory(team=team),
        "task": AgentTaskFactory(team=team),
        "recurring": RecurringReservationFactory(team=team, created_by=user),
        "override": TemporaryOverrideFactory(team=team),
        "estimate": SizingEstimateFactory(team=team, created_by=user),
        "audit": AuditEventFactory(object_type="pools.capacityrequest", object_id=str(request.pk)),
    }


@pytest.fixture(scope="module")
def world(django_db_blocker, django_db_setup):
    """alice (member of alpha), bob (manager of bravo), a pool admin; each team's rows. Made
    once for the module inside a transaction rolled back at its end."""
    from django.db import transaction

    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        alpha = TeamFactory(slug="alpha", name="Alpha Lab", cost_centre="CC-ALPHA")
        bravo = TeamFactory(slug="bravo", name="Bravo Lab", cost_centre="CC-BRAVO")
        alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
        MembershipFactory(team=alpha, user=alice)
        MembershipFactory(team=bravo, user=bob, role=TeamRole.MANAGER)
        yield {
            "alice": (alice, _team_rows(alpha, alice), None),
            "bob": (bob, None, _team_rows(bravo, bob)),
            "admin": UserFactory(username="admin", is_staff=True),
        }
        transaction.set_rollback(True)
        atomic.__exit__(None, None, None)


def _get(user, url: str, query: dict | None = None):
    client = APIClient()
    client.force_authenticate(user)
    return client.get(url, query or {})


def _ids(response, field: str) -> set:
    body = response.json()
    rows = body["results"] if isinstance(body, dict) and "results" in body else body
    return {row[field] for row in rows}


def test_every_list_endpoint_is_in_a_table():
    assert sorted(_list_prefixes()) == sorted([*TEAM_OWNED, *NOT_TEAM_OWNED])


@pytest.mark.parametrize("attacker, victim", [("alice", "bravo"), ("bob", "alpha")])
@pytest.mark.parametrize("prefix", _list_prefixes())
def test_a_list_holds_no_row_of_another_team(world, db, prefix, attacker, victim):
    user = world[attacker][0]
    alice_rows, bravo_rows = world["alice"][1], world["bob"][2]
    theirs = bravo_rows if victim == "bravo" else alice_rows
    team = theirs["team"]
    names = (team.slug, team.name, team.cost_centre)
    url = f"/api/v1/{prefix}/"

    plain = _get(user, url)
    # The other team named in the filters a list may have: refused or empty, never its rows.
    filtered = _get(user, url, {"team": team.slug, "cost_centre": team.cost_centre})

    assert plain.status_code == (403 if prefix == "inventory/imports" else 200)
    for response in (plain, filtered):
        body = response.content.decode()
        assert not [name for name in names if name in body], (prefix, response.status_code)
    if prefix in TEAM_OWNED:
        key, field = TEAM_OWNED[prefix]
        row = getattr(theirs[key], field) if field == "slug" else theirs[key].pk
        assert row in _ids(_get(world["admin"], url), field)  # the row is there to be seen
        assert row not in _ids(plain, field)
        if filtered.status_code == 200:
            assert row not in _ids(filtered, field)
        else:
            assert filtered.status_code == 400 and list(filtered.json()["errors"]) == ["team"]


@pytest.mark.parametrize("prefix", _list_prefixes())
def test_an_anonymous_caller_reads_no_list(db, prefix):
    assert APIClient().get(f"/api/v1/{prefix}/").status_code == 401
