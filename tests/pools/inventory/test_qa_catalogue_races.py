"""QA (h-qa): two pool admins create catalogue models at the same time, on real PostgreSQL.

``gpu_model_create`` checks the slug, the aliases and the PCI device ids with SELECTs and then
inserts, with no lock between the check and the insert. The first create is held open for a
second inside its transaction, after its inserts; the second starts then and passes
every check, because it cannot see the first's uncommitted rows. Then:

- same slug: the second waits on the unique index and fails with an IntegrityError instead of
  the field error (``InvalidInput``) it gets when the two are not concurrent — through the API,
  a 500;
- same alias: the second *succeeds* — ``_aliases_replace``'s ``update_or_create`` hits the
  unique key, re-reads the first's now committed alias and moves it to the second model, so
  the first admin's model silently loses the alias it was just created with;
- same PCI device id (no unique index: ids live in a JSON list): both commit, and one device id
  belongs to two models, which the catalogue promises never happens ("one model each").
"""

from __future__ import annotations

import threading
import time

import pytest
from broker_support import catalogue_loaded
from django.db import connection

from pools.common.errors import InvalidInput
from pools.inventory.models import GpuModel
from pools.inventory.services import catalogue as catalogue_services

pytestmark = pytest.mark.django_db(transaction=True)

HOLD_S = 1.0
FIELDS = {
    "name": "RTX A6000",
    "vendor_name": "NVIDIA RTX A6000",
    "card_class": "datacentre",
    "form_factor": "pcie",
    "memory_gib": 48,
}


@pytest.fixture
def held_first(monkeypatch, pool_admin):
    if connection.vendor != "postgresql":
        pytest.fail("the concurrency test needs PostgreSQL")
    catalogue_loaded()
    original = catalogue_services._aliases_replace
    first: list[threading.Thread] = []
    inside = threading.Event()  # the first create has written its rows, uncommitted

    def held(*args, **kwargs):
        original(*args, **kwargs)
        if first and threading.current_thread() is first[0]:
            inside.set()
            time.sleep(HOLD_S)

    monkeypatch.setattr(catalogue_services, "_aliases_replace", held)

    def run_both(one: dict, two: dict) -> list:
        results: list = [None, None]

        def run(index, kwargs):
            if index == 0:
                first.append(threading.current_thread())
            try:
                results[index] = catalogue_services.gpu_model_create(actor=pool_admin, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the test asserts which one
                results[index] = exc
            finally:
                connection.close()

        threads = [threading.Thread(target=run, args=(i, k)) for i, k in enumerate((one, two))]
        threads[0].start()
        # The second starts once the first is inside its transaction (a fixed 0.2 s let a
        # loaded machine start the second first, and the test then saw the wrong winner).
        assert inside.wait(timeout=30), "the first create never reached its held point"
        threads[1].start()
        for thread in threads:
            thread.join(timeout=30)
        return results

    return run_both


def test_the_same_slug_twice_at_once_is_a_field_error(held_first):
    create = {"slug": "rtx_a6000", "fields": FIELDS, "aliases": []}

    results = held_first(create, create)

    assert isinstance(results[0], GpuModel)
    assert isinstance(results[1], InvalidInput), repr(results[1])


def test_the_same_alias_twice_at_once_is_a_field_error(held_first):
    alias = [{"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"}]

    results = held_first(
        {"slug": "rtx_a6000", "fields": FIELDS, "aliases": alias},
        {"slug": "rtx_a6000_b", "fields": FIELDS, "aliases": alias},
    )

    assert isinstance(results[0], GpuModel)
    assert isinstance(results[1], InvalidInput), repr(results[1])
    assert list(GpuModel.objects.get(slug="rtx_a6000").aliases.values_list("value", flat=True)) == [
        "NVIDIA RTX A6000"
    ]


def test_one_pci_device_id_never_ends_on_two_models(held_first):
    # 0x2230: NVIDIA RTX A6000 (open-gpu-kernel-modules README), in no shipped model.
    fields = {**FIELDS, "pci_device_ids": ["0x2230"]}

    results = held_first(
        {"slug": "rtx_a6000", "fields": fields, "aliases": []},
        {"slug": "rtx_a6000_b", "fields": fields, "aliases": []},
    )

    owners = [m.slug for m in GpuModel.objects.all() if "0x2230" in m.pci_device_ids]
    assert owners == ["rtx_a6000"]
    assert isinstance(results[1], InvalidInput), repr(results[1])
