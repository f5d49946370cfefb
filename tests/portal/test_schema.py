"""The OpenAPI schema is served and describes the inventory API."""

from __future__ import annotations

import json
import threading

import pytest
from django.test import RequestFactory
from django.urls import resolve

pytestmark = pytest.mark.django_db


def test_the_openapi_schema_is_served(member_api):
    response = member_api.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "gpu-pool-portal API"
    for path in (
        "/api/v1/nodes/",
        "/api/v1/nodes/{hostname}/",
        "/api/v1/gpus/",
        "/api/v1/gpu-models/{slug}/",
        "/api/v1/pools/cuda-support/",
        "/api/v1/inventory/imports/",
        "/api/v1/unrecognised-models/",
        "/api/v1/auth/token/",
    ):
        assert path in schema["paths"], path


def test_the_api_docs_page_is_served(member_page):
    assert member_page.get("/api/docs/").status_code == 200


def _write_examples(schema: dict, path: str) -> list[dict]:
    body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    return [example["value"] for example in body["examples"].values()]


def _description(schema: dict, component: str, field: str) -> str:
    return schema["components"]["schemas"][component]["properties"][field]["description"]


def test_the_docs_say_team_pool_and_gpu_model_take_slugs(member_api):
    """A newcomer's first create failed with "slug=NLP does not exist": the docs now say so."""
    schema = member_api.get("/api/schema/", {"format": "json"}).json()

    for component in ("CapacityRequestRequest", "ApproveRequest", "SizingEstimateCreateRequest"):
        fields = schema["components"]["schemas"][component]["properties"]
        for field in {"team", "pool", "gpu_model", "gpu_models"} & set(fields):
            assert "slug" in _description(schema, component, field), (component, field)
    assert _description(schema, "CapacityRequestRequest", "team").startswith(
        "Team slug, not its name: `nlp`, not `NLP`"
    )


def test_each_write_has_an_example_body_the_api_accepts(member_api, admin_api):
    """Every example body of the three writes, posted as it is (its fixed dates moved into the
    coming weeks), is accepted: 201 for a request and an extension, 202 for an estimate. The
    fleet is the demo's names: pool ``train-slurm`` with one 8-card A100 NVSwitch node, teams
    ``nlp`` and ``vision``, an allocation of nlp to extend."""
    from datetime import timedelta

    from django.utils import timezone
    from factories import AllocationFactory, PoolFactory, TeamFactory, node_with_gpus

    from pools.common.choices import AllocationStatus, Scheduler
    from pools.inventory.models import GpuModel

    schema = member_api.get("/api/schema/", {"format": "json"}).json()
    pool = PoolFactory(slug="train-slurm", scheduler=Scheduler.SLURM, slurm_partition="train")
    node_with_gpus(8, hostname="trn-01", pool=pool, nvlink_domains=[list(range(8))])
    nlp, _ = TeamFactory(slug="nlp"), TeamFactory(slug="vision")
    now = timezone.now().replace(microsecond=0)
    allocation = AllocationFactory(
        team=nlp, pool=pool, gpu_model=GpuModel.objects.get(slug="a100_80g_sxm"), card_count=1,
        starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=10),
        status=AllocationStatus.ACTIVE,
    )  # fmt: skip
    window = {"starts_at": (now + timedelta(days=7)).isoformat(),
              "ends_at": (now + timedelta(days=21)).isoformat()}  # fmt: skip

    requests = _write_examples(schema, "/api/v1/requests/")
    extend = _write_examples(schema, "/api/v1/allocations/{id}/extend/")
    estimates = _write_examples(schema, "/api/v1/estimates/")

    assert len(requests) == 2 and len(extend) == 1 and len(estimates) == 1
    for body in requests:
        response = admin_api.post("/api/v1/requests/", {**body, **window}, format="json")
        assert response.status_code == 201, response.json()
    (body,) = extend
    later = {"ends_at": (now + timedelta(days=24)).isoformat()}
    response = admin_api.post(
        f"/api/v1/allocations/{allocation.pk}/extend/", {**body, **later}, format="json"
    )
    assert response.status_code == 201, response.json()
    (body,) = estimates
    response = admin_api.post("/api/v1/estimates/", body, format="json")
    assert response.status_code == 202, response.json()


def test_every_operation_documents_the_errors_the_portal_answers(member_api):
    """The statuses ``portal.openapi`` adds (schemathesis' status_code_conformance counted 118
    undocumented 400/401/404 answers as an admin before): 401, 403 and 503 (with Retry-After)
    everywhere; 404 wherever a path names an object; 409 on writes; one error body."""
    schema = member_api.get("/api/schema/", {"format": "json"}).json()
    operations = [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]
    assert len(operations) >= 80
    for path, method, operation in operations:
        statuses = set(operation["responses"])
        assert {"401", "403", "503"} <= statuses, (method, path)
        assert operation["responses"]["503"]["headers"]["Retry-After"]["required"] is True
        if "{" in path:
            assert "404" in statuses, (method, path)
        if method != "get":
            assert "409" in statuses, (method, path)
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["code", "detail"]
    detail = schema["paths"]["/api/v1/pools/{slug}/"]["get"]["responses"]["404"]
    assert detail["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_the_paging_bounds_are_documented_as_checked(member_api):
    schema = member_api.get("/api/schema/", {"format": "json"}).json()
    parameters = {
        p["name"]: p["schema"] for p in schema["paths"]["/api/v1/pools/"]["get"]["parameters"]
    }
    assert parameters["page"] == {"type": "integer", "minimum": 1}
    assert parameters["page_size"] == {"type": "integer", "minimum": 1, "maximum": 500}
    # the pool's capacity is one list, not a page of one (it was documented as paginated)
    capacity = schema["paths"]["/api/v1/pools/{slug}/capacity/"]["get"]
    assert capacity["responses"]["200"]["content"]["application/json"]["schema"]["type"] == "array"
    assert not any(p["name"] == "page" for p in capacity.get("parameters", []))


def test_concurrent_schema_requests_are_all_served_and_identical(monkeypatch):
    """Several requests building the document at once in one process (a threaded server's
    first docs page) each get 200 and the same document; the builds never overlap."""
    view = resolve("/api/schema/").func
    generator_class = view.view_class.generator_class
    threads_n = 4
    active = 0
    most_active = 0
    counting = threading.Lock()

    class CountingGenerator(generator_class):
        def get_schema(self, *args, **kwargs):
            nonlocal active, most_active
            with counting:
                active += 1
                most_active = max(most_active, active)
            try:
                return super().get_schema(*args, **kwargs)
            finally:
                with counting:
                    active -= 1

    monkeypatch.setattr(view.view_class, "generator_class", CountingGenerator)
    start = threading.Barrier(threads_n)
    answers = []

    def fetch():
        request = RequestFactory().get("/api/schema/", {"format": "json"})
        start.wait()
        try:
            response = view(request)
            response.render()
            answers.append((response.status_code, response.content))
        except Exception as error:  # a 500 under a real server
            answers.append((500, repr(error).encode()))

    threads = [threading.Thread(target=fetch) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [status for status, _ in answers] == [200] * threads_n
    assert len({body for _, body in answers}) == 1
    assert json.loads(answers[0][1])["info"]["title"] == "gpu-pool-portal API"
    assert most_active == 1
