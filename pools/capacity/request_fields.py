"""A capacity request's fields as one typed value (issue #29, item 4): what the API serializer
(:meth:`pools.capacity.api.CapacityRequestSerializer.request_fields`), the page's form
(:meth:`pools.capacity.forms.CapacityRequestForm.request_fields`) and the explainer build from
their input, and what :func:`pools.capacity.services.requests.capacity_request_create` and
:func:`~pools.capacity.services.requests.validate_request_fields` take.

Pure: no Django at run time (the models are named for the types only). Nothing here checks a
value; the service does (:func:`~pools.capacity.services.requests.validate_request_fields`), so
a value of the wrong type (``card_count="3"``) is its field error, not a ``TypeError`` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    from pools.capacity.models import Allocation
    from pools.classes.models import WorkloadClass
    from pools.inventory.models import GpuModel, Pool
    from pools.tenancy.models import Team


@dataclass(frozen=True)
class RequestFields:
    """What a team asks for, as it asks it (a :class:`~pools.capacity.models.CapacityRequest`
    before it is written).

    - ``team``: the team asking; ``workload_kind``: ``"training"`` (Slurm) or ``"inference"``
      (Kubernetes), :class:`pools.common.choices.WorkloadKind`;
    - ``card_count``: whole cards, an integer >= 1 (with ``mig_profile``: MIG slices of it);
    - ``starts_at``, ``ends_at``: the window, aware datetimes, ``[starts_at, ends_at)``;
    - ``justification``: plain text, at most ``JUSTIFICATION_MAX`` (5,000) characters; required
      to create (blank here: the explainer asks without one);
    - ``pool``, ``gpu_model``: named, or ``None`` for any eligible one; ``min_memory_gib``: GiB
      per card (Decimal) when no model is named; ``cuda_version``: ``"MAJOR.MINOR"`` or ``""``;
    - ``kind``: ``"cards"`` (:attr:`pools.common.choices.RequestKind.CARDS`, from a pool) or
      ``"growth"`` (capacity no pool has yet);
    - a shape: ``node_count`` groups of ``cards_per_node`` cards (both or neither; integers),
      ``one_nvlink_domain`` (each group's cards joined by NVLink), ``shared_nodes`` (groups may
      share a node);
    - ``mig_profile``: ``"1g.10gb"`` asks for slices of that profile, ``""`` for whole cards;
    - ``workload_class``: ``None`` is the extended allocation's class, else the team's default
      (:func:`pools.capacity.services.requests.request_class`);
    - ``extends``: the allocation a request extends (its cards, from its current end), or ``None``;
    - ``form_token``: the UUID of the page's form that sent it, or ``None`` (the API): one request
      per token (:func:`pools.capacity.services.requests.capacity_request_create_once`).
    """

    team: Team
    workload_kind: str
    card_count: int
    starts_at: datetime
    ends_at: datetime
    justification: str = ""
    pool: Pool | None = None
    gpu_model: GpuModel | None = None
    min_memory_gib: Decimal | None = None
    cuda_version: str = ""
    kind: str = "cards"
    cards_per_node: int | None = None
    node_count: int | None = None
    one_nvlink_domain: bool = False
    shared_nodes: bool = False
    mig_profile: str = ""
    workload_class: WorkloadClass | None = None
    extends: Allocation | None = None
    form_token: UUID | None = None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RequestFields:
        """The fields ``data`` names (a serializer's ``validated_data``, a form's
        ``cleaned_data``); keys that are not a request's field (``submit``) are left out and a
        field ``data`` lacks keeps its default. Raises ``TypeError`` when ``team``,
        ``workload_kind``, ``card_count``, ``starts_at`` or ``ends_at`` is missing."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
