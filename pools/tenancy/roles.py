"""The roles (DESIGN.md, *Who uses it*): a **pool admin** is a Django staff user and may see and
do everything; in a team a user is a **member** or a **manager**
(:class:`pools.common.choices.TeamRole`, one :class:`~pools.tenancy.models.Membership` per team and
user). Anonymous users hold none.

The one place that reads ``is_staff``; the rules built on it are :mod:`pools.tenancy.permissions`.
"""

from __future__ import annotations

from typing import Any

#: The user fields that make a pool admin (staff) and a Django superuser; changed only through
#: :func:`pools.access.services.user_rights_set` (audited).
RIGHTS = ("is_staff", "is_superuser")


def is_pool_admin(user: Any) -> bool:
    """A signed-in pool admin (Django staff)."""
    return bool(getattr(user, "is_authenticated", False) and getattr(user, "is_staff", False))


def sees_every_team(user: Any) -> bool:
    """Pool admins see every team's rows; everyone else their own teams' only."""
    return is_pool_admin(user)
