"""The token-flow API answers as its OpenAPI document says, nulls included (a task whose only
call reported no usage, on a served model without a token price: no cost, no first-call input,
no latency), and schemathesis finds no 5xx or mismatch on its operations as a member."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance
from tokenflow_support import task_a, task_b

from billing.services.tokens import usage_tokens_ingest
from pools.tokenflow.models import AgentTask

DAY = {"since": "2026-12-01", "until": "2026-12-01"}


@pytest.fixture
def api_schema(db):
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def token(team, team_member, rates):
    from pools.access.services import api_token_create

    unmetered = task_b(key="u")[:1]
    unmetered[0] |= {"served_model": "no-price", "metadata": {"task_id": "U"}}
    del unmetered[0]["usage"], unmetered[0]["latency_s"]
    usage_tokens_ingest(records=task_a() + task_b() + unmetered)
    return api_token_create(user=team_member, client="schemathesis")[1]


def test_reads_with_nulls_match_the_schema(api_schema, token):
    from werkzeug.test import Client

    client = Client(api_schema.app)
    mismatches = []

    def get(path: str, **query):
        response = client.get(path, query_string=query, headers={"Authorization": f"Token {token}"})
        assert response.status_code == 200, (path, response.get_data()[:300])
        try:
            api_schema.find_operation_by_path("GET", path).validate_response(response)
        except (Exception, BaseExceptionGroup) as exc:
            mismatches.extend(f"{path}: {e}"[:500] for e in getattr(exc, "exceptions", [exc]))
        return response.get_json()

    tasks = get("/api/v1/token-flow/tasks/", **DAY)["results"]
    unmetered = AgentTask.objects.get(task_id="U")
    detail = get(f"/api/v1/token-flow/tasks/{unmetered.pk}/")
    get(f"/api/v1/token-flow/tasks/{unmetered.pk}/calls/")
    summary = get("/api/v1/token-flow/tasks/summary/", **DAY)

    assert mismatches == []
    assert [t["task_id"] for t in tasks] == ["A", "B", "U"]  # unknown cost sorts last
    assert (detail["cost"], detail["first_call_input_tokens"], detail["mean_latency_s"]) == (
        None, None, None)  # fmt: skip
    assert (summary["cost"], summary["unpriced_tasks"]) == (None, 1)


@pytest.mark.subprocess
def test_schemathesis_on_token_flow_operations(api_schema, token):
    operations = [r.ok() for r in api_schema.get_all_operations() if "token-flow" in r.ok().path]
    failures, statuses = [], Counter()

    def fuzz_one(operation):
        @given(case=operation.as_strategy())
        @settings(max_examples=10, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        def fuzz(case):
            response = case.call(headers={"Authorization": f"Token {token}"})
            statuses[response.status_code] += 1
            try:
                case.validate_response(
                    response, checks=[not_a_server_error, response_schema_conformance]
                )
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{operation.label}: {exc}"[:1500])

        fuzz()

    for operation in operations:
        fuzz_one(operation)

    assert len(operations) == 4  # list, detail, calls, summary
    assert sum(statuses.values()) >= 8
    assert failures == [], "\n\n".join(failures[:5])
