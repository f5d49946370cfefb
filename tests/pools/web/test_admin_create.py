"""The create action the overrides, recurring reservations and maintenance windows APIs share
(:class:`pools.web.api.PoolAdminCreateMixin`): the caller's right is checked before the body is
read, then the body; and the pages' slug pickers (:class:`pools.web.pages.SlugChoiceField`)."""

from __future__ import annotations

import pytest
from django import forms

from pools.tenancy.models import Team
from pools.web.pages import SlugChoiceField

# (list URL, the 403's words, the fields an empty body lacks): the words are the ones each
# service says for the same refusal (pools/*/services), the fields those the serializers
# declare required (pools/*/api.py and the models' non-blank columns).
ENDPOINTS = {
    "overrides": (
        "/api/v1/overrides/",
        "Only pool admins may override a team's limits.",
        {"team", "pool", "kind", "until", "reason"},
    ),
    "recurring": (
        "/api/v1/recurring-reservations/",
        "Only pool admins may reserve recurring capacity.",
        {
            "team",
            "pool",
            "gpu_model",
            "name",
            "card_count",
            "recurrence",
            "time_zone",
            "first_date",
            "last_date",
            "start_time",
            "end_time",
        },
    ),  # fmt: skip
    "maintenance": (
        "/api/v1/maintenance-windows/",
        "Only pool admins may plan maintenance.",
        {"title", "scope", "starts_at", "ends_at"},
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_a_member_is_refused_before_the_body_is_read(member_api, name):
    """An empty body from a member is a 403 naming the action, not a 400 listing what is
    missing (maintenance read the body first until the action was shared)."""
    url, words, _ = ENDPOINTS[name]
    answer = member_api.post(url, {}, format="json")
    assert answer.status_code == 403
    assert answer.json() == {"code": "permission_denied", "detail": words, "data": {}}


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_a_pool_admin_s_empty_body_is_a_400_by_field(admin_api, name):
    url, _, required = ENDPOINTS[name]
    answer = admin_api.post(url, {}, format="json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_input"
    assert set(answer.json()["errors"]) == required


@pytest.mark.django_db
def test_the_slug_picker_lists_by_name_and_reads_back_slugs():
    zeta = Team.objects.create(slug="a-team", name="Zeta")
    alpha = Team.objects.create(slug="z-team", name="Alpha")
    field = SlugChoiceField(Team.objects, required=False)
    assert [(str(value), label) for value, label in field.choices] == [
        ("", "---------"),
        ("z-team", "Alpha"),
        ("a-team", "Zeta"),
    ]
    assert field.clean("a-team") == zeta
    assert field.clean("z-team") == alpha
    with pytest.raises(forms.ValidationError, match="valid choice"):
        field.clean(str(zeta.pk))  # a primary key is not a slug
    by_slug_descending = SlugChoiceField(Team.objects, order="-slug", empty_label=None)
    assert [label for _, label in by_slug_descending.choices] == ["Alpha", "Zeta"]
