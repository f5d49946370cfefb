"""Which fields of a Kubernetes object the portal owns, read from ``metadata.managedFields``,
and what follows for a write: fields it owned and no longer wants, entries to upgrade. No I/O.

Server-side apply (kubernetes.io/docs/reference/using-api/server-side-apply/) removes a field
only when the applier's *Apply* entry owned it and nobody else does. A field the portal set by a
create or update (an ``Update`` entry, even under the same manager name) stays for ever, and a
re-apply without it changes nothing: that is how a ClusterQueue kept its ``cohortName`` after the
elastic allocation ended (issue #28). So the adapter applies everything (creation too), and an
object still carrying an ``Update`` entry of the portal (written by older versions) first has that
entry folded into the portal's ``Apply`` entry, the migration kubectl itself performs for
client-side-applied objects (k8s.io/client-go/util/csaupgrade, ``UpgradeManagedFields``).

A *path* is a tuple of keys from the object's root down to a leaf. An atomic list is one leaf
(Kueue ``resourceGroups`` and ResourceFlavor ``tolerations``, RoleBinding ``subjects``,
LimitRange ``limits``, HPA ``metrics``: replaced whole by an apply). An associative list
(``x-kubernetes-list-type: map`` in the API's OpenAPI; the one the portal writes is a Node's
``spec.taints``, keyed by ``key`` and ``effect``, :data:`MAP_LISTS`) is owned per element: its
element is the path step ``k:{"effect":"NoSchedule","key":"..."}`` (the key fields as compact JSON
with sorted keys, as ``fieldsV1`` spells it) and its fields are leaves below that, so two field
managers each own their own taints of one node. ``fieldsV1`` (FieldsV1 in k8s.io/apimachinery
``meta/v1``) spells a path as nested ``f:<key>`` maps; ``"."`` marks the map itself and is
ignored here; a ``k:`` element continues the path, a ``v:``/``i:`` element ends it at the list.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler_adapters.kubernetes_manifests import FIELD_MANAGER, LABEL_NAMESPACE_NAME

Path = tuple[str, ...]

APPLY = "Apply"
UPDATE = "Update"

# Fields the API server itself sets on every write of the kind: never the portal's to remove.
# (NamespaceStrategy sets the kubernetes.io/metadata.name label on create and update, and
# spec.finalizers on create; k8s.io/kubernetes pkg/registry/core/namespace/strategy.go.)
SERVER_SET: Mapping[str, frozenset[Path]] = {
    "Namespace": frozenset({("metadata", "labels", LABEL_NAMESPACE_NAME), ("spec", "finalizers")}),
}

# Associative lists the portal writes: kind -> path of the list -> its key fields
# (``x-kubernetes-list-map-keys`` of io.k8s.api.core.v1.NodeSpec.taints: key, effect).
MAP_LISTS: Mapping[str, Mapping[Path, tuple[str, ...]]] = {
    "Node": {("spec", "taints"): ("effect", "key")},
}


def element_key(item: Mapping[str, Any], keys: Iterable[str]) -> str:
    """The ``fieldsV1`` name of a map-list element: ``k:{"effect":"NoSchedule","key":"a"}``."""
    fields = {key: item[key] for key in sorted(keys) if key in item}
    return "k:" + json.dumps(fields, sort_keys=True, separators=(",", ":"))


def keyed(obj: Mapping[str, Any], kind: str | None = None) -> dict[str, Any]:
    """A copy of ``obj`` whose associative lists (:data:`MAP_LISTS` of its kind) are maps from
    :func:`element_key` to element (the later of two equal keys wins), so that maps and
    associative lists merge, compare and yield paths alike. Other lists are left as they are."""
    out = copy.deepcopy(dict(obj))
    for path, keys in MAP_LISTS.get(kind or str(obj.get("kind")), {}).items():
        parent = _at(out, path[:-1])
        if isinstance(parent, dict) and isinstance(parent.get(path[-1]), list):
            parent[path[-1]] = {
                element_key(item, keys): item
                for item in parent[path[-1]]
                if isinstance(item, Mapping)
            }
    return out


_IDENTITY_METADATA = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "generation",
        "deletionTimestamp",
    }
)


def object_paths(obj: Mapping[str, Any]) -> set[Path]:
    """The leaf paths of an applied configuration: every field but ``apiVersion``, ``kind``,
    ``status`` and the identity/server fields of ``metadata`` (name, namespace, uid...); an
    element of an associative list contributes a path per field (``("spec", "taints",
    'k:{"effect":"NoSchedule","key":"a"}', "value")``)."""
    body = {
        key: value
        for key, value in keyed(obj).items()
        if key not in ("apiVersion", "kind", "status")
    }
    metadata = {
        key: value
        for key, value in (obj.get("metadata") or {}).items()
        if key not in _IDENTITY_METADATA
    }
    body.pop("metadata", None)
    if metadata:
        body["metadata"] = metadata
    return _leaves(body, ())


def _leaves(value: Any, prefix: Path) -> set[Path]:
    if isinstance(value, Mapping) and value:
        paths: set[Path] = set()
        for key, item in value.items():
            paths |= _leaves(item, (*prefix, str(key)))
        return paths
    return {prefix} if prefix else set()


def fields_v1_paths(fields: Any) -> set[Path]:
    """The leaf paths a ``fieldsV1`` tree owns (``{"f:spec": {"f:cohortName": {}}}`` ->
    ``{("spec", "cohortName")}``); an element of an associative list (``k:{...}``) is a step
    of the path, an element of a set or atomic list (``v:``, ``i:``) ends the path at the
    list."""
    paths: set[Path] = set()

    def walk(node: Any, prefix: Path) -> None:
        keys = [key for key in (node or {}) if key != "."] if isinstance(node, Mapping) else []
        if not keys:
            if prefix:
                paths.add(prefix)
            return
        for key in keys:
            if key.startswith("f:"):
                walk(node[key], (*prefix, key[2:]))
            elif key.startswith("k:") and prefix:  # an element of an associative list
                walk(node[key], (*prefix, key))
            elif prefix:  # v:..., i:N: an element of a list, owned as the list
                paths.add(prefix)

    walk(fields, ())
    return paths


def fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The ``fieldsV1`` tree of ``paths`` (the inverse of :func:`fields_v1_paths`; an
    associative list's element is its ``k:{...}`` name, marked ``"."`` as owned itself)."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            if key.startswith("k:"):
                node = node.setdefault(key, {".": {}})
            else:
                node = node.setdefault(f"f:{key}", {})
    return tree


def portal_entries(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``managedFields`` entries of the portal's field manager (main resource only)."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return [
        entry
        for entry in entries
        if isinstance(entry, Mapping)
        and entry.get("manager") == FIELD_MANAGER
        and not entry.get("subresource")
    ]


def portal_paths(obj: Mapping[str, Any]) -> set[Path]:
    """Every path the portal owns on ``obj``, by Apply or by Update."""
    owned: set[Path] = set()
    for entry in portal_entries(obj):
        owned |= fields_v1_paths(entry.get("fieldsV1"))
    return owned


def stale_paths(current: Mapping[str, Any], desired: Mapping[str, Any]) -> set[Path]:
    """Fields the portal owns on ``current``, that ``current`` still holds and ``desired`` no
    longer says: what the next apply must remove (cohortName after an elastic allocation ended,
    the PodNodeSelector annotation once a second GPU product arrived). Server-set fields
    (:data:`SERVER_SET`) and paths above or below a desired one are not stale."""
    wanted = object_paths(desired)
    server_set = SERVER_SET.get(str(current.get("kind")), frozenset())
    stale = set()
    held = keyed(current)
    for path in portal_paths(current) - wanted - server_set:
        if _at(held, path) is None:
            continue
        if any(_prefix(path, other) or _prefix(other, path) for other in wanted):
            continue
        stale.add(path)
    return stale


def needs_upgrade(current: Mapping[str, Any]) -> bool:
    """Whether the portal owns fields of ``current`` through an ``Update`` entry (an object
    created or updated by an older portal), which an apply could never remove."""
    return any(entry.get("operation") == UPDATE for entry in portal_entries(current))


def upgraded_managed_fields(current: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``current``'s ``managedFields`` with the portal's ``Update`` entries folded into its
    ``Apply`` entry (made when missing), less the server-set fields: after writing this the
    portal owns what it set as an applier, so leaving a field out of an apply removes it."""
    entries = copy.deepcopy((current.get("metadata") or {}).get("managedFields") or [])
    server_set = SERVER_SET.get(str(current.get("kind")), frozenset())
    mine = portal_entries({"metadata": {"managedFields": entries}})
    owned: set[Path] = set()
    kept: list[dict[str, Any]] = []
    apply_entry: dict[str, Any] | None = None
    for entry in entries:
        if any(entry is portal for portal in mine):
            owned |= fields_v1_paths(entry.get("fieldsV1"))
            if entry.get("operation") == APPLY and apply_entry is None:
                apply_entry = entry
                kept.append(entry)
            continue
        kept.append(entry)
    if apply_entry is None:
        apply_entry = {
            "manager": FIELD_MANAGER,
            "operation": APPLY,
            "apiVersion": current.get("apiVersion"),
            "fieldsType": "FieldsV1",
        }
        kept.append(apply_entry)
    apply_entry["time"] = max(
        (entry.get("time") or "" for entry in mine), default=apply_entry.get("time")
    )
    apply_entry["fieldsV1"] = fields_v1(owned - server_set)
    return kept


def _at(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _prefix(short: Path, long: Path) -> bool:
    return len(short) < len(long) and long[: len(short)] == short
