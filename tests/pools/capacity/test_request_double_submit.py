"""The request form posted twice (a double click, a reload that posts again) writes one request:
the page's form carries a fresh token, and a second POST of it answers with the first request.
It used to write two."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone
from factories import CapacityRequestFactory

from pools.audit.models import AuditEvent
from pools.capacity.models import CapacityRequest

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'<input type="hidden" name="form_token" value="([0-9a-f-]{36})"')


def _fields(team, token):
    start = (timezone.localtime() + timedelta(days=2)).replace(hour=9, minute=0)
    return {
        "form_token": token, "team": team.slug, "kind": "cards", "workload_kind": "inference",
        "gpu_model": "l40s", "pool": "infer", "card_count": 2,
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (start + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"),
        "justification": "serving", "save_draft": "1",
    }  # fmt: skip


def _token(client) -> str:
    html = client.get("/requests/new/").content.decode()
    return TOKEN.search(html)[1]


def test_the_same_form_posted_twice_writes_one_request(team, team_member, infer_pool, l40s):
    client = Client()
    client.force_login(team_member)
    fields = _fields(team, _token(client))

    first = client.post("/requests/new/", fields)
    second = client.post("/requests/new/", fields)

    created = CapacityRequest.objects.get()  # one, not two
    assert first.status_code == second.status_code == 302
    assert first.headers["Location"] == second.headers["Location"] == f"/requests/{created.pk}/"
    assert AuditEvent.objects.filter(action="request.created").count() == 1
    shown = client.get(second.headers["Location"]).content.decode()
    assert f"Request #{created.pk} was already sent" in shown


def test_two_showings_of_the_form_are_two_requests(team, team_member, infer_pool, l40s):
    client = Client()
    client.force_login(team_member)
    one, two = _token(client), _token(client)
    assert one != two
    client.post("/requests/new/", _fields(team, one))
    client.post("/requests/new/", _fields(team, two))
    assert CapacityRequest.objects.count() == 2


def test_two_posts_at_once_meet_the_unique_index(team, team_member):
    """The second of two simultaneous POSTs passes the look-up before the first commits: the
    index refuses its row."""
    token = uuid.uuid4()
    CapacityRequestFactory(team=team, requested_by=team_member, form_token=token)
    with pytest.raises(IntegrityError), transaction.atomic():
        CapacityRequestFactory(team=team, requested_by=team_member, form_token=token)
    # Another requester's form token collides with nothing.
    CapacityRequestFactory(team=team, form_token=token)
    assert CapacityRequest.objects.filter(form_token=token).count() == 2
