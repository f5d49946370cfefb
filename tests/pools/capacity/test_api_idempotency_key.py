"""POST /api/v1/requests/ with an ``Idempotency-Key`` header: a retry of the same body answers
the first request (201, ``Idempotent-Replayed: true``, nothing written), another body with
the key is a 422, another user's key is theirs, two POSTs at once write one request, and a key
is forgotten after 24 h. The API used to ignore the header and write a request per POST."""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from factories import MembershipFactory

from pools.audit.models import AuditEvent
from pools.capacity.models import CapacityRequest
from pools.capacity.services import idempotency
from pools.capacity.services import requests as request_services

URL = "/api/v1/requests/"


# One window for the whole module: two bodies built a second apart must not differ by it.
START = (timezone.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)


def _body(team, **changes) -> dict:
    start = START
    body = {
        "team": team.slug, "workload_kind": "inference", "pool": "infer", "gpu_model": "l40s",
        "card_count": 2, "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(days=3)).isoformat(), "justification": "serving",
        "submit": False,
    }  # fmt: skip
    return {**body, **changes}


def _post(client, body, key=None):
    headers = {} if key is None else {"Idempotency-Key": key}
    return client.post(URL, body, format="json", headers=headers)


@pytest.mark.django_db
def test_the_same_key_and_body_answers_the_first_request(api_as, team, team_member, infer_pool):
    client, body = api_as(team_member), _body(team)
    first = _post(client, body, key="retry-1")
    second = _post(client, body, key="retry-1")

    created = CapacityRequest.objects.get()  # one, not two
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["id"] == second.json()["id"] == created.pk
    assert second.json() == first.json()  # nothing happened to it between the two
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"
    assert AuditEvent.objects.filter(action="request.created").count() == 1


@pytest.mark.django_db
def test_the_same_key_with_another_body_is_422(api_as, team, team_member, infer_pool):
    client = api_as(team_member)
    first = _post(client, _body(team), key="k")
    again = _post(client, _body(team, card_count=3, justification="other"), key="k")

    assert again.status_code == 422
    assert again.json() == {
        "code": "idempotency_key_reused",
        "detail": again.json()["detail"],
        "data": {"request": first.json()["id"], "fields": ["card_count", "justification"]},
    }
    assert CapacityRequest.objects.get().card_count == 2  # nothing written


@pytest.mark.django_db
def test_what_a_create_normalises_is_the_same_body(api_as, team, team_member, infer_pool):
    """Blanks around the justification and an absent class (the team's default) are what the
    first POST wrote: a replay, not a 422."""
    client = api_as(team_member)
    _post(client, _body(team), key="k")
    again = _post(client, _body(team, justification="  serving \n"), key="k")
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"


@pytest.mark.django_db
def test_another_users_key_is_their_own(api_as, team, team_member, infer_pool):
    bob = MembershipFactory(team=team, user__username="bob").user
    mine = _post(api_as(team_member), _body(team), key="shared")
    theirs = _post(api_as(bob), _body(team), key="shared")

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]
    assert "Idempotent-Replayed" not in theirs.headers
    assert CapacityRequest.objects.count() == 2


@pytest.mark.django_db
def test_no_key_writes_a_request_per_post(api_as, team, team_member, infer_pool):
    client, body = api_as(team_member), _body(team)
    assert [_post(client, body).status_code for _ in range(2)] == [201, 201]
    assert CapacityRequest.objects.count() == 2


@pytest.mark.django_db
def test_a_key_older_than_24_hours_names_a_new_request(api_as, team, team_member, infer_pool):
    client, body = api_as(team_member), _body(team)
    old = _post(client, body, key="daily").json()["id"]
    CapacityRequest.objects.filter(pk=old).update(
        created_at=timezone.now() - timedelta(hours=24, seconds=1)
    )
    new = _post(client, body, key="daily")

    assert new.status_code == 201 and "Idempotent-Replayed" not in new.headers
    assert new.json()["id"] != old
    assert CapacityRequest.objects.get(pk=old).form_token is None  # the key forgotten
    # Within 24 h of the new one, the key answers it.
    assert _post(client, body, key="daily").json()["id"] == new.json()["id"]


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "x" * 256, "naïve", "tab\there"])
def test_an_unusable_key_is_400_and_writes_nothing(api_as, team, team_member, infer_pool, key):
    answer = _post(api_as(team_member), _body(team), key=key)
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_input"
    assert list(answer.json()["errors"]) == ["Idempotency-Key"]
    assert not CapacityRequest.objects.exists()


def test_a_key_is_a_version_5_uuid_a_form_token_never_is():
    """uuid5 under the portal's namespace (RFC 9562 §5.5): the form's tokens are version 4."""
    token = idempotency.idempotency_token("retry-1")
    assert token == uuid.uuid5(idempotency.KEY_NAMESPACE, "retry-1")
    assert (token.version, uuid.uuid4().version) == (5, 4)


@pytest.mark.django_db
def test_the_unique_index_answers_a_post_that_lost_the_race(
    api_as, team, team_member, infer_pool, monkeypatch
):
    """The other POST of the key commits its row after this one looked and found none: this
    one's INSERT meets the (requester, form_token) index and answers the other's request."""
    create = request_services.capacity_request_create
    token = idempotency.idempotency_token("race")

    def other_post_commits_first(*, actor, fields, submit=True):
        written = replace(
            fields, form_token=token, workload_class=team.default_class
        )  # what the other POST wrote: the same body
        other = CapacityRequest.objects.create(
            requested_by=actor, **request_services.request_record_values(written)
        )
        other_post_commits_first.other = other
        return create(actor=actor, fields=fields, submit=submit)

    monkeypatch.setattr(request_services, "capacity_request_create", other_post_commits_first)
    answer = _post(api_as(team_member), _body(team), key="race")

    assert answer.status_code == 201
    assert answer.json()["id"] == other_post_commits_first.other.pk
    assert answer.headers["Idempotent-Replayed"] == "true"
    assert CapacityRequest.objects.count() == 1


@pytest.fixture
def catalogue(transactional_db):
    """The GPU catalogue as the migrations seed it: a transactional test's flush may have
    emptied it before this test (as the approval race test does)."""
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModel, GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)


@pytest.mark.django_db(transaction=True)
def test_two_posts_at_once_write_one_request(catalogue, api_as, team, team_member, infer_pool):
    body, answers, start = _body(team), [], threading.Barrier(2)

    def post():
        try:
            start.wait()
            answers.append(_post(api_as(team_member), body, key="twice"))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(a.status_code for a in answers) == [201, 201]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert sorted(a.headers.get("Idempotent-Replayed", "") for a in answers) == ["", "true"]
    assert CapacityRequest.objects.count() == 1


@pytest.mark.django_db
def test_the_schema_documents_the_header_and_the_422(member_api):
    schema = member_api.get("/api/schema/", {"format": "json"}).json()
    create = schema["paths"]["/api/v1/requests/"]["post"]
    headers = {p["name"] for p in create["parameters"] if p["in"] == "header"}
    assert "Idempotency-Key" in headers
    assert "422" in create["responses"]
    assert "Idempotent-Replayed" in create["responses"]["201"]["headers"]
    others = schema["paths"]["/api/v1/allocations/{id}/release/"]["post"]["responses"]
    assert "422" not in others
