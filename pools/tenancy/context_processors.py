"""What every page may ask about the signed-in user's role (templates never read ``is_staff``)."""

from __future__ import annotations

from pools.tenancy.roles import is_pool_admin


def roles(request) -> dict[str, bool]:
    """``is_pool_admin``: show the pool admins' links and controls."""
    return {"is_pool_admin": is_pool_admin(getattr(request, "user", None))}
