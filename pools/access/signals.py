"""Rights changed outside the portal's services, audited all the same.

The portal changes rights through :func:`pools.access.services.user_rights_set` (the Django
admin included), which writes ``user.rights_changed`` with who did it. These receivers catch
what bypasses it, with ``actor`` unknown (``None``, the system) and a reason saying where:

- a user saved with different staff/superuser flags — ``user.save()`` from ``manage.py
  shell`` — and a new superuser (``createsuperuser``) as ``user.rights_changed`` (before/after
  of the flags; a new user counts as having had none). A new user created with staff rights
  only is not an event (scripts and fixtures make pool admins that way);
- a password set outside sign-in (``changepassword``, the admin's password form, the shell) as
  ``user.password_changed`` (no hash, no length: only that it changed);
- a user's groups or individual permissions, and a group's permissions (every member's rights),
  changed by ``.add``/``.remove``/``.set``/``.clear`` — ``user.rights_changed`` with the
  groups or permissions before and after, ``group.permissions_changed`` for a group.

:func:`user_rights_set` updates with ``QuerySet.update`` (no save signal), so its changes are
audited once, by it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_save, pre_save
from django.dispatch import receiver

from pools.audit.services import audit_event_record
from pools.tenancy.roles import RIGHTS

OUTSIDE = "changed outside the portal's services (management command, shell or admin form)"
User = get_user_model()


def _watched(update_fields) -> bool:
    return update_fields is None or bool(set(update_fields) & {*RIGHTS, "password"})


@receiver(pre_save, sender=User, dispatch_uid="access-user-rights-before")
def _remember_rights(sender, instance, update_fields=None, raw=False, **kwargs) -> None:
    if raw or not _watched(update_fields):
        instance._access_before = None
        return
    stored = None
    if instance.pk is not None:
        stored = sender.objects.filter(pk=instance.pk).values(*RIGHTS, "password").first()
    instance._access_before = stored or {**{name: False for name in RIGHTS}, "password": None}


@receiver(post_save, sender=User, dispatch_uid="access-user-rights-after")
def _audit_rights(sender, instance, created, raw=False, **kwargs) -> None:
    before = getattr(instance, "_access_before", None)
    instance._access_before = None
    if raw or before is None:
        return
    was = {name: before[name] for name in RIGHTS}
    now = {name: bool(getattr(instance, name)) for name in RIGHTS}
    # A new user: only a superuser is an event (createsuperuser, create_superuser in a shell).
    # A new staff user is every pool admin a script or fixture makes; their rights are theirs
    # from the start, with nothing "before" to compare.
    if was != now and (not created or now[RIGHTS[1]]):
        audit_event_record(
            actor=None, action="user.rights_changed", obj=instance, before=was, after=now,
            reason=OUTSIDE,
        )  # fmt: skip
    if not created and before["password"] is not None and before["password"] != instance.password:
        audit_event_record(actor=None, action="user.password_changed", obj=instance, reason=OUTSIDE)


def _names(pairs) -> list[str]:
    return sorted(str(x) for x in pairs)


def _m2m_receiver(field: str, action_name: str):
    """A receiver auditing ``field`` (a many-to-many of the model that owns it: User's
    ``groups`` or ``user_permissions``, Group's ``permissions``) before and after, from either
    side (``user.groups.add(g)`` or ``g.user_set.add(user)``)."""

    def audit(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
        phase, _, kind = action.partition("_")
        if kind not in ("add", "remove", "clear"):
            return
        if not reverse:
            owners = [instance]
        elif pk_set is not None:
            owners = list(model.objects.filter(pk__in=pk_set))
        else:  # the reverse side cleared: every owner that had it
            owners = list(model.objects.filter(**{field: instance}))
        if phase == "pre":
            instance._access_m2m_before = {
                o.pk: (o, _names(getattr(o, field).all())) for o in owners
            }
            return
        remembered = getattr(instance, "_access_m2m_before", None) or {}
        instance._access_m2m_before = None
        for owner, before in remembered.values():
            after = _names(getattr(owner, field).all())
            if before != after:
                audit_event_record(
                    actor=None, action=action_name, obj=owner, before={field: before},
                    after={field: after}, reason=OUTSIDE,
                )  # fmt: skip

    return audit


def _connect() -> None:
    for through, field, action in (
        (User.groups.through, "groups", "user.rights_changed"),
        (User.user_permissions.through, "user_permissions", "user.rights_changed"),
        (Group.permissions.through, "permissions", "group.permissions_changed"),
    ):
        m2m_changed.connect(
            _m2m_receiver(field, action), sender=through, weak=False,
            dispatch_uid=f"access-{field}-{action}",
        )  # fmt: skip


_connect()


__all__: list[Any] = []
