"""Elastic GPU quota of a team in Kubernetes: a guaranteed floor, a burst ceiling and the cards
the portal's loop decided on, rendered for the pool's quota backend, plus the team's
``autoscaling/v2`` HorizontalPodAutoscaler (issue #19, seed 004 §3.3).

Backends (a pool setting), all counting ``nvidia.com/gpu`` cards of one GPU product:

- ``resourcequota``: the portal's own loop moves the namespace's ``ResourceQuota``
  ``requests.nvidia.com/gpu`` to the decided cards, within [floor, ceiling]. Kubernetes does
  the enforcing; the portal does the borrowing.
- ``kueue``: the team's ClusterQueue gets ``nominalQuota`` = floor, ``borrowingLimit`` =
  ceiling - floor and ``lendingLimit`` = 0 in the pool's cohort (``cohortName``), so Kueue
  borrows for it, and never lends the team's guaranteed cards to anyone. What may be borrowed
  is the pool's free capacity, held by one lender ClusterQueue per pool
  (:func:`kueue_lender_manifests`: ``<cohort>-free``, no ``namespaceSelector``, which Kueue reads
  as "admits no namespace", ``nominalQuota`` = the pool's free cards). The namespace's
  ResourceQuota is the ceiling so it never blocks what Kueue admits. The team's ClusterQueue is
  one object whatever the backend: :func:`~scheduler_adapters.kubernetes.quota_manifests` with
  a :class:`~scheduler_adapters.kubernetes.KueueCohort` renders it, here and in the portal's
  quota sync alike, so the two never disagree about it.
- ``volcano``: a Volcano ``Queue`` named like the namespace: ``guarantee.resource`` = floor
  (reserved for the queue), ``deserved`` = the decided cards (its share before reclaim),
  ``capability`` = ceiling (hard cap), ``reclaimable: true``; ``parent`` = the pool's queue
  when given. Workloads choose the queue (``scheduling.volcano.sh/queue-name``); the
  ResourceQuota is the ceiling.
- ``koordinator``: an ``ElasticQuota`` in the namespace (``min`` = floor, ``max`` = ceiling),
  labelled ``quota.scheduling.koordinator.sh/allow-lent-resource: "false"`` (its min is never
  lent to other quotas) and, with a cohort, ``.../parent`` = the pool's parent quota and
  ``.../is-parent: "false"`` (label names from koordinator ``apis/extension/elastic_quota.go``).
  The ResourceQuota is the ceiling.

CRD objects are checked against :mod:`scheduler_adapters.crd_schemas` before anything is sent;
built-in kinds (ResourceQuota, HPA) are checked by the API server (and by kubernetes-validate in
the tests). Writes go through :meth:`KubernetesAdapter.ensure_objects`: read, compare, server-side
apply only what differs, so a repeated decision costs only GETs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import jsonschema

from scheduler_adapters.crd_schemas import (
    ELASTIC_QUOTA_API_VERSION,
    VOLCANO_QUEUE_API_VERSION,
    validate_crd_object,
)
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_manifests import (
    KUEUE_API_VERSION,
    LABEL_TEAM,
    check_gpu_quota,
    flavor_name,
    namespace_name,
    object_meta,
    quota_manifests,
)
from scheduler_adapters.kubernetes_nodes import GPU_RESOURCE, LABEL_PRODUCT
from scheduler_adapters.types import KueueCohort

ANNOTATION_ELASTIC = "gpu-pool-portal/elastic"
HPA_API_VERSION = "autoscaling/v2"
KOORDINATOR_PREFIX = "quota.scheduling.koordinator.sh"
# HPA behavior limits (k8s.io/api autoscaling/v2 HPAScalingRules; validated by the API server)
HPA_MAX_STABILIZATION_S = 3600
HPA_MAX_PERIOD_S = 1800


class QuotaBackend(StrEnum):
    RESOURCE_QUOTA = "resourcequota"
    KUEUE = "kueue"
    VOLCANO = "volcano"
    KOORDINATOR = "koordinator"


@dataclass(frozen=True)
class ElasticBounds:
    """A team's elastic cards of one GPU ``product`` (the ``nvidia.com/gpu.product`` label):
    ``floor_cards`` guaranteed, ``ceiling_cards`` at most, ``cards`` what the loop decided
    (floor <= cards <= ceiling). ``cohort``: the pool's Kueue cohort, Volcano parent queue or
    Koordinator parent quota (required for Kueue: borrowing needs a cohort)."""

    team: str
    product: str
    floor_cards: int
    ceiling_cards: int
    cards: int
    cohort: str | None = None

    def __post_init__(self) -> None:
        for name in ("floor_cards", "ceiling_cards", "cards"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        if not self.floor_cards <= self.cards <= self.ceiling_cards:
            raise ValueError(
                f"cards {self.cards} must lie within floor {self.floor_cards} and ceiling "
                f"{self.ceiling_cards}"
            )


def _annotation(bounds: ElasticBounds) -> str:
    return json.dumps(
        {"floor": bounds.floor_cards, "ceiling": bounds.ceiling_cards, "cards": bounds.cards},
        sort_keys=True,
    )


def elastic_manifests(
    backend: QuotaBackend | str,
    bounds: ElasticBounds,
    *,
    namespace: str,
    dra_device_class: str | None = None,
    product_card_classes: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The objects that hold ``bounds`` under ``backend``, in apply order (the ResourceQuota
    with the DRA devices of ``dra_device_class`` too, and the ResourceFlavor with its card
    class's toleration, as the quota sync writes them)."""
    backend = QuotaBackend(backend)
    team = bounds.team
    labels = {LABEL_TEAM: team}
    dra = {"dra_device_class": dra_device_class}
    if backend is QuotaBackend.RESOURCE_QUOTA:
        objects = quota_manifests(
            team, namespace, {bounds.product: bounds.cards}, kueue=False, **dra
        )
    elif backend is QuotaBackend.KUEUE:
        if not bounds.cohort:
            raise ValueError("Kueue borrowing needs the pool's cohort")
        borrowing = {bounds.product: bounds.ceiling_cards - bounds.floor_cards}
        objects = quota_manifests(
            team,
            namespace,
            {bounds.product: bounds.ceiling_cards},
            kueue=True,
            cohort=KueueCohort(bounds.cohort, borrowing),
            product_card_classes=product_card_classes,
            **dra,
        )
    else:
        objects = quota_manifests(
            team, namespace, {bounds.product: bounds.ceiling_cards}, kueue=False, **dra
        )
        if backend is QuotaBackend.VOLCANO:
            spec: dict[str, Any] = {
                "guarantee": {"resource": {GPU_RESOURCE: str(bounds.floor_cards)}},
                "deserved": {GPU_RESOURCE: str(bounds.cards)},
                "capability": {GPU_RESOURCE: str(bounds.ceiling_cards)},
                "reclaimable": True,
            }
            if bounds.cohort:
                spec["parent"] = bounds.cohort
            objects.append(
                {
                    "apiVersion": VOLCANO_QUEUE_API_VERSION,
                    "kind": "Queue",
                    "metadata": object_meta(namespace, **labels),
                    "spec": spec,
                }
            )
        else:
            quota_labels = {**labels, f"{KOORDINATOR_PREFIX}/allow-lent-resource": "false"}
            if bounds.cohort:
                quota_labels[f"{KOORDINATOR_PREFIX}/parent"] = bounds.cohort
                quota_labels[f"{KOORDINATOR_PREFIX}/is-parent"] = "false"
            objects.append(
                {
                    "apiVersion": ELASTIC_QUOTA_API_VERSION,
                    "kind": "ElasticQuota",
                    "metadata": object_meta(namespace, namespace, **quota_labels),
                    "spec": {
                        "min": {GPU_RESOURCE: str(bounds.floor_cards)},
                        "max": {GPU_RESOURCE: str(bounds.ceiling_cards)},
                    },
                }
            )
    objects[0]["metadata"]["annotations"][ANNOTATION_ELASTIC] = _annotation(bounds)
    for obj in objects:
        if obj["apiVersion"] in (VOLCANO_QUEUE_API_VERSION, ELASTIC_QUOTA_API_VERSION):
            try:
                validate_crd_object(obj)
            except jsonschema.ValidationError as exc:
                raise ValueError(f"{obj['kind']} does not fit its CRD: {exc.message}") from exc
    return objects


def lender_name(cohort: str) -> str:
    """The pool's lender ClusterQueue: ``<cohort>-free``."""
    return f"{cohort}-free"


def kueue_lender_manifests(
    cohort: str,
    free_cards: Mapping[str, int],
    *,
    gpu_label: str = LABEL_PRODUCT,
    product_card_classes: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The pool's lender: a ResourceFlavor per GPU product (the same objects the teams'
    queues use, so a product no team holds yet still resolves) and the ClusterQueue
    :func:`lender_name` whose ``nominalQuota`` per product is the pool's free cards, which the
    cohort's elastic teams may borrow. No ``namespaceSelector`` (Kueue: nil selects no
    namespace), so no workload runs in it. ``free_cards`` may be empty (nothing to lend: the
    queue stays, with no resource groups)."""
    checked = check_gpu_quota(free_cards)
    KueueCohort(cohort, {})  # checks the name
    flavors = [
        obj
        for obj in quota_manifests(
            "-",
            "-",
            checked,
            kueue=True,
            gpu_label=gpu_label,
            product_card_classes=product_card_classes,
        )
        if obj["kind"] == "ResourceFlavor"
    ]
    queue = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": object_meta(lender_name(cohort)),
        "spec": {
            "cohortName": cohort,
            "resourceGroups": [
                {
                    "coveredResources": [GPU_RESOURCE],
                    "flavors": [
                        {
                            "name": flavor_name(product),
                            "resources": [{"name": GPU_RESOURCE, "nominalQuota": str(cards)}],
                        }
                        for product, cards in checked.items()
                    ],
                }
            ]
            if checked
            else [],
        },
    }
    return [*flavors, queue]


@dataclass(frozen=True)
class HpaSpec:
    """What the generated HPA needs. Cards -> replicas by ``cards_per_replica`` (the TP degree
    of the sizing estimate). Targets are the policy's: ``util_pct`` is the per-pod average of
    ``util_metric`` (dcgm-exporter utilisation, 0-100, exposed to the custom metrics API by
    prometheus-adapter), ``latency_ms`` the per-pod average of ``latency_metric`` in seconds
    (a prometheus-adapter rule of ``rate(..._sum) / rate(..._count)``)."""

    deployment: str
    floor_cards: int
    ceiling_cards: int
    cards_per_replica: int = 1
    min_replicas: int = 1
    step_cards: int = 1
    util_pct: float = 75.0
    latency_ms: float = 800.0
    up_window_s: int = 300
    down_window_s: int = 1800
    cooldown_s: int = 900
    util_metric: str = "DCGM_FI_DEV_GPU_UTIL"
    latency_metric: str = "vllm_e2e_request_latency_seconds_mean"


def hpa_manifest(team: str, namespace: str, spec: HpaSpec) -> dict[str, Any]:
    """An ``autoscaling/v2`` HorizontalPodAutoscaler for the team's serving Deployment.

    ``minReplicas`` = max(``min_replicas``, floor / cards per replica) >= 1 (no cold start from
    zero); ``maxReplicas`` = ceiling / cards per replica. ``behavior``: scale-up stabilisation
    = the up window (the HPA takes the lowest recommendation of the window, so it scales up only
    after 5 minutes of a higher one), scale-down stabilisation = the down window (30 minutes),
    and at most one step of replicas per cooldown period in either direction.

    Caveat: an HPA with two metrics scales to the *larger* of their recommendations, so it
    scales up when utilisation *or* latency is over target; the seed's AND rule is what the
    portal's own loop applies. Use the HPA for replicas inside the cards the quota gives.
    """
    per = spec.cards_per_replica
    if per < 1 or spec.min_replicas < 1:
        raise ValueError("cards_per_replica and min_replicas must be >= 1")
    max_replicas = spec.ceiling_cards // per
    min_replicas = max(spec.min_replicas, spec.floor_cards // per)
    if max_replicas < min_replicas:
        raise ValueError(
            f"ceiling of {spec.ceiling_cards} cards holds {max_replicas} replicas of {per} "
            f"cards, fewer than the minimum of {min_replicas}"
        )
    step = max(1, spec.step_cards // per)
    if not 0 < spec.cooldown_s <= HPA_MAX_PERIOD_S:
        raise ValueError(f"cooldown_s must be 1-{HPA_MAX_PERIOD_S} s for an HPA policy period")
    for name in ("up_window_s", "down_window_s"):
        if not 0 <= getattr(spec, name) <= HPA_MAX_STABILIZATION_S:
            raise ValueError(f"{name} must be 0-{HPA_MAX_STABILIZATION_S} s")

    def rules(window: int) -> dict[str, Any]:
        return {
            "stabilizationWindowSeconds": window,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": step, "periodSeconds": spec.cooldown_s}],
        }

    return {
        "apiVersion": HPA_API_VERSION,
        "kind": "HorizontalPodAutoscaler",
        "metadata": object_meta(spec.deployment, namespace, **{LABEL_TEAM: team}),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": spec.deployment,
            },
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": spec.util_metric},
                        "target": {"type": "AverageValue", "averageValue": f"{spec.util_pct:g}"},
                    },
                },
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": spec.latency_metric},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": f"{round(spec.latency_ms):d}m",
                        },
                    },
                },
            ],
            "behavior": {
                "scaleUp": rules(spec.up_window_s),
                "scaleDown": rules(spec.down_window_s),
            },
        },
    }


class ElasticQuotaWriter:
    """Writes elastic quotas and HPAs through a :class:`KubernetesAdapter` (its transport, its
    read-compare-apply, its dry run)."""

    def __init__(self, adapter: KubernetesAdapter) -> None:
        self.adapter = adapter

    def namespace(self, team: str) -> str:
        return namespace_name(team, self.adapter.namespace_prefix)

    def render(self, backend: QuotaBackend | str, bounds: ElasticBounds) -> list[dict[str, Any]]:
        return elastic_manifests(
            backend,
            bounds,
            namespace=self.namespace(bounds.team),
            dra_device_class=self.adapter.dra_device_class,
            product_card_classes=self.adapter.product_card_classes,
        )

    def set_elastic_quota(
        self, backend: QuotaBackend | str, bounds: ElasticBounds, *, with_quota: bool = True
    ) -> bool:
        """Make the cluster hold ``bounds``; ``True`` when something was written.
        ``with_quota=False`` leaves the namespace's ResourceQuota alone (the portal's quota
        sync writes it with all of the team's products: writing it here too would make the
        two writers undo each other)."""
        objects = self.render(backend, bounds)
        if not with_quota:
            objects = [obj for obj in objects if obj["kind"] != "ResourceQuota"]
        return self.adapter.ensure_objects(bounds.team, objects, operation="set_elastic_quota")

    def set_lender(self, cohort: str, free_cards: Mapping[str, int]) -> bool:
        """Keep the pool's Kueue lender at ``free_cards`` per product (cluster-scoped objects
        of no team)."""
        objects = kueue_lender_manifests(
            cohort,
            free_cards,
            gpu_label=self.adapter.gpu_label,
            product_card_classes=self.adapter.product_card_classes,
        )
        return self.adapter.ensure_objects(None, objects, operation="set_kueue_lender")

    def apply_hpa(self, team: str, spec: HpaSpec) -> bool:
        obj = hpa_manifest(team, self.namespace(team), spec)
        return self.adapter.ensure_objects(team, [obj], operation="apply_hpa")
