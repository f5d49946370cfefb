"""Pool admins keep the GPU model catalogue: create and edit models with their aliases and PCI
device ids, audited.

A model's identity is what imports match: its aliases (a normalised key each, unique across the
catalogue) and its 16-bit PCI device ids (``0xNNNN``, one model each; the tie-breaker between SKUs
sharing a name, see :func:`pools.inventory.gpu_names.model_match`). Both are checked here, for the
API and the page alike, before anything is written. A model answers to its nvidia-smi name
(``vendor_name``) as the shipped catalogue's do: it is kept as an ``nvidia-smi`` alias.

Checks and writes run under one catalogue-wide lock
(:func:`pools.inventory.services.gpu_models.catalogue_lock`), so two admins saving at once
cannot both pass the checks on the same slug, alias or device id. Cards already imported whose
name or device id the saved model now matches are recognised in the same transaction
(:func:`_unrecognised_cards_resolve`).
"""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction

from pools.audit.services import audit_event_record, audit_snapshot
from pools.common.choices import AliasKind
from pools.common.errors import InvalidInput
from pools.inventory.catalogue import load_ambiguous_names
from pools.inventory.gpu_names import normalise_model_key, pci_device_id_key
from pools.inventory.models import Gpu, GpuModel, GpuModelAlias
from pools.inventory.services.gpu_models import GpuModelResolver, catalogue_lock

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
    try:
        with transaction.atomic():
            catalogue_lock()
            if GpuModel.objects.filter(slug=slug).exists():
                _slug_taken(slug)
            fields = {**fields, "pci_device_ids": _checked_device_ids(fields, owner=None)}
            aliases = _with_vendor_name(aliases, fields.get("vendor_name"), owner=None)
            keys = _checked_aliases(aliases, owner=None)
            model = GpuModel.objects.create(slug=slug, **fields)
            _aliases_replace(model, aliases, keys)
            after = _snapshot(model)
            recognised = _unrecognised_cards_resolve(model)
            if recognised:
                after["cards_recognised"] = recognised
            audit_event_record(actor=actor, action="gpu_model.created", obj=model, after=after)
    except IntegrityError:
        # A writer outside this service (the Django admin, sync_gpu_catalogue) took the slug
        # between the check and the insert: the slug is the one unique column written here.
        if GpuModel.objects.filter(slug=slug).exists():
            _slug_taken(slug)
        raise
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
        catalogue_lock()
        model = GpuModel.objects.select_for_update().get(pk=gpu_model.pk)
        before = _snapshot(model)
        if "pci_device_ids" in changes:
            changes = {**changes, "pci_device_ids": _checked_device_ids(changes, owner=model)}
        if aliases is None and changes.get("vendor_name", model.vendor_name) != model.vendor_name:
            # The new nvidia-smi name joins the aliases the model keeps.
            aliases = [{"value": a.value, "kind": a.kind} for a in model.aliases.all()]
        if aliases is not None:
            aliases = _with_vendor_name(
                aliases, changes.get("vendor_name", model.vendor_name), owner=model
            )
        keys = None if aliases is None else _checked_aliases(aliases, owner=model)
        for field, value in changes.items():
            setattr(model, field, value)
        model.save()
        if aliases is not None:
            _aliases_replace(model, aliases, keys)
        after = _snapshot(model)
        recognised = _unrecognised_cards_resolve(model)
        if recognised:
            after["cards_recognised"] = recognised
        audit_event_record(
            actor=actor, action="gpu_model.updated", obj=model, before=before, after=after
        )
    return model


def _slug_taken(slug: str) -> None:
    raise InvalidInput(f"A GPU model {slug!r} exists.", errors={"slug": "This slug is taken."})


def _with_vendor_name(
    aliases: list[dict[str, str]], vendor_name: str | None, *, owner: GpuModel | None
) -> list[dict[str, str]]:
    """``aliases`` plus the nvidia-smi name as an ``nvidia-smi`` alias when no alias has its key.

    A name several SKUs share (``NVIDIA H100``) is left out: the PCI device id settles it
    (:func:`pools.inventory.gpu_names.model_match`). A name another model answers to is an
    InvalidInput on ``vendor_name``: imports could not tell the two apart."""
    key = normalise_model_key(vendor_name or "")
    ambiguous = {normalise_model_key(entry["value"]) for entry in load_ambiguous_names()}
    if not key or key in ambiguous or key in {normalise_model_key(a["value"]) for a in aliases}:
        return aliases
    clash = GpuModelAlias.objects.filter(key=key).exclude(gpu_model=owner).first()
    if clash is not None:
        message = (
            f"{vendor_name!r} is already {clash.gpu_model.name}'s name ({clash.gpu_model.slug}): "
            "imports could not tell the two models apart."
        )
        raise InvalidInput(message, errors={"vendor_name": message})
    return [*aliases, {"value": vendor_name.strip(), "kind": AliasKind.NVIDIA_SMI}]


def _unrecognised_cards_resolve(model: GpuModel) -> int:
    """Give ``model`` to every card without a model that it now matches (by name, by PCI device
    id, as an import would: :meth:`GpuModelResolver.match`). Returns the number of cards."""
    pending = Gpu.objects.filter(gpu_model__isnull=True).only(
        "pk", "raw_model_name", "pci_device_id"
    )
    if not pending.exists():
        return 0
    resolver = GpuModelResolver.load()
    matched = [
        card.pk
        for card in pending
        if resolver.match(card.raw_model_name, pci_device_id=card.pci_device_id or None).gpu_model
        == model
    ]
    return Gpu.objects.filter(pk__in=matched).update(gpu_model=model, model_candidates=[])


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
