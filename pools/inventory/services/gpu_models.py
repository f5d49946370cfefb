"""Map reported model strings onto the catalogue, and let admins map unrecognised ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from pools.audit.services import audit_event_record
from pools.common.choices import AliasKind
from pools.common.errors import Conflict, InvalidInput
from pools.inventory.catalogue import load_ambiguous_names, load_gpu_models
from pools.inventory.gpu_names import (
    ambiguous_name_index,
    device_id_index,
    model_match,
    normalise_model_key,
)
from pools.inventory.models import Gpu, GpuModel, GpuModelAlias


class GpuModelResolver:
    """Name (and PCI device id) -> :class:`GpuModel`, loaded once per import.

    Names match exactly on :func:`pools.inventory.gpu_names.normalise_model_key`, never by
    substring, so ``NVIDIA GeForce RTX 4090 D`` never resolves to the RTX 4090 (tricky input
    C05). Aliases and PCI device ids are the database's (kept by pool admins, seeded from
    ``pools/inventory/catalogue/gpu_models.json``); the names several SKUs share come from that
    file. :func:`pools.inventory.gpu_names.model_match` holds the rule.
    """

    def __init__(
        self,
        by_key: dict[str, GpuModel],
        *,
        by_device: dict[str, str] | None = None,
        ambiguous: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._by_key = by_key
        self._slug_by_key = {key: model.slug for key, model in by_key.items()}
        self._by_slug = {model.slug: model for model in by_key.values()}
        self._by_device = by_device or {}
        self._ambiguous = ambiguous or {}

    @classmethod
    def load(cls) -> GpuModelResolver:
        aliases = GpuModelAlias.objects.select_related("gpu_model")
        by_key = {a.key: a.gpu_model for a in aliases}
        rows = list(GpuModel.objects.values("slug", "pci_device_ids"))
        slugs = {row["slug"] for row in rows}
        by_device = device_id_index(rows)
        ambiguous = {
            key: tuple(c for c in candidates if c in slugs)
            for key, candidates in ambiguous_name_index(
                load_ambiguous_names(),
                slugs=slugs | {e["slug"] for e in load_gpu_models()},
                by_key={k: m.slug for k, m in by_key.items() if k not in _admin_keys(aliases)},
            ).items()
            # An admin alias for an ambiguous name (a site with one H100 kind) settles it.
            if key not in by_key
        }
        return cls(by_key, by_device=by_device, ambiguous=ambiguous)

    def resolve(self, raw: str | None) -> GpuModel | None:
        """Return the catalogue model for ``raw`` or ``None`` when no alias matches."""
        if not raw:
            return None
        return self._by_key.get(normalise_model_key(raw))

    def match(self, raw: str | None, *, pci_device_id: str | None = None) -> ResolvedModel:
        """Return the model ``raw`` (with its PCI device id) identifies, or why there is none."""
        found = model_match(
            raw,
            pci_device_id=pci_device_id,
            by_key=self._slug_by_key,
            by_device=self._by_device,
            ambiguous=self._ambiguous,
        )
        model = None
        if found.slug is not None:
            model = self._by_slug.get(found.slug) or GpuModel.objects.get(slug=found.slug)
        return ResolvedModel(model, found.candidates, found.reason)


@dataclass(frozen=True)
class ResolvedModel:
    """A :class:`GpuModel` or ``None``; ``candidates`` (slugs) when the name is ambiguous."""

    gpu_model: GpuModel | None
    candidates: tuple[str, ...]
    reason: str


def _admin_keys(aliases: Any) -> set[str]:
    return {a.key for a in aliases if a.kind == AliasKind.ADMIN}


#: The name of the catalogue's advisory lock (``hashtext`` of it is the key, as billing.locks).
_CATALOGUE_LOCK = "gpu-catalogue"


def catalogue_lock() -> None:
    """Wait for and take the catalogue's lock until the transaction ends.

    PostgreSQL: ``pg_advisory_xact_lock(hashtext('gpu-catalogue'))``, as billing.locks takes
    its named locks (a row lock cannot guard rows not yet inserted, nor the device ids kept in
    a JSON list with no unique index). Every writer of aliases and device ids takes it: the
    catalogue service and :func:`gpu_model_alias_map`. SQLite (the demo) needs none: a write
    transaction locks the database."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [_CATALOGUE_LOCK])


def gpu_model_alias_map(*, raw_name: str, gpu_model: GpuModel, actor: Any) -> int:
    """Map an unrecognised reported name onto ``gpu_model`` for every source from now on.

    Creates an admin alias and assigns the model to every GPU reporting ``raw_name`` without a
    model. Returns the number of GPUs that became recognised. Raises :class:`InvalidInput` for
    an empty name and :class:`Conflict` when the name already maps to another model.
    """
    raw_name = raw_name.strip()
    key = normalise_model_key(raw_name) if raw_name else ""
    if not key:
        raise InvalidInput("The reported model name is empty.", field="raw_name")
    with transaction.atomic():
        catalogue_lock()
        existing = GpuModelAlias.objects.select_for_update().filter(key=key).first()
        if existing is not None and existing.gpu_model_id != gpu_model.pk:
            raise Conflict(
                f"{raw_name!r} already maps to {existing.gpu_model.name}.",
                raw_name=raw_name,
                gpu_model=existing.gpu_model.slug,
            )
        if existing is None:
            alias = GpuModelAlias.objects.create(
                gpu_model=gpu_model, value=raw_name, kind=AliasKind.ADMIN, key=key
            )
            audit_event_record(
                actor=actor,
                action="gpu_model_alias.created",
                obj=alias,
                after={"value": raw_name, "gpu_model": gpu_model.slug},
            )
        pending = [
            g.pk
            for g in Gpu.objects.filter(gpu_model__isnull=True).only("pk", "raw_model_name")
            if g.raw_model_name and normalise_model_key(g.raw_model_name) == key
        ]
        return Gpu.objects.filter(pk__in=pending).update(gpu_model=gpu_model, model_candidates=[])
