"""A request's fields as one typed value (issue #29, item 4): the API serializer and the page's
form build the same :class:`RequestFields` from the same request, which the service takes.

Pools (tests/conftest.py): ``infer`` (Kubernetes) holds 8 L40S; alice is a member of ``nlp``.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.utils import timezone
from factories import next_week_9am

from pools.capacity.api import CapacityRequestSerializer
from pools.capacity.forms import CapacityRequestForm
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import validate_shape_fields
from pools.common.choices import RequestKind
from pools.tenancy.models import Team


def test_from_data_takes_the_fields_it_names_and_leaves_the_rest_at_their_defaults():
    team = SimpleNamespace(slug="nlp")  # any object: nothing is checked here
    start = datetime(2027, 1, 4, 9, tzinfo=UTC)
    fields = RequestFields.from_data(
        {
            "team": team,
            "workload_kind": "training",
            "card_count": 16,
            "starts_at": start,
            "ends_at": start + timedelta(days=2),
            "min_memory_gib": Decimal("80"),
            "submit": False,  # the API's, not a field of the request
            "sizing_estimate": 7,  # the explainer's
        }
    )
    assert (fields.team, fields.workload_kind, fields.card_count) == (team, "training", 16)
    assert (fields.starts_at, fields.ends_at) == (start, datetime(2027, 1, 6, 9, tzinfo=UTC))
    assert fields.min_memory_gib == Decimal("80")
    assert (fields.pool, fields.gpu_model, fields.workload_class, fields.extends) == (None,) * 4
    assert (fields.kind, fields.justification, fields.cuda_version, fields.mig_profile) == (
        "cards", "", "", "",
    )  # fmt: skip
    assert (fields.cards_per_node, fields.node_count) == (None, None)
    assert (fields.one_nvlink_domain, fields.shared_nodes) == (False, False)


def test_from_data_without_a_required_field_raises():
    with pytest.raises(TypeError, match="card_count"):
        RequestFields.from_data({"team": None, "workload_kind": "training",
                                 "starts_at": None, "ends_at": None})  # fmt: skip


def test_the_default_kind_is_the_stored_choice_for_cards():
    # the pure module cannot import pools.common.choices (Django's TextChoices): the literal must
    # match
    assert RequestFields.__dataclass_fields__["kind"].default == RequestKind.CARDS


def test_the_fields_are_frozen():
    fields = RequestFields(team=None, workload_kind="training", card_count=1,
                           starts_at=None, ends_at=None)  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        fields.card_count = 2


@pytest.mark.django_db
def test_the_form_and_the_serializer_build_the_same_fields(team, team_member, infer_pool, l40s):
    """The same request, 2 L40S in infer as one group of 2 on one NVLink domain, from 9:00
    next week for 3 days, CUDA 12.4, typed into the page (local time, no offset) and posted to
    the API (ISO with offset)."""
    start = next_week_9am()
    local = timezone.localtime(start)
    form = CapacityRequestForm(
        {
            "team": team.slug, "kind": "cards", "workload_kind": "inference",
            "pool": infer_pool.slug, "gpu_model": l40s.slug, "card_count": "2",
            "cards_per_node": "2", "node_count": "1", "one_nvlink_domain": "on",
            "starts_at": local.strftime("%Y-%m-%dT%H:%M"),
            "ends_at": (local + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"),
            "cuda_version": " 12.4 ", "justification": "serve",
        },
        teams=Team.objects.all(),
    )  # fmt: skip
    assert form.is_valid(), form.errors
    serializer = CapacityRequestSerializer(
        data={
            "team": team.slug, "workload_kind": "inference", "pool": infer_pool.slug,
            "gpu_model": l40s.slug, "card_count": 2, "cards_per_node": 2, "node_count": 1,
            "one_nvlink_domain": True, "starts_at": start.isoformat(),
            "ends_at": (start + timedelta(days=3)).isoformat(), "cuda_version": "12.4",
            "justification": "serve", "submit": False,
        },
        context={"request": SimpleNamespace(user=team_member)},
    )  # fmt: skip
    assert serializer.is_valid(), serializer.errors
    expected = RequestFields(
        team=team, workload_kind="inference", card_count=2, starts_at=start,
        ends_at=start + timedelta(days=3), justification="serve", pool=infer_pool,
        gpu_model=l40s, cuda_version="12.4", cards_per_node=2, node_count=1,
        one_nvlink_domain=True,
    )  # fmt: skip
    assert form.request_fields() == expected
    assert serializer.request_fields() == expected


@pytest.mark.django_db
def test_the_forms_shape_boxes_say_nothing_without_a_shape(team, infer_pool, l40s):
    """Ticked with no cards per node, the NVLink and shared-node boxes are left unticked, as the
    page did before the fields were one value; the API's explicit ``true`` without a shape is
    the service's field error."""
    start = timezone.localtime(next_week_9am())
    form = CapacityRequestForm(
        {
            "team": team.slug, "kind": "cards", "workload_kind": "inference",
            "gpu_model": l40s.slug, "card_count": "2", "one_nvlink_domain": "on",
            "shared_nodes": "on", "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
            "ends_at": (start + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
        },
        teams=Team.objects.all(),
    )  # fmt: skip
    assert form.is_valid(), form.errors
    assert form.cleaned_data["one_nvlink_domain"] and form.cleaned_data["shared_nodes"]
    fields = form.request_fields()
    assert (fields.one_nvlink_domain, fields.shared_nodes, fields.cards_per_node) == (
        False, False, None,
    )  # fmt: skip
    assert validate_shape_fields(dataclasses.replace(fields, one_nvlink_domain=True)) == {
        "cards_per_node": "Give cards per node and nodes for a shape."
    }
