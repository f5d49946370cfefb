"""Pool admins keep the GPU model catalogue: create and edit models with their aliases and PCI
device ids, audited.

A model's identity is what imports match: its aliases (a normalised key each, unique across the
catalogue) and its 16-bit PCI device ids (``0xNNNN``, one model each; the tie-breaker between SKUs
sharing a name, see :func:`pools.inventory.gpu_names.model_match`). Both are checked here, for the
API and the page alike, before anything is written.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from pools.audit.services import audit_event_record, audit_snapshot
from pools.choices import AliasKind
from pools.errors import InvalidInput
from pools.inventory.catalogue import load_ambiguous_names
from pools.inventory.gpu_names import normalise_model_key, pci_device_id_key
from pools.inventory.models import GpuModel, GpuModelAlias

#: The fields sizing (memory, bandwidth, dense tensor rates, NVLink) and pricing (the model a
#: rate-card line names) read, plus identity and citations; ``slug`` is set once, at creation.
GPU_MODEL_FIELDS = (
    "name",
    "vendor_name",
    "architecture",
    "card_class",
    "form_factor",
    "memory_gib",
    "memory_bandwidth_gbps",
    "fp16_dense_tflops",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "int8_dense_tops",
    "nvlink_gbps",
    "tdp_w",
    "cuda_cores",
    "sources",
    "pci_device_ids",
)
_PCI_ID = re.compile(r"0x[0-9a-f]{4}", re.IGNORECASE)


def gpu_model_create(
    *, slug: str, fields: dict[str, Any], aliases: list[dict[str, str]], actor: Any
) -> GpuModel:
    """Create a catalogue model with its aliases (``[{"value", "kind"}]``) and audit it.

    ``fields`` are validated values of :data:`GPU_MODEL_FIELDS`. Raises :class:`InvalidInput`
    with per-field ``errors`` (``slug``, ``aliases``, ``pci_device_ids``) and writes nothing
    when the slug is taken, an alias names another model or a device id is malformed or claimed.
    """
    with transaction.atomic():
        if GpuModel.objects.filter(slug=slug).exists():
            raise InvalidInput(
                f"A GPU model {slug!r} exists.", errors={"slug": "This slug is taken."}
            )
        fields = {**fields, "pci_device_ids": _checked_device_ids(fields, owner=None)}
        keys = _checked_aliases(aliases, owner=None)
        model = GpuModel.objects.create(slug=slug, **fields)
        _aliases_replace(model, aliases, keys)
        audit_event_record(
            actor=actor, action="gpu_model.created", obj=model, after=_snapshot(model)
        )
    return model


def gpu_model_update(
    *,
    gpu_model: GpuModel,
    changes: dict[str, Any],
    aliases: list[dict[str, str]] | None,
    actor: Any,
) -> GpuModel:
    """Apply ``changes`` (validated :data:`GPU_MODEL_FIELDS`) and, when given, make ``aliases``
    the model's aliases; audit before/after. Same checks and errors as :func:`gpu_model_create`.
    """
    with transaction.atomic():
        model = GpuModel.objects.select_for_update().get(pk=gpu_model.pk)
        before = _snapshot(model)
        if "pci_device_ids" in changes:
            changes = {**changes, "pci_device_ids": _checked_device_ids(changes, owner=model)}
        keys = None if aliases is None else _checked_aliases(aliases, owner=model)
        for field, value in changes.items():
            setattr(model, field, value)
        model.save()
        if aliases is not None:
            _aliases_replace(model, aliases, keys)
        audit_event_record(
            actor=actor,
            action="gpu_model.updated",
            obj=model,
            before=before,
            after=_snapshot(model),
        )
    return model


def _checked_device_ids(fields: dict[str, Any], *, owner: GpuModel | None) -> list[str]:
    """``0xNNNN`` ids, upper-case hex, each claimed by no other model; else InvalidInput."""
    raw = fields.get("pci_device_ids") or []
    wrong = [value for value in raw if not (isinstance(value, str) and _PCI_ID.fullmatch(value))]
    if wrong:
        raise InvalidInput(
            f"Not a 16-bit PCI device id: {', '.join(map(repr, wrong))}.",
            errors={"pci_device_ids": f"Write each id as 0xNNNN (e.g. 0x2330), not {wrong[0]!r}."},
        )
    ids = sorted({"0x" + value[2:].upper() for value in raw})
    others = GpuModel.objects.exclude(pk=owner.pk if owner else None)
    for other in others.only("slug", "pci_device_ids"):
        taken = sorted(set(ids) & {pci_device_id_key(v) for v in other.pci_device_ids})
        if taken:
            raise InvalidInput(
                f"PCI device id {taken[0]} belongs to {other.slug}.",
                errors={"pci_device_ids": f"{taken[0]} is already {other.name}'s device id."},
            )
    return ids


def _checked_aliases(aliases: list[dict[str, str]], *, owner: GpuModel | None) -> dict[str, str]:
    """Return ``{value: key}``; InvalidInput when a key is empty, repeated, a name several SKUs
    share (``h100``, ``a100``: only an admin mapping settles those) or another model's alias."""
    keys: dict[str, str] = {}
    seen: dict[str, str] = {}
    ambiguous = {normalise_model_key(entry["value"]) for entry in load_ambiguous_names()}
    for alias in aliases:
        value, key = alias["value"].strip(), normalise_model_key(alias["value"])
        if not key:
            _alias_error(f"{value!r} has no letters or digits to match on.")
        if key in seen:
            _alias_error(
                f"{value!r} already matches as {seen[key]!r} (names are compared without case, "
                "spaces, hyphens or the NVIDIA/GeForce prefix): give one of them."
            )
        if key in ambiguous and alias["kind"] != AliasKind.ADMIN:
            _alias_error(
                f"{value!r} names several GPU models; give it kind 'admin' to settle it for this "
                "site, or leave it to the PCI device id."
            )
        seen[key] = value
        keys[value] = key
    clash = (
        GpuModelAlias.objects.filter(key__in=keys.values())
        .exclude(gpu_model=owner)
        .select_related("gpu_model")
        .first()
    )
    if clash is not None:
        owner_model = clash.gpu_model
        _alias_error(f"{clash.value!r} already names {owner_model.name} ({owner_model.slug}).")
    return keys


def _alias_error(message: str) -> None:
    raise InvalidInput(message, errors={"aliases": message})


def _aliases_replace(model: GpuModel, aliases: list[dict[str, str]], keys: dict[str, str]) -> None:
    model.aliases.exclude(key__in=keys.values()).delete()
    for alias in aliases:
        value = alias["value"].strip()
        GpuModelAlias.objects.update_or_create(
            key=keys[value], defaults={"gpu_model": model, "value": value, "kind": alias["kind"]}
        )


def _snapshot(model: GpuModel) -> dict[str, Any]:
    values = audit_snapshot(model, "slug", *GPU_MODEL_FIELDS)
    values["aliases"] = [
        {"value": a.value, "kind": a.kind} for a in model.aliases.order_by("kind", "value")
    ]
    return values
