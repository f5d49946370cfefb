"""gpu_model_alias_map: an admin maps an unrecognised reported name onto a catalogue model."""

from __future__ import annotations

import pytest
from factories import nvidia_smi_csv, slurm_node, slurm_nodes_json

from pools.audit.models import AuditEvent
from pools.common.errors import Conflict, InvalidInput
from pools.inventory import selectors
from pools.inventory.models import Gpu, GpuModel, GpuModelAlias
from pools.inventory.services.gpu_models import GpuModelResolver, gpu_model_alias_map
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

TESLA_P100 = "NVIDIA Tesla P100-PCIE-16GB"


@pytest.fixture
def legacy_fleet():
    """Two Slurm nodes with 4 'p100' cards each, one nvidia-smi node with 2 Tesla P100s."""
    inventory_import_file(
        data=slurm_nodes_json(
            slurm_node("legacy-01", "gpu:p100:4"), slurm_node("legacy-02", "gpu:p100:4")
        ),
        source="slurm",
    )
    inventory_import_file(
        data=nvidia_smi_csv(2, name=TESLA_P100, memory_mib=16384),
        source="nvidia-smi",
        node="old-01",
    )


def test_mapping_a_name_recognises_every_card_reporting_it_and_is_audited(legacy_fleet, pool_admin):
    target = GpuModel.objects.get(slug="a100_40g_sxm")

    count = gpu_model_alias_map(raw_name="p100", gpu_model=target, actor=pool_admin)

    assert count == 8
    assert Gpu.objects.filter(gpu_model=target).count() == 8
    assert set(Gpu.objects.filter(gpu_model=target).values_list("node__hostname", flat=True)) == {
        "legacy-01",
        "legacy-02",
    }
    # Exact matching: the Tesla P100 name is another key and stays unrecognised.
    assert selectors.unrecognised_model_list() == [
        {"raw_model_name": TESLA_P100, "model_candidates": [], "gpu_count": 2, "node_count": 1}
    ]
    alias = GpuModelAlias.objects.get(key="p100")
    assert (alias.value, alias.kind, alias.gpu_model) == ("p100", "admin", target)
    event = AuditEvent.objects.get(action="gpu_model_alias.created")
    assert (event.actor, event.object_type, event.object_id) == (
        pool_admin,
        "pools.gpumodelalias",
        str(alias.pk),
    )
    assert event.after == {"value": "p100", "gpu_model": "a100_40g_sxm"}


def test_a_mapped_name_is_recognised_by_later_imports():
    target = GpuModel.objects.get(slug="a100_40g_sxm")
    gpu_model_alias_map(raw_name=" P-100 ", gpu_model=target, actor=None)

    inventory_import_file(
        data=slurm_nodes_json(slurm_node("legacy-03", "gpu:p100:2")), source="slurm"
    )

    assert resolved_slug("p100") == "a100_40g_sxm"
    assert list(Gpu.objects.values_list("gpu_model__slug", flat=True)) == ["a100_40g_sxm"] * 2


def resolved_slug(raw: str) -> str | None:
    model = GpuModelResolver.load().resolve(raw)
    return model.slug if model else None


def test_mapping_the_same_name_again_to_the_same_model_maps_nothing_new(legacy_fleet, pool_admin):
    target = GpuModel.objects.get(slug="a100_40g_sxm")
    gpu_model_alias_map(raw_name="p100", gpu_model=target, actor=pool_admin)

    again = gpu_model_alias_map(raw_name="p100", gpu_model=target, actor=pool_admin)

    assert again == 0
    assert GpuModelAlias.objects.filter(key="p100").count() == 1
    assert AuditEvent.objects.filter(action="gpu_model_alias.created").count() == 1


@pytest.mark.parametrize("raw_name", ["p100", "P100"])
def test_mapping_a_name_already_mapped_to_another_model_is_a_conflict(
    legacy_fleet, pool_admin, table_counts, raw_name
):
    gpu_model_alias_map(
        raw_name="p100", gpu_model=GpuModel.objects.get(slug="a100_40g_sxm"), actor=pool_admin
    )
    before = table_counts()
    mapped = list(Gpu.objects.order_by("id").values_list("id", "gpu_model_id"))

    with pytest.raises(Conflict) as excinfo:
        gpu_model_alias_map(
            raw_name=raw_name, gpu_model=GpuModel.objects.get(slug="h100_sxm"), actor=pool_admin
        )

    assert excinfo.value.code == "conflict" and excinfo.value.status == 409
    assert excinfo.value.data == {"raw_name": raw_name, "gpu_model": "a100_40g_sxm"}
    assert table_counts() == before
    assert list(Gpu.objects.order_by("id").values_list("id", "gpu_model_id")) == mapped


def test_a_catalogue_name_cannot_be_mapped_onto_another_model(pool_admin, table_counts):
    before = table_counts()

    with pytest.raises(Conflict) as excinfo:
        gpu_model_alias_map(
            raw_name="NVIDIA GeForce RTX 4090",
            gpu_model=GpuModel.objects.get(slug="rtx4090d"),
            actor=pool_admin,
        )

    assert excinfo.value.data["gpu_model"] == "rtx4090"
    assert table_counts() == before


@pytest.mark.parametrize("raw_name", ["", "   ", "NVIDIA", "-- --"])
def test_an_empty_name_is_invalid_input(raw_name, pool_admin, table_counts):
    before = table_counts()

    with pytest.raises(InvalidInput) as excinfo:
        gpu_model_alias_map(
            raw_name=raw_name, gpu_model=GpuModel.objects.get(slug="l4"), actor=pool_admin
        )

    assert excinfo.value.data == {"field": "raw_name"}
    assert table_counts() == before
