"""Rights changed outside the portal's services are audited too (pools/access/signals.py):
``createsuperuser``, a user saved from the shell, ``changepassword``, groups and permissions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command

from pools.access.signals import OUTSIDE
from pools.audit.models import AuditEvent

pytestmark = pytest.mark.django_db

NONE = {"is_staff": False, "is_superuser": False}


def _events(action: str, user) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action, object_id=str(user.pk)).order_by("id"))


def test_createsuperuser_is_a_rights_event(django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "pw-root-123")
    call_command("createsuperuser", "--noinput", "--username", "root", "--email", "r@x.org")

    root = django_user_model.objects.get(username="root")
    (event,) = _events("user.rights_changed", root)
    assert (event.actor, event.reason) == (None, OUTSIDE)
    assert (event.before, event.after) == (NONE, {"is_staff": True, "is_superuser": True})


def test_staff_saved_from_the_shell_and_taken_away_again(django_user_model):
    bob = django_user_model.objects.create_user("bob", password="pw")
    assert _events("user.rights_changed", bob) == []  # no rights: nothing to say

    bob.is_staff = True
    bob.save()
    bob.is_staff = False
    bob.save(update_fields=["is_staff"])
    bob.first_name = "Bob"
    bob.save()  # no rights change: no event

    events = _events("user.rights_changed", bob)
    assert [(e.before, e.after) for e in events] == [
        (NONE, {"is_staff": True, "is_superuser": False}),
        ({"is_staff": True, "is_superuser": False}, NONE),
    ]


def test_a_sign_in_saving_last_login_is_not_looked_at(django_user_model, django_assert_num_queries):
    bob = django_user_model.objects.create_user("bob", password="pw")
    with django_assert_num_queries(1):  # the UPDATE only, no read of the stored rights
        bob.save(update_fields=["last_login"])


def test_changepassword_is_an_event_without_the_hash(django_user_model, monkeypatch):
    bob = django_user_model.objects.create_user("bob", password="pw-old-123")
    answers = iter(["pw-new-456", "pw-new-456"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    call_command("changepassword", "bob", stdout=open("/dev/null", "w"))  # noqa: SIM115

    (event,) = _events("user.password_changed", bob)
    assert (event.before, event.after, event.reason) == (None, None, OUTSIDE)
    bob.refresh_from_db()
    assert bob.check_password("pw-new-456")


def test_groups_and_permissions_from_either_side(django_user_model):
    bob = django_user_model.objects.create_user("bob", password="pw")
    editors = Group.objects.create(name="editors")
    change_pool = Permission.objects.get(codename="change_pool")

    bob.groups.add(editors)
    editors.user_set.remove(bob)
    bob.user_permissions.set([change_pool])
    editors.permissions.add(change_pool)

    events = _events("user.rights_changed", bob)
    assert [(e.before, e.after) for e in events] == [
        ({"groups": []}, {"groups": ["editors"]}),
        ({"groups": ["editors"]}, {"groups": []}),
        ({"user_permissions": []}, {"user_permissions": [str(change_pool)]}),
    ]
    (group_event,) = _events("group.permissions_changed", editors)
    assert group_event.after == {"permissions": [str(change_pool)]}
    assert all(e.actor is None and e.reason == OUTSIDE for e in [*events, group_event])
