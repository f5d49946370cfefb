"""The OpenAPI document matches what the API answers.

1. Every operation of ``/api/schema/``, fuzzed by schemathesis (valid and invalid inputs, from
   the schema itself) through the WSGI app, as a pool admin and as a team member: no answer is a
   5xx and every documented answer matches its response schema.
2. Every list and detail read, against a world whose nullable fields really are null (a card of
   no known model, a node in no pool and no driver group, a system audit event, a request with
   no allocation and no decider, a statement line with no GPU model): each response matches its
   schema, so a generated client does not break on them.
"""

from __future__ import annotations

from collections import Counter
from datetime import date
from decimal import Decimal

import pytest
import schemathesis
from factories import AllocationFactory, CapacityRequestFactory, NodeFactory, PoolFactory
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

pytestmark = [pytest.mark.django_db, pytest.mark.subprocess]

EXAMPLES_PER_OPERATION = 15
CHECKS = [not_a_server_error, response_schema_conformance]


@pytest.fixture
def world(team, team_member, infer_pool, l40s, django_user_model):
    """Objects with null foreign keys and every kind of row the API lists."""
    from django.utils import timezone

    from billing.models import Statement, StatementLine
    from pools.access.services import api_token_create
    from pools.audit.services import audit_event_record
    from pools.common.choices import AllocationStatus
    from pools.inventory.models import Gpu

    admin = django_user_model.objects.create_user("api-admin", password="x", is_staff=True)
    stray = NodeFactory(hostname="stray-01", pool=None, driver_group=None, driver_version="")
    Gpu.objects.create(node=stray, index=0, gpu_model=None, raw_model_name="Mystery GPU 9000")
    PoolFactory(slug="empty", name="Empty", slurm_partition="empty")
    pending = CapacityRequestFactory(team=team, requested_by=team_member, pool=infer_pool)
    allocation = AllocationFactory(
        team=team, pool=infer_pool, gpu_model=l40s, status=AllocationStatus.ACTIVE
    )
    audit_event_record(actor=None, action="request.created", obj=pending)
    statement = Statement.objects.create(
        team=team,
        month=date(2026, 10, 1),
        currency="EUR",
        adjustment_amount=Decimal("-5.00"),
        total_amount=Decimal("-5.00"),
        built_at=timezone.now(),
    )
    StatementLine.objects.create(
        statement=statement,
        position=1,
        kind="adjustment",
        period=date(2026, 9, 1),
        gpu_model=None,
        served_model="",
        basis="tokens",
        quantity=Decimal("-1"),
        unit="M tokens",
        unit_price=Decimal("5.00"),
        amount=Decimal("-5.00"),
        rate_from=date(2026, 1, 1),
        rate_to=date(2026, 12, 31),
    )
    # overrides with no author (a deleted user), no GPU model (a priority), no class before
    from datetime import timedelta

    from pools.capacity.models import TemporaryOverride
    from pools.classes.models import WorkloadClass

    now = timezone.now()
    held = {"team": team, "pool": infer_pool, "until": now + timedelta(days=1), "created_at": now}
    TemporaryOverride.objects.create(kind="ceiling", gpu_model=l40s, cards=3, reason="x", **held)
    TemporaryOverride.objects.create(
        kind="priority", workload_class=WorkloadClass.objects.order_by("pk").first(), reason="y",
        status="expired", ended_at=now, **held,
    )  # fmt: skip
    return {
        "admin": api_token_create(user=admin, client="schemathesis")[1],
        "member": api_token_create(user=team_member, client="schemathesis")[1],
        "request": pending,
        "allocation": allocation,
        "statement": statement,
        "node": stray,
    }


@pytest.fixture
def api_schema(db):
    """The served schema, its operations called through the real WSGI app (no network)."""
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    # As Django's test client does: a request must not close the test's open transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def run_operation(operation, token: str, statuses: Counter) -> list[str]:
    """Fuzz one operation; the failures found, as text (empty: none). Counts the statuses."""
    failures: list[str] = []

    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case):
        response = case.call(headers={"Authorization": f"Token {token}"})
        statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except (Exception, BaseExceptionGroup) as exc:  # one failure, or a group of them
            failures.append(f"{operation.label}: {exc}"[:2000])

    fuzz()
    return failures


@pytest.mark.parametrize("role", ["admin", "member"])
def test_schemathesis_finds_no_server_error_and_no_schema_mismatch(api_schema, world, role):
    operations = [result.ok() for result in api_schema.get_all_operations()]
    failures: list[str] = []
    statuses: Counter = Counter()

    for operation in operations:
        failures.extend(run_operation(operation, world[role], statuses))

    print(
        f"schemathesis as {role}: {len(operations)} operations, {sum(statuses.values())} calls,"
        f" statuses {dict(sorted(statuses.items()))}, {len(failures)} failures"
    )
    assert len(operations) >= 50  # every operation of the API, not a filtered few
    assert sum(statuses.values()) >= 2 * len(operations)  # really fuzzed, not one call each
    assert failures == [], f"{len(failures)} failures:\n" + "\n\n".join(failures[:20])


def read_paths(world) -> list[str]:
    return [
        "/api/v1/gpus/",
        "/api/v1/nodes/",
        f"/api/v1/nodes/{world['node'].hostname}/",
        "/api/v1/pools/",
        "/api/v1/pools/empty/",
        "/api/v1/overrides/",
        "/api/v1/gpu-models/",
        "/api/v1/driver-groups/",
        "/api/v1/teams/",
        "/api/v1/requests/",
        f"/api/v1/requests/{world['request'].pk}/",
        f"/api/v1/requests/{world['allocation'].request_id}/",
        "/api/v1/allocations/",
        f"/api/v1/allocations/{world['allocation'].pk}/",
        "/api/v1/audit-events/",
        "/api/v1/statements/",
        f"/api/v1/statements/{world['statement'].pk}/",
        f"/api/v1/statements/{world['statement'].pk}/lines/",
        "/api/v1/unrecognised-models/",
        "/api/v1/inventory/imports/",
        "/api/v1/estimates/",
        "/api/v1/idle-findings/",
        "/api/v1/exemptions/",
        "/api/v1/reclamation-policies/",
    ]


def test_reads_with_null_fields_match_their_response_schemas(api_schema, world):
    from werkzeug.test import Client

    client = Client(api_schema.app)
    auth = {"Authorization": f"Token {world['admin']}"}
    mismatches: list[str] = []

    def get(path: str, **query):
        response = client.get(path, query_string=query, headers=auth)
        assert response.status_code == 200, (path, response.get_data()[:300])
        try:
            api_schema.find_operation_by_path("GET", path).validate_response(response)
        except (Exception, BaseExceptionGroup) as exc:  # one mismatch, or a group of them
            details = getattr(exc, "exceptions", [exc])
            mismatches.extend(f"{path}: {str(e).split('Value:')[0]}" for e in details)
        return response.get_json()

    checked = [get(path) for path in read_paths(world)]

    assert len(checked) == len(read_paths(world))
    assert mismatches == [], "\n".join(mismatches)
    # The nulls really were in the answers (otherwise the check proved nothing).
    assert [g["gpu_model"] for g in get("/api/v1/gpus/", node="stray-01")["results"]] == [None]
    node = get("/api/v1/nodes/stray-01/")
    assert (node["pool"], node["driver_group"]) == (None, None)
    assert None in [e["actor"] for e in get("/api/v1/audit-events/")["results"]]
    request = get(f"/api/v1/requests/{world['request'].pk}/")
    assert (request["allocation"], request["decided_by"]) == (None, None)
    statement = get(f"/api/v1/statements/{world['statement'].pk}/")
    assert statement["month"] == "2026-10"
    lines = get(f"/api/v1/statements/{world['statement'].pk}/lines/")["results"]
    assert [line["gpu_model"] for line in lines] == [None]
