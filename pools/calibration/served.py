"""What an allocation serves, set from the team's own sizing: a manager links one of the team's
saved estimates to the allocation, and the calibration pass sizes what the team sized (the
estimate's model, precision, KV-cache dtype and engine, and the TP it chose for the
allocation's GPU model), not only what a pool admin typed into the admin.

Linking writes the :class:`~pools.serving.models.ServedModel` in one transaction with its audit
event on the allocation (``served_model.linked`` / ``served_model.unlinked``, before/after),
so the team sees it in the allocation's history.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from pools.audit.services import audit_event_record, audit_snapshot
from pools.capacity.models import Allocation
from pools.common.choices import EstimateStatus
from pools.common.errors import InvalidInput, NotFound, PermissionDenied
from pools.serving.models import ServedModel
from pools.sizing.models import SizingEstimate
from pools.tenancy.permissions import may_link_estimate


def _require(actor: Any, allocation: Allocation) -> None:
    if not may_link_estimate(actor, allocation.team):
        raise PermissionDenied(
            f"Only a manager of team {allocation.team.slug} or a pool admin may say what its "
            "allocation serves.",
            team=allocation.team.slug,
        )


SNAPSHOT = ("model_id", "precision", "tp", "engine", "kv_cache_dtype", "estimate_id")


def _snapshot(served: ServedModel | None) -> dict[str, Any] | None:
    return None if served is None else audit_snapshot(served, *SNAPSHOT)


def estimate_row_for(estimate: SizingEstimate, gpu_slug: str) -> dict | None:
    """The estimate's result row for ``gpu_slug`` when it fits (a TP was chosen), else ``None``."""
    for row in (estimate.results or {}).get("rows", []):
        if row.get("gpu_model") == gpu_slug and row.get("tp"):
            return row
    return None


def linkable_estimates(*, user: Any, allocation: Allocation) -> list[SizingEstimate]:
    """The saved estimates ``user`` could link to ``allocation``: done, visible to them, shared
    with the allocation's team or their own, with a fitting row for its GPU model; newest
    first (at most 50)."""
    candidates = (
        SizingEstimate.objects.visible_to(user)
        .filter(status=EstimateStatus.DONE)
        .filter(Q(team=allocation.team_id) | Q(team__isnull=True))
        .order_by("-created_at", "-id")[:50]
    )
    slug = allocation.gpu_model.slug
    return [e for e in candidates if estimate_row_for(e, slug) is not None]


def served_model_link_estimate(
    *, actor: Any, allocation: Allocation, estimate_id: Any
) -> ServedModel:
    """Link saved estimate ``estimate_id`` to ``allocation`` (managers of its team, pool
    admins): its ServedModel becomes the estimate's model, precision, KV-cache dtype, engine and
    the TP of its row for the allocation's GPU model.

    Errors: :class:`PermissionDenied` (not a manager); :class:`InvalidInput` on ``estimate``
    when it is not a whole number, does not exist or cannot be seen (one message: never says
    which), is shared with another team, is not done, or has no fitting row for the GPU model.
    A refused link changes nothing."""
    _require(actor, allocation)
    try:
        pk = int(estimate_id)
    except (TypeError, ValueError):
        raise InvalidInput(
            "Give a saved estimate's id.", errors={"estimate": "A whole number."}
        ) from None
    estimate = SizingEstimate.objects.visible_to(actor).filter(pk=pk).first()
    if estimate is None:
        raise InvalidInput(
            f"No saved estimate #{pk} you may see.", errors={"estimate": "No such estimate."}
        )
    if estimate.team_id not in (None, allocation.team_id):
        raise InvalidInput(
            f"Estimate #{pk} is shared with another team.",
            errors={"estimate": f"Shared with another team, not {allocation.team.slug}."},
        )
    if estimate.status != EstimateStatus.DONE:
        raise InvalidInput(
            f"Estimate #{pk} is {estimate.status}, not done.",
            errors={"estimate": "Only a finished estimate has sizes to compare with."},
        )
    gpu = allocation.gpu_model
    row = estimate_row_for(estimate, gpu.slug)
    if row is None:
        raise InvalidInput(
            f"Estimate #{pk} has no fitting size for {gpu.name}.",
            errors={"estimate": f"It does not size {gpu.name}, or the model does not fit on it."},
        )
    inputs = estimate.inputs
    custom = inputs["model"] == "custom"
    fields = {
        # a custom architecture is keyed by its estimate: two custom models never share records
        "model_id": f"custom:{estimate.pk}" if custom else inputs["model"],
        "precision": inputs["precision"],
        "tp": int(row["tp"]),
        "engine": inputs["engine"],
        "kv_cache_dtype": inputs.get("kv_cache_dtype") or "",
        "estimate": estimate,
    }
    with transaction.atomic():
        served = ServedModel.objects.select_for_update().filter(allocation=allocation).first()
        before = _snapshot(served)
        if served is None:
            served = ServedModel(allocation=allocation)
        for name, value in fields.items():
            setattr(served, name, value)
        served.save()
        audit_event_record(
            actor=actor,
            action="served_model.linked",
            obj=allocation,
            before=before,
            after=_snapshot(served),
        )
    return served


def served_model_unlink_estimate(*, actor: Any, allocation: Allocation) -> ServedModel:
    """Take the estimate off ``allocation``'s ServedModel (managers, pool admins): the fields
    stay as they were (calibration keeps sizing them, as if an admin had typed them); a 404
    (:class:`NotFound`) when no estimate is linked."""
    _require(actor, allocation)
    with transaction.atomic():
        served = (
            ServedModel.objects.select_for_update()
            .filter(allocation=allocation, estimate__isnull=False)
            .first()
        )
        if served is None:
            raise NotFound("No saved estimate is linked to this allocation.")
        before = _snapshot(served)
        served.estimate = None
        served.save(update_fields=["estimate"])
        audit_event_record(
            actor=actor,
            action="served_model.unlinked",
            obj=allocation,
            before=before,
            after=_snapshot(served),
        )
    return served
