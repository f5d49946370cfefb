"""inventory_import / inventory_import_file against PostgreSQL: what is written, what is refused."""

from __future__ import annotations

import pytest
from django.test import override_settings
from factories import (
    A100_SXM,
    MASKED_UUID,
    PoolFactory,
    gpu_uuid,
    nvidia_smi_csv,
    slurm_node,
    slurm_nodes_json,
)

from pools.audit.models import AuditEvent
from pools.common.errors import InvalidInput, UploadTooLarge
from pools.inventory import selectors
from pools.inventory.models import DriverGroup, Gpu, InventoryImport, MigDevice, Node
from pools.inventory.services.import_files import inventory_import_file, inventory_import_files
from pools.inventory.services.importer import inventory_import
from scheduler_adapters.types import (
    GpuSnapshot,
    InventorySource,
    NodeSnapshot,
    ParseResult,
)

pytestmark = pytest.mark.django_db


def import_smi(host: str, data: bytes, **kwargs):
    return inventory_import_file(data=data, source="nvidia-smi", node=host, **kwargs)


def import_slurm(*nodes: dict, **kwargs):
    return inventory_import_file(data=slurm_nodes_json(*nodes), source="slurm", **kwargs)


def gpu_rows(hostname: str | None = None) -> list[tuple]:
    """Every stored fact of the cards (of one node), in a stable order."""
    qs = Gpu.objects.order_by("node__hostname", "index")
    if hostname:
        qs = qs.filter(node__hostname=hostname)
    return list(
        qs.values_list(
            "node__hostname",
            "index",
            "uuid",
            "serial",
            "pci_bus_id",
            "gpu_model__slug",
            "raw_model_name",
            "memory_total_mib",
            "mig_mode",
            "health",
        )
    )


# --- created / updated / unchanged -----------------------------------------------------------


def test_the_same_nvidia_smi_csv_imported_twice_is_unchanged_the_second_time():
    csv = nvidia_smi_csv(2, host=7)

    first = import_smi("trn-01", csv, filename="trn-01.csv")
    second = import_smi("trn-01", csv, filename="trn-01.csv")

    assert (first.created, first.updated, first.unchanged, first.rejected) == (
        ["trn-01"],
        [],
        [],
        [],
    )
    assert first.gpus_seen == 2 and first.ok
    assert (second.created, second.updated, second.unchanged, second.rejected) == (
        [],
        [],
        ["trn-01"],
        [],
    )
    assert second.ok
    # Card 0 of host 7: GPU-00000007-0000-4000-8000-{7*16+0 = 112 = 0x70}, serial 1320000000000
    # + 7*16 + 0, bus 0x18; card 1: 0x71, ...113, bus 0x28.
    assert gpu_rows() == [
        (
            "trn-01",
            0,
            "GPU-00000007-0000-4000-8000-000000000070",
            "1320000000112",
            "00000000:18:00.0",
            "a100_80g_sxm",
            A100_SXM,
            81920,
            False,
            "ok",
        ),
        (
            "trn-01",
            1,
            "GPU-00000007-0001-4000-8000-000000000071",
            "1320000000113",
            "00000000:28:00.0",
            "a100_80g_sxm",
            A100_SXM,
            81920,
            False,
            "ok",
        ),
    ]
    node = Node.objects.get()
    assert (node.driver_version, node.last_source, node.scheduler) == (
        "535.129.03",
        "nvidia-smi",
        "none",
    )
    records = list(
        InventoryImport.objects.order_by("created_at", "id").values_list(
            "source", "filename", "nodes_created", "nodes_unchanged", "gpus_seen", "errors"
        )
    )
    assert records == [
        ("nvidia-smi", "trn-01.csv", 1, 0, 2, []),
        ("nvidia-smi", "trn-01.csv", 0, 1, 2, []),
    ]
    assert list(AuditEvent.objects.values_list("action", "object_repr")) == [
        ("node.created", "trn-01")
    ]


def test_a_new_driver_makes_the_node_updated_with_before_and_after_in_the_audit_trail():
    import_smi("trn-01", nvidia_smi_csv(1, driver="535.129.03"))

    report = import_smi("trn-01", nvidia_smi_csv(1, driver="550.54.15"))

    assert report.updated == ["trn-01"]
    event = AuditEvent.objects.get(action="node.updated")
    assert event.before["driver_version"] == "535.129.03"
    assert event.after["driver_version"] == "550.54.15"
    assert Node.objects.get().driver_group.branch == 550


def test_cards_that_swap_indices_after_a_reboot_are_updated_in_place():
    import_smi(
        "trn-01",
        nvidia_smi_csv(
            [
                {"uuid": "GPU-aaaaaaaa-0000-4000-8000-000000000001"},
                {"uuid": "GPU-bbbbbbbb-0000-4000-8000-000000000002"},
            ]
        ),
    )
    ids = dict(Gpu.objects.values_list("uuid", "id"))

    report = import_smi(
        "trn-01",
        nvidia_smi_csv(
            [
                {"uuid": "GPU-bbbbbbbb-0000-4000-8000-000000000002"},
                {"uuid": "GPU-aaaaaaaa-0000-4000-8000-000000000001"},
            ]
        ),
    )

    assert report.updated == ["trn-01"] and report.ok
    assert list(Gpu.objects.order_by("index").values_list("index", "uuid", "id")) == [
        (
            0,
            "GPU-bbbbbbbb-0000-4000-8000-000000000002",
            ids["GPU-bbbbbbbb-0000-4000-8000-000000000002"],
        ),
        (
            1,
            "GPU-aaaaaaaa-0000-4000-8000-000000000001",
            ids["GPU-aaaaaaaa-0000-4000-8000-000000000001"],
        ),
    ]


def test_a_card_missing_from_the_new_snapshot_is_removed():
    import_smi("trn-01", nvidia_smi_csv(3))

    report = import_smi("trn-01", nvidia_smi_csv(2))

    assert report.updated == ["trn-01"]
    assert list(Gpu.objects.order_by("index").values_list("index", flat=True)) == [0, 1]


# --- rejected nodes --------------------------------------------------------------------------


def test_invalid_hostname_rejects_that_node_only_and_keeps_the_others():
    dev = PoolFactory(slug="dev", slurm_partition="dev")

    report = import_slurm(
        slurm_node("gpu-node-01", "gpu:rtx4090:4", partitions=["dev"]),
        slurm_node("gpu node 01", "gpu:p100:4", partitions=["dev"]),
        slurm_node("gpu-node-02", "gpu:rtx4090d:2", partitions=["dev"]),
    )

    assert report.created == ["gpu-node-01", "gpu-node-02"]
    assert report.rejected == ["gpu node 01"]
    assert not report.ok
    assert [(i.node, i.field) for i in report.issues] == [("gpu node 01", "hostname")]
    assert "invalid node name 'gpu node 01'" in report.issues[0].message
    assert report.gpus_seen == 6
    assert list(Node.objects.values_list("hostname", "pool__slug", "scheduler", "state")) == [
        ("gpu-node-01", dev.slug, "slurm", "up"),
        ("gpu-node-02", dev.slug, "slurm", "up"),
    ]
    assert Gpu.objects.count() == 6
    assert not Gpu.objects.filter(raw_model_name="p100").exists()
    assert not AuditEvent.objects.filter(object_repr="gpu node 01").exists()
    record = InventoryImport.objects.get()
    assert (record.nodes_created, record.nodes_rejected, record.gpus_seen) == (2, 1, 6)
    assert [e["node"] for e in record.errors] == ["gpu node 01"]


def test_a_uuid_held_by_another_node_rejects_the_node_and_does_not_move_the_card():
    import_smi("node-a", nvidia_smi_csv(2, host=1))
    before = gpu_rows()
    audit_before = AuditEvent.objects.count()

    # node-b reports card 1 of node-a plus a card of its own.
    report = import_smi(
        "node-b", nvidia_smi_csv([{"uuid": gpu_uuid(1, 1)}, {"uuid": gpu_uuid(2, 1)}], host=2)
    )

    assert report.rejected == ["node-b"] and report.created == []
    assert report.issues[0].node == "node-b"
    assert report.issues[0].field == "uuid"
    assert f"GPU UUID {gpu_uuid(1, 1)} is already held by node node-a" in report.issues[0].message
    assert gpu_rows() == before
    assert list(Node.objects.values_list("hostname", flat=True)) == ["node-a"]
    assert not Gpu.objects.filter(uuid=gpu_uuid(2, 1)).exists()
    assert AuditEvent.objects.count() == audit_before


def test_an_existing_node_rejected_for_a_held_uuid_keeps_all_its_old_values():
    import_smi("node-a", nvidia_smi_csv(1, host=1))
    import_smi("node-b", nvidia_smi_csv(1, host=2, driver="550.54.15"))
    before = gpu_rows()

    report = import_smi(
        "node-b",
        nvidia_smi_csv(
            [{"uuid": gpu_uuid(2, 0)}, {"uuid": gpu_uuid(1, 0)}], host=2, driver="570.86.10"
        ),
    )

    assert report.rejected == ["node-b"]
    assert gpu_rows() == before
    assert Node.objects.get(hostname="node-b").driver_version == "550.54.15"
    assert not DriverGroup.objects.filter(branch=570).exists()


def test_the_same_uuid_twice_in_one_snapshot_rejects_the_node():
    twice = "GPU-11111111-2222-4333-8444-555555555555"

    report = import_smi("dup-01", nvidia_smi_csv([{"uuid": twice}, {"uuid": twice}]))

    assert report.rejected == ["dup-01"]
    assert any(
        i.field == "uuid" and i.node == "dup-01" and "appears twice" in i.message
        for i in report.issues
    )
    assert Node.objects.count() == 0 and Gpu.objects.count() == 0


def test_a_snapshot_built_in_code_with_duplicate_uuids_is_rejected_too():
    uuid = "GPU-11111111-2222-4333-8444-555555555555"
    snapshot = NodeSnapshot(
        hostname="dup-02",
        source=InventorySource.NVIDIA_SMI,
        gpus=(
            GpuSnapshot(index=0, model_name=A100_SXM, uuid=uuid),
            GpuSnapshot(index=1, model_name=A100_SXM, uuid=uuid),
        ),
    )

    report = inventory_import(
        result=ParseResult(nodes=(snapshot,)), source=InventorySource.NVIDIA_SMI
    )

    assert report.rejected == ["dup-02"] and report.gpus_seen == 0
    assert not Node.objects.exists()


# --- masked UUIDs, models --------------------------------------------------------------------


def test_masked_all_zero_uuids_are_stored_as_null_with_a_warning_on_two_nodes(fixtures_dir):
    plain = fixtures_dir / "nvidia-smi" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
    mig = fixtures_dir / "nvidia-smi" / "linux-x86_64__nvidia-h100-mig__590.48.01.txt"

    first = import_smi("lab-h100", plain.read_bytes())
    second = import_smi("lab-h100-mig", mig.read_bytes())

    assert first.created == ["lab-h100"] and first.ok
    assert second.created == ["lab-h100-mig"] and second.ok
    for report, host in ((first, "lab-h100"), (second, "lab-h100-mig")):
        masked = [w for w in report.warnings if w.field == "uuid"]
        assert masked[0].node == host
        assert MASKED_UUID in masked[0].message and "masked placeholder" in masked[0].message
    # and the MIG capture's four slices, MIG-00000000-… to MIG-00000003-…: one warning
    assert [w.message for w in first.warnings if w.field == "uuid"][1:] == []
    (slices,) = [w.message for w in second.warnings if w.field == "uuid"][1:]
    assert slices.startswith("GPU 0: 4 MIG device UUID(s) are placeholders")
    assert list(
        Gpu.objects.order_by("node__hostname").values_list(
            "node__hostname", "uuid", "gpu_model__slug"
        )
    ) == [("lab-h100", None, "h100_sxm"), ("lab-h100-mig", None, "h100_sxm")]


def test_unrecognised_models_are_kept_with_their_raw_name_and_listed():
    slurm = import_slurm(slurm_node("legacy-01", "gpu:p100:4"))
    smi = import_smi(
        "old-01", nvidia_smi_csv(2, name="NVIDIA Tesla P100-PCIE-16GB", memory_mib=16384)
    )

    assert slurm.created == ["legacy-01"] and slurm.ok
    assert smi.created == ["old-01"] and smi.ok
    assert [w.field for w in slurm.warnings] == ["model"] * 4
    assert [w.field for w in smi.warnings] == ["model"] * 2
    assert set(Gpu.objects.values_list("node__hostname", "raw_model_name", "gpu_model")) == {
        ("legacy-01", "p100", None),
        ("old-01", "NVIDIA Tesla P100-PCIE-16GB", None),
    }
    assert selectors.unrecognised_model_list() == [
        {"raw_model_name": "p100", "model_candidates": [], "gpu_count": 4, "node_count": 1},
        {
            "raw_model_name": "NVIDIA Tesla P100-PCIE-16GB",
            "model_candidates": [],
            "gpu_count": 2,
            "node_count": 1,
        },
    ]


def test_rtx_4090_d_resolves_to_the_4090_d_and_never_to_the_4090():
    report = import_smi(
        "dev-01",
        nvidia_smi_csv(
            [
                {"name": "NVIDIA GeForce RTX 4090 D"},
                {"name": "NVIDIA GeForce RTX 4090"},
                {"name": "NVIDIA GeForce RTX 4090D"},
            ],
            memory_mib=24564,
        ),
    )

    assert report.ok and report.warnings == []
    assert list(Gpu.objects.order_by("index").values_list("index", "gpu_model__slug")) == [
        (0, "rtx4090d"),
        (1, "rtx4090"),
        (2, "rtx4090d"),
    ]


def test_a_later_slurm_import_keeps_the_uuids_and_names_nvidia_smi_reported():
    train = PoolFactory(slug="train", slurm_partition="train")
    import_smi("trn-01", nvidia_smi_csv(2, host=3))
    smi_rows = gpu_rows()

    report = import_slurm(
        slurm_node(
            "trn-01",
            "gpu:a100_80g_sxm:2(S:0-1)",
            flags=["DRAIN"],
            reason="ECC errors",
            partitions=["train"],
        )
    )

    assert report.updated == ["trn-01"] and report.ok
    assert gpu_rows() == smi_rows
    node = Node.objects.get()
    assert (node.pool, node.scheduler, node.state, node.state_reason, node.partitions) == (
        train,
        "slurm",
        "drain",
        "ECC errors",
        ["train"],
    )
    # Slurm says nothing of drivers: nvidia-smi's stays.
    assert (node.driver_version, node.last_source) == ("535.129.03", "slurm")


def test_an_unrecognised_gres_type_never_replaces_a_recognised_model():
    import_smi("trn-01", nvidia_smi_csv(2, host=3))
    smi_rows = gpu_rows()

    report = import_slurm(slurm_node("trn-01", "gpu:a100:2"))

    assert gpu_rows() == smi_rows
    assert [w.field for w in report.warnings] == ["model", "model"]


# --- driver groups ---------------------------------------------------------------------------


def test_driver_group_widens_to_the_oldest_driver_and_takes_its_cuda():
    import_smi("n-535-new", nvidia_smi_csv(1, host=1, driver="535.129.03"))
    group = DriverGroup.objects.get()
    # 535.129.03 >= 535.54.03 (CUDA 12.2 GA) and < 545.23.06 (12.3 GA).
    assert (group.branch, group.min_driver_version, group.max_driver_version, group.max_cuda) == (
        535,
        "535.129.03",
        "535.129.03",
        "12.2",
    )

    import_smi("n-535-old", nvidia_smi_csv(1, host=2, driver="535.54.03"))

    group.refresh_from_db()
    # 535.54 is older than 535.129 (a float compare would say the opposite).
    assert (group.min_driver_version, group.max_driver_version, group.max_cuda) == (
        "535.54.03",
        "535.129.03",
        "12.2",
    )
    assert set(Node.objects.values_list("driver_group__branch", flat=True)) == {535}


def test_an_older_driver_of_a_branch_lowers_the_groups_max_cuda():
    import_smi("n-550-a", nvidia_smi_csv(1, host=1, driver="550.54.15"))
    assert DriverGroup.objects.get(branch=550).max_cuda == "12.4"  # 550.54.15 >= 550.54.14

    import_smi("n-550-b", nvidia_smi_csv(1, host=2, driver="550.40.07"))

    # 550.40.07 < 550.54.14 (12.4 GA) but >= 545.23.06 (12.3 GA).
    group = DriverGroup.objects.get(branch=550)
    assert (group.min_driver_version, group.max_driver_version, group.max_cuda) == (
        "550.40.07",
        "550.54.15",
        "12.3",
    )


# --- unusable input: InvalidInput, nothing written --------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "code", "field"),
    [
        ({"data": b"", "source": "nvidia-smi", "node": "n1"}, "invalid_input", "file"),
        ({"data": b" \n\t\n", "source": "slurm"}, "invalid_input", "file"),
        ({"data": b"GPU 0: NVIDIA L4 (UUID: GPU-1)\n", "source": "lsf"}, "invalid_input", "source"),
        ({"data": nvidia_smi_csv(1), "source": "nvidia-smi"}, "invalid_input", "node"),
        ({"data": nvidia_smi_csv(1), "source": "nvidia-smi", "node": ""}, "invalid_input", "node"),
    ],
    ids=["empty", "blank", "unknown-source", "no-node", "empty-node"],
)
def test_unusable_input_raises_invalid_input_and_writes_nothing(kwargs, code, field, table_counts):
    before = table_counts()

    with pytest.raises(InvalidInput) as excinfo:
        inventory_import_file(**kwargs)

    assert excinfo.value.code == code
    assert excinfo.value.data["field"] == field
    assert table_counts() == before


def test_an_unknown_source_is_refused_alike_for_one_file_and_for_many(table_counts):
    before = table_counts()
    expected = "Unknown source 'lsf'; use one of: nvidia-smi, slurm, kubernetes."

    with pytest.raises(InvalidInput) as one:
        inventory_import_file(data=b"GPU 0: NVIDIA L4 (UUID: GPU-1)\n", source="lsf", node="n1")
    with pytest.raises(InvalidInput) as many:
        inventory_import_files(files=[("a.txt", b"x", "n1")], source="lsf")

    assert (one.value.message, one.value.data) == (expected, {"field": "source"})
    assert (many.value.message, many.value.data) == (expected, {"field": "source"})
    assert table_counts() == before


@override_settings(INVENTORY_UPLOAD_MAX_BYTES=100)
def test_a_file_over_the_limit_raises_upload_too_large_and_writes_nothing(table_counts):
    before = table_counts()
    data = b"x" * 101

    with pytest.raises(UploadTooLarge) as excinfo:
        inventory_import_file(data=data, source="nvidia-smi", node="n1", filename="big.txt")

    assert excinfo.value.code == "upload_too_large"
    assert (excinfo.value.data["size"], excinfo.value.data["limit"]) == (101, 100)
    assert "big.txt is 101 bytes; the limit is 100 bytes." == excinfo.value.message
    assert table_counts() == before


@override_settings(INVENTORY_UPLOAD_MAX_BYTES=100)
def test_a_file_of_exactly_the_limit_is_read():
    data = b"GPU 0: NVIDIA L4 (UUID: GPU-12345678-1234-4234-8234-123456789abc)\n"
    data += b" " * (100 - len(data))

    report = import_smi("l4-01", data)

    assert report.created == ["l4-01"]


def test_bytes_that_are_not_utf8_are_reported_by_line_and_the_rest_is_imported():
    # Line 1 is the header; the bad byte starts line 3's serial, after "1, " (column 4).
    data = (
        b"index, serial, name, uuid\n"
        b"0, 1320000000001, NVIDIA A100-SXM4-80GB, GPU-11111111-0000-4000-8000-000000000001\n"
        b"1, \xff1320000000002, NVIDIA A100-SXM4-80GB, GPU-11111111-0000-4000-8000-000000000002\n"
    )

    report = import_smi("enc-01", data)

    assert report.created == ["enc-01"]
    decode = [i for i in report.issues if "UTF-8" in i.message]
    assert [(i.line, i.message) for i in decode] == [
        (3, "bytes that are not UTF-8 at column 4; replaced")
    ]
    assert list(Gpu.objects.order_by("index").values_list("index", "uuid", "gpu_model__slug")) == [
        (0, "GPU-11111111-0000-4000-8000-000000000001", "a100_80g_sxm"),
        (1, "GPU-11111111-0000-4000-8000-000000000002", "a100_80g_sxm"),
    ]
    assert InventoryImport.objects.get().errors[0]["line"] == 3


# --- MIG ---------------------------------------------------------------------------------------


H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01.txt"


def test_mig_devices_are_recorded_under_their_parent_card(fixtures_dir):
    capture = fixtures_dir / "nvidia-smi" / H100_MIG

    first = import_smi("lab-h100-mig", capture.read_bytes())
    again = import_smi("lab-h100-mig", capture.read_bytes())

    assert first.created == ["lab-h100-mig"] and first.gpus_seen == 1
    assert again.unchanged == ["lab-h100-mig"]
    gpu = Gpu.objects.get()
    assert (gpu.index, gpu.gpu_model.slug, gpu.mig_mode, gpu.memory_total_mib) == (
        0,
        "h100_sxm",
        True,
        81559,
    )
    node = gpu.node
    assert (node.driver_version, node.cuda_version, node.driver_group.branch) == (
        "590.48.01",
        "13.1",
        590,
    )
    # From the capture's `nvidia-smi -L` (profiles, UUIDs) and `-q` (GPU and compute instance
    # ids, "Shared FB Memory Usage" totals) sections.
    assert list(
        MigDevice.objects.order_by("index").values_list(
            "gpu", "index", "profile", "gpu_instance_id", "compute_instance_id", "memory_total_mib"
        )
    ) == [
        (gpu.pk, 0, "3g.40gb", 2, 0, 40448),
        (gpu.pk, 1, "2g.20gb", 3, 0, 20096),
        (gpu.pk, 2, "1g.10gb", 9, 0, 9984),
        (gpu.pk, 3, "1g.10gb", 10, 0, 9984),
    ]
    # the capture's MIG UUIDs are numbered placeholders (MIG-00000001-0000-0000-0000-
    # 000000000001 …: 30 of 32 hex digits zero), the same on every node it is imported for
    assert list(MigDevice.objects.values_list("uuid", flat=True)) == [""] * 4


def test_a_masked_mig_uuid_is_stored_as_unknown(fixtures_dir):
    import_smi("lab-h100-mig", (fixtures_dir / "nvidia-smi" / H100_MIG).read_bytes())

    assert MigDevice.objects.get(index=0).uuid == ""


def test_mig_devices_from_list_output():
    data = (
        b"GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-e3dc1a0a5a8f)\n"
        b"  MIG 3g.40gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
        b"  MIG 3g.40gb     Device  1: (UUID: MIG-cba663e8-9bed-5b65-a243-3b7fef6c7c77)\n"
        b"GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-6a2cde4c-d4d4-4c0a-0b35-3a8e7cd6f0e1)\n"
    )

    report = import_smi("a100-mig", data)

    assert report.created == ["a100-mig"] and report.gpus_seen == 2
    assert Gpu.objects.count() == 2
    assert list(
        MigDevice.objects.order_by("index").values_list("gpu__index", "index", "profile", "uuid")
    ) == [
        (0, 0, "3g.40gb", "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"),
        (0, 1, "3g.40gb", "MIG-cba663e8-9bed-5b65-a243-3b7fef6c7c77"),
    ]


def test_slurm_nodes_the_parser_could_not_read_count_as_rejected():
    """A slurmrestd nodes file with a good node, one whose GRES is unbalanced and one whose
    GRES is a number: the two unreadable nodes are reported by line of the report *and*
    counted as rejected (they were not written), the good one is created."""
    import json

    PoolFactory(slug="dev", slurm_partition="dev")
    body = {
        "nodes": [
            {"name": "qa-good-01", "gres": "gpu:a100:2(S:0)", "state": ["IDLE"],
             "partitions": ["dev"]},
            {"name": "qa-bad-01", "gres": "gpu:a100:(IDX:0-3", "state": ["IDLE"],
             "partitions": ["dev"]},
            {"name": "qa-bad-03", "gres": 12, "state": ["IDLE"], "partitions": ["dev"]},
        ]
    }  # fmt: skip
    report = inventory_import_file(data=json.dumps(body).encode(), source="slurm")
    assert report.created == ["qa-good-01"]
    assert report.rejected == ["qa-bad-01", "qa-bad-03"]
    assert sorted({i.node for i in report.issues}) == ["qa-bad-01", "qa-bad-03"]
    assert not Node.objects.filter(hostname__startswith="qa-bad").exists()
    record = InventoryImport.objects.get()
    assert (record.nodes_created, record.nodes_rejected) == (1, 2)
