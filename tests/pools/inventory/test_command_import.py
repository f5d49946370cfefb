"""``manage.py import_inventory``: prints the report; exit 0 all imported, 1 rejected, 2 usage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from factories import PoolFactory, nvidia_smi_csv, slurm_node, slurm_nodes_json

from pools.inventory.models import Gpu, Node

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]


def import_inventory(*args: str) -> int:
    """Run the command in-process; return its exit status."""
    try:
        call_command("import_inventory", *args)
    except SystemExit as exit_:
        return exit_.code
    return 0


def test_exit_0_when_everything_is_imported(tmp_path, capsys):
    PoolFactory(slug="train")
    path = tmp_path / "trn-01.csv"
    path.write_bytes(nvidia_smi_csv(4))

    status = import_inventory(
        "--source", "nvidia-smi", "--node", "trn-01", "--pool", "train", str(path)
    )

    assert status == 0
    out = capsys.readouterr().out
    assert "1 created, 0 updated, 0 unchanged, 0 rejected, 4 GPUs" in out
    node = Node.objects.get()
    assert (node.hostname, node.pool.slug, node.gpus.count()) == ("trn-01", "train", 4)


def test_exit_0_for_an_unchanged_second_run(tmp_path, capsys):
    path = tmp_path / "trn-01.csv"
    path.write_bytes(nvidia_smi_csv(2))
    import_inventory("--source", "nvidia-smi", "--node", "trn-01", str(path))
    capsys.readouterr()

    status = import_inventory("--source", "nvidia-smi", "--node", "trn-01", str(path))

    assert status == 0
    assert "0 created, 0 updated, 1 unchanged, 0 rejected, 2 GPUs" in capsys.readouterr().out


def test_exit_1_when_a_node_is_rejected_and_the_others_are_kept(tmp_path, capsys):
    path = tmp_path / "nodes.json"
    path.write_bytes(
        slurm_nodes_json(
            slurm_node("gpu-node-01", "gpu:rtx4090:4"), slurm_node("gpu node 01", "gpu:rtx4090:4")
        )
    )

    status = import_inventory("--source", "slurm", str(path))

    assert status == 1
    out = capsys.readouterr().out
    assert "1 created, 0 updated, 0 unchanged, 1 rejected, 4 GPUs" in out
    assert "error: node gpu node 01" in out
    assert list(Node.objects.values_list("hostname", flat=True)) == ["gpu-node-01"]


def test_exit_1_for_an_empty_file(tmp_path, capsys):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")

    status = import_inventory("--source", "slurm", str(path))

    assert status == 1
    captured = capsys.readouterr()
    assert "empty.json is empty." in captured.out + captured.err
    assert not Node.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "nvidia-smi"], "--source nvidia-smi needs --node"),
        (["--source", "slurm", "--pool", "nope"], "no pool with slug 'nope'"),
        (["--source", "slurm", "{missing}"], "cannot read"),
    ],
    ids=["no-node", "unknown-pool", "unreadable-file"],
)
def test_exit_2_for_unusable_arguments_and_nothing_written(
    tmp_path, capsys, table_counts, args, message
):
    good = tmp_path / "nodes.json"
    good.write_bytes(slurm_nodes_json(slurm_node("gpu-node-01", "gpu:rtx4090:4")))
    smi = tmp_path / "trn-01.csv"
    smi.write_bytes(nvidia_smi_csv(1))
    files = [str(smi if "nvidia-smi" in args else good)]
    args = [a.format(missing=tmp_path / "missing.json") for a in args]
    before = table_counts()

    status = import_inventory(*args, *files)

    assert status == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("import_inventory: ")
    assert message in captured.err
    assert table_counts() == before


@pytest.mark.subprocess
def test_the_exit_status_reaches_the_shell(tmp_path):
    """The same codes from a real ``manage.py`` process (argument errors need no database)."""
    path = tmp_path / "trn-01.csv"
    path.write_bytes(nvidia_smi_csv(1))

    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "import_inventory",
            "--source",
            "nvidia-smi",
            str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "DEBUG": "1",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
        },
    )

    assert result.returncode == 2, result.stderr
    assert "needs --node" in result.stderr
    assert not Gpu.objects.exists()


@pytest.mark.parametrize("version", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_a_slurm_24_11_nodes_file_imports(tmp_path, capsys, version):
    """``GET /slurm/v0.0.4x/nodes`` as a real 24.11.5 answered it (``state`` a list, numbers
    as set/number objects): gpu-a100-01 has gpu:a100:4, gpu-4090-01 gpu:rtx4090:2."""
    recorded = ROOT / "tests" / "fixtures" / "slurm" / f"rest_{version}" / "nodes.json"
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(json.loads(recorded.read_text())["body"]), encoding="utf-8")

    status = import_inventory("--source", "slurm", str(path))

    assert status == 0, capsys.readouterr().out
    assert "2 created, 0 updated, 0 unchanged, 0 rejected, 6 GPUs" in capsys.readouterr().out
    cards = {node.hostname: node.gpus.count() for node in Node.objects.all()}
    assert cards == {"gpu-a100-01": 4, "gpu-4090-01": 2}
    assert set(Gpu.objects.values_list("node__state", flat=True)) == {"up"}
