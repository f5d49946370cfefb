"""``FakeKubernetes``: the :class:`~scheduler_adapters.kubernetes.KubernetesAdapter` over an
in-memory object store instead of an API server, for fast unit tests.

It is the real adapter (same manifests, same read-compare-write, same idempotency, same
errors); only :class:`MemoryTransport` stands in for the HTTP calls, answering as the API
server documents for server-side apply: an apply of a missing object creates it with a ``uid``
and ``resourceVersion`` (``NotFound`` into a missing namespace); ``metadata.managedFields``
records what the portal applied (one ``Apply`` entry) and what hand edits changed (an
``Update`` entry of ``kubectl-edit``, which takes those fields over); a re-apply removes the
fields the portal applied before and leaves out now, unless a hand edit owns them; an apply
whose ``resourceVersion`` is stale raises
:class:`~scheduler_adapters.kubernetes.ResourceVersionConflict`; an apply that changes nothing
keeps the ``resourceVersion``; deleting a namespace deletes what is in it. Not modelled here:
conflicts between field managers (every apply wins, as with ``force``; the HTTP fake in the
tests models them), quantity canonicalisation, schema validation.

Failure switches, for the errors a caller must survive:

- ``down = True``: every call raises :class:`SchedulerUnavailable` (connection refused);
- ``timeout = True``: every call raises :class:`SchedulerUnavailable` (timed out);
- ``auth_broken = True``: every call raises :class:`SchedulerAuthError` (403);
- ``reject_next(message)``: the next write raises :class:`SchedulerRejected` (422 Invalid);
- ``conflict_next(times)``: the next ``times`` applies meet a concurrent writer (409 Conflict);
- ``fail_next(error)``: the next call raises ``error``.

``edit(...)`` and ``delete(...)`` change the cluster "by hand" (drift for reconcile tests).
``requests`` lists ``(verb, kind, namespace, name)`` of every call; :meth:`writes` the writes.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler_adapters.errors import (
    NotFound,
    RemoteError,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
)
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_manifests import FIELD_MANAGER, LABEL_NAMESPACE_NAME
from scheduler_adapters.kubernetes_ownership import (
    APPLY,
    UPDATE,
    Path,
    fields_v1,
    fields_v1_paths,
    object_paths,
)
from scheduler_adapters.kubernetes_transport import KINDS, ResourceVersionConflict

Key = tuple[str, str | None, str]  # (kind, namespace, name)


def gpu_node(name: str, product: str, cards: int, *, memory_mib: int | None = None) -> dict:
    """A Ready node as GPU Feature Discovery and the device plugin label it."""
    labels = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(cards),
    }
    if memory_mib is not None:
        labels["nvidia.com/gpu.memory"] = str(memory_mib)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(cards)},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


DEFAULT_NODES: Sequence[Mapping[str, Any]] = (
    gpu_node("gpu-a100-01", "NVIDIA-A100-SXM4-80GB", 4, memory_mib=81920),
    gpu_node("gpu-4090-01", "NVIDIA-GeForce-RTX-4090", 2, memory_mib=24564),
)
"""One node of 4 A100 and one of 2 RTX 4090, like the Slurm fake's test cluster."""


class MemoryTransport:
    """A :class:`~scheduler_adapters.kubernetes.Transport` that keeps objects in a dict."""

    def __init__(self, nodes: Iterable[Mapping[str, Any]] = DEFAULT_NODES) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str | None, str | None]] = []
        self.down = False
        self.timeout = False
        self.auth_broken = False
        self._conflicts = 0
        self._next_failure: SchedulerError | None = None
        self._next_write_failure: SchedulerError | None = None
        self._versions = itertools.count(1)
        for node in nodes:
            self._store(copy.deepcopy(dict(node)))

    # ------------------------------------------------------------------ Transport

    def get(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any] | None:
        key = _key(obj)
        self._enter("get", key, operation)
        found = self.objects.get(key)
        return copy.deepcopy(found) if found is not None else None

    def apply(
        self, obj: Mapping[str, Any], *, operation: str, force: bool = False
    ) -> dict[str, Any]:
        key = _key(obj)
        self._enter("apply", key, operation, write=True)
        body = copy.deepcopy(dict(obj))
        wanted_version = body["metadata"].pop("resourceVersion", None)
        current = self.objects.get(key)
        if current is None:
            if wanted_version is not None:
                raise NotFound(KINDS[key[0]].plural, key[2], operation=operation, http_status=404)
            self._check_namespace(key, operation)
            applied = object_paths(body)  # not what _store adds (the namespace's name label)
            stored = self._store(body)
            _set_owners(stored, {(FIELD_MANAGER, APPLY): applied})
            return copy.deepcopy(stored)
        if self._conflicts:
            self._conflicts -= 1
            self._bump(current)  # a concurrent writer got there first
        if wanted_version is not None and wanted_version != current["metadata"]["resourceVersion"]:
            raise ResourceVersionConflict(
                f'Operation cannot be fulfilled on {KINDS[key[0]].plural} "{key[2]}": the '
                "object has been modified; please apply your changes to the latest version "
                "and try again",
                operation=operation,
                http_status=409,
            )
        mine = (FIELD_MANAGER, APPLY)
        owners = _owners(current)
        applied = object_paths(body)
        others = set().union(*(paths for owner, paths in owners.items() if owner != mine))
        merged = copy.deepcopy(current)
        for path in owners.get(mine, set()) - applied - others:
            _remove(merged, path)
        merged = _merge(merged, body)
        for owner, paths in owners.items():  # every apply here wins, as a forced one would
            if owner != mine:
                paths -= {path for path in applied if _at(current, path) != _at(body, path)}
        owners[mine] = applied
        _set_owners(merged, owners)
        if _content(merged) != _content(current):
            self._bump(merged)
        self.objects[key] = merged
        return copy.deepcopy(merged)

    def upgrade_managed_fields(
        self,
        obj: Mapping[str, Any],
        managed_fields: list[dict[str, Any]],
        *,
        resource_version: str,
        operation: str,
    ) -> dict[str, Any]:
        key = _key(obj)
        self._enter("patch", key, operation, write=True)
        current = self.objects.get(key)
        if current is None:
            raise NotFound(KINDS[key[0]].plural, key[2], operation=operation, http_status=404)
        if current["metadata"]["resourceVersion"] != resource_version:
            raise ResourceVersionConflict(
                "the resourceVersion test failed: the object has been modified",
                operation=operation,
                http_status=409,
            )
        current["metadata"]["managedFields"] = copy.deepcopy(managed_fields)
        self._bump(current)
        return copy.deepcopy(current)

    def list(
        self, kind: str, *, operation: str, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        self._enter("list", (kind, None, None), operation)
        wanted = dict(term.split("=", 1) for term in (label_selector or "").split(",") if term)
        return [
            copy.deepcopy(obj)
            for key, obj in sorted(self.objects.items(), key=lambda item: str(item[0]))
            if key[0] == kind
            and all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]

    def served_versions(self, *, operation: str) -> dict[str, set[str]]:
        """Every group of :data:`~scheduler_adapters.kubernetes_transport.KINDS`, at the
        version the adapter writes (an in-memory cluster with every CRD installed)."""
        self._enter("discover", ("Namespace", None, None), operation)
        served: dict[str, set[str]] = {}
        for spec in KINDS.values():
            served.setdefault(spec.group, set()).add(spec.version)
        return served

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ test hooks

    def conflict_next(self, times: int = 1) -> None:
        self._conflicts = times

    def reject_next(self, message: str = "rejected by the fake", *, field: str | None = None):
        self._next_write_failure = SchedulerRejected(
            message,
            errors=(
                RemoteError(None, f"{field}: {message}" if field else message, "FieldValueInvalid"),
            ),
            http_status=422,
        )

    def fail_next(self, error: SchedulerError) -> None:
        self._next_failure = error

    def edit(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        change: Callable[[dict], None],
        *,
        manager: str = "kubectl-edit",
    ) -> None:
        """Change a stored object as ``kubectl edit`` would: a new resourceVersion, and an
        ``Update`` entry of ``manager`` that takes over the fields it changed."""
        obj = self.objects[(kind, namespace, name)]
        before = copy.deepcopy(obj)
        change(obj)
        changed = {
            path
            for path in object_paths(obj) | object_paths(before)
            if _at(obj, path) != _at(before, path)
        }
        owners = _owners(before)
        for paths in owners.values():
            paths -= changed
        owners[(manager, UPDATE)] = owners.get((manager, UPDATE), set()) | {
            path for path in changed if _at(obj, path) is not None
        }
        _set_owners(obj, owners)
        self._bump(obj)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        del self.objects[(kind, namespace, name)]
        if kind == "Namespace":
            for key in [key for key in self.objects if key[1] == name]:
                del self.objects[key]

    def writes(self) -> list[tuple[str, str, str | None, str | None]]:
        return [request for request in self.requests if request[0] in ("apply", "patch")]

    # ------------------------------------------------------------------ internals

    def _enter(
        self, verb: str, key: tuple[str, str | None, str | None], operation: str, *, write=False
    ) -> None:
        self.requests.append((verb, *key))
        if self.down:
            raise SchedulerUnavailable("connection refused (fake)", operation=operation)
        if self.timeout:
            raise SchedulerUnavailable("read timed out (fake)", operation=operation)
        if self.auth_broken:
            raise SchedulerAuthError(
                f"{KINDS[key[0]].plural} is forbidden (fake)", operation=operation, http_status=403
            )
        failure: SchedulerError | None = None
        if self._next_failure is not None:
            failure, self._next_failure = self._next_failure, None
        elif write and self._next_write_failure is not None:
            failure, self._next_write_failure = self._next_write_failure, None
        if failure is not None:
            failure.operation = failure.operation or operation
            raise failure

    def _check_namespace(self, key: Key, operation: str) -> None:
        kind, namespace, _ = key
        if KINDS[kind].namespaced and ("Namespace", None, namespace) not in self.objects:
            raise NotFound("namespaces", namespace, operation=operation, http_status=404)

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        if obj["kind"] == "Namespace":
            metadata.setdefault("labels", {})[LABEL_NAMESPACE_NAME] = metadata["name"]
            obj["status"] = {"phase": "Active"}
        self._bump(obj)
        self.objects[_key(obj)] = obj
        return obj

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))


class FakeKubernetes(KubernetesAdapter):
    """The adapter over :class:`MemoryTransport` (``self.api``), with its switches and hooks."""

    def __init__(
        self,
        *,
        nodes: Iterable[Mapping[str, Any]] = DEFAULT_NODES,
        kueue: bool = False,
        namespace_prefix: str = "team-",
    ) -> None:
        self.api = MemoryTransport(nodes)
        super().__init__(transport=self.api, kueue=kueue, namespace_prefix=namespace_prefix)

    @property
    def down(self) -> bool:
        return self.api.down

    @down.setter
    def down(self, value: bool) -> None:
        self.api.down = value

    @property
    def timeout(self) -> bool:
        return self.api.timeout

    @timeout.setter
    def timeout(self, value: bool) -> None:
        self.api.timeout = value

    @property
    def auth_broken(self) -> bool:
        return self.api.auth_broken

    @auth_broken.setter
    def auth_broken(self, value: bool) -> None:
        self.api.auth_broken = value

    @property
    def objects(self) -> dict[Key, dict[str, Any]]:
        return self.api.objects

    @property
    def requests(self) -> list[tuple[str, str, str | None, str | None]]:
        return self.api.requests

    def writes(self) -> list[tuple[str, str, str | None, str | None]]:
        return self.api.writes()

    def conflict_next(self, times: int = 1) -> None:
        self.api.conflict_next(times)

    def reject_next(self, message: str = "rejected by the fake", *, field: str | None = None):
        self.api.reject_next(message, field=field)

    def fail_next(self, error: SchedulerError) -> None:
        self.api.fail_next(error)

    def edit(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        change: Callable[[dict], None],
        *,
        manager: str = "kubectl-edit",
    ) -> None:
        self.api.edit(kind, name, namespace, change, manager=manager)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        self.api.delete(kind, name, namespace)


def _key(obj: Mapping[str, Any]) -> Key:
    metadata = obj["metadata"]
    namespace = metadata.get("namespace") if KINDS[obj["kind"]].namespaced else None
    return obj["kind"], namespace, metadata["name"]


def _owners(obj: Mapping[str, Any]) -> dict[tuple[str, str], set[Path]]:
    owners: dict[tuple[str, str], set[Path]] = {}
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        owner = (entry["manager"], entry["operation"])
        owners[owner] = owners.get(owner, set()) | fields_v1_paths(entry.get("fieldsV1"))
    return owners


def _set_owners(obj: dict[str, Any], owners: Mapping[tuple[str, str], set[Path]]) -> None:
    obj["metadata"]["managedFields"] = [
        {
            "manager": manager,
            "operation": operation,
            "apiVersion": obj["apiVersion"],
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(paths),
        }
        for (manager, operation), paths in sorted(owners.items())
        if paths
    ]


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without what every write changes (resourceVersion, managedFields)."""
    body = copy.deepcopy(dict(obj))
    body["metadata"].pop("resourceVersion", None)
    body["metadata"].pop("managedFields", None)
    return body


def _at(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _remove(obj: dict[str, Any], path: Path) -> None:
    """Remove the field at ``path`` and the maps it leaves empty."""
    parents = [obj]
    for key in path[:-1]:
        child = parents[-1].get(key)
        if not isinstance(child, dict):
            return
        parents.append(child)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if parents[depth] == {}:
            parents[depth - 1].pop(path[depth - 1], None)


def _merge(current: Any, applied: Any) -> Any:
    """Server-side apply as the adapter uses it: maps merge key by key, lists (all atomic in
    the objects the adapter writes) are replaced whole."""
    if isinstance(current, dict) and isinstance(applied, dict):
        merged = copy.deepcopy(current)
        for key, value in applied.items():
            merged[key] = _merge(current.get(key), value)
        return merged
    return copy.deepcopy(applied)
