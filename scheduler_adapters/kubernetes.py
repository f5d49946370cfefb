"""``KubernetesAdapter``: a team's GPU quota in a Kubernetes cluster, through the official
``kubernetes`` client (a :class:`~scheduler_adapters.base.NamespaceQuotaAdapter`).

Per team the adapter keeps, in this order:

- a ``Namespace`` named ``<prefix><team>`` labelled ``gpu-pool-portal/team=<team>``;
- a ``ResourceQuota`` ``gpu-quota`` whose ``requests.nvidia.com/gpu`` is the team's total
  (Kubernetes quota knows extended resources only with the ``requests.`` prefix, and counts
  device-plugin units, so it cannot tell an A100 from an L40S); the per-product split the
  portal asked for is recorded in its ``gpu-pool-portal/gpu-quota`` annotation;
- a ``LimitRange`` giving containers default CPU/memory requests and limits (never GPUs: a
  LimitRange ``max`` on ``nvidia.com/gpu`` becomes every container's default, sidecars too);
- a ``RoleBinding`` of the team's group to the ``edit`` ClusterRole;
- with Kueue (``kueue.x-k8s.io/v1beta2``, served from Kueue 0.15): a ``ResourceFlavor`` per GPU
  product (``nodeLabels: {nvidia.com/gpu.product: <product>}``, shared by all teams, never
  deleted), the team's ``ClusterQueue`` (named like the namespace, admitting only that
  namespace, ``nominalQuota`` of ``nvidia.com/gpu`` per flavor) and a ``LocalQueue`` named
  ``default`` in the namespace. The ClusterQueue covers only ``nvidia.com/gpu``: Kueue does
  not admit a pod set that requests a resource its ClusterQueue does not cover, so Kueue's
  Configuration must list ``cpu``, ``memory`` (and whatever else pods request) under
  ``resources.excludeResourcePrefixes``.

Every write reads the object first and sends nothing when the cluster already holds what the
portal wants, so a second identical call is only GETs. A missing object is created (POST; a
409 ``AlreadyExists`` from a concurrent creator counts as success and is read back); a
differing one is server-side applied (``PATCH`` ``application/apply-patch+yaml``, field
manager ``gpu-pool-portal``, ``force=true``) with the ``resourceVersion`` it was read at as a
precondition, so a concurrent change gives 409 ``Conflict``: the object is read again and the
apply retried once. Errors map onto :mod:`scheduler_adapters.errors` (see
:func:`api_error`); connection refused and timeouts are :class:`SchedulerUnavailable`.

**Which nodes** (placement): a pool names the node label that tells GPU models apart
(``gpu_label``): GPU Feature Discovery's ``nvidia.com/gpu.product`` (the default) or the
``gpu-type=<model>`` convention of seed 004 §3.1. Kueue's ResourceFlavors select nodes by it
(``nodeLabels``; Kueue copies them into the admitted pods' node selector). Without Kueue a
namespace can carry ``scheduler.alpha.kubernetes.io/node-selector: <label>=<product>`` (the
PodNodeSelector admission plugin merges it into every pod of the namespace; only when the team
holds one product, since the plugin ANDs its terms) with ``namespace_node_selector=True``; and
:func:`gpu_node_affinity` gives the ``affinity`` block for a team's pod templates.

``dry_run=True`` never writes to the cluster: the objects are rendered as multi-document YAML
(:meth:`KubernetesAdapter.render_manifests`) and, with ``dry_run_dir``, kept as the team's
desired state in ``<dir>/<namespace>.yaml`` for ``kubectl apply --server-side -f``.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from scheduler_adapters.base import NamespaceGpuQuota
from scheduler_adapters.errors import (
    NotFound,
    RemoteError,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
)
from scheduler_adapters.kubernetes_nodes import GPU_RESOURCE, LABEL_PRODUCT, parse_kubernetes_nodes
from scheduler_adapters.types import KueueCohort, ParseResult
from scheduler_adapters.units import parse_k8s_extended_count, parse_k8s_quantity

FIELD_MANAGER = "gpu-pool-portal"
QUOTA_RESOURCE = f"requests.{GPU_RESOURCE}"
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


# --------------------------------------------------------------------------------- the kinds


@dataclass(frozen=True)
class Kind:
    """One API kind the adapter writes or reads."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


KINDS: Mapping[str, Kind] = {
    kind.kind: kind
    for kind in (
        Kind("Namespace", "v1", "namespaces", False),
        Kind("Node", "v1", "nodes", False),
        Kind("ResourceQuota", "v1", "resourcequotas", True),
        Kind("LimitRange", "v1", "limitranges", True),
        Kind("RoleBinding", RBAC_API_VERSION, "rolebindings", True),
        Kind("ResourceFlavor", KUEUE_API_VERSION, "resourceflavors", False),
        Kind("ClusterQueue", KUEUE_API_VERSION, "clusterqueues", False),
        Kind("LocalQueue", KUEUE_API_VERSION, "localqueues", True),
        # elastic quota backends and the team's HPA (scheduler_adapters/kubernetes_elastic.py)
        Kind("Queue", "scheduling.volcano.sh/v1beta1", "queues", False),
        Kind("ElasticQuota", "scheduling.sigs.k8s.io/v1alpha1", "elasticquotas", True),
        Kind("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", True),
    )
}


# --------------------------------------------------------------------------------- the errors


class AlreadyExists(SchedulerRejected):
    """409 ``AlreadyExists`` on create: someone else created the object first."""

    code = "scheduler_already_exists"


class ResourceVersionConflict(SchedulerRejected):
    """409 ``Conflict``: the object changed since it was read. Transient: read it again."""

    code = "scheduler_conflict"
    transient = True


def api_error(operation: str, exc: ApiException) -> SchedulerError:
    """Map an API error (a ``v1.Status`` body when the server sent one) onto the adapter errors.

    401/403 -> :class:`SchedulerAuthError` (except 403 ``NamespaceTerminating``, which passes:
    a transient :class:`SchedulerRejected`); 400/422 -> :class:`SchedulerRejected` with the
    Status ``message`` and one :class:`RemoteError` per ``details.causes`` entry; 404 ->
    :class:`NotFound`; 409 -> :class:`AlreadyExists` or :class:`ResourceVersionConflict`;
    410 (an expired list continue token), 429 and 5xx -> :class:`SchedulerUnavailable`.
    """
    status_code = exc.status or 0
    body = _status_body(exc.body)
    message = body.get("message") or f"HTTP {status_code} {exc.reason or ''}".strip()
    details = body.get("details") if isinstance(body.get("details"), dict) else {}
    causes = tuple(
        RemoteError(
            None,
            f"{cause['field']}: {cause.get('message', '')}"
            if cause.get("field")
            else str(cause.get("message", "")),
            description=cause.get("reason"),
        )
        for cause in details.get("causes") or ()
        if isinstance(cause, dict)
    )
    kwargs: dict[str, Any] = {"operation": operation, "errors": causes}
    if status_code == 0:  # the client failed before any answer (TLS verification)
        return SchedulerUnavailable(message, transient=False, **kwargs)
    kwargs["http_status"] = status_code
    reason = body.get("reason")
    if status_code == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(message, **kwargs)
        return ResourceVersionConflict(message, **kwargs)
    if status_code in (401, 403):
        if any(cause.description == "NamespaceTerminating" for cause in causes):
            return SchedulerRejected(message, transient=True, **kwargs)
        return SchedulerAuthError(message, **kwargs)
    if status_code == 404:
        return NotFound(str(details.get("kind") or "object"), details.get("name"), **kwargs)
    if status_code in (400, 422):
        return SchedulerRejected(message, **kwargs)
    if status_code in (410, 429) or status_code >= 500:
        return SchedulerUnavailable(message, **kwargs)
    return UnexpectedResponse(message, **kwargs)


def _status_body(raw: Any) -> dict[str, Any]:
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return body if isinstance(body, dict) and body.get("kind") == "Status" else {}


# --------------------------------------------------------------------------------- transports


class Transport(Protocol):
    """How the adapter reaches objects: the API server, or memory in the fake.

    ``get`` returns ``None`` for 404; ``create`` raises :class:`AlreadyExists`; ``apply``
    (server-side apply, field manager ``gpu-pool-portal``, forced) raises
    :class:`ResourceVersionConflict` when ``metadata.resourceVersion`` in the object is stale.
    """

    def get(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any] | None: ...

    def create(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any]: ...

    def apply(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any]: ...

    def list(
        self, kind: str, *, operation: str, label_selector: str | None = None
    ) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class ApiTransport:
    """:class:`Transport` over the official client's typed APIs (CoreV1, RbacAuthorizationV1,
    CustomObjects for Kueue). Responses are read as raw JSON (``_preload_content=False``) so
    that fields a newer server adds never fail the client's response models."""

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        page_size: int = 500,
    ) -> None:
        self.api_client = api_client
        self.timeout = (float(connect_timeout_s), float(timeout_s))
        self.page_size = page_size
        self.core = k8s.CoreV1Api(api_client)
        self.rbac = k8s.RbacAuthorizationV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)

    def get(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any] | None:
        kind, name, namespace = _identity(obj)
        try:
            return self._call(operation, self._reader(kind), name, namespace)
        except NotFound:
            return None

    def create(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any]:
        kind, _, namespace = _identity(obj)
        return self._call(
            operation,
            self._creator(kind),
            namespace,
            dict(obj),
            field_manager=FIELD_MANAGER,
            field_validation="Strict",
            **_JSON_BODY,
        )

    def apply(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any]:
        kind, name, namespace = _identity(obj)
        return self._call(
            operation,
            self._patcher(kind),
            name,
            namespace,
            dict(obj),
            field_manager=FIELD_MANAGER,
            field_validation="Strict",
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def list(
        self, kind: str, *, operation: str, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        spec = KINDS[kind]
        if kind == "Node":

            def page(**query: Any) -> Any:
                return self.core.list_node(**query)
        else:

            def page(**query: Any) -> Any:
                return self.custom.list_cluster_custom_object(
                    spec.group, spec.version, spec.plural, **query
                )

        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query: dict[str, Any] = {"limit": self.page_size}
            if label_selector:
                query["label_selector"] = label_selector
            if token:
                query["_continue"] = token
            payload = self._call(operation, page, **query)
            found = payload.get("items")
            if found is None:
                found = []
            if not isinstance(found, list):
                raise UnexpectedResponse(f"{kind} list has no item list", operation=operation)
            items.extend(found)
            metadata = payload.get("metadata") if isinstance(payload.get("metadata"), dict) else {}
            token = metadata.get("continue") or None
            if not token:
                return items

    def close(self) -> None:
        self.api_client.close()

    # -- the typed calls for each kind; ``namespace`` is ignored for cluster-scoped kinds

    def _reader(self, kind: str) -> Callable[..., Any]:
        spec = KINDS[kind]
        readers: dict[str, Callable[..., Any]] = {
            "Namespace": lambda name, _ns, **kw: self.core.read_namespace(name, **kw),
            "ResourceQuota": self.core.read_namespaced_resource_quota,
            "LimitRange": self.core.read_namespaced_limit_range,
            "RoleBinding": self.rbac.read_namespaced_role_binding,
        }
        if kind in readers:
            return readers[kind]
        if spec.namespaced:
            return lambda name, ns, **kw: self.custom.get_namespaced_custom_object(
                spec.group, spec.version, ns, spec.plural, name, **kw
            )
        return lambda name, _ns, **kw: self.custom.get_cluster_custom_object(
            spec.group, spec.version, spec.plural, name, **kw
        )

    def _creator(self, kind: str) -> Callable[..., Any]:
        spec = KINDS[kind]
        creators: dict[str, Callable[..., Any]] = {
            "Namespace": lambda _ns, body, **kw: self.core.create_namespace(body, **kw),
            "ResourceQuota": self.core.create_namespaced_resource_quota,
            "LimitRange": self.core.create_namespaced_limit_range,
            "RoleBinding": self.rbac.create_namespaced_role_binding,
        }
        if kind in creators:
            return creators[kind]
        if spec.namespaced:
            return lambda ns, body, **kw: self.custom.create_namespaced_custom_object(
                spec.group, spec.version, ns, spec.plural, body, **kw
            )
        return lambda _ns, body, **kw: self.custom.create_cluster_custom_object(
            spec.group, spec.version, spec.plural, body, **kw
        )

    def _patcher(self, kind: str) -> Callable[..., Any]:
        spec = KINDS[kind]
        patchers: dict[str, Callable[..., Any]] = {
            "Namespace": lambda name, _ns, body, **kw: self.core.patch_namespace(name, body, **kw),
            "ResourceQuota": self.core.patch_namespaced_resource_quota,
            "LimitRange": self.core.patch_namespaced_limit_range,
            "RoleBinding": self.rbac.patch_namespaced_role_binding,
        }
        if kind in patchers:
            return patchers[kind]
        if spec.namespaced:
            return lambda name, ns, body, **kw: self.custom.patch_namespaced_custom_object(
                spec.group, spec.version, ns, spec.plural, name, body, **kw
            )
        return lambda name, _ns, body, **kw: self.custom.patch_cluster_custom_object(
            spec.group, spec.version, spec.plural, name, body, **kw
        )

    def _call(self, operation: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict:
        try:
            response = fn(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
            raw = response.data
        except ApiException as exc:
            raise api_error(operation, exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            host = self.api_client.configuration.host
            raise SchedulerUnavailable(
                f"Kubernetes API at {host} unreachable: {exc}", operation=operation
            ) from exc
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise UnexpectedResponse(
                "the API server answered with something that is not JSON", operation=operation
            ) from exc
        if not isinstance(payload, dict):
            raise UnexpectedResponse(
                "the API server answered with a non-object", operation=operation
            )
        return payload


# kubernetes 37's create calls ignore ``_content_type`` and send no Content-Type at all; the
# API server would take JSON, but say so rather than rely on its default.
_JSON_BODY: dict[str, Any] = (
    {"_headers": {"Content-Type": "application/json"}}
    if "_headers" in inspect.signature(k8s.CoreV1Api.create_namespace).parameters
    else {"_content_type": "application/json"}
)


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    metadata = obj["metadata"]
    return obj["kind"], metadata["name"], metadata.get("namespace")


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


def gpu_node_affinity(products: Iterable[str], *, label: str = LABEL_PRODUCT) -> dict[str, Any]:
    """A pod's ``affinity`` that keeps it on nodes whose ``label`` is one of ``products``
    (``requiredDuringSchedulingIgnoredDuringExecution``, operator ``In``; the Pod API's
    NodeAffinity)."""
    values = sorted(set(products))
    if not values:
        raise ValueError("node affinity needs at least one GPU product")
    check_gpu_quota(dict.fromkeys(values, 0))
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": check_gpu_label(label), "operator": "In", "values": values}
                        ]
                    }
                ]
            }
        }
    }


def quota_manifests(
    team: str,
    namespace: str,
    gpu_quota: Mapping[str, int],
    *,
    kueue: bool,
    gpu_label: str = LABEL_PRODUCT,
    cohort: KueueCohort | None = None,
) -> list[dict[str, Any]]:
    """The objects that hold a team's GPU quota: the ResourceQuota and, with Kueue, a
    ResourceFlavor per product (selecting nodes by ``gpu_label``), the ClusterQueue (in
    ``cohort`` when given) and the LocalQueue (in apply order)."""
    quota = check_gpu_quota(gpu_quota)
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
            "spec": {"hard": {QUOTA_RESOURCE: str(sum(quota.values()))}},
        }
    ]
    if not kueue:
        return objects
    for product in quota:
        objects.append(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": object_meta(flavor_name(product)),
                "spec": {"nodeLabels": {gpu_label: product}},
            }
        )
    # resourceGroups is sent even when empty: leaving it out would leave the old groups in
    # place (nothing to compare against), while [] replaces them (the list is atomic).
    cluster_queue_spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {LABEL_NAMESPACE_NAME: namespace}},
        "resourceGroups": [
            {
                "coveredResources": [GPU_RESOURCE],
                "flavors": [
                    {
                        "name": flavor_name(product),
                        "resources": [_kueue_resource(cards, borrowing.get(product), cohort)],
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


def _kueue_resource(cards: int, borrow: int | None, cohort: KueueCohort | None) -> dict:
    if cohort is None:
        return {"name": GPU_RESOURCE, "nominalQuota": str(cards)}
    resource = {"name": GPU_RESOURCE, "nominalQuota": str(cards - (borrow or 0))}
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
) -> list[dict[str, Any]]:
    """Every object of a team, in apply order (the namespace first). With
    ``namespace_node_selector`` and exactly one product with cards, the namespace carries the
    PodNodeSelector annotation ``<gpu_label>=<product>`` (module docstring)."""
    _check_group(group)
    labels = {LABEL_TEAM: team}
    quota = quota_manifests(
        team, namespace, gpu_quota, kueue=kueue, gpu_label=gpu_label, cohort=cohort
    )
    namespace_meta = object_meta(namespace, **labels)
    held = [product for product, cards in check_gpu_quota(gpu_quota).items() if cards > 0]
    if namespace_node_selector and len(held) == 1:
        namespace_meta["annotations"] = {ANNOTATION_NODE_SELECTOR: f"{gpu_label}={held[0]}"}
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


# --------------------------------------------------------------------------------- the adapter


class KubernetesAdapter:
    """GPU quotas of teams in one Kubernetes cluster (see the module docstring).

    ``transport`` is how objects are reached (default: :class:`ApiTransport` over
    ``api_client``). ``kueue`` is the default for the operations' ``kueue`` argument;
    ``namespace_prefix`` makes namespaces ``<prefix><team>``. With ``dry_run`` nothing is
    written to the cluster (reads still need a connection); see :meth:`render_manifests`.
    """

    def __init__(
        self,
        *,
        api_client: k8s.ApiClient | None = None,
        transport: Transport | None = None,
        kueue: bool = False,
        dry_run: bool = False,
        dry_run_dir: str | Path | None = None,
        namespace_prefix: str = "team-",
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        page_size: int = 500,
        container_limits: Mapping[str, str] = DEFAULT_CONTAINER_LIMITS,
        container_requests: Mapping[str, str] = DEFAULT_CONTAINER_REQUESTS,
        gpu_label: str = LABEL_PRODUCT,
        namespace_node_selector: bool = False,
    ) -> None:
        if transport is None and api_client is not None:
            transport = ApiTransport(
                api_client,
                timeout_s=timeout_s,
                connect_timeout_s=connect_timeout_s,
                page_size=page_size,
            )
        if transport is None and not dry_run:
            raise ValueError("KubernetesAdapter needs an api_client or a transport")
        self.transport = transport
        self.kueue = kueue
        self.dry_run = dry_run
        self.dry_run_dir = Path(dry_run_dir) if dry_run_dir else None
        self.namespace_prefix = namespace_prefix
        self.container_limits = dict(container_limits)
        self.container_requests = dict(container_requests)
        self.gpu_label = check_gpu_label(gpu_label)
        self.namespace_node_selector = namespace_node_selector
        self.manifests: list[str] = []  # what dry-run writes produced, in order
        namespace_name("x", namespace_prefix)  # a prefix that can never work fails now

    # ------------------------------------------------------------------ NamespaceQuotaAdapter

    def list_nodes(self) -> ParseResult:
        items = self._transport("list_nodes").list("Node", operation="list_nodes")
        return parse_kubernetes_nodes({"kind": "NodeList", "apiVersion": "v1", "items": items})

    def ensure_team(
        self,
        team: str,
        *,
        group: str,
        gpu_quota: Mapping[str, int],
        kueue: bool | None = None,
        cohort: KueueCohort | None = None,
    ) -> bool:
        objects = self._team_objects(
            team, group=group, gpu_quota=gpu_quota, kueue=kueue, cohort=cohort
        )
        if self.dry_run:
            return self._emit(team, objects)
        transport = self._transport("ensure_team")
        changed = False
        for obj in objects:
            changed |= self._ensure(transport, "ensure_team", team, obj)
        return changed

    def set_gpu_quota(
        self, team: str, gpu_quota: Mapping[str, int], *, kueue: bool | None = None
    ) -> bool:
        return self._set_quota("set_gpu_quota", team, gpu_quota, kueue, missing_ok=False)

    def remove_team_quota(self, team: str, *, kueue: bool | None = None) -> bool:
        return self._set_quota("remove_team_quota", team, {}, kueue, missing_ok=True)

    def get_gpu_quota(self, team: str, *, kueue: bool | None = None) -> NamespaceGpuQuota:
        operation = "get_gpu_quota"
        namespace = namespace_name(team, self.namespace_prefix)
        use_kueue = self.kueue if kueue is None else kueue
        transport = self._transport(operation)
        self._read_namespace(transport, operation, team, namespace)
        objects = {
            obj["kind"]: obj for obj in quota_manifests(team, namespace, {}, kueue=use_kueue)
        }
        quota = transport.get(objects["ResourceQuota"], operation=operation)
        cards: int | None = None
        recorded: dict[str, int] | None = None
        if quota is not None:
            hard = (quota.get("spec") or {}).get("hard") or {}
            if QUOTA_RESOURCE in hard:
                cards = self._count(
                    operation, hard[QUOTA_RESOURCE], f"ResourceQuota {QUOTA_RESOURCE}"
                )
            annotations = (quota.get("metadata") or {}).get("annotations") or {}
            recorded = _recorded_split(annotations.get(ANNOTATION_GPU_QUOTA))
        by_product = recorded
        if use_kueue:
            queue = transport.get(objects["ClusterQueue"], operation=operation)
            by_product = None if queue is None else self._kueue_split(transport, operation, queue)
        return NamespaceGpuQuota(
            team=team,
            namespace=namespace,
            cards=cards,
            cards_by_product=by_product,
            kueue=use_kueue,
        )

    def ensure_objects(
        self, team: str | None, objects: list[dict[str, Any]], *, operation: str
    ) -> bool:
        """Make the cluster hold ``objects`` (in order) with the read-compare-apply of every
        other write; ``True`` when something was written. With a ``team`` its namespace must
        exist and the objects must not belong to another team; ``team=None`` is for
        cluster-scoped objects of no team (a pool's Kueue lender queue)."""
        if self.dry_run:
            if team is None:
                self.manifests.append(render_yaml(objects, comment="gpu-pool-portal: pool objects"))
                return True
            return self._emit(team, objects)
        transport = self._transport(operation)
        if team is not None:
            namespace = namespace_name(team, self.namespace_prefix)
            self._read_namespace(transport, operation, team, namespace)
        changed = False
        for obj in objects:
            changed |= self._ensure(transport, operation, team, obj)
        return changed

    def render_manifests(
        self,
        team: str,
        *,
        group: str,
        gpu_quota: Mapping[str, int],
        kueue: bool | None = None,
    ) -> str:
        objects = self._team_objects(team, group=group, gpu_quota=gpu_quota, kueue=kueue)
        return render_yaml(objects, comment=self._comment(team, objects))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ internals

    def _team_objects(
        self,
        team: str,
        *,
        group: str,
        gpu_quota: Mapping[str, int],
        kueue: bool | None,
        cohort: KueueCohort | None = None,
    ) -> list[dict[str, Any]]:
        if cohort is not None:
            kueue = True  # a cohort is a Kueue ClusterQueue's, whatever the adapter's default
        return team_manifests(
            team,
            namespace_name(team, self.namespace_prefix),
            group=group,
            gpu_quota=gpu_quota,
            kueue=self.kueue if kueue is None else kueue,
            container_limits=self.container_limits,
            container_requests=self.container_requests,
            gpu_label=self.gpu_label,
            namespace_node_selector=self.namespace_node_selector,
            cohort=cohort,
        )

    def _set_quota(
        self,
        operation: str,
        team: str,
        gpu_quota: Mapping[str, int],
        kueue: bool | None,
        *,
        missing_ok: bool,
    ) -> bool:
        namespace = namespace_name(team, self.namespace_prefix)
        objects = quota_manifests(
            team,
            namespace,
            gpu_quota,
            kueue=self.kueue if kueue is None else kueue,
            gpu_label=self.gpu_label,
        )
        if self.dry_run:
            return self._emit(team, objects)
        transport = self._transport(operation)
        if (
            self._read_namespace(transport, operation, team, namespace, missing_ok=missing_ok)
            is None
        ):
            return False
        changed = False
        for obj in objects:
            changed |= self._ensure(transport, operation, team, obj)
        return changed

    def _transport(self, operation: str) -> Transport:
        if self.transport is None:
            raise SchedulerUnavailable(
                "dry-run adapter has no cluster connection to read from",
                operation=operation,
                transient=False,
            )
        return self.transport

    def _read_namespace(
        self,
        transport: Transport,
        operation: str,
        team: str,
        namespace: str,
        *,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        probe = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        current = transport.get(probe, operation=operation)
        if current is None:
            if missing_ok:
                return None
            raise NotFound("namespace", namespace, operation=operation)
        _check_owner(operation, team, current)
        return current

    def _ensure(
        self, transport: Transport, operation: str, team: str | None, desired: dict[str, Any]
    ) -> bool:
        """Make the cluster hold ``desired``; ``True`` when something was written."""
        current = transport.get(desired, operation=operation)
        if current is None:
            try:
                transport.create(desired, operation=operation)
                return True
            except NotFound as missing:
                served_by = _CRD_PROJECTS.get(desired["apiVersion"])
                if served_by and missing.kind != "namespaces":
                    raise SchedulerRejected(
                        f"the cluster does not serve {desired['apiVersion']} "
                        f"{KINDS[desired['kind']].plural}: is {served_by} installed?",
                        operation=operation,
                        http_status=404,
                    ) from missing
                raise
            except AlreadyExists:
                current = transport.get(desired, operation=operation)
                if current is None:
                    raise ResourceVersionConflict(
                        f"{desired['kind']} {desired['metadata']['name']!r} was created and "
                        "deleted while being written",
                        operation=operation,
                    ) from None
        for attempt in (1, 2):
            _check_owner(operation, team, current)
            if covers(current, desired):
                return False
            body = copy.deepcopy(desired)
            body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get(
                "resourceVersion"
            )
            try:
                transport.apply(body, operation=operation)
                return True
            except ResourceVersionConflict:
                if attempt == 2:
                    raise
                current = transport.get(desired, operation=operation)
                if current is None:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _kueue_split(
        self, transport: Transport, operation: str, queue: Mapping[str, Any]
    ) -> dict[str, int]:
        products: dict[str, str] = {}
        for flavor in transport.list("ResourceFlavor", operation=operation):
            metadata = flavor.get("metadata") or {}
            node_labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
            if metadata.get("name") and node_labels.get(self.gpu_label):
                products[metadata["name"]] = node_labels[self.gpu_label]
        split: dict[str, int] = {}
        for group in (queue.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for resource in flavor.get("resources") or []:
                    if resource.get("name") != GPU_RESOURCE:
                        continue
                    # A flavor without a product label (made by hand) is keyed by its name.
                    product = products.get(flavor.get("name"), flavor.get("name"))
                    cards = self._count(operation, resource.get("nominalQuota"), "nominalQuota")
                    split[product] = split.get(product, 0) + cards
        return dict(sorted(split.items()))

    @staticmethod
    def _count(operation: str, value: Any, what: str) -> int:
        try:
            return parse_k8s_extended_count(str(value))
        except ValueError as exc:
            raise UnexpectedResponse(f"{what} {value!r}: {exc}", operation=operation) from exc

    def _emit(self, team: str, objects: list[dict[str, Any]]) -> bool:
        """Dry run: render ``objects``; with ``dry_run_dir`` merge them into the team's file,
        which always holds the team's whole desired state (later objects replace earlier ones
        of the same kind and name), so applying it converges whatever ran before."""
        namespace = namespace_name(team, self.namespace_prefix)
        if self.dry_run_dir is not None:
            path = self.dry_run_dir / f"{namespace}.yaml"
            if path.exists():
                kept = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
                fresh = {_key(obj) for obj in objects}
                objects = [doc for doc in kept if _key(doc) not in fresh] + objects
                objects.sort(key=_apply_order)
            text = render_yaml(objects, comment=self._comment(team, objects))
            self.dry_run_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        else:
            text = render_yaml(objects, comment=self._comment(team, objects))
        self.manifests.append(text)
        return True

    def _comment(self, team: str, objects: list[dict[str, Any]]) -> str:
        namespace = namespace_name(team, self.namespace_prefix)
        kinds = ", ".join(f"{obj['kind']} {obj['metadata']['name']}" for obj in objects)
        return f"gpu-pool-portal: team {team} (namespace {namespace})\nObjects: {kinds}"


_CRD_PROJECTS: Mapping[str, str] = {
    KUEUE_API_VERSION: "Kueue >= 0.15",
    "scheduling.volcano.sh/v1beta1": "Volcano",
    "scheduling.sigs.k8s.io/v1alpha1": "Koordinator (or scheduler-plugins' ElasticQuota)",
}

_APPLY_ORDER = [
    "Namespace",
    "ResourceQuota",
    "LimitRange",
    "RoleBinding",
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Queue",
    "ElasticQuota",
    "HorizontalPodAutoscaler",
]


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    return _identity(obj)


def _apply_order(obj: Mapping[str, Any]) -> int:
    return _APPLY_ORDER.index(obj["kind"]) if obj["kind"] in _APPLY_ORDER else len(_APPLY_ORDER)


def _check_owner(operation: str, team: str | None, current: Mapping[str, Any]) -> None:
    """Refuse to take over an object the portal made for another team (two slugs can never
    map to one namespace, but a hand-made namespace can carry another team's label)."""
    labels = (current.get("metadata") or {}).get("labels") or {}
    owner = labels.get(LABEL_TEAM)
    if owner is not None and owner != team:
        metadata = current.get("metadata") or {}
        raise SchedulerRejected(
            f"{current.get('kind', 'object')} {metadata.get('name')!r} belongs to team "
            f"{owner!r}, not {team!r}",
            operation=operation,
        )


def _recorded_split(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, str):
        return None
    try:
        split = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(split, dict) or not all(
        isinstance(cards, int) and not isinstance(cards, bool) and cards >= 0
        for cards in split.values()
    ):
        return None
    return dict(sorted(split.items()))


def api_client_from_settings(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    host: str | None = None,
    token: str | None = None,
    ca_cert: str | None = None,
) -> k8s.ApiClient:
    """An ApiClient from a kubeconfig file (optionally one ``context``), or from ``host`` and
    a bearer ``token`` (with ``ca_cert``, a CA bundle path, for TLS). urllib3 retries are off:
    callers retry transient errors themselves, and a hung server must cost one timeout."""
    from kubernetes import config as kube_config

    configuration = k8s.Configuration()
    if kubeconfig:
        kube_config.load_kube_config(
            config_file=kubeconfig,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    elif host and token:
        configuration.host = host
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        if ca_cert:
            configuration.ssl_ca_cert = ca_cert
    else:
        raise ValueError("Kubernetes settings need KUBECONFIG, or HOST and TOKEN")
    configuration.retries = 0
    return k8s.ApiClient(configuration)
