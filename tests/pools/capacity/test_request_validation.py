"""Bad input to a capacity request, in the service and through the API: a clear field error and
nothing written.

``infer``: Kubernetes, 8 L40S on driver 550.54.15 (CUDA up to 12.4).
``train``: Slurm, 8 A100 SXM4 80GB on driver 535.129.03 (CUDA up to 12.2).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import next_week_9am

from pools.capacity.models import CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_create, validate_request_fields
from pools.common.errors import InvalidInput
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


WHOLE = "The number of cards must be a whole number of at least 1."


@pytest.fixture
def start():
    return next_week_9am()


@pytest.fixture
def a100(db):
    return GpuModel.objects.get(slug="a100_80g_sxm")


@pytest.fixture
def create(team, team_member, infer_pool, train_pool, l40s, start):
    """``create(**fields)`` as alice: 2 L40S in infer for a week, unless overridden."""

    def make(**fields):
        values = {
            "team": team,
            "workload_kind": "inference",
            "pool": infer_pool,
            "gpu_model": l40s,
            "card_count": 2,
            "starts_at": start,
            "ends_at": start + timedelta(days=7),
            "justification": "serve llama-3-8b",
        }
        values.update(fields)
        return capacity_request_create(actor=team_member, fields=RequestFields(**values))

    return make


def refused(create, request_state, **fields) -> dict[str, str]:
    """The field errors ``create(**fields)`` raises; asserts that nothing was written."""
    before = request_state()
    with pytest.raises(InvalidInput) as excinfo:
        create(**fields)
    assert request_state() == before
    return excinfo.value.data["errors"]


def test_end_before_or_at_the_start(create, request_state, start):
    expected = {"ends_at": "The end must be after the start."}
    assert refused(create, request_state, ends_at=start - timedelta(hours=1)) == expected
    assert refused(create, request_state, ends_at=start) == expected


def test_a_window_longer_than_a_year(create, request_state, start):
    assert refused(create, request_state, ends_at=start + timedelta(days=367)) == {
        "ends_at": "A request may last at most 366 days; ask again to extend."
    }


def test_start_in_the_past(create, request_state):
    yesterday = timezone.now() - timedelta(days=1)

    assert refused(
        create, request_state, starts_at=yesterday, ends_at=yesterday + timedelta(days=2)
    ) == {"starts_at": "The start is in the past."}


def test_a_start_a_few_minutes_ago_counts_as_now(create):
    now = timezone.now()

    request = create(starts_at=now - timedelta(minutes=5), ends_at=now + timedelta(days=1))

    assert request.status == "submitted"


@pytest.mark.parametrize("count", [0, -1, 2.5, "3", True, None])
def test_zero_negative_and_non_integer_counts(create, request_state, count):
    assert refused(create, request_state, card_count=count) == {"card_count": WHOLE}


def test_more_cards_than_the_pool_has(create, request_state):
    assert refused(create, request_state, card_count=9) == {
        "card_count": "No eligible pool has 9 such cards (the most is 8)."
    }


def test_over_commit_raises_the_most_a_request_may_ask(create, request_state, infer_pool):
    infer_pool.overcommit_ratio = Decimal("1.50")
    infer_pool.save()

    assert create(card_count=12).card_count == 12  # floor(8 x 1.5)
    assert refused(create, request_state, card_count=13) == {
        "card_count": "No eligible pool has 13 such cards (the most is 12)."
    }


def test_a_gpu_model_the_pool_does_not_offer(create, request_state, a100):
    assert refused(create, request_state, gpu_model=a100) == {
        "gpu_model": "Inference offers no schedulable A100 SXM4 80GB cards."
    }


def test_a_cuda_version_no_driver_group_supports(create, request_state, train_pool, a100):
    # 535.129.03 is CUDA 12.2 at most (12.3 needs 545.23.06, 12.4 needs 550.54.14).
    training = {"workload_kind": "training", "pool": train_pool, "gpu_model": a100}

    assert refused(create, request_state, cuda_version="12.4", **training) == {
        "cuda_version": "No eligible pool has a driver that supports CUDA 12.4."
    }
    assert create(cuda_version="12.2", **training).cuda_version == "12.2"


def test_a_cuda_version_no_pool_supports_when_any_pool_will_do(create, request_state, a100):
    assert refused(
        create,
        request_state,
        workload_kind="training",
        pool=None,
        gpu_model=a100,
        cuda_version="12.8",
    ) == {"cuda_version": "No eligible pool has a driver that supports CUDA 12.8."}


@pytest.mark.parametrize("cuda", ["twelve", "12", "12.x", "N/A"])
def test_a_cuda_version_that_is_not_one(create, request_state, cuda):
    assert refused(create, request_state, cuda_version=cuda) == {
        "cuda_version": "Write a CUDA version as MAJOR.MINOR, e.g. 12.4."
    }


def test_the_wrong_scheduler_for_the_workload_kind(create, request_state, train_pool, a100):
    assert refused(create, request_state, workload_kind="training") == {
        "pool": "The pool “Inference” runs Kubernetes; training requests need a Slurm pool."
    }
    assert refused(create, request_state, pool=train_pool, gpu_model=a100) == {
        "pool": "The pool “Training” runs Slurm; inference requests need a Kubernetes pool."
    }


def test_the_wrong_scheduler_names_the_pool_apart_from_the_kind(create, request_state, infer_pool):
    """A Kubernetes pool called like the training kind's label: the error still tells which is
    the pool (quoted) and which the kind."""
    infer_pool.name = "Training (Slurm)"
    infer_pool.save(update_fields=["name"])

    assert refused(create, request_state, workload_kind="training") == {
        "pool": "The pool “Training (Slurm)” runs Kubernetes; training requests need a Slurm pool."
    }


def test_an_unknown_workload_kind(create, request_state):
    assert refused(create, request_state, workload_kind="batch") == {
        "workload_kind": "Choose training (Slurm) or inference (Kubernetes)."
    }


def test_naive_datetimes(create, request_state, start):
    naive = start.replace(tzinfo=None)

    assert refused(create, request_state, starts_at=naive, ends_at=naive + timedelta(1)) == {
        "starts_at": "Give times with a time zone offset."
    }


def test_neither_a_model_nor_a_minimum_memory(create, request_state):
    assert refused(create, request_state, gpu_model=None) == {
        "gpu_model": "Choose a GPU model, or a minimum memory per card."
    }


def test_no_model_has_that_much_memory(create, request_state):
    # No card of the fleet has 200 GiB: nothing is offered at all.
    assert refused(create, request_state, gpu_model=None, min_memory_gib=Decimal("200")) == {
        "card_count": "No eligible pool has 2 such cards (the most is 0)."
    }


@pytest.mark.parametrize("justification", ["", "   "])
def test_a_justification_is_required(create, request_state, justification):
    assert refused(create, request_state, justification=justification) == {
        "justification": "Say what the cards are for."
    }


def test_a_justification_of_at_most_5000_characters(create, request_state):
    assert create(justification="x" * 5000).justification == "x" * 5000
    assert refused(create, request_state, justification="x" * 5001) == {
        "justification": "Keep it under 5,000 characters."
    }


def test_several_errors_are_reported_together(create, request_state):
    past = timezone.now() - timedelta(days=3)

    assert refused(
        create, request_state, card_count=0, starts_at=past, ends_at=past - timedelta(hours=1)
    ) == {
        "card_count": WHOLE,
        "ends_at": "The end must be after the start.",
        "starts_at": "The start is in the past.",
    }


def test_validate_request_fields_accepts_a_good_request(team, infer_pool, l40s, start):
    assert (
        validate_request_fields(
            RequestFields(
                team=team,
                workload_kind="inference",
                card_count=8,
                starts_at=start,
                ends_at=start + timedelta(days=1),
                pool=infer_pool,
                gpu_model=l40s,
                cuda_version="12.4",
            )
        )
        == {}
    )


# --- the same through the API: 400 with field-level ``errors``; nothing written ----------------

URL = "/api/v1/requests/"


def iso(moment: datetime) -> str:
    return moment.isoformat()


@pytest.fixture
def payload(start):
    def make(**fields):
        body = {
            "team": "nlp",
            "workload_kind": "inference",
            "pool": "infer",
            "gpu_model": "l40s",
            "card_count": 2,
            "starts_at": iso(start),
            "ends_at": iso(start + timedelta(days=7)),
            "justification": "serve llama-3-8b",
        }
        body.update(fields)
        return body

    return make


def api_refused(client, body, request_state) -> dict:
    before = request_state()
    response = client.post(URL, body, format="json")
    assert response.status_code == 400, response.content
    assert request_state() == before
    return response.json()


@pytest.fixture
def alice_api(api_as, team_member, infer_pool, train_pool):
    return api_as(team_member)


def test_the_api_accepts_the_good_payload(alice_api, payload):
    response = alice_api.post(URL, payload(), format="json")

    assert response.status_code == 201, response.content
    assert response.json()["status"] == "submitted"
    assert CapacityRequest.objects.count() == 1


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"team": "no-such-team"}, {"team": ["No team you can see has this slug."]}),
        ({"team": 1}, {"team": ["No team you can see has this slug."]}),  # a forged id
        ({"card_count": 0}, {"card_count": ["Ensure this value is greater than or equal to 1."]}),
        ({"card_count": -3}, {"card_count": ["Ensure this value is greater than or equal to 1."]}),
        ({"card_count": 2.5}, {"card_count": ["A valid integer is required."]}),
        ({"card_count": "two"}, {"card_count": ["A valid integer is required."]}),
        (
            {"gpu_model": "no-such-gpu"},
            {"gpu_model": ["Object with slug=no-such-gpu does not exist."]},
        ),
        ({"workload_kind": "batch"}, {"workload_kind": ['"batch" is not a valid choice.']}),
    ],
)
def test_serializer_field_errors(alice_api, payload, request_state, fields, errors):
    body = api_refused(alice_api, payload(**fields), request_state)

    assert body["code"] == "invalid_input"
    assert body["errors"] == errors


@pytest.mark.parametrize("field", ["starts_at", "ends_at"])
def test_naive_datetimes_are_refused(alice_api, payload, request_state, start, field):
    naive = (start + timedelta(days=1 if field == "ends_at" else 0)).replace(tzinfo=None)

    body = api_refused(alice_api, payload(**{field: naive.isoformat()}), request_state)

    assert list(body["errors"]) == [field]
    assert "offset" in body["errors"][field][0]


def test_service_field_errors_come_back_as_400(alice_api, payload, request_state, start):
    cases = [
        (
            {"ends_at": iso(start - timedelta(hours=2))},
            "ends_at",
            "The end must be after the start.",
        ),
        (
            {"starts_at": iso(timezone.now() - timedelta(days=1))},
            "starts_at",
            "The start is in the past.",
        ),
        ({"card_count": 9}, "card_count", "No eligible pool has 9 such cards (the most is 8)."),
        (
            {"gpu_model": "a100_80g_sxm"},
            "gpu_model",
            "Inference offers no schedulable A100 SXM4 80GB cards.",
        ),
        (
            {
                "workload_kind": "training",
                "pool": "train",
                "gpu_model": "a100_80g_sxm",
                "cuda_version": "12.4",
            },
            "cuda_version",
            "No eligible pool has a driver that supports CUDA 12.4.",
        ),
        (
            {"cuda_version": "abc"},
            "cuda_version",
            "Write a CUDA version as MAJOR.MINOR, e.g. 12.4.",
        ),
        (
            {"workload_kind": "training"},
            "pool",
            "The pool “Inference” runs Kubernetes; training requests need a Slurm pool.",
        ),
    ]
    for fields, field, message in cases:
        body = api_refused(alice_api, payload(**fields), request_state)

        assert body["code"] == "invalid_input", fields
        assert body["errors"] == {field: [message]}, fields
