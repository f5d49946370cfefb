"""Workload classes decide which cards a request may land on (issue 36).

The hand-built fleet: Kubernetes pool ``mixed`` with node ``dc-01`` (4 L40S, data-centre class)
and nodes ``gc-01``, ``gc-02`` (4 GeForce RTX 4090 each, consumer class): 4 data-centre and 8
consumer cards. The seeded classes (migration 0037): production may use data-centre cards,
batch consumer cards. Team ``svc`` defaults to production, ``etl`` to batch, ``lab`` to none.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from factories import next_week_9am

from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.classes.models import WorkloadClass, card_classes_validator
from pools.classes.rules import ClassRule
from pools.common.choices import RequestStatus
from pools.common.errors import InvalidInput
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

PRODUCTION_REFUSES_4090 = (
    "Production may not run on GeForce RTX 4090: consumer class (it may use: L40S)."
)


@pytest.fixture
def ask(member, teams):
    """``ask(team_slug, **fields)``: a submitted request for 4 cards next week, inference."""

    def make(team_slug, **fields):
        start = next_week_9am()
        values = {
            "team": teams[team_slug],
            "workload_kind": "inference",
            "card_count": 4,
            "starts_at": start,
            "ends_at": start + timedelta(days=7),
            "justification": "serve",
        }
        values.update(fields)
        return capacity_request_create(actor=member, fields=RequestFields(**values))

    return make


def model(slug):
    return GpuModel.objects.get(slug=slug)


def test_seeded_classes_follow_the_source():
    """004 §3.2: production on data-centre cards, internal tools and batch on consumer cards;
    000 §5.4: important work gets whole cards (production exclusive); batch preempted first."""
    rows = {
        c.slug: (c.card_classes, c.exclusive, c.preemption_order)
        for c in WorkloadClass.objects.all()
    }
    assert rows == {
        "production": (["datacentre"], True, 40),
        "internal": (["consumer"], False, 30),
        "development": (["consumer"], False, 20),
        "batch": (["consumer"], False, 10),
    }


def test_production_on_a_4090_is_refused_with_the_models_it_may_use(fleet, ask):
    """The fleet's data-centre model is L40S only, so that is what production may use."""
    with pytest.raises(InvalidInput) as refused:
        ask("svc", pool=fleet, gpu_model=model("rtx4090"))

    assert refused.value.data["errors"] == {"gpu_model": PRODUCTION_REFUSES_4090}
    assert not CapacityRequest.objects.exists()


def test_batch_on_a_4090_states_the_team_default(fleet, ask, classes):
    request = ask("etl", pool=fleet, gpu_model=model("rtx4090"))

    assert request.workload_class == classes["batch"]
    assert request.status == RequestStatus.SUBMITTED


def test_a_request_may_name_another_class_than_the_team_default(fleet, ask, classes):
    request = ask("etl", gpu_model=model("l40s"), workload_class=classes["production"])

    assert request.workload_class == classes["production"]


def test_open_production_request_lands_on_the_data_centre_cards(fleet, ask, pool_admin, classes):
    """Any model with ≥ 20 GiB: the 4090s (24 GiB, 8 free) have more free cards than the L40S
    (48 GiB, 4 free) and would be chosen first without the class; production gets the L40S."""
    request = ask("svc", min_memory_gib=20)

    allocation = capacity_request_approve(request=request, actor=pool_admin)

    assert (allocation.gpu_model.slug, allocation.card_count) == ("l40s", 4)
    assert allocation.workload_class == classes["production"]


def test_open_production_request_counts_only_permitted_cards(fleet, ask):
    """5 cards of ≥ 20 GiB: 12 exist, but production may use only the 4 L40S."""
    with pytest.raises(InvalidInput) as refused:
        ask("svc", min_memory_gib=20, card_count=5)

    assert refused.value.data["errors"] == {
        "card_count": "No eligible pool has 5 such cards (the most is 4)."
    }
    assert not CapacityRequest.objects.exists()


def test_approval_onto_a_model_the_class_may_not_use_is_refused(fleet, ask, pool_admin):
    """The pool admin picks L40S for an open batch request: batch may use the 4090s only."""
    request = ask("etl", min_memory_gib=20)

    with pytest.raises(InvalidInput) as refused:
        capacity_request_approve(
            request=request, actor=pool_admin, pool=fleet, gpu_model=model("l40s")
        )

    assert refused.value.data["errors"] == {
        "gpu_model": "Batch may not run on L40S: data-centre class (it may use: GeForce RTX 4090)."
    }
    request.refresh_from_db()
    assert request.status == RequestStatus.SUBMITTED
    assert not Allocation.objects.exists()


def test_unclassed_team_may_use_any_card(fleet, ask):
    request = ask("lab", pool=fleet, gpu_model=model("rtx4090"))

    assert request.workload_class is None


def test_a_class_may_name_a_model_outside_its_card_classes():
    rule = ClassRule(
        slug="production",
        name="Production",
        card_classes=frozenset({"datacentre"}),
        model_slugs=frozenset({"rtx4090"}),
    )

    assert rule.permits(model_slug="rtx4090", card_class="consumer")
    assert not rule.permits(model_slug="rtx3090", card_class="consumer")
    assert rule.permits(model_slug="l40s", card_class="datacentre")


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("datacentre", "invalid"),
        (["datacentre", 3], "invalid"),
        (["quantum"], "invalid_choice"),
        (["consumer", "consumer"], "duplicate"),
    ],
)
def test_card_classes_outside_the_list_of_known_classes_are_refused(value, code):
    """The admin's form is the only writer: full_clean refuses what is not a list of distinct
    known card classes (consumer, datacentre)."""
    with pytest.raises(ValidationError) as refused:
        card_classes_validator(value)
    assert refused.value.code == code
    card_classes_validator(["consumer", "datacentre"])  # the two known ones pass
