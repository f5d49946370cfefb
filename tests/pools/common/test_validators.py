"""Bounds on names, counts and dates the pools app takes in (issue 27, items 6 and 10): each
refused with a field error, nothing written. The rules: pools.common.validators."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from factories import TeamFactory

from pools.audit.models import AuditEvent
from pools.capacity.models import CapacityRequest
from pools.common.validators import dns_label_validator, hostname_validator, slug_validator
from pools.inventory.models import Pool
from pools.tenancy.models import Team

pytestmark = pytest.mark.django_db

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "team\u202eabc" shows as "teamcba"


@pytest.fixture
def superuser_page(django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("su", password="pw"))
    return client


@pytest.mark.parametrize(
    "name", ["Train\r\nBcc: x", "Train\nA", "Train\tA", f"Train{RLO}A", "Tr\u2066ain\u2069"]
)
def test_a_pool_name_with_line_breaks_or_bidi_marks_is_a_field_error(admin_api, name):
    body = {"slug": "train", "name": name, "scheduler": "slurm"}
    response = admin_api.post("/api/v1/pools/", body, format="json")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["name"]
    assert not Pool.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("validator", "value"),
    [(slug_validator, "train\n"), (hostname_validator, "gpu-01\n"), (dns_label_validator, "q\n")],
)
def test_a_trailing_newline_does_not_pass_a_name_pattern(validator, value):
    """``$`` in a regex also matches before a final newline: "train\\n" passed as a slug where
    nothing strips it first (importers, services)."""
    with pytest.raises(ValidationError):
        validator(value)


def test_a_plain_unicode_pool_name_is_kept(admin_api):
    body = {"slug": "train", "name": "Training · Zürich 训练", "scheduler": "slurm"}
    assert admin_api.post("/api/v1/pools/", body, format="json").status_code == 201
    assert Pool.objects.get().name == "Training · Zürich 训练"


def _admin_form(client, url):
    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    return {k: ("" if v is None else v) for k, v in data.items()}


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", f"Vision{RLO}lanif"), ("cost_centre", "CC\r\n1"), ("name", "Vi\u200fsion")],
)
def test_the_admin_refuses_bidi_marks_and_line_breaks_in_a_team(superuser_page, field, value):
    """The statement PDF's header shows the team name and cost centre: an RLO reversed it."""
    team = TeamFactory(slug="vision", name="Vision", cost_centre="CC-1")
    url = f"/admin/pools/team/{team.pk}/change/"
    data = _admin_form(superuser_page, url)
    data.update({field: value, "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"})
    response = superuser_page.post(url, data)
    assert response.status_code == 200  # the form again, with its error
    assert field in response.context["adminform"].form.errors
    team.refresh_from_db()
    assert (team.name, team.cost_centre) == ("Vision", "CC-1")


@pytest.mark.parametrize(("value", "ok"), [(2**40, False), (100_001, False), (100_000, True)])
def test_auto_approve_max_cards_is_bounded(superuser_page, infer_pool, value, ok):
    """At most 100,000 cards (pools.common.validators.MAX_REQUEST_CARDS); 2**40 does not even fit
    PostgreSQL's integer."""
    url = f"/admin/pools/pool/{infer_pool.pk}/change/"
    data = _admin_form(superuser_page, url)
    data["auto_approve_max_cards"] = str(value)
    response = superuser_page.post(url, data)
    infer_pool.refresh_from_db()
    if ok:
        assert response.status_code == 302
        assert infer_pool.auto_approve_max_cards == 100_000
    else:
        assert response.status_code == 200
        assert "auto_approve_max_cards" in response.context["adminform"].form.errors
        assert infer_pool.auto_approve_max_cards is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("starts_at", "0001-01-01T00:00:00Z"),
        ("ends_at", "9999-12-31T00:00:00Z"),
        ("card_count", 2**40),
    ],
)
def test_a_request_outside_the_date_range_or_with_2_40_cards_is_a_field_error(
    api_as, team_member, infer_pool, l40s, field, value
):
    body = {
        "team": "nlp",
        "workload_kind": "inference",
        "pool": "infer",
        "gpu_model": "l40s",
        "card_count": 2,
        "starts_at": "2030-01-07T09:00:00Z",
        "ends_at": "2030-01-14T09:00:00Z",
        "justification": "x",
        field: value,
    }
    response = api_as(team_member).post("/api/v1/requests/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert not CapacityRequest.objects.exists()
    assert Team.objects.count() == 1


@pytest.mark.parametrize(("cards_per_node", "ok"), [(65, False), (64, True)])
def test_a_shape_asks_at_most_64_cards_a_node(api_as, team_member, infer_pool, l40s,
                                              cards_per_node, ok):  # fmt: skip
    """No node holds more than 64 cards (scheduler_adapters.types.MAX_GPUS_PER_NODE, which the
    importers enforce), so a shape of 65 a node could never be placed: a field error, where
    1,024 was taken. 64 a node x 1 node is a usable shape (refused only because the pool
    has 8 cards, on card_count)."""
    body = {
        "team": "nlp", "workload_kind": "inference", "pool": "infer", "gpu_model": "l40s",
        "card_count": cards_per_node, "cards_per_node": cards_per_node, "node_count": 1,
        "starts_at": "2030-01-07T09:00:00Z", "ends_at": "2030-01-14T09:00:00Z",
        "justification": "x",
    }  # fmt: skip
    response = api_as(team_member).post("/api/v1/requests/", body, format="json")
    assert response.status_code == 400
    if ok:
        assert list(response.json()["errors"]) == ["card_count"]
    else:
        assert response.json()["errors"]["cards_per_node"] == [
            "Ensure this value is less than or equal to 64."
        ]
        assert not CapacityRequest.objects.exists()
