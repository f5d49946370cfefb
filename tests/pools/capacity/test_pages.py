"""The request list says what an approval granted when it granted fewer cards than asked."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from factories import CapacityRequestFactory

from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import RequestStatus

pytestmark = pytest.mark.django_db


def test_a_partial_grant_shows_held_of_requested(team, team_member, pool_admin, infer_pool, l40s):
    start = timezone.now() + timedelta(days=1)
    request = CapacityRequestFactory(
        team=team,
        requested_by=team_member,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=4,
        starts_at=start,
        ends_at=start + timedelta(days=7),
        status=RequestStatus.SUBMITTED,
    )
    capacity_request_approve(request=request, actor=pool_admin, card_count=2, reason="half")
    client = Client()
    client.force_login(team_member)

    page = client.get("/requests/").content.decode()
    assert '2 <span class="muted">of 4</span>' in page

    export = client.get("/requests/?export=csv")
    text = b"".join(export.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["card_count"], r["allocation_card_count"]) for r in rows] == [("4", "2")]


def test_the_audit_trail_has_its_csv(team, team_member, pool_admin, infer_pool, l40s):
    # approved with 2 of 4 cards by the pool admin: the request's approval and its allocation's
    # creation, in time order, as the page's table; another team's request is a 404
    start = timezone.now() + timedelta(days=1)
    request = CapacityRequestFactory(
        team=team, requested_by=team_member, pool=infer_pool, gpu_model=l40s, card_count=4,
        starts_at=start, ends_at=start + timedelta(days=7), status=RequestStatus.SUBMITTED,
    )  # fmt: skip
    allocation = capacity_request_approve(
        request=request, actor=pool_admin, card_count=2, reason="half"
    )
    client = Client()
    client.force_login(team_member)

    assert 'href="?export=audit"' in client.get(f"/requests/{request.pk}/").content.decode()
    export = client.get(f"/requests/{request.pk}/?export=audit")
    assert export["Content-Disposition"] == (
        f'attachment; filename="request-{request.pk}-audit.csv"'
    )
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert {(r["actor"], r["action"], r["object_id"], r["reason"]) for r in rows} >= {
        (pool_admin.username, "request.approved", str(request.pk), "half"),
    }
    assert all(r["at"].endswith("+00:00") for r in rows)
    assert [r["at"] for r in rows] == sorted(r["at"] for r in rows)
    assert str(allocation.pk) in {r["object_id"] for r in rows if "allocation" in r["object_type"]}
    other = CapacityRequestFactory(pool=infer_pool, gpu_model=l40s)
    assert client.get(f"/requests/{other.pk}/?export=audit").status_code == 404


def test_a_refused_approval_names_fields_as_the_form_does(
    team, team_member, pool_admin, infer_pool, l40s
):
    start = timezone.now() + timedelta(days=1)
    request = CapacityRequestFactory(
        team=team,
        requested_by=team_member,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=2,
        starts_at=start,
        ends_at=start + timedelta(days=7),
        status=RequestStatus.SUBMITTED,
    )
    client = Client()
    client.force_login(pool_admin)
    response = client.post(f"/requests/{request.pk}/approve/", {"card_count": 5}, follow=True)
    (message,) = [str(m) for m in response.context["messages"]]
    assert message == "The approval has invalid fields. Cards: Grant at most the 2 cards requested."
    request.refresh_from_db()
    assert request.status == RequestStatus.SUBMITTED  # nothing changed


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"ends_at": "", "justification": "more"}, "End: This field is required."),
        (
            {"ends_at": "2026-12-21T10:00", "justification": ""},
            "Justification: This field is required.",
        ),
    ],
    ids=["no-end", "no-justification"],
)
def test_a_refused_extension_says_which_field_and_why(
    team, team_member, pool_admin, infer_pool, l40s, data, said
):
    """Found by a newcomer: the extend form's refusal was only "Check the extension fields.",
    naming no field, while a refused approval names each."""
    start = timezone.now() + timedelta(days=1)
    request = CapacityRequestFactory(
        team=team,
        requested_by=team_member,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=2,
        starts_at=start,
        ends_at=start + timedelta(days=7),
        status=RequestStatus.SUBMITTED,
    )
    allocation = capacity_request_approve(request=request, actor=pool_admin)
    client = Client()
    client.force_login(team_member)

    response = client.post(f"/allocations/{allocation.pk}/extend/", data, follow=True)

    (message,) = [str(m) for m in response.context["messages"]]
    assert message == f"Check the extension fields. {said}"
    assert response.redirect_chain == [(f"/requests/{request.pk}/", 302)]
    assert CapacityRequestFactory._meta.model.objects.count() == 1  # no extension written


def _ticked(page: str, name: str) -> list[str]:
    """The values of the ``name`` radios the page renders ticked."""
    radios = re.findall(rf'<input type="radio" name="{name}" value="([^"]*)"([^>]*)>', page)
    return [value for value, rest in radios if " checked" in rest]


def test_a_prefilled_request_ticks_ask_for_cards(team_member, infer_pool, l40s):
    """The sizing page's link names no ``kind`` when it asks for cards a pool has: the form still
    ticks *Cards a pool has* (it showed both radios unticked), and the workload the link names."""
    client = Client()
    client.force_login(team_member)

    page = client.get(
        "/requests/new/?workload_kind=inference&gpu_model=l40s&card_count=8&pool=infer-k8s"
    ).content.decode()
    growth = client.get(
        "/requests/new/?workload_kind=inference&kind=growth&gpu_model=h100_nvl&card_count=6"
    ).content.decode()

    assert _ticked(page, "kind") == ["cards"]
    assert _ticked(page, "workload_kind") == ["inference"]
    assert _ticked(growth, "kind") == ["growth"]


@pytest.mark.django_db
def test_a_link_naming_only_the_team_opens_the_form_without_errors(team, team_member, client):
    """The team dashboard's *Request GPUs* links to ``/requests/new/?team=<slug>``: the form
    opens with the team chosen and no "This field is required" (nothing was submitted)."""
    client.force_login(team_member)
    page = client.get(f"/requests/new/?team={team.slug}")
    assert page.status_code == 200
    form = page.context["form"]
    assert not form.is_bound and form.errors == {}
    assert form["team"].value() == team.slug
    assert "This field is required" not in page.content.decode()
