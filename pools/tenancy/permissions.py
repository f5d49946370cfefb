"""Who may do what: one named rule per action, over the roles of :mod:`pools.tenancy.roles`.

Every check of a role in the code is one of the ``may_*`` rules below (``True`` when allowed),
or a ``require_*`` that raises :class:`pools.common.errors.PermissionDenied` (403, code
``permission_denied``) with a message saying who may. Which rows a user may *see* is the
``visible_to(user)`` method of each team-owned model's queryset
(:class:`pools.tenancy.models.TeamOwnedQuerySet`).
"""

from __future__ import annotations

from typing import Any

from pools.common.choices import TeamRole
from pools.common.errors import PermissionDenied
from pools.tenancy.models import Membership, Team
from pools.tenancy.roles import is_pool_admin


def team_role(*, user: Any, team: Team) -> str | None:
    """The user's role in ``team`` (``"member"``/``"manager"``) or ``None``; one query."""
    if not getattr(user, "is_authenticated", False):
        return None
    return team.memberships.filter(user=user).values_list("role", flat=True).first()


def _in_team(user: Any, team: Team) -> bool:
    return is_pool_admin(user) or team_role(user=user, team=team) is not None


def _manages(user: Any, team: Team) -> bool:
    return is_pool_admin(user) or team_role(user=user, team=team) == TeamRole.MANAGER


# -- actions on a team's things -----------------------------------------------------------------


def may_see_team(user: Any, team: Team) -> bool:
    """See the team's pages (its dashboard, its month) and rows: members, managers, pool admins."""
    return _in_team(user, team)


def may_request(user: Any, team: Team) -> bool:
    """Ask for capacity for the team: create, submit or cancel one's own draft or submitted
    request, ask for more time on the team's allocation, share a sizing estimate with the
    team. Any member."""
    return _in_team(user, team)


def may_see_costs(user: Any, team: Team) -> bool:
    """Read the team's statements, spend and cost reports: any member."""
    return _in_team(user, team)


def may_release(user: Any, team: Team) -> bool:
    """End one of the team's allocations early, or cancel another member's request or an
    approved one (its cards go back, as in a release): managers."""
    return _manages(user, team)


def may_manage_elastic(user: Any, team: Team) -> bool:
    """Make the team's inference allocation elastic, or edit its policy: managers."""
    return _manages(user, team)


def may_link_estimate(user: Any, team: Team) -> bool:
    """Say what the team's allocation serves by linking one of its saved sizing estimates, so
    calibration compares with what the team sized: managers."""
    return _manages(user, team)


def may_reset_calendar_feed(user: Any, team: Team) -> bool:
    """Replace the team's secret calendar feed link with a new one (the old one stops working
    for every member's calendar app): managers."""
    return _manages(user, team)


def may_get_advisor_digest(user: Any) -> bool:
    """Opt in to the weekly e-mail digest of the advisor's findings of the teams one manages
    (:func:`pools.advisor.services.advisor_digest_send`): a manager of at least one team (a
    pool admin too only as a team's manager: the digest is of managed teams, not all)."""
    if not getattr(user, "is_authenticated", False):
        return False
    return Membership.objects.filter(user=user, role=TeamRole.MANAGER).exists()


# -- actions on the pool -----------------------------------------------------------------------


def may_decide(user: Any) -> bool:
    """Approve, reject or accept capacity requests: pool admins."""
    return is_pool_admin(user)


def may_see_all_holders(user: Any) -> bool:
    """See which teams and allocations hold a pool's cards, in an explanation of why a request
    cannot be approved (:mod:`pools.explain`): pool admins. Everyone else sees other teams'
    holdings as counts and end times only, never names, ids or costs."""
    return is_pool_admin(user)


def may_administer_pools(user: Any) -> bool:
    """Keep the inventory, pools, reclamation policies, findings and dashboards: pool admins."""
    return is_pool_admin(user)


def may_see_cluster_details(user: Any) -> bool:
    """See a cluster's connection (API URL, ClusterName, credential kind and file path), its
    last check's reason and API version, and its health (jobs' last runs, drifts, errors):
    pool admins. Everyone else sees name, kind, site / provider and ``ok`` / ``degraded``
    (:attr:`pools.clusters.models.Cluster.summary_status`): reasons and paths name hosts."""
    return is_pool_admin(user)


def may_see_all_costs(user: Any) -> bool:
    """Every team's statements and the finance reports: pool admins (and finance, as staff)."""
    return is_pool_admin(user)


def may_record_usage(user: Any) -> bool:
    """Post token usage (an inference gateway's account): pool admins and users granted
    ``billing.add_usagerecord``."""
    return is_pool_admin(user) or bool(user and user.has_perm("billing.add_usagerecord"))


# -- the same rules, raising ------------------------------------------------------------------


def require_member(user: Any, team: Team) -> None:
    """:func:`may_request`, else :class:`PermissionDenied` with ``team``."""
    if not may_request(user, team):
        raise PermissionDenied(f"You are not a member of team {team.slug}.", team=team.slug)


def require_manager(user: Any, team: Team) -> None:
    """:func:`may_release` (managers, pool admins), else :class:`PermissionDenied` with ``team``."""
    if not may_release(user, team):
        raise PermissionDenied(
            f"Only a manager of team {team.slug} or a pool admin may do this.", team=team.slug
        )


def require_pool_admin(user: Any, message: str) -> None:
    """:func:`is_pool_admin`, else :class:`PermissionDenied` with ``message``, which names the
    action refused (``"Only pool admins may plan maintenance."``): no default, so no caller
    can answer with another action's words."""
    if not is_pool_admin(user):
        raise PermissionDenied(message)
