"""Users' rights and API tokens changed in the Django admin go through the audited services of
pools.access (issue 27, item 8): granting or removing staff / superuser is a
``user.rights_changed`` event, a token is never made or shown there, deleting one revokes it."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.test import Client

from pools.access.models import ApiToken
from pools.access.services import api_token_create
from pools.audit.models import AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("su", password="pw")


@pytest.fixture
def su_page(superuser):
    client = Client()
    client.force_login(superuser)
    return client


def _user_form(client, user) -> dict:
    url = f"/admin/auth/user/{user.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False:
            continue
        if isinstance(value, datetime):  # the admin's split date and time inputs
            data[f"{name}_0"], data[f"{name}_1"] = f"{value:%Y-%m-%d}", f"{value:%H:%M:%S}"
            continue
        data[name] = [str(v) for v in value] if isinstance(value, list) else value
    data.pop("password", None)
    return data


@pytest.mark.parametrize(
    ("start", "change", "before", "after"),
    [
        ({}, {"is_staff": "on"}, (False, False), (True, False)),
        ({"is_staff": True}, {"is_staff": "on", "is_superuser": "on"}, (True, False), (True, True)),
        ({"is_staff": True, "is_superuser": True}, {}, (True, True), (False, False)),
    ],
)
def test_granting_or_removing_rights_in_the_admin_is_audited(
    su_page, superuser, django_user_model, start, change, before, after
):
    bob = django_user_model.objects.create_user("bob", password="pw", **start)
    data = {
        k: v for k, v in _user_form(su_page, bob).items() if k not in ("is_staff", "is_superuser")
    }
    response = su_page.post(f"/admin/auth/user/{bob.pk}/change/", {**data, **change})
    assert response.status_code == 302, response.context["adminform"].form.errors
    bob.refresh_from_db()
    assert (bob.is_staff, bob.is_superuser) == after
    # (creating the users wrote events of their own, with no actor: pools/access/signals.py)
    event = AuditEvent.objects.get(action="user.rights_changed", reason="Django admin")
    assert (event.actor, event.object_id, event.reason) == (superuser, str(bob.pk), "Django admin")
    assert event.before == {"is_staff": before[0], "is_superuser": before[1]}
    assert event.after == {"is_staff": after[0], "is_superuser": after[1]}


def test_saving_a_user_without_a_rights_change_writes_no_rights_event(su_page, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="pw", is_staff=True)
    data = {**_user_form(su_page, bob), "first_name": "Bob"}
    assert su_page.post(f"/admin/auth/user/{bob.pk}/change/", data).status_code == 302
    bob.refresh_from_db()
    assert (bob.first_name, bob.is_staff) == ("Bob", True)
    # create_user(is_staff=True) is no event either (pools/access/signals.py)
    assert not AuditEvent.objects.filter(action="user.rights_changed", object_id=str(bob.pk))


def test_the_token_admin_shows_no_key_and_makes_none(su_page, django_user_model):
    alice = django_user_model.objects.create_user("alice", password="pw")
    token, key = api_token_create(user=alice, client="ci")
    listing = su_page.get("/admin/pools/apitoken/").content.decode()
    detail = su_page.get(f"/admin/pools/apitoken/{token.pk}/change/").content.decode()
    assert "ci" in listing
    for page in (listing, detail):
        assert key not in page and key[:15] not in page and token.digest not in page
    assert su_page.get("/admin/pools/apitoken/add/").status_code == 403


def test_deleting_a_token_in_the_admin_revokes_it_audited(su_page, superuser, django_user_model):
    alice = django_user_model.objects.create_user("alice", password="pw")
    token, _ = api_token_create(user=alice, client="ci")
    response = su_page.post(f"/admin/pools/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not ApiToken.objects.exists()
    event = AuditEvent.objects.get(action="api_token.revoked")
    assert (event.actor, event.before["user"], event.before["client"]) == (superuser, "alice", "ci")
    assert event.reason == "revoked in the Django admin"
