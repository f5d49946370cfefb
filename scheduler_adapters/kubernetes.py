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
- with Kueue (``kueue.x-k8s.io/v1beta2`` only, served from Kueue 0.15 and the only version
  Kueue 0.20 serves; checked by discovery before the first write): a ``ResourceFlavor`` per GPU
  product (``nodeLabels: {nvidia.com/gpu.product: <product>}``, shared by all teams, never
  deleted), the team's ``ClusterQueue`` (named like the namespace, admitting only that
  namespace, ``nominalQuota`` of ``nvidia.com/gpu`` per flavor) and a ``LocalQueue`` named
  ``default`` in the namespace. The ClusterQueue covers only ``nvidia.com/gpu``: Kueue does
  not admit a pod set that requests a resource its ClusterQueue does not cover, so Kueue's
  Configuration must list ``cpu``, ``memory`` (and whatever else pods request) under
  ``resources.excludeResourcePrefixes``.

Every write reads the object first and sends nothing when the cluster already holds what the
portal wants and no field the portal set and no longer wants, so a second identical call is only
GETs. Every write is a server-side apply (``PATCH`` ``application/apply-patch+yaml``, field
manager ``gpu-pool-portal``), creation too, so the portal owns every field it set as an applier
and a field it leaves out of its next apply is removed (a ClusterQueue's ``cohortName`` when the
elastic allocation ends; :mod:`~scheduler_adapters.kubernetes_ownership`). An object an older
portal created with POST first has its ``Update`` ownership folded into the ``Apply`` entry. An
existing object is applied at the ``resourceVersion`` it was read at, so a concurrent change
gives 409 ``Conflict``: the object is read again and the apply retried once. Applies are not
forced: a conflict with another field manager is forced only on an object the portal made
(someone edited the portal's fields by hand) and reported on an object someone else made.
Errors map onto :mod:`scheduler_adapters.errors` by meaning (see
:func:`~scheduler_adapters.kubernetes_transport.api_error`): only timeouts, connection errors,
429 and 503 (and their kin) are transient.

**Which nodes** (placement): a pool names the node label that tells GPU models apart
(``gpu_label``): GPU Feature Discovery's ``nvidia.com/gpu.product`` (the default) or the
``gpu-type=<model>`` convention of seed 004 §3.1. Kueue's ResourceFlavors select nodes by it
(``nodeLabels``; Kueue copies them into the admitted pods' node selector). Without Kueue a
namespace can carry ``scheduler.alpha.kubernetes.io/node-selector: <label>=<product>`` (the
PodNodeSelector admission plugin merges it into every pod of the namespace; only when the team
holds one product, since the plugin ANDs its terms) with ``namespace_node_selector=True``.

**Which cards** (card classes, issue #36): with ``card_class_taints`` the GPU nodes carry
``gpu-pool-portal/card-class=<class>:NoSchedule`` and the ResourceFlavors (with Kueue) or the
team namespaces (without) the matching tolerations (:mod:`scheduler_adapters.kubernetes_taints`);
a Node's ``spec.taints`` is an associative list, compared and owned per (key, effect) entry.

``dry_run=True`` never writes to the cluster: the objects are rendered as multi-document YAML
(:meth:`KubernetesAdapter.render_manifests`) and, with ``dry_run_dir``, kept as the team's
desired state in ``<dir>/<namespace>.yaml`` for ``kubectl apply --server-side -f``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from scheduler_adapters.base import NamespaceGpuQuota
from scheduler_adapters.errors import (
    NotFound,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
)
from scheduler_adapters.kubernetes_dra import (
    DRA_API_VERSION,
    DeviceClassInfo,
    claim_template,
    device_classes,
    product_names,
    with_dra_cards,
)
from scheduler_adapters.kubernetes_manifests import (
    ANNOTATION_GPU_QUOTA,
    DEFAULT_CONTAINER_LIMITS,
    DEFAULT_CONTAINER_REQUESTS,
    KUEUE_API_VERSION,
    LABEL_TEAM,
    QUOTA_RESOURCE,
    check_gpu_label,
    covers,
    dra_quota_resource,
    flavor_name,
    kueue_device_class_mapping,
    namespace_name,
    quota_manifests,
    render_yaml,
    team_manifests,
)
from scheduler_adapters.kubernetes_nodes import GPU_RESOURCE, LABEL_PRODUCT, parse_kubernetes_nodes
from scheduler_adapters.kubernetes_ownership import (
    keyed,
    needs_upgrade,
    portal_entries,
    stale_paths,
    upgraded_managed_fields,
)
from scheduler_adapters.kubernetes_taints import check_card_class
from scheduler_adapters.kubernetes_transport import (
    KINDS,
    AlreadyExists,
    ApiTransport,
    FieldManagerConflict,
    ResourceVersionConflict,
    Transport,
    object_identity,
)
from scheduler_adapters.kueue_workloads import PendingWorkload, pending_workloads
from scheduler_adapters.types import KueueCohort, ParseResult
from scheduler_adapters.units import parse_k8s_quantity

if TYPE_CHECKING:
    from kubernetes import client as k8s

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
        dra_device_class: str | None = None,
        product_card_classes: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
        card_class_taints: bool = False,
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
        # with DRA, the team's ResourceQuota also caps this DeviceClass's devices
        self.dra_device_class = dra_device_class
        if dra_device_class is not None:
            dra_quota_resource(dra_device_class)  # a name that can never work fails now
        # GPU product (the ``gpu_label`` value) -> card class, or what gives it (the portal's
        # catalogue, read at each use): its ResourceFlavor tolerates that class's node taint
        # (scheduler_adapters.kubernetes_taints). ``card_class_taints``: the portal taints the
        # GPU nodes and gives teams their tolerations (``CARD_CLASS_TAINTS`` in the settings).
        self._product_card_classes = product_card_classes
        self.card_class_taints = card_class_taints
        self.manifests: list[str] = []  # what dry-run writes produced, in order
        self._served: dict[str, set[str]] | None = None  # discovery, read on first CRD use
        self._served_checked: set[str] = set()
        namespace_name("x", namespace_prefix)  # a prefix that can never work fails now

    @property
    def product_card_classes(self) -> dict[str, str]:
        """GPU product -> card class (``{}``: no tolerations on the ResourceFlavors)."""
        source = self._product_card_classes
        found = source() if callable(source) else source
        return {product: check_card_class(cls) for product, cls in (found or {}).items()}

    @product_card_classes.setter
    def product_card_classes(
        self, value: Mapping[str, str] | Callable[[], Mapping[str, str]] | None
    ) -> None:
        self._product_card_classes = value

    # ------------------------------------------------------------------ NamespaceQuotaAdapter

    def list_nodes(self) -> ParseResult:
        """The Nodes as GPU Feature Discovery and the device plugin describe them, with the
        cards of NVIDIA's DRA driver (``resource.k8s.io/v1`` ResourceSlices, when the cluster
        serves that version) in place of the device plugin's count where it publishes any."""
        transport = self._transport("list_nodes")
        items = transport.list("Node", operation="list_nodes")
        result = parse_kubernetes_nodes({"kind": "NodeList", "apiVersion": "v1", "items": items})
        if not self._serves(transport, "list_nodes", DRA_API_VERSION):
            return result
        return with_dra_cards(result, transport.list("ResourceSlice", operation="list_nodes"))

    def list_node_objects(self) -> list[dict[str, Any]]:
        """Every Node as the API returns it (labels, taints), one paged list call."""
        return self._transport("list_nodes").list("Node", operation="list_nodes")

    def list_device_classes(self) -> list[DeviceClassInfo] | None:
        """The cluster's DeviceClasses by name, each with the GPU models of the published DRA
        cards it selects; ``None`` (unknown) when the cluster serves no ``resource.k8s.io/v1``
        (before 1.34, or DRA off)."""
        operation = "list_device_classes"
        transport = self._transport(operation)
        if not self._serves(transport, operation, DRA_API_VERSION):
            return None
        return device_classes(
            transport.list("DeviceClass", operation=operation),
            transport.list("ResourceSlice", operation=operation),
        )

    def pending_workloads(self) -> list[PendingWorkload]:
        """Kueue Workloads of every namespace that are not admitted, with why (see
        :mod:`scheduler_adapters.kueue_workloads`); one paged list call. Empty without Kueue
        (``kueue.x-k8s.io/v1beta2`` not served)."""
        operation = "pending_workloads"
        transport = self._transport(operation)
        if not self._serves(transport, operation, KUEUE_API_VERSION):
            return []
        return pending_workloads(transport.list("Workload", operation=operation))

    def ensure_team(
        self,
        team: str,
        *,
        group: str,
        gpu_quota: Mapping[str, int],
        kueue: bool | None = None,
        cohort: KueueCohort | None = None,
        mig_quota: Mapping[str, int] | None = None,
        card_classes: Iterable[str] | None = None,
    ) -> bool:
        """Create or update the team's objects (module docstring). ``card_classes``: the card
        classes its work may use; without Kueue the namespace carries their tolerations
        (:func:`~scheduler_adapters.kubernetes_taints.toleration_annotations`); ``None``
        writes none."""
        objects = self._team_objects(
            team,
            group=group,
            gpu_quota=gpu_quota,
            kueue=kueue,
            cohort=cohort,
            mig_quota=mig_quota,
            card_classes=card_classes,
        )
        if self.dry_run:
            return self._emit(team, objects)
        return self._ensure_all(self._transport("ensure_team"), "ensure_team", team, objects)

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
        cards: int | Decimal | None = None
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
            self._check_served(transport, operation, KUEUE_API_VERSION)
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
        return self._ensure_all(transport, operation, team, objects)

    def read_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """One object of a kind the adapter knows, as the cluster holds it; ``None`` when
        absent. A dry-run adapter has nothing to read: ``None``."""
        if self.dry_run and self.transport is None:
            return None
        metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
        probe = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
        return self._transport("read_object").get(probe, operation="read_object")

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
        mig_quota: Mapping[str, int] | None = None,
        card_classes: Iterable[str] | None = None,
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
            dra_device_class=self.dra_device_class,
            mig_quota=mig_quota,
            product_card_classes=self.product_card_classes,
            card_classes=card_classes,
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
            dra_device_class=self.dra_device_class,
            product_card_classes=self.product_card_classes,
        )
        if self.dry_run:
            return self._emit(team, objects)
        transport = self._transport(operation)
        if (
            self._read_namespace(transport, operation, team, namespace, missing_ok=missing_ok)
            is None
        ):
            return False
        return self._ensure_all(transport, operation, team, objects)

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

    def _ensure_all(
        self, transport: Transport, operation: str, team: str | None, objects: list[dict]
    ) -> bool:
        """:meth:`_ensure` each object in order, after checking the server serves every CRD
        version among them (so a missing Kueue stops the write before anything is written)."""
        for obj in objects:
            self._check_served(transport, operation, obj["apiVersion"])
        changed = False
        for obj in objects:
            changed |= self._ensure(transport, operation, team, obj)
        return changed

    def _ensure(
        self, transport: Transport, operation: str, team: str | None, desired: dict[str, Any]
    ) -> bool:
        """Make the cluster hold ``desired`` and nothing else the portal set; ``True`` when
        something was written. A concurrent change (409 on the resourceVersion read) is read
        again and retried once."""
        current = transport.get(desired, operation=operation)
        for attempt in (1, 2):
            try:
                return self._converge(transport, operation, team, desired, current)
            except (ResourceVersionConflict, AlreadyExists):
                if attempt == 2:
                    raise
                current = transport.get(desired, operation=operation)
        raise AssertionError("unreachable")  # pragma: no cover

    def _converge(
        self,
        transport: Transport,
        operation: str,
        team: str | None,
        desired: dict[str, Any],
        current: dict[str, Any] | None,
    ) -> bool:
        """One read-compare-apply: create by apply; fold an older portal's Update ownership
        into its Apply entry (so leaving a field out removes it); apply when the object lacks
        something the portal wants or holds a field the portal set and no longer wants."""
        if current is None:
            self._apply(transport, operation, desired, None)
            return True
        _check_owner(operation, team, current)
        written = False
        if needs_upgrade(current):
            current = transport.upgrade_managed_fields(
                desired,
                upgraded_managed_fields(current),
                resource_version=current["metadata"]["resourceVersion"],
                operation=operation,
            )
            written = True
        # associative lists (a Node's taints) compare by key: other managers' entries may stay
        if covers(keyed(current), keyed(desired)) and not stale_paths(current, desired):
            return written
        body = copy.deepcopy(desired)
        body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
        self._apply(transport, operation, body, current)
        return True

    def _apply(
        self,
        transport: Transport,
        operation: str,
        body: dict[str, Any],
        current: dict[str, Any] | None,
    ) -> None:
        """Server-side apply ``body``, without force first. A conflict on an object the portal
        made (it has a managedFields entry there) is someone else's edit of the portal's
        fields: applied again with force. On an object someone else made it is reported, and
        nothing is written."""
        try:
            transport.apply(body, operation=operation)
        except FieldManagerConflict as conflict:
            if current is not None and portal_entries(current):
                transport.apply(body, operation=operation, force=True)
                return
            owners = ", ".join(f"{path} (owned by {who})" for path, who in conflict.fields)
            raise SchedulerRejected(
                f"{body['kind']} {body['metadata']['name']!r} was not made by the portal and "
                f"other field managers own what it would change: {owners}; not overwritten",
                operation=operation,
                errors=conflict.errors,
                http_status=409,
            ) from conflict
        except NotFound as missing:
            served_by = _CRD_PROJECTS.get(body["apiVersion"])
            if served_by and missing.kind != "namespaces":
                raise SchedulerRejected(
                    f"the cluster does not serve {body['apiVersion']} "
                    f"{KINDS[body['kind']].plural}: is {served_by} installed?",
                    operation=operation,
                    http_status=404,
                ) from missing
            raise

    def _serves(self, transport: Transport, operation: str, api_version: str) -> bool:
        if self._served is None:
            self._served = transport.served_versions(operation=operation)
        group, _, version = api_version.rpartition("/")
        return version in self._served.get(group, set())

    def _check_served(self, transport: Transport, operation: str, api_version: str) -> None:
        """On first use of a CRD's API version (Kueue, Volcano, Koordinator), check the server
        serves it (discovery, read once per adapter): Kueue 0.20 serves only ``v1beta2``, 0.14
        and older no ``v1beta2``, and writing to a version not served fails object by object
        with a bare 404."""
        project = _CRD_PROJECTS.get(api_version)
        if project is None or api_version in self._served_checked:
            return
        if self._served is None:
            self._served = transport.served_versions(operation=operation)
        group, _, version = api_version.rpartition("/")
        versions = self._served.get(group)
        if not versions:
            raise SchedulerRejected(
                f"the cluster serves no {group} API: is {project} installed?",
                operation=operation,
            )
        if version not in versions:
            raise SchedulerRejected(
                f"the cluster serves {group} {', '.join(sorted(versions))}, but the portal "
                f"writes {api_version}: install {project}",
                operation=operation,
            )
        self._served_checked.add(api_version)

    def _kueue_split(
        self, transport: Transport, operation: str, queue: Mapping[str, Any]
    ) -> dict[str, int | Decimal]:
        products: dict[str, str] = {}
        for flavor in transport.list("ResourceFlavor", operation=operation):
            metadata = flavor.get("metadata") or {}
            node_labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
            if metadata.get("name") and node_labels.get(self.gpu_label):
                products[metadata["name"]] = node_labels[self.gpu_label]
        split: dict[str, int | Decimal] = {}
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
    def _count(operation: str, value: Any, what: str) -> int | Decimal:
        """Cards in a quota the cluster holds: an ``int`` when whole (``"2"``, ``"2000m"``),
        else the exact ``Decimal`` (``1.5`` set by hand, which the API server stores and
        returns as ``1500m``): a value the portal never writes, so a drift to repair, not an
        error. Negative or unreadable -> :class:`UnexpectedResponse`."""
        try:
            cards = parse_k8s_quantity(str(value))
        except ValueError as exc:
            raise UnexpectedResponse(f"{what} {value!r}: {exc}", operation=operation) from exc
        if cards < 0:
            raise UnexpectedResponse(f"{what} {value!r} is negative", operation=operation)
        if cards == cards.to_integral_value():
            return int(cards)
        return cards.normalize()

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
        comment = f"gpu-pool-portal: team {team} (namespace {namespace})\nObjects: {kinds}"
        if self.dra_device_class is not None:
            comment += self._dra_comment(namespace, objects)
        return comment

    def _dra_comment(self, namespace: str, objects: list[dict[str, Any]]) -> str:
        """Per GPU product of the team's quota, the ResourceClaimTemplate whose CEL selector
        keeps a claim on that model, for the team's workloads (the portal does not apply it),
        or why it cannot be given: the selector needs NVML's spelling of the product, known
        only from the cards NVIDIA's DRA driver publishes."""
        quotas = [obj for obj in objects if obj["kind"] == "ResourceQuota"]
        if not quotas:
            return ""
        products = json.loads(quotas[0]["metadata"]["annotations"][ANNOTATION_GPU_QUOTA])
        names = self._dra_product_names()
        lines = [
            f"DRA: a ResourceClaimTemplate per GPU model for the team's claims (not applied by"
            f" the portal), one card of DeviceClass {self.dra_device_class} each:"
        ]
        for product in products:
            name = names.get(product)
            if name is None:
                lines.append(f"{product}: no DRA card of this model is published, no selector")
                continue
            template = claim_template(flavor_name(product), namespace, self.dra_device_class, name)
            lines += ["---", yaml.safe_dump(template, sort_keys=False, width=200).rstrip(), "..."]
        if any(obj["kind"] == "ClusterQueue" for obj in objects):
            configuration = {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "resources": {
                    "deviceClassMappings": [kueue_device_class_mapping(self.dra_device_class)]
                },
            }
            lines += [
                "Kueue: merge into its Configuration (ConfigMap kueue-manager-config), then"
                " restart kueue-controller-manager, so the ClusterQueue's DRA resource counts"
                " claims:",
                "---",
                yaml.safe_dump(configuration, sort_keys=False, width=200).rstrip(),
                "...",
            ]
        return "\n".join(lines)

    def _dra_product_names(self) -> dict[str, str]:
        """GFD label -> NVML product name of the DRA cards published now (read at each dry-run
        write, so a model added later is found); empty without a connection or where
        ``resource.k8s.io/v1`` is not served."""
        operation = "render_manifests"
        if self.transport is None or not self._serves(self.transport, operation, DRA_API_VERSION):
            return {}
        return product_names(self.transport.list("ResourceSlice", operation=operation))


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
    return object_identity(obj)


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
