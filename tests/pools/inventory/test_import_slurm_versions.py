"""Issue 38, item 3: a slurmrestd nodes file of a data-parser version the portal does not read
is refused as a whole (command exit 2, API and page 400), never imported as nodes without cards.

Fixtures: tests/fixtures/slurm/nodes_data_parser_v0.0.99.json is the recorded 24.11.5 answer
``rest_v0.0.42/nodes.json`` (2 nodes: gpu-a100-01 with 4 a100, gpu-4090-01 with 2 rtx4090) with
``meta.plugin.data_parser`` set to ``data_parser/v0.0.99``; see tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from pools.inventory.models import Gpu, InventoryImport, Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def unknown_parser(fixtures_dir):
    return fixtures_dir / "slurm" / "nodes_data_parser_v0.0.99.json"


@pytest.fixture
def recorded_nodes(fixtures_dir):
    return json.loads((fixtures_dir / "slurm" / "rest_v0.0.42" / "nodes.json").read_text())["body"]


def _nothing_written():
    return not (Node.objects.exists() or Gpu.objects.exists() or InventoryImport.objects.exists())


def test_the_command_refuses_it_with_exit_2_and_says_why(unknown_parser, capsys):
    with pytest.raises(SystemExit) as exit_:
        call_command("import_inventory", "--source", "slurm", str(unknown_parser))

    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "'data_parser/v0.0.99'" in err and "reads v0.0.36 to v0.0.45" in err
    assert _nothing_written()


def test_the_api_refuses_it_with_400(admin_api, unknown_parser):
    response = admin_api.post(
        "/api/v1/inventory/imports/",
        {
            "source": "slurm",
            "file": SimpleUploadedFile("nodes.json", unknown_parser.read_bytes()),
        },
        format="multipart",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input" and "data_parser/v0.0.99" in body["detail"]
    assert _nothing_written()


def test_the_page_refuses_it_with_400_on_the_file_field(pool_admin, client, unknown_parser):
    client.force_login(pool_admin)

    response = client.post(
        "/inventory/import/",
        {"source": "slurm", "file": SimpleUploadedFile("nodes.json", unknown_parser.read_bytes())},
    )

    assert response.status_code == 400
    assert "data_parser/v0.0.99" in " ".join(response.context["form"].errors["file"])
    assert _nothing_written()


def test_the_recorded_v0_0_42_answer_still_imports(recorded_nodes, tmp_path):
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(recorded_nodes))

    call_command("import_inventory", "--source", "slurm", str(path))

    assert sorted(Gpu.objects.values_list("node__hostname", flat=True)) == (
        ["gpu-4090-01"] * 2 + ["gpu-a100-01"] * 4
    )
