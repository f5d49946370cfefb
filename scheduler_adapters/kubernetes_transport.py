"""How the Kubernetes adapter talks to an API server: the kinds it writes (group, version,
plural), the :class:`Transport` protocol and :class:`ApiTransport` over the official client
(every write a server-side apply of field manager ``gpu-pool-portal``, plus the one-time
managedFields upgrade of :mod:`~scheduler_adapters.kubernetes_ownership`), the client built
from settings, and the API's errors mapped onto :mod:`scheduler_adapters.errors` by meaning."""

from __future__ import annotations

import inspect
import json
import os
import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import urllib3

if TYPE_CHECKING:
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

from scheduler_adapters.errors import (
    NotFound,
    RemoteError,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
)
from scheduler_adapters.kubernetes_manifests import (
    FIELD_MANAGER,
    KUEUE_API_VERSION,
    RBAC_API_VERSION,
)

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
        # read only: jobs waiting for admission (scheduler_adapters/kueue_workloads.py)
        Kind("Workload", KUEUE_API_VERSION, "workloads", True),
        # elastic quota backends and the team's HPA (scheduler_adapters/kubernetes_elastic.py)
        Kind("Queue", "scheduling.volcano.sh/v1beta1", "queues", False),
        Kind("ElasticQuota", "scheduling.sigs.k8s.io/v1alpha1", "elasticquotas", True),
        Kind("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", True),
        # GPUs published through DRA (scheduler_adapters/kubernetes_dra.py), read only
        Kind("ResourceSlice", "resource.k8s.io/v1", "resourceslices", False),
        Kind("DeviceClass", "resource.k8s.io/v1", "deviceclasses", False),
        # workload classes (scheduler_adapters/kubernetes_priority.py)
        Kind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False),
        Kind("WorkloadPriorityClass", KUEUE_API_VERSION, "workloadpriorityclasses", False),
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


class FieldManagerConflict(SchedulerRejected):
    """409 ``Conflict`` of a server-side apply without ``force``: other field managers own
    fields the apply sets to other values. ``fields`` holds ``(field, manager)`` pairs from
    the Status causes (reason ``FieldManagerConflict``, message ``conflict with "<manager>"
    using <apiVersion>``, field ``.spec.cohortName``)."""

    code = "scheduler_field_conflict"

    def __init__(self, message: str, *, fields: tuple[tuple[str, str], ...] = (), **kwargs):
        super().__init__(message, **kwargs)
        self.fields = fields


def _api_exception() -> type[Exception]:
    """The official client's ``ApiException``, imported when an error is being matched: the
    ``kubernetes`` package is imported only once a client exists (registry.py)."""
    from kubernetes.client.exceptions import ApiException

    return ApiException


def api_error(operation: str, exc: ApiException) -> SchedulerError:
    """Map an API error (a ``v1.Status`` body when the server sent one) onto the adapter
    errors, by meaning: only what may pass by itself is transient.

    401/403 -> :class:`SchedulerAuthError` (except 403 ``NamespaceTerminating``, which passes:
    a transient :class:`SchedulerRejected`); 400/422 -> :class:`SchedulerRejected` with the
    Status ``message`` and one :class:`RemoteError` per ``details.causes`` entry; 404 ->
    :class:`NotFound`; 409 -> :class:`AlreadyExists`, :class:`FieldManagerConflict` (causes of
    reason ``FieldManagerConflict``) or :class:`ResourceVersionConflict`; 429, 503, 502/504 (a
    proxy that lost or timed out on the server), 410 (an expired list continue token) and a 500
    that says it timed out or lost a connection (etcd, a webhook) ->
    :class:`SchedulerUnavailable`. Any other 500 is final: a server-side apply of a field the
    installed schema does not know answers ``500 failed to create typed patch object (...):
    .spec.foo: field not declared in schema`` (kubernetes/kubernetes#122480, #139253), which no
    retry cures -> :class:`SchedulerRejected`.
    """
    status_code = exc.status or 0
    body = _status_body(exc.body)
    message = body.get("message") or f"HTTP {status_code} {exc.reason or ''}".strip()
    details = body.get("details") if isinstance(body.get("details"), dict) else {}
    raw_causes = [cause for cause in details.get("causes") or () if isinstance(cause, dict)]
    causes = tuple(_remote_cause(cause) for cause in raw_causes)
    kwargs: dict[str, Any] = {"operation": operation, "errors": causes}
    if status_code == 0:  # the client failed before any answer
        return SchedulerUnavailable(message, transient=False, **kwargs)
    kwargs["http_status"] = status_code
    if status_code == 409:
        return _conflict_error(message, body.get("reason"), raw_causes, kwargs)
    if status_code in (401, 403):
        if any(cause.description == "NamespaceTerminating" for cause in causes):
            return SchedulerRejected(message, transient=True, **kwargs)
        return SchedulerAuthError(message, **kwargs)
    if status_code == 404:
        return NotFound(str(details.get("kind") or "object"), details.get("name"), **kwargs)
    if status_code in (400, 422):
        return SchedulerRejected(message, **kwargs)
    if status_code in (410, 429, 502, 503, 504):
        return SchedulerUnavailable(message, **kwargs)
    if status_code == 500:
        return _server_error(message, kwargs)
    if status_code > 500:
        return SchedulerUnavailable(message, **kwargs)
    return UnexpectedResponse(message, **kwargs)


def _remote_cause(cause: dict[str, Any]) -> RemoteError:
    """One ``details.causes`` entry of a Status as a :class:`RemoteError` (``field: message``)."""
    return RemoteError(
        None,
        f"{cause['field']}: {cause.get('message', '')}"
        if cause.get("field")
        else str(cause.get("message", "")),
        description=cause.get("reason"),
    )


def _conflict_error(
    message: str, reason: Any, raw_causes: list[dict[str, Any]], kwargs: dict[str, Any]
) -> SchedulerError:
    """A 409 by its Status ``reason`` and causes: :class:`AlreadyExists`,
    :class:`FieldManagerConflict` (causes of reason ``FieldManagerConflict``) or
    :class:`ResourceVersionConflict`."""
    if reason == "AlreadyExists":
        return AlreadyExists(message, **kwargs)
    conflicts = tuple(
        (str(cause.get("field") or ""), _conflict_manager(cause.get("message")))
        for cause in raw_causes
        if cause.get("reason") == "FieldManagerConflict"
    )
    if conflicts:
        return FieldManagerConflict(message, fields=conflicts, **kwargs)
    return ResourceVersionConflict(message, **kwargs)


def _server_error(message: str, kwargs: dict[str, Any]) -> SchedulerError:
    """A 500: transient when etcd or a webhook timed out or was unreachable, else final (an
    unknown schema field is named, see :func:`api_error`)."""
    if _PASSING_500.search(message):
        return SchedulerUnavailable(message, **kwargs)
    unknown = _UNKNOWN_FIELD.search(message)
    if unknown:
        kind = unknown["gvk"].rpartition("Kind=")[2]
        return SchedulerRejected(
            f"{kind} {unknown['ident'].lstrip('/')}: field {unknown['field']} is not in "
            "the schema the cluster serves (an older CRD or API version installed?)",
            **kwargs,
        )
    return SchedulerRejected(f"the API server failed: {message}", **kwargs)


# A 500 that passes by itself: etcd or a webhook timed out or could not be reached.
_PASSING_500 = re.compile(
    r"timed? ?out|timeout|deadline exceeded|connection refused|connection reset|"
    r"no endpoints available",
    re.IGNORECASE,
)
# "failed to create typed patch object (team-a/gpu-quota; /v1, Kind=ResourceQuota): .spec.foo:
# field not declared in schema" (k8s.io/apimachinery managedfields internal/structuredmerge.go)
_UNKNOWN_FIELD = re.compile(
    r"typed (?:patch|live) object \((?P<ident>[^;)]*); (?P<gvk>[^)]*)\): "
    r"(?P<field>\S+): field not declared in schema"
)


def _conflict_manager(message: Any) -> str:
    match = re.search(r'conflict with "([^"]*)"', str(message or ""))
    return match.group(1) if match else str(message or "")


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

    ``get`` returns ``None`` for 404. ``apply`` is server-side apply (field manager
    ``gpu-pool-portal``; creates a missing object): :class:`ResourceVersionConflict` when
    ``metadata.resourceVersion`` in the object is stale, :class:`FieldManagerConflict` when
    other managers own fields it changes and ``force`` is off. ``upgrade_managed_fields``
    replaces the object's ``metadata.managedFields`` (at ``resource_version``, else
    :class:`ResourceVersionConflict`) and returns the object.
    """

    def get(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any] | None: ...

    def apply(
        self, obj: Mapping[str, Any], *, operation: str, force: bool = False
    ) -> dict[str, Any]: ...

    def upgrade_managed_fields(
        self,
        obj: Mapping[str, Any],
        managed_fields: list[dict[str, Any]],
        *,
        resource_version: str,
        operation: str,
    ) -> dict[str, Any]: ...

    def list(
        self, kind: str, *, operation: str, label_selector: str | None = None
    ) -> list[dict[str, Any]]: ...

    def served_versions(self, *, operation: str) -> dict[str, set[str]]: ...

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
        from kubernetes import client as k8s  # imported when a client is built (registry.py)

        self.api_client = api_client
        self.timeout = (float(connect_timeout_s), float(timeout_s))
        self.page_size = page_size
        self.core = k8s.CoreV1Api(api_client)
        self.rbac = k8s.RbacAuthorizationV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)
        self.apis = k8s.ApisApi(api_client)

    def get(self, obj: Mapping[str, Any], *, operation: str) -> dict[str, Any] | None:
        kind, name, namespace = object_identity(obj)
        try:
            return self._call(operation, self._reader(kind), name, namespace, what=describe(obj))
        except NotFound:
            return None

    def apply(
        self, obj: Mapping[str, Any], *, operation: str, force: bool = False
    ) -> dict[str, Any]:
        kind, name, namespace = object_identity(obj)
        return self._call(
            operation,
            self._patcher(kind),
            name,
            namespace,
            dict(obj),
            what=describe(obj),
            field_manager=FIELD_MANAGER,
            field_validation="Strict",
            force=force,
            _content_type="application/apply-patch+yaml",
        )

    def upgrade_managed_fields(
        self,
        obj: Mapping[str, Any],
        managed_fields: list[dict[str, Any]],
        *,
        resource_version: str,
        operation: str,
    ) -> dict[str, Any]:
        """A JSON patch (RFC 6902) replacing ``metadata.managedFields``, with the
        ``resourceVersion`` read as its precondition (how ``kubectl apply --server-side``
        migrates ownership: k8s.io/client-go/util/csaupgrade). No field manager: it changes
        no field."""
        kind, name, namespace = object_identity(obj)
        patch = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "replace", "path": "/metadata/managedFields", "value": managed_fields},
        ]
        return self._call(
            operation,
            self._patcher(kind),
            name,
            namespace,
            patch,
            what=describe(obj),
            _content_type="application/json-patch+json",
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

    def served_versions(self, *, operation: str) -> dict[str, set[str]]:
        """API group -> the versions the server serves (discovery, ``GET /apis``; every
        authenticated client may read it through the ``system:discovery`` ClusterRole)."""
        payload = self._call(operation, self.apis.get_api_versions, what="API discovery")
        served: dict[str, set[str]] = {}
        for group in payload.get("groups") or []:
            if isinstance(group, dict) and group.get("name"):
                served[group["name"]] = {
                    str(version.get("version"))
                    for version in group.get("versions") or []
                    if isinstance(version, dict)
                }
        return served

    def close(self) -> None:
        self.api_client.close()

    # -- the typed calls for each kind; ``namespace`` is ignored for cluster-scoped kinds

    def _reader(self, kind: str) -> Callable[..., Any]:
        spec = KINDS[kind]
        readers: dict[str, Callable[..., Any]] = {
            "Namespace": lambda name, _ns, **kw: self.core.read_namespace(name, **kw),
            "Node": lambda name, _ns, **kw: self.core.read_node(name, **kw),
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

    def _patcher(self, kind: str) -> Callable[..., Any]:
        spec = KINDS[kind]
        patchers: dict[str, Callable[..., Any]] = {
            "Namespace": lambda name, _ns, body, **kw: self.core.patch_namespace(name, body, **kw),
            "Node": lambda name, _ns, body, **kw: self.core.patch_node(name, body, **kw),
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

    def _call(
        self,
        operation: str,
        fn: Callable[..., Any],
        *args: Any,
        what: str = "the request",
        **kwargs: Any,
    ) -> dict:
        try:
            response = fn(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
            raw = response.data
        except _api_exception() as exc:
            raise api_error(operation, exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._connection_error(operation, exc) from exc
        except ValueError as exc:  # the client's own checks (pydantic ValidationError too)
            raise SchedulerRejected(
                f"the Kubernetes client refused {what}: {_client_complaint(exc, fn)}",
                operation=operation,
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

    def _connection_error(self, operation: str, exc: BaseException) -> SchedulerError:
        """A failure before any answer: refused, reset or timed out (transient), or a TLS
        certificate that does not verify (final: the CA bundle or the server must change)."""
        host = self.api_client.configuration.host
        if _tls_verification_failed(exc):
            return TlsVerificationFailed(
                f"TLS verification of the Kubernetes API at {host} failed: {_root(exc)}; "
                "check the cluster's CA (the kubeconfig's certificate-authority, the CA "
                "bundle setting, or the in-cluster service account's ca.crt)",
                operation=operation,
            )
        return SchedulerUnavailable(
            f"Kubernetes API at {host} unreachable: {exc}", operation=operation
        )


class TlsVerificationFailed(SchedulerAuthError):
    """The API server's certificate does not verify against the configured CA. Final: a retry
    meets the same certificate."""

    code = "scheduler_tls"


def _tls_verification_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps: urllib3's MaxRetryError ``reason``, ``__cause__``) is
    a certificate verification failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        if isinstance(current, urllib3.exceptions.SSLError | ssl.SSLError) and (
            "CERTIFICATE_VERIFY_FAILED" in str(current) or "hostname" in str(current).lower()
        ):
            return True
        reason = getattr(current, "reason", None)
        current = reason if isinstance(reason, BaseException) else current.__cause__
    return False


def _root(exc: BaseException) -> str:
    while isinstance(getattr(exc, "reason", None), BaseException):
        exc = exc.reason
    return str(exc)


def _client_complaint(exc: ValueError, fn: Callable[..., Any]) -> str:
    """What the client's check said, per argument for a pydantic ``ValidationError``
    (``name: Input should be a valid string``; pydantic counts positions from ``self``)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    try:
        names = ["self", *inspect.signature(fn).parameters]
    except (TypeError, ValueError):
        names = []
    parts = []
    for error in errors():
        loc = [
            names[part] if isinstance(part, int) and part < len(names) else str(part)
            for part in error.get("loc") or ()
        ]
        parts.append(f"{'.'.join(loc)}: {error.get('msg')}")
    return "; ".join(parts)


def describe(obj: Mapping[str, Any]) -> str:
    """``ResourceQuota team-a/gpu-quota`` (kind, namespace/name) for messages."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name")
    return f"{obj.get('kind')} {namespace}/{name}" if namespace else f"{obj.get('kind')} {name}"


def object_identity(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    metadata = obj["metadata"]
    return obj["kind"], metadata["name"], metadata.get("namespace")


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service-account ``token`` and the cluster's ``ca.crt``."""


def api_client_from_settings(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    host: str | None = None,
    token: str | None = None,
    ca_cert: str | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
) -> k8s.ApiClient:
    """An ApiClient from a kubeconfig file (optionally one ``context``), or from ``host`` and
    a bearer ``token`` (with ``ca_cert``, a CA bundle path, for TLS), or, with none of them
    and a service-account token mounted (the portal runs in the cluster it manages), in-cluster:
    ``KUBERNETES_SERVICE_HOST``/``_PORT`` from ``environ``, the token (re-read as the kubelet
    rotates it) and ``ca.crt`` from ``service_account_dir`` (the client's
    ``InClusterConfigLoader``, what ``load_incluster_config`` does). urllib3 retries are
    off: callers retry transient errors themselves, and a hung server must cost one timeout.
    Raises ``ValueError`` for settings that configure no client (a kubeconfig the client
    library refuses — missing file, unknown context — included)."""
    from kubernetes import client as k8s
    from kubernetes import config as kube_config
    from kubernetes.config.incluster_config import InClusterConfigLoader

    configuration = k8s.Configuration()
    token_file = Path(service_account_dir) / "token"
    if kubeconfig:
        try:
            kube_config.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except kube_config.ConfigException as exc:  # no such file, no such context, no user
            raise ValueError(f"kubeconfig {kubeconfig}: {exc}") from exc
    elif host and token:
        configuration.host = host
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        if ca_cert:
            configuration.ssl_ca_cert = ca_cert
    elif not (host or token) and token_file.is_file():
        try:
            InClusterConfigLoader(
                token_filename=str(token_file),
                cert_filename=str(Path(service_account_dir) / "ca.crt"),
                environ=os.environ if environ is None else environ,
            ).load_and_set(configuration)
        except kube_config.ConfigException as exc:
            raise ValueError(f"in-cluster Kubernetes configuration: {exc}") from exc
    else:
        raise ValueError(
            "Kubernetes settings need KUBECONFIG, or HOST and TOKEN, or the portal running in "
            f"the cluster (a service-account token at {token_file})"
        )
    configuration.retries = 0
    return k8s.ApiClient(configuration)
