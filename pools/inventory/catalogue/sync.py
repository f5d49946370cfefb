"""Upsert the shipped GPU catalogue into the database (used by a data migration and a command)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pools.inventory.catalogue import load_gpu_models
from pools.inventory.gpu_names import normalise_model_key

#: The audit actions by which an admin made a GPU model's values their own
#: (:mod:`pools.inventory.services.catalogue`): such a row is never overwritten by the file.
ADMIN_EDIT_ACTIONS = ("gpu_model.created", "gpu_model.updated")

_DECIMAL_FIELDS = (
    "memory_gib",
    "memory_bandwidth_gbps",
    "fp16_dense_tflops",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "int8_dense_tops",
    "nvlink_gbps",
)
_PLAIN_FIELDS = (
    "name",
    "vendor_name",
    "architecture",
    "card_class",
    "form_factor",
    "tdp_w",
    "cuda_cores",
    "sources",
)


def catalogue_sync(
    gpu_model_cls: Any, alias_cls: Any, *, kept: frozenset[str] = frozenset()
) -> tuple[int, int]:
    """Create or update every catalogue model by slug and add its missing aliases.

    Takes the model classes so a migration can pass its historical models. Aliases already
    pointing at another model (e.g. mapped by an admin) are left alone. Models whose slug is in
    ``kept`` (rows an admin created or edited: :func:`admin_kept_slugs`) are not updated — the
    admin's values win over the shipped file; they still get the file's missing aliases.
    Returns ``(models_created, aliases_created)``.
    """
    created_models = created_aliases = 0
    for entry in load_gpu_models():
        values = {f: entry.get(f) for f in _PLAIN_FIELDS}
        values.update(
            {f: None if entry.get(f) is None else Decimal(str(entry[f])) for f in _DECIMAL_FIELDS}
        )
        values["sources"] = values["sources"] or {}
        values["pci_device_ids"] = entry.get("pci_device_ids", [])
        if entry["slug"] in kept:
            model, created = gpu_model_cls.objects.get(slug=entry["slug"]), False
        else:
            model, created = gpu_model_cls.objects.update_or_create(
                slug=entry["slug"], defaults=values
            )
        created_models += created
        for alias in entry.get("aliases", []):
            key = normalise_model_key(alias["value"])
            if not key:
                continue
            _, made = alias_cls.objects.get_or_create(
                key=key,
                defaults={"gpu_model": model, "value": alias["value"], "kind": alias["kind"]},
            )
            created_aliases += made
    return created_models, created_aliases
