"""Map reported model strings onto the catalogue, and let admins map unrecognised ones."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from pools.audit import audit_event_record
from pools.choices import AliasKind
from pools.errors import Conflict, InvalidInput
from pools.gpu_names import normalise_model_key
from pools.models import Gpu, GpuModel, GpuModelAlias


class GpuModelResolver:
    """Exact alias lookup, loaded once per import: normalised key -> :class:`GpuModel`.

    Matching is exact on :func:`pools.gpu_names.normalise_model_key`, never by substring, so
    ``NVIDIA GeForce RTX 4090 D`` never resolves to the RTX 4090 (tricky input C05).
    """

    def __init__(self, by_key: dict[str, GpuModel]) -> None:
        self._by_key = by_key

    @classmethod
    def load(cls) -> GpuModelResolver:
        aliases = GpuModelAlias.objects.select_related("gpu_model")
        return cls({a.key: a.gpu_model for a in aliases})

    def resolve(self, raw: str | None) -> GpuModel | None:
        """Return the catalogue model for ``raw`` or ``None`` when no alias matches."""
        if not raw:
            return None
        return self._by_key.get(normalise_model_key(raw))


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
        return Gpu.objects.filter(pk__in=pending).update(gpu_model=gpu_model)
