"""The named rules of :mod:`pools.tenancy.permissions`, for each role (DESIGN.md, *Who uses
it*): a member asks and sees, a manager also releases, cancels for others and edits elastic
policies, a pool admin does everything, another team's member and an anonymous user nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Permission
from factories import MembershipFactory, TeamFactory, UserFactory

from pools.common.choices import TeamRole
from pools.common.errors import PermissionDenied
from pools.tenancy import permissions
from pools.tenancy.roles import is_pool_admin

pytestmark = pytest.mark.django_db

TEAM_RULES = ("may_see_team", "may_request", "may_see_costs", "may_release", "may_manage_elastic")
POOL_RULES = ("may_decide", "may_administer_pools", "may_see_all_costs", "may_record_usage")

# role -> the team rules it passes (of TEAM_RULES) and the pool rules (of POOL_RULES)
EXPECTED = {
    "member": ({"may_see_team", "may_request", "may_see_costs"}, set()),
    "manager": (set(TEAM_RULES), set()),
    "other team's manager": (set(), set()),
    "pool admin": (set(TEAM_RULES), set(POOL_RULES)),
    "anonymous": (set(), set()),
}


@pytest.fixture
def team():
    return TeamFactory(slug="nlp")


def _user(role: str, team):
    if role == "anonymous":
        return AnonymousUser()
    if role == "pool admin":
        return UserFactory(username="admin", is_staff=True)
    user = UserFactory(username=role.replace(" ", "-").replace("'", ""))
    if role == "other team's manager":
        MembershipFactory(team=TeamFactory(slug="vision"), user=user, role=TeamRole.MANAGER)
    else:
        MembershipFactory(team=team, user=user, role=role)
    return user


@pytest.mark.parametrize("role", list(EXPECTED))
def test_each_role_passes_exactly_its_rules(role, team):
    user = _user(role, team)
    team_rules, pool_rules = EXPECTED[role]
    assert {r for r in TEAM_RULES if getattr(permissions, r)(user, team)} == team_rules
    assert {r for r in POOL_RULES if getattr(permissions, r)(user)} == pool_rules
    assert is_pool_admin(user) == (role == "pool admin")


def test_a_gateway_account_granted_add_usagerecord_may_record_usage_and_nothing_else(team):
    gateway = UserFactory(username="gateway")
    gateway.user_permissions.add(Permission.objects.get(codename="add_usagerecord"))
    gateway = type(gateway).objects.get(pk=gateway.pk)  # permissions are cached per instance
    assert permissions.may_record_usage(gateway)
    assert not permissions.may_decide(gateway)
    assert not permissions.may_see_team(gateway, team)


def test_the_require_rules_raise_permission_denied_naming_the_team(team):
    member = _user("member", team)
    permissions.require_member(member, team)  # passes
    with pytest.raises(PermissionDenied) as refused:
        permissions.require_manager(member, team)
    assert refused.value.data == {"team": "nlp"}
    with pytest.raises(PermissionDenied, match="Only pool admins can undo"):
        permissions.require_pool_admin(member, "Only pool admins can undo a reclamation.")
    with pytest.raises(PermissionDenied) as refused:
        permissions.require_member(_user("other team's manager", team), team)
    assert str(refused.value) == "You are not a member of team nlp."
