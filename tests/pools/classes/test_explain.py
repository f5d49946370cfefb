"""The explainer applies the request's workload class (issue 36): pure core over hand-made
facts, and the API over the hand-built fleet of ``test_eligibility``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from pools.capacity.models import CapacityRequest
from pools.classes.rules import ClassRule
from pools.explain.core import Ask, CardCounts, ModelFacts, OptionFacts, Viewer, explain

T0 = datetime(2027, 1, 11, 9, tzinfo=UTC)
L40S = ModelFacts("l40s", "L40S", Decimal(45), "datacentre")
RTX = ModelFacts("rtx4090", "GeForce RTX 4090", Decimal("23.99"), "consumer")
PRODUCTION = ClassRule("production", "Production", frozenset({"datacentre"}), frozenset(), True)
BATCH = ClassRule("batch", "Batch", frozenset({"consumer"}), frozenset())


def option(model, usable):
    return OptionFacts(
        pool_slug="mixed",
        pool_name="Mixed",
        scheduler="kubernetes",
        overcommit_ratio=Decimal("1.00"),
        model=model,
        cards=CardCounts(schedulable=usable, on_driver=usable),
        holds=(),
        groups=None,
        price_per_card_hour=None,
        currency=None,
    )


FLEET = [option(L40S, 4), option(RTX, 8)]


def ask(cards, model=None, rule=None, min_memory=None):
    return Ask(
        team_slug="svc",
        workload_kind="inference",
        scheduler="kubernetes",
        cards=cards,
        start=T0,
        end=T0 + timedelta(days=7),
        model_slug=model.slug if model else None,
        model_name=model.name if model else None,
        model_memory_gib=model.memory_gib if model else None,
        model_card_class=model.card_class if model else None,
        min_memory_gib=min_memory,
        workload_class=rule,
        class_may_use=("L40S",) if rule is PRODUCTION else ("GeForce RTX 4090",),
    )


def test_production_on_4090_is_a_class_reason_naming_the_l40s():
    """8 RTX 4090 are free, but production may use data-centre cards: the fleet's is L40S."""
    answer = explain(ask(4, RTX, PRODUCTION), FLEET, viewer=Viewer(pool_admin=True))

    assert not answer.approvable_now
    assert [(r.code, r.text) for r in answer.why_not] == [
        (
            "class",
            "Production may not run on GeForce RTX 4090: consumer class (it may use: L40S)",
        )
    ]
    assert answer.why_not[0].data == {"workload_class": "production", "may_use": ["L40S"]}
    assert answer.when == []


def test_open_production_ask_is_checked_on_the_l40s_only():
    """Any ≥ 20 GiB: 4 L40S and 8 RTX 4090 free. Unclassed, 6 cards fit (on the 4090s);
    production may use only the 4 L40S, so 6 do not fit and no alternative is a 4090."""
    assert explain(
        ask(6, min_memory=Decimal(20)), FLEET, viewer=Viewer(pool_admin=True)
    ).approvable_now

    answer = explain(
        ask(6, rule=PRODUCTION, min_memory=Decimal(20)), FLEET, viewer=Viewer(pool_admin=True)
    )

    assert not answer.approvable_now
    assert [row["gpu_model"] for row in answer.when] == ["l40s"]
    assert [r.code for r in answer.why_not] == ["free_cards"]
    assert all(row.get("gpu_model") != "rtx4090" for row in answer.where_instead)


def test_batch_on_4090_passes():
    answer = explain(ask(8, RTX, BATCH), FLEET, viewer=Viewer(pool_admin=True))

    assert answer.approvable_now
    assert answer.why_not == []


@pytest.mark.django_db
def test_api_create_refuses_production_on_4090_and_explain_says_why(api_as, member, teams, fleet):
    """The same request through the API: a 400 on gpu_model (nothing saved), and the
    explainer's ``class`` reason with the models production may use."""
    start = (timezone.now() + timedelta(days=7)).replace(microsecond=0)
    body = {
        "team": "etl",
        "workload_kind": "inference",
        "workload_class": "production",
        "gpu_model": "rtx4090",
        "card_count": 4,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(days=7)).isoformat(),
        "justification": "serve",
    }
    client = api_as(member)

    created = client.post("/api/v1/requests/", body, format="json")

    assert created.status_code == 400
    assert created.json()["errors"] == {
        "gpu_model": [
            "Production may not run on GeForce RTX 4090: consumer class (it may use: L40S)."
        ]
    }
    assert not CapacityRequest.objects.exists()

    explained = client.post("/api/v1/requests/explain/", body, format="json")

    assert explained.status_code == 200
    answer = explained.json()
    assert [r["code"] for r in answer["why_not"]] == ["class"]
    assert answer["why_not"][0]["data"] == {"workload_class": "production", "may_use": ["L40S"]}
    assert answer["submit_errors"] == created.json()["errors"]
