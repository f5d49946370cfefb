"""Node names are RFC 1123 host names: at most 63 characters between dots and 253 in all
(RFC 1123 §2.1, keeping RFC 1035 §2.3.4's lengths). A name whose label is longer — the validator
took one label of 253 — is refused by each import path with its node named in the report, and the
file's other nodes are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from factories import nvidia_smi_csv, slurm_node, slurm_nodes_json

from pools.common.validators import hostname_validator
from pools.inventory.models import Gpu, Node
from pools.inventory.services.import_files import inventory_import_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LONG_LABEL = "n" * 64  # one character over RFC 1123's 63
RULE = "at most 63 characters between dots, 253 in all"


@pytest.mark.parametrize(
    "name",
    [
        "a" * 63,
        f"{'a' * 63}.{'b' * 63}",
        ".".join(["c" * 63] * 4)[:253],  # 253 characters, labels of 63 and a last of 61
        "gpu_node-01.example.org",
    ],
)
def test_labels_of_63_and_names_of_253_are_taken(name):
    hostname_validator(name)


@pytest.mark.parametrize(
    "name",
    [LONG_LABEL, "a" * 253, f"gpu-01.{LONG_LABEL}", f"{LONG_LABEL}.example.org", "a" * 254],
)
def test_a_label_over_63_or_a_name_over_253_is_refused(name):
    with pytest.raises(ValidationError) as refused:
        hostname_validator(name)
    assert RULE in refused.value.messages[0]


@pytest.mark.django_db
def test_a_slurm_file_rejects_the_long_label_and_keeps_the_rest():
    report = inventory_import_file(
        data=slurm_nodes_json(
            slurm_node("gpu-node-01", "gpu:rtx4090:4"),
            slurm_node(LONG_LABEL, "gpu:rtx4090:2"),
            slurm_node("gpu-node-02", "gpu:rtx4090:2"),
        ),
        source="slurm",
    )
    assert (report.created, report.rejected) == (["gpu-node-01", "gpu-node-02"], [LONG_LABEL])
    [issue] = report.issues
    assert (issue.node, issue.field) == (LONG_LABEL, "hostname")
    assert RULE in issue.message
    assert sorted(Node.objects.values_list("hostname", flat=True)) == ["gpu-node-01", "gpu-node-02"]
    assert Gpu.objects.count() == 6


@pytest.mark.django_db
def test_a_kubernetes_nodelist_rejects_the_long_label_and_keeps_the_rest():
    """The fixture's five Nodes, the first renamed to a 64-character label."""
    nodes = json.loads((FIXTURES / "kubernetes" / "nodes.json").read_text())
    kept = [item["metadata"]["name"] for item in nodes["items"][1:]]
    nodes["items"][0]["metadata"]["name"] = LONG_LABEL
    report = inventory_import_file(data=json.dumps(nodes).encode(), source="kubernetes")
    assert report.rejected == [LONG_LABEL]
    assert [(i.node, i.field) for i in report.issues if i.node == LONG_LABEL] == [
        (LONG_LABEL, "hostname")
    ]
    assert sorted(Node.objects.values_list("hostname", flat=True)) == sorted(kept)


@pytest.mark.django_db
def test_the_command_names_the_nvidia_smi_file_whose_name_is_too_long(tmp_path, capsys):
    """``--node-from-filename``: the host named by the second file's stem is refused (exit 1,
    its line in the report), the first file's host is imported."""
    good, bad = tmp_path / "trn-01.csv", tmp_path / f"{LONG_LABEL}.csv"
    good.write_bytes(nvidia_smi_csv(2))
    bad.write_bytes(nvidia_smi_csv(2))
    with pytest.raises(SystemExit) as exited:
        call_command(
            "import_inventory",
            "--source",
            "nvidia-smi",
            "--node-from-filename",
            str(good),
            str(bad),
        )
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert "1 created, 0 updated, 0 unchanged, 1 rejected, 2 GPUs" in out
    [line] = [x for x in out.splitlines() if "error:" in x]
    assert line.startswith(f"  error: node {LONG_LABEL}, field hostname: invalid node name")
    assert RULE in line
    assert list(Node.objects.values_list("hostname", flat=True)) == ["trn-01"]


@pytest.mark.django_db
def test_the_import_page_refuses_the_node_field(admin_page):
    response = admin_page.post(
        "/inventory/import/",
        {
            "source": "nvidia-smi",
            "node": LONG_LABEL,
            "file": SimpleUploadedFile("smi.csv", nvidia_smi_csv(1)),
        },
    )
    assert response.status_code == 200
    assert RULE in response.context["form"].errors["node"][0]
    assert not Node.objects.exists()
