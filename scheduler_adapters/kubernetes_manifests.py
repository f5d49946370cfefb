"""The objects a team's GPU quota is made of in Kubernetes, as plain dicts: the names,
labels and API versions the portal uses, the quota, team and Kueue manifests, GPU node affinity,
and :func:`covers` (does the live object already say what the desired one says). No I/O."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from scheduler_adapters.kubernetes_nodes import GPU_RESOURCE, LABEL_PRODUCT, mig_slices
from scheduler_adapters.kubernetes_taints import card_class_toleration, toleration_annotations
from scheduler_adapters.types import KueueCohort
from scheduler_adapters.units import parse_k8s_quantity

FIELD_MANAGER = "gpu-pool-portal"
QUOTA_RESOURCE = f"requests.{GPU_RESOURCE}"
# MIG slices under the device plugin's *mixed* strategy: one extended resource per profile,
# ``nvidia.com/mig-1g.10gb`` (k8s-device-plugin README, "MIG strategies"); quota'd as
# ``requests.nvidia.com/mig-<profile>``. A pod asking for one can only land on a node that
# advertises it, so these need no node affinity of their own.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_TEAM = "gpu-pool-portal/team"
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"  # set by the API server on every namespace
ANNOTATION_GPU_QUOTA = "gpu-pool-portal/gpu-quota"

ANNOTATION_NODE_SELECTOR = "scheduler.alpha.kubernetes.io/node-selector"  # PodNodeSelector
GPU_TYPE_LABEL = "gpu-type"  # seed 004 §3.1's convention, beside GFD's LABEL_PRODUCT

RESOURCE_QUOTA_NAME = "gpu-quota"
LIMIT_RANGE_NAME = "gpu-pool-portal-defaults"
ROLE_BINDING_NAME = "gpu-pool-portal-team-edit"
TEAM_CLUSTER_ROLE = "edit"
LOCAL_QUEUE_NAME = "default"  # the name Kueue's LocalQueue defaulting looks for

# Container defaults (research/k8s_gpu_anchors.md §2.2): every pod gets requests to schedule by.
DEFAULT_CONTAINER_LIMITS: Mapping[str, str] = {"cpu": "2", "memory": "8Gi"}
DEFAULT_CONTAINER_REQUESTS: Mapping[str, str] = {"cpu": "1", "memory": "4Gi"}

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


# --------------------------------------------------------------------------------- manifests


def namespace_name(team: str, prefix: str = "team-") -> str:
    """The namespace of ``team``; ``ValueError`` unless it is a DNS-1123 label (lower-case
    letters, digits and ``-``, at most 63 characters) and ``team`` a valid label value."""
    if not isinstance(team, str) or not _DNS_LABEL.fullmatch(team):
        raise ValueError(
            f"team {team!r} must be lower-case letters, digits and '-', starting and ending "
            "with a letter or digit (Kubernetes namespace names allow no '_')"
        )
    name = f"{prefix}{team}"
    if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        raise ValueError(f"namespace {name!r} is not a DNS-1123 label of at most 63 characters")
    return name


def flavor_name(product: str) -> str:
    """The ResourceFlavor of a GPU product label: lower case, ``_`` as ``-``
    (``NVIDIA-A100-SXM4-80GB`` -> ``nvidia-a100-sxm4-80gb``)."""
    name = product.lower().replace("_", "-")
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(f"GPU product {product!r} gives no valid ResourceFlavor name ({name!r})")
    return name


def mig_quota_resource(profile: str) -> str:
    """``1g.10gb`` → ``requests.nvidia.com/mig-1g.10gb``; :class:`ValueError` for a text that
    is no MIG profile (``<1|2|3|4|7>g.<m>gb``), and for a ``+me`` profile: ``+`` cannot stand
    in a resource name (a qualified name: alphanumerics, ``-``, ``_``, ``.``), and how the
    device plugin spells those is not checked here, so they are refused rather than guessed."""
    slices = mig_slices(profile, card_memory_gib=None)
    if slices is None:
        raise ValueError(f"{profile!r} is not a MIG profile such as 1g.10gb")
    if slices.media_extensions:
        raise ValueError(f"{profile!r}: a +me profile has no quota resource name the portal knows")
    return f"requests.{MIG_RESOURCE_PREFIX}{profile}"


def check_mig_quota(mig_quota: Mapping[str, int] | None) -> dict[str, int]:
    """``mig_quota`` (slices per MIG profile, mixed strategy) sorted, after checking each
    profile and that slices are whole numbers >= 0; profiles at 0 are left out (the quota
    entry is then removed: server-side apply drops a field its manager stops sending)."""
    checked: dict[str, int] = {}
    for profile, slices in sorted((mig_quota or {}).items()):
        mig_quota_resource(profile)
        if isinstance(slices, bool) or not isinstance(slices, int) or slices < 0:
            raise ValueError(f"slices of {profile!r} must be a whole number >= 0, got {slices!r}")
        if slices:
            checked[profile] = slices
    return checked


def check_gpu_quota(gpu_quota: Mapping[str, int]) -> dict[str, int]:
    """``gpu_quota`` sorted by product, after checking products are label values (the
    ``nvidia.com/gpu.product`` value, at most 63 characters), cards whole numbers >= 0 and no
    two products share a ResourceFlavor name."""
    if not isinstance(gpu_quota, Mapping):
        raise ValueError(f"gpu_quota must map GPU product labels to cards, got {gpu_quota!r}")
    checked: dict[str, int] = {}
    flavors: dict[str, str] = {}
    for product, cards in sorted(gpu_quota.items()):
        if not isinstance(product, str) or len(product) > 63 or not _LABEL_VALUE.fullmatch(product):
            raise ValueError(f"GPU product {product!r} is not a Kubernetes label value")
        if isinstance(cards, bool) or not isinstance(cards, int) or cards < 0:
            raise ValueError(f"cards for {product!r} must be a whole number >= 0, got {cards!r}")
        flavor = flavor_name(product)
        if flavor in flavors:
            raise ValueError(
                f"GPU products {flavors[flavor]!r} and {product!r} share flavor {flavor!r}"
            )
        flavors[flavor] = product
        checked[product] = cards
    return checked


def _check_group(group: str) -> str:
    if not isinstance(group, str) or not group.strip() or not group.isprintable():
        raise ValueError(f"group {group!r} must be a non-empty printable name")
    return group


def object_meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = {LABEL_MANAGED_BY: FIELD_MANAGER, **labels}
    return metadata


def check_gpu_label(label: str) -> str:
    """``label`` when it is a Kubernetes label key (optional DNS prefix and ``/``, a name of at
    most 63 characters), else ``ValueError``."""
    prefix, _, name = label.rpartition("/") if isinstance(label, str) else ("", "", "")
    if (
        not name
        or len(name) > 63
        or not _LABEL_VALUE.fullmatch(name)
        or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)))
    ):
        raise ValueError(f"GPU node label {label!r} is not a Kubernetes label key")
    return label


def dra_quota_resource(device_class: str) -> str:
    """The ResourceQuota resource that caps the devices a namespace's ResourceClaims may
    allocate from ``device_class`` (``<device-class>.deviceclass.resource.k8s.io/devices``;
    Kubernetes "Resource quotas", DRA), e.g. ``gpu.nvidia.com.deviceclass.resource.k8s.io/
    devices`` for the class NVIDIA's DRA driver installs."""
    if (
        not isinstance(device_class, str)
        or len(device_class) > 253
        or not (_DNS_SUBDOMAIN.fullmatch(device_class))
    ):
        raise ValueError(f"DeviceClass {device_class!r} is not a DNS subdomain name")
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def kueue_device_class_mapping(device_class: str) -> dict[str, Any]:
    """The entry of Kueue's Configuration ``resources.deviceClassMappings`` (Kueue
    ``apis/config/v1beta2/configuration_types.go`` ``DeviceClassMapping``: ``name``, the
    resource a ClusterQueue's quota names, and ``deviceClassNames``; docs "Set Up Dynamic
    Resource Allocation", kubernetes-sigs/kueue at ff69552e) that makes Kueue charge claims of
    ``device_class`` to the resource the ClusterQueue covers: the ResourceQuota's own name
    for it (:func:`dra_quota_resource`), a qualified name Kueue accepts (at most 253
    characters). Kueue reads the Configuration once, at start: an admin installs it."""
    name = dra_quota_resource(device_class)
    if len(name) > 253:
        raise ValueError(f"Kueue resource name {name!r} is longer than 253 characters")
    return {"name": name, "deviceClassNames": [device_class]}


def quota_manifests(
    team: str,
    namespace: str,
    gpu_quota: Mapping[str, int],
    *,
    kueue: bool,
    gpu_label: str = LABEL_PRODUCT,
    cohort: KueueCohort | None = None,
    dra_device_class: str | None = None,
    mig_quota: Mapping[str, int] | None = None,
    product_card_classes: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The objects that hold a team's GPU quota: the ResourceQuota (``requests.nvidia.com/gpu``
    = the total, ``requests.nvidia.com/mig-<profile>`` = the slices of each ``mig_quota``
    profile under the mixed MIG strategy
    = the total, and with ``dra_device_class`` the same total on that class's DRA devices,
    since a claim through DRA is not a ``nvidia.com/gpu`` request) and, with Kueue, a
    ResourceFlavor per product (selecting nodes by ``gpu_label``), the ClusterQueue (in
    ``cohort`` when given; with ``dra_device_class`` it covers the class's mapped resource,
    :func:`kueue_device_class_mapping`, with the same limits per flavor as
    ``nvidia.com/gpu``) and the LocalQueue (in apply order). A flavor whose product has a card
    class in ``product_card_classes`` tolerates that class's node taint
    (:mod:`scheduler_adapters.kubernetes_taints`)."""
    quota = check_gpu_quota(gpu_quota)
    hard = {QUOTA_RESOURCE: str(sum(quota.values()))}
    for profile, slices in check_mig_quota(mig_quota).items():
        hard[mig_quota_resource(profile)] = str(slices)
    covered = [GPU_RESOURCE]
    if dra_device_class is not None:
        hard[dra_quota_resource(dra_device_class)] = str(sum(quota.values()))
        covered.append(kueue_device_class_mapping(dra_device_class)["name"])
    check_gpu_label(gpu_label)
    borrowing = dict(cohort.borrowing) if cohort is not None else {}
    for product, cards in borrowing.items():
        if cards > quota.get(product, 0):
            raise ValueError(
                f"borrowing {cards} of {product!r} exceeds its quota {quota.get(product, 0)}"
            )
    labels = {LABEL_TEAM: team}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {
                **object_meta(RESOURCE_QUOTA_NAME, namespace, **labels),
                "annotations": {ANNOTATION_GPU_QUOTA: json.dumps(quota, sort_keys=True)},
            },
            "spec": {"hard": hard},
        }
    ]
    if not kueue:
        return objects
    for product in quota:
        flavor_spec: dict[str, Any] = {"nodeLabels": {gpu_label: product}}
        card_class = (product_card_classes or {}).get(product)
        if card_class is not None:
            flavor_spec["tolerations"] = [card_class_toleration(card_class)]
        objects.append(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": object_meta(flavor_name(product)),
                "spec": flavor_spec,
            }
        )
    # resourceGroups is sent even when empty: leaving it out would leave the old groups in
    # place (nothing to compare against), while [] replaces them (the list is atomic).
    cluster_queue_spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {LABEL_NAMESPACE_NAME: namespace}},
        "resourceGroups": [
            {
                "coveredResources": covered,
                "flavors": [
                    {
                        "name": flavor_name(product),
                        "resources": [
                            _kueue_resource(name, cards, borrowing.get(product), cohort)
                            for name in covered
                        ],
                    }
                    for product, cards in quota.items()
                ],
            }
        ]
        if quota
        else [],
    }
    if cohort is not None:
        cluster_queue_spec["cohortName"] = cohort.name
    objects.append(
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ClusterQueue",
            "metadata": object_meta(namespace, **labels),
            "spec": cluster_queue_spec,
        }
    )
    objects.append(
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "LocalQueue",
            "metadata": object_meta(LOCAL_QUEUE_NAME, namespace, **labels),
            "spec": {"clusterQueue": namespace},
        }
    )
    return objects


def _kueue_resource(name: str, cards: int, borrow: int | None, cohort: KueueCohort | None) -> dict:
    if cohort is None:
        return {"name": name, "nominalQuota": str(cards)}
    resource = {"name": name, "nominalQuota": str(cards - (borrow or 0))}
    if borrow is not None:
        resource["borrowingLimit"] = str(borrow)
    resource["lendingLimit"] = "0"
    return resource


def team_manifests(
    team: str,
    namespace: str,
    *,
    group: str,
    gpu_quota: Mapping[str, int],
    kueue: bool,
    container_limits: Mapping[str, str] = DEFAULT_CONTAINER_LIMITS,
    container_requests: Mapping[str, str] = DEFAULT_CONTAINER_REQUESTS,
    gpu_label: str = LABEL_PRODUCT,
    namespace_node_selector: bool = False,
    cohort: KueueCohort | None = None,
    dra_device_class: str | None = None,
    mig_quota: Mapping[str, int] | None = None,
    product_card_classes: Mapping[str, str] | None = None,
    card_classes: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Every object of a team, in apply order (the namespace first). With
    ``namespace_node_selector`` and exactly one product with cards, the namespace carries the
    PodNodeSelector annotation ``<gpu_label>=<product>`` (module docstring). Without Kueue and
    with ``card_classes`` (those the team's work may use), it carries their tolerations
    (:func:`~scheduler_adapters.kubernetes_taints.toleration_annotations`)."""
    _check_group(group)
    labels = {LABEL_TEAM: team}
    quota = quota_manifests(
        team,
        namespace,
        gpu_quota,
        kueue=kueue,
        gpu_label=gpu_label,
        cohort=cohort,
        dra_device_class=dra_device_class,
        mig_quota=mig_quota,
        product_card_classes=product_card_classes,
    )
    namespace_meta = object_meta(namespace, **labels)
    annotations: dict[str, str] = {}
    held = [product for product, cards in check_gpu_quota(gpu_quota).items() if cards > 0]
    if namespace_node_selector and len(held) == 1:
        annotations[ANNOTATION_NODE_SELECTOR] = f"{gpu_label}={held[0]}"
    if not kueue and card_classes is not None:
        annotations.update(toleration_annotations(card_classes))
    if annotations:
        namespace_meta["annotations"] = annotations
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": namespace_meta},
        quota[0],
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": object_meta(LIMIT_RANGE_NAME, namespace, **labels),
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": dict(container_limits),
                        "defaultRequest": dict(container_requests),
                    }
                ]
            },
        },
        {
            "apiVersion": RBAC_API_VERSION,
            "kind": "RoleBinding",
            "metadata": object_meta(ROLE_BINDING_NAME, namespace, **labels),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": TEAM_CLUSTER_ROLE,
            },
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}],
        },
        *quota[1:],
    ]


def render_yaml(objects: Iterable[Mapping[str, Any]], *, comment: str = "") -> str:
    """Multi-document YAML for ``kubectl apply --server-side -f`` (quantities stay strings)."""
    header = "".join(f"# {line}\n" for line in comment.splitlines())
    header += (
        f"# Apply with: kubectl apply --server-side --field-manager={FIELD_MANAGER} -f <file>\n"
    )
    body = yaml.safe_dump_all(
        [dict(obj) for obj in objects], sort_keys=False, explicit_start=True, width=100
    )
    return header + body


def covers(current: Any, desired: Any) -> bool:
    """Whether ``current`` (as read from the API) already holds everything in ``desired``.

    Maps may hold more keys (labels others set, fields the server defaults); lists must match
    item by item (every list the adapter writes is atomic). A missing key counts as an empty
    list or map, because the API drops empty ones. Quantities compare by value
    (``"1000m"`` equals ``"1"``)."""
    if isinstance(desired, Mapping):
        if current is None:
            current = {}
        if not isinstance(current, Mapping):
            return False
        return all(covers(current.get(key), value) for key, value in desired.items())
    if isinstance(desired, list):
        if current is None:
            current = []
        if not isinstance(current, list) or len(current) != len(desired):
            return False
        return all(covers(c, d) for c, d in zip(current, desired, strict=True))
    if current == desired:
        return True
    if (
        isinstance(desired, str)
        and isinstance(current, str | int)
        and not isinstance(current, bool)
    ):
        try:
            return parse_k8s_quantity(str(current)) == parse_k8s_quantity(desired)
        except ValueError:
            return False
    return False
