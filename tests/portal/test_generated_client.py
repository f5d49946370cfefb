"""A Python client generated from the served OpenAPI document (openapi-python-client, dev extra)
works against the running portal: it lists GPUs, and creates, submits and approves a request,
parsing every answer into its typed models (a schema that lied about a field would fail here)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.subprocess]


@pytest.fixture(scope="module")
def gpp_client(tmp_path_factory):
    """The ``gpp_client`` package generated from ``/api/schema/``, importable."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    root = tmp_path_factory.mktemp("client")
    schema = json.loads(
        OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    )
    # The client speaks JSON: of the bodies DRF also accepts as form data and multipart, keep
    # the JSON one (the generator's code for three same-schema bodies does not import).
    for operations in schema["paths"].values():
        for operation in operations.values():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                operation["requestBody"]["content"] = {
                    "application/json": content["application/json"]
                }
    (root / "schema.json").write_text(json.dumps(schema))
    (root / "config.json").write_text(
        json.dumps({"package_name_override": "gpp_client", "post_hooks": []})
    )
    generator = Path(sys.executable).with_name("openapi-python-client")
    result = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            "schema.json",
            "--output-path",
            "gpp_client",
            "--meta",
            "none",
            "--config",
            "config.json",
        ],  # fmt: skip
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("gpp_client")
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == "gpp_client" or m.startswith("gpp_client.")]:
            del sys.modules[name]


@pytest.fixture
def catalogue(transactional_db):
    """The GPU model catalogue: an earlier transactional test may have flushed it."""
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModel, GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)


def test_the_generated_client_lists_gpus_and_creates_submits_and_approves_a_request(
    catalogue, gpp_client, live_server, team, team_member, infer_pool, django_user_model
):
    from pools.access.services import api_token_create
    from pools.capacity.models import Allocation

    admin_user = django_user_model.objects.create_user("api-admin", password="x", is_staff=True)
    models = importlib.import_module("gpp_client.models")

    def client_for(user):
        return gpp_client.AuthenticatedClient(
            base_url=live_server.url,
            token=api_token_create(user=user, client="gpp-client")[1],
            prefix="Token",
            raise_on_unexpected_status=True,
        )

    member, admin = client_for(team_member), client_for(admin_user)

    gpus = importlib.import_module("gpp_client.api.gpus.gpus_list").sync(
        client=member, pool="infer", page_size=100
    )
    # infer_pool: 2 nodes x 4 L40S.
    assert gpus.count == 8
    assert {(g.node, g.gpu_model, g.pool) for g in gpus.results} == {
        ("inf-01", "l40s", "infer"),
        ("inf-02", "l40s", "infer"),
    }

    start = (timezone.now() + timedelta(days=7)).replace(minute=0, second=0, microsecond=0)
    body = models.CapacityRequestRequest(
        team="nlp",
        workload_kind=models.WorkloadKindEnum.INFERENCE,
        card_count=3,
        starts_at=start,
        ends_at=start + timedelta(days=2),
        justification="generated client",
        pool="infer",
        gpu_model="l40s",
        submit=False,
    )
    draft = importlib.import_module("gpp_client.api.requests.requests_create").sync(
        client=member, body=body
    )
    assert (draft.status.value, draft.card_count, draft.allocation, draft.decided_by) == (
        "draft",
        3,
        None,
        None,
    )
    submitted = importlib.import_module("gpp_client.api.requests.requests_submit_create").sync(
        draft.id, client=member
    )
    assert submitted.status.value == "submitted"
    allocation = importlib.import_module("gpp_client.api.requests.requests_approve_create").sync(
        draft.id, client=admin, body=models.ApproveRequest()
    )
    assert (allocation.card_count, allocation.team, allocation.pool, allocation.gpu_model) == (
        3,
        "nlp",
        "infer",
        "l40s",
    )
    assert allocation.starts_at == start
    assert Allocation.objects.get(pk=allocation.id).request_id == draft.id
