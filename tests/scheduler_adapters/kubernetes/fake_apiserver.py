"""An HTTP-level fake of kube-apiserver for the KubernetesAdapter's tests.

It speaks the REST paths and JSON the official ``kubernetes`` client sends, keeps objects in
memory, and answers as the API documentation describes (api-concepts, server-side-apply,
api-conventions "Response Status Kind"):

- ``POST`` -> 201 and the stored object (``uid``, ``resourceVersion``, ``creationTimestamp``,
  ``metadata.managedFields``); 409 ``AlreadyExists`` for a taken name; 404 ``NotFound`` when the
  namespace does not exist; 403 ``Forbidden`` (cause ``NamespaceTerminating``) into a
  namespace being deleted. Errors are ``v1.Status`` bodies.
- ``PATCH`` with ``application/apply-patch+yaml`` is server-side apply: ``fieldManager`` is
  required; the object is created when missing (201), the applier owning exactly the fields it
  applied (not what the server added); ownership is kept per (manager, operation) in
  ``managedFields``, so a manager's ``Update`` entry (its create, update or patch) is another
  owner to its ``Apply`` entry; maps merge, lists are atomic (replaced whole) except the
  associative lists of ``kubernetes_ownership.MAP_LISTS`` (a Node's ``spec.taints``,
  ``listType=map`` keyed by ``key`` and ``effect`` in the real OpenAPI), which merge by key
  with each entry's fields owned per manager (``k:{"effect":"NoSchedule","key":"..."}`` in
  ``managedFields``), so an apply keeps the kubelet's and an operator's taints, and two managers
  conflict only on one entry's field set to different values; an apply naming one (key, effect)
  twice is the real 500 ``failed to create typed patch object (...): .spec.taints: duplicate
  entries for key [effect="NoSchedule",key="a"]``; a field an update removes is nobody's any
  more (as structured-merge-diff's Updater drops removed fields from every manager); a field the
  manager applied before and now leaves out is removed unless another entry owns it (a field it
  set by create or update is never removed by its applies); a field another entry owns with a
  different value is a 409 ``Conflict`` (causes ``FieldManagerConflict``, the real Status body,
  an entry spelled ``.spec.taints[effect="NoSchedule",key="a"].value``) unless ``force=true``,
  which takes the field over; a field the schema does not declare is the
  real server's 500 ``failed to create typed patch object (...): .spec.foo: field not declared in
  schema``; a ``metadata.resourceVersion`` in the body is a precondition (409 ``Conflict`` when
  stale). Merge and strategic-merge patches are applied as RFC 7386 merge patches; JSON patches
  (RFC 6902 on object members) too, where writing ``metadata.managedFields`` replaces who owns
  what (how ``kubectl`` migrates ownership).
- Quantities of built-in kinds (ResourceQuota, LimitRange, HPA targets) are stored in the API
  server's canonical form (:func:`canonical_quantity`: ``1.5`` is read back as ``1500m``); CRD
  fields as sent. A Namespace gets its ``kubernetes.io/metadata.name`` label on every write.
- ``PUT`` replaces, with the same ``resourceVersion`` precondition.
- A write that changes nothing keeps the ``resourceVersion`` (the server skips no-op writes).
- Bodies are checked: kubernetes-validate's strict schemas of the configured Kubernetes version
  for built-in kinds (an unknown field is a 400 "strict decoding error", as with
  ``fieldValidation=Strict``; other schema errors 422 ``Invalid`` with ``details.causes``),
  :data:`KUEUE_SCHEMAS` for Kueue kinds, DNS-1123 names, quantity grammar, ``roleRef`` kind and
  immutability, LocalQueue ``clusterQueue`` immutability, PriorityClass rules (no ``system-``
  names, user values at most one billion, ``value`` and ``preemptionPolicy`` immutable), Node
  taints (``validateNodeTaints``: a key that is no qualified name, a value that is no label
  value, an effect not NoSchedule / PreferNoSchedule / NoExecute, e.g. 422 ``spec.taints[1].
  effect: Unsupported value: "X": supported values: ...``, a (key, effect) twice) and the
  Kueue CEL rules we generate
  against (each flavor lists every covered resource; no ``borrowingLimit`` without a cohort).
- ``GET`` lists honour ``labelSelector`` and ``limit``/``continue``; ``DELETE`` of a namespace
  deletes what is in it; a bearer ``token`` may be required (401 otherwise).

- ``GET /apis`` is discovery (an APIGroupList of the groups served).

Not emulated: quota enforcement and ``status``, LimitRange defaulting, RBAC (403 only when
told), Kueue's controllers and webhooks, watches, per-group discovery, server-side dry run;
in server-side apply, associative lists other than a Node's taints (a pod's ``containers``,
``tolerations``: the portal writes none; Kueue's ResourceFlavor ``tolerations`` are atomic in
its CRD anyway), set lists (``listType=set``), managed fields per API version and subresource,
the ``Apply``/``Update`` time
stamps' meaning, and conflicts judged on canonical quantities (a patch's ``1000`` against a
stored ``1k``).

Faults for tests: :meth:`FakeApiServer.fail` (answer a matching request with a given status),
:meth:`FakeApiServer.hang` (never answer), :meth:`FakeApiServer.before` (run a hook first, e.g.
a concurrent writer), :meth:`FakeApiServer.forbid` (RBAC-style 403) and
:meth:`FakeApiServer.terminate_namespace`. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_UP, Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import kubernetes_validate
import yaml

from scheduler_adapters.crd_schemas import CRD_SCHEMAS
from scheduler_adapters.kubernetes_ownership import MAP_LISTS, element_key, keyed

K8S_VERSION = ".".join(kubernetes_validate.latest_version().split(".")[:2])


def unkeyed(obj: dict, kind: str | None = None) -> dict:
    """The inverse of :func:`~scheduler_adapters.kubernetes_ownership.keyed` (what the API
    server stores after a merge): associative lists back to lists, in their map's order."""
    out = copy.deepcopy(dict(obj))
    for path in MAP_LISTS.get(kind or str(obj.get("kind")), {}):
        parent = out
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and isinstance(parent.get(path[-1]), dict):
            parent[path[-1]] = list(parent[path[-1]].values())
    return out


# k8s.io/apimachinery resource.Quantity, as the Kueue CRDs spell it in their schemas
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

# ------------------------------------------------------------------------------ Kueue schemas
# kubernetes-validate ships no CRD schemas, so these are transcribed by hand from Kueue's
# v1beta2 API (kubernetes-sigs/kueue apis/kueue/v1beta2/{resourceflavor,clusterqueue,
# localqueue}_types.go and config/components/crd/bases/*.yaml): field names, types, enums,
# required fields and item limits. Unknown fields are rejected (like fieldValidation=Strict).
# Sub-objects the adapter never writes are typed only as objects.

_QUANTITY = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}]}
_NAME = {"type": "string", "maxLength": 253, "pattern": DNS1123_SUBDOMAIN}
_STOP_POLICY = {"type": "string", "enum": ["None", "Hold", "HoldAndDrain"]}
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}
_TAINT_EFFECT = {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}


def _root(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata"],
        "properties": {
            "apiVersion": {"const": "kueue.x-k8s.io/v1beta2"},
            "kind": {"const": kind},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "additionalProperties": False, **spec},
            "status": {"type": "object"},
        },
    }


KUEUE_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    # no spec: value (int32, required) and description (at most 2048) at the top level
    # (apis/kueue/v1beta2/workloadpriorityclass_types.go)
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"): {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "value"],
        "properties": {
            "apiVersion": {"const": "kueue.x-k8s.io/v1beta2"},
            "kind": {"const": "WorkloadPriorityClass"},
            "metadata": {"type": "object"},
            "value": {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
            "description": {"type": "string", "maxLength": 2048},
        },
    },
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): _root(
        "ResourceFlavor",
        {
            "properties": {
                "nodeLabels": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "maxProperties": 8,
                },
                "nodeTaints": {
                    "type": "array",
                    "maxItems": 8,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["effect", "key"],
                        "properties": {
                            "effect": _TAINT_EFFECT,
                            "key": {"type": "string"},
                            "value": {"type": "string"},
                            "timeAdded": {"type": "string"},
                        },
                    },
                },
                "tolerations": {
                    "type": "array",
                    "maxItems": 8,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "effect": _TAINT_EFFECT,
                            "key": {"type": "string"},
                            "operator": {"type": "string", "enum": ["Equal", "Exists"]},
                            "tolerationSeconds": {"type": "integer"},
                            "value": {"type": "string"},
                        },
                    },
                },
                "topologyName": _NAME,
            }
        },
    ),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): _root(
        "ClusterQueue",
        {
            "properties": {
                "resourceGroups": {
                    "type": "array",
                    "maxItems": 16,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["coveredResources", "flavors"],
                        "properties": {
                            "coveredResources": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": 64,
                                "items": {"type": "string"},
                            },
                            "flavors": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": 64,
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["name", "resources"],
                                    "properties": {
                                        "name": _NAME,
                                        "resources": {
                                            "type": "array",
                                            "minItems": 1,
                                            "maxItems": 64,
                                            "items": {
                                                "type": "object",
                                                "additionalProperties": False,
                                                "required": ["name", "nominalQuota"],
                                                "properties": {
                                                    "name": {"type": "string"},
                                                    "nominalQuota": _QUANTITY,
                                                    "borrowingLimit": _QUANTITY,
                                                    "lendingLimit": _QUANTITY,
                                                },
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
                "cohortName": _NAME,
                "queueingStrategy": {"type": "string", "enum": ["StrictFIFO", "BestEffortFIFO"]},
                "namespaceSelector": _LABEL_SELECTOR,
                "flavorFungibility": {"type": "object"},
                "preemption": {"type": "object"},
                "admissionChecksStrategy": {"type": "object"},
                "stopPolicy": _STOP_POLICY,
                "fairSharing": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"weight": _QUANTITY},
                },
                "admissionScope": {"type": "object"},
                "concurrentAdmissionPolicy": {"type": "object"},
            }
        },
    ),
    # Workload: spec fields of config/components/crd/bases/kueue.x-k8s.io_workloads.yaml
    # (v1beta2); pod sets need a template and are at most 18; Kueue's job controllers write it.
    ("kueue.x-k8s.io/v1beta2", "Workload"): _root(
        "Workload",
        {
            "properties": {
                "active": {"type": "boolean"},
                "maximumExecutionTimeSeconds": {"type": "integer", "minimum": 1},
                "podSets": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 18,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["template"],
                        "properties": {
                            "name": {"type": "string", "maxLength": 63},
                            "count": {"type": "integer", "minimum": 0},
                            "minCount": {"type": "integer", "minimum": 1},
                            "template": {"type": "object"},
                            "topologyRequest": {"type": "object"},
                        },
                    },
                },
                "preemptionGates": {"type": "array"},
                "priority": {"type": "integer"},
                "priorityClassRef": {"type": "object"},
                "queueName": {"type": "string", "maxLength": 253},
            }
        },
    ),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): _root(
        "LocalQueue",
        {
            "properties": {
                "clusterQueue": _NAME,
                "stopPolicy": _STOP_POLICY,
                "fairSharing": {"type": "object"},
                "wallTimePolicy": {"type": "object"},
            }
        },
    ),
}


# ------------------------------------------------------------------------------ validation


class ApiError(Exception):
    """An error answer: ``status()`` is the ``v1.Status`` body the real server sends."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        unknown_field: str | None = None,
    ):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = dict(details or {})
        self.unknown_field = unknown_field

    def status(self) -> dict[str, Any]:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]  # an error that is no metav1.Status carries none (500)
        if self.details:
            body["details"] = self.details
        return body


_QUANTITY_RX = re.compile(QUANTITY_PATTERN)
_QUANTITY_PARTS = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def canonical_quantity(value: Any) -> str:
    """A quantity in the canonical form the API server stores and returns for built-in kinds
    (k8s.io/apimachinery/pkg/api/resource, ``Quantity.CanonicalizeBytes``): the format of
    the suffix written (binary ``Ki``..., decimal SI, or ``e`` exponent) is kept; the value is
    rounded up to nano precision; a binary value below 1024 in size or not a whole number
    falls back to decimal SI; the mantissa is a whole number with no fractional digits and the
    suffix the largest that keeps it whole (decimal exponents in steps of 3). So ``1.5`` ->
    ``1500m``, ``2000m`` -> ``2``, ``1000`` -> ``1k``, ``1.5Gi`` -> ``1536Mi``, ``1Ki`` ->
    ``1Ki``, ``0.5Ki`` -> ``512``, ``1e4`` -> ``10e3``. CRD fields are stored as sent."""
    match = _QUANTITY_PARTS.fullmatch(str(value))
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number = Decimal(match["number"])
    if match["binary"]:
        fmt, amount = "binary", number * (Decimal(1024) ** _BINARY[match["binary"]])
    elif match["exponent"] is not None:
        fmt, amount = "exponent", number.scaleb(int(match["exponent"]))
    else:
        fmt, amount = "si", number.scaleb(_DECIMAL[match["decimal"] or ""])
    nanos = (amount * Decimal(10) ** 9).to_integral_value(rounding=ROUND_UP)
    amount = nanos.scaleb(-9)
    sign = "-" if amount < 0 else ""
    if fmt == "binary" and (abs(amount) < 1024 or amount != amount.to_integral_value()):
        fmt = "si"
    if fmt == "binary":
        mantissa, power = int(abs(amount)), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa, power = mantissa // 1024, power + 1
        suffix = {v: k for k, v in _BINARY.items()}.get(power, "")
        return f"{sign}{mantissa}{suffix}"
    mantissa, exponent = int(abs(nanos)), -9
    if mantissa == 0:
        return "0"
    while mantissa % 1000 == 0 and (fmt == "exponent" or exponent < 18):
        mantissa, exponent = mantissa // 1000, exponent + 3
    if fmt == "exponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{ {v: k for k, v in _DECIMAL.items()}[exponent] }"


def validate_object(obj: Mapping[str, Any], k8s_version: str = K8S_VERSION) -> None:
    """Check one object as the API server would on create/apply; raise :class:`ApiError`
    (400 for undecodable or unknown fields, 422 ``Invalid`` with causes otherwise)."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    metadata = obj.get("metadata") or {}
    name = metadata.get("name") or ""
    causes: list[dict[str, str]] = []
    pattern = DNS1123_LABEL if kind == "Namespace" else DNS1123_SUBDOMAIN
    limit = 63 if kind == "Namespace" else 253
    if not re.match(pattern, name) or len(name) > limit:
        causes.append(
            _cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 '
                f"{'label' if kind == 'Namespace' else 'subdomain'} must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
        )
    for path, quantity in _quantities(obj):
        if not isinstance(quantity, int) and not _QUANTITY_RX.match(str(quantity)):
            raise ApiError(
                400,
                "BadRequest",
                f"quantities must match the regular expression "
                f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' ({path}: {quantity!r})",
            )
    if kind == "RoleBinding":
        role_kind = (obj.get("roleRef") or {}).get("kind")
        if role_kind not in ("Role", "ClusterRole"):
            causes.append(
                _cause(
                    "FieldValueNotSupported",
                    "roleRef.kind",
                    f'Unsupported value: "{role_kind}": supported values: "Role", "ClusterRole"',
                )
            )
    if kind == "PriorityClass":
        causes.extend(_priority_class_causes(obj, name))
    if kind == "Node":
        causes.extend(_taint_causes((obj.get("spec") or {}).get("taints")))
    if kind == "ClusterQueue":
        spec = obj.get("spec") or {}
        for index, group in enumerate(spec.get("resourceGroups") or []):
            covered = len(group.get("coveredResources") or [])
            if any(len(f.get("resources") or []) != covered for f in group.get("flavors") or []):
                causes.append(
                    _cause(
                        "FieldValueInvalid",
                        f"spec.resourceGroups[{index}]",
                        'Invalid value: "object": flavors must have the same number of '
                        "resources as the coveredResources",
                    )
                )
            borrowing = any(
                "borrowingLimit" in r for f in group.get("flavors") or [] for r in f["resources"]
            )
            if borrowing and not spec.get("cohortName"):
                causes.append(
                    _cause(
                        "FieldValueInvalid",
                        "spec",
                        'Invalid value: "object": borrowingLimit must be nil when cohort is empty',
                    )
                )
    if not causes:
        cause = _schema_cause(obj, k8s_version)
        if cause is not None:
            causes.append(cause)
    if causes:
        raise ApiError(
            422,
            "Invalid",
            f'{kind} "{name}" is invalid: '
            + "; ".join(f"{c['field']}: {c['message']}" for c in causes),
            {"name": name, "group": api_version.rpartition("/")[0], "kind": kind, "causes": causes},
        )


def _priority_class_causes(obj: Mapping[str, Any], name: str) -> list[dict[str, str]]:
    """What the API server refuses in a PriorityClass (k8s.io/kubernetes
    pkg/apis/scheduling/validation/validation.go): a ``system-`` name that is not one of the
    two built-in classes, and a user value above one billion."""
    causes = []
    if name.startswith("system-") and name not in (
        "system-cluster-critical",
        "system-node-critical",
    ):
        causes.append(
            _cause(
                "FieldValueForbidden",
                "metadata.name",
                "Forbidden: priority class names with 'system-' prefix are reserved for system "
                "use only",
            )
        )
    value = obj.get("value")
    if isinstance(value, int) and value > 1_000_000_000 and not name.startswith("system-"):
        causes.append(
            _cause(
                "FieldValueForbidden",
                "value",
                "Forbidden: maximum allowed value of a user defined priority is 1000000000",
            )
        )
    return causes


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_PART_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _qualified_name_errors(value: str) -> list[str]:
    """k8s.io/apimachinery ``validation.IsQualifiedName``: ``[prefix/]name``, the name part at
    most 63 characters of the label-name alphabet, the prefix a DNS-1123 subdomain."""
    prefix, slash, part = value.rpartition("/")
    errors = []
    if len(part) == 0:
        errors.append("name part must be non-empty")
    elif len(part) > 63:
        errors.append("name part must be no more than 63 characters")
    if part and not _QUALIFIED_NAME_PART.fullmatch(part):
        errors.append(_NAME_PART_MESSAGE)
    if slash and (not prefix or len(prefix) > 253 or not re.match(DNS1123_SUBDOMAIN, prefix)):
        errors.append(
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def _taint_causes(taints: Any) -> list[dict[str, str]]:
    """What the API server refuses in ``spec.taints`` (k8s.io/kubernetes pkg/apis/core/
    validation ``validateNodeTaints``): a key that is no qualified name, a value that is no
    label value, an effect other than NoSchedule, PreferNoSchedule or NoExecute, and two
    taints of one (key, effect)."""
    causes: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(taints if isinstance(taints, list) else []):
        where = f"spec.taints[{index}]"
        key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
        effect = str(taint.get("effect") or "")
        for error in _qualified_name_errors(key):
            causes.append(
                _cause("FieldValueInvalid", f"{where}.key", f'Invalid value: "{key}": {error}')
            )
        if value and (len(value) > 63 or not _QUALIFIED_NAME_PART.fullmatch(value)):
            error = (
                "must be no more than 63 characters" if len(value) > 63 else _LABEL_VALUE_MESSAGE
            )
            causes.append(
                _cause("FieldValueInvalid", f"{where}.value", f'Invalid value: "{value}": {error}')
            )
        if not effect:
            causes.append(_cause("FieldValueRequired", f"{where}.effect", "Required value"))
        elif effect not in _TAINT_EFFECTS:
            supported = ", ".join(f'"{e}"' for e in _TAINT_EFFECTS)
            causes.append(
                _cause(
                    "FieldValueNotSupported",
                    f"{where}.effect",
                    f'Unsupported value: "{effect}": supported values: {supported}',
                )
            )
        if (key, effect) in seen:
            causes.append(
                _cause(
                    "FieldValueDuplicate",
                    where,
                    f"Duplicate value: {json.dumps(taint, sort_keys=True)}: taints must be "
                    "unique by key and effect pair",
                )
            )
        seen.add((key, effect))
    return causes


def _cause(reason: str, field_path: str, message: str) -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field_path}


def _quantities(obj: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """``(path, value)`` of every resource.Quantity field of the built-in kinds written."""
    for path, holder, key in _quantity_slots(obj):
        yield path, holder[key]


def _quantity_slots(obj: Mapping[str, Any]) -> Iterable[tuple[str, dict, str]]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "ResourceQuota":
        for key in spec.get("hard") or {}:
            yield f"spec.hard.{key}", spec["hard"], key
    if obj.get("kind") == "LimitRange":
        for index, item in enumerate(spec.get("limits") or []):
            for part in ("default", "defaultRequest", "max", "min", "maxLimitRequestRatio"):
                for key in item.get(part) or {}:
                    yield f"spec.limits[{index}].{part}.{key}", item[part], key
    if obj.get("kind") == "HorizontalPodAutoscaler":
        for index, metric in enumerate(spec.get("metrics") or []):
            for source in metric.values():
                target = source.get("target") if isinstance(source, dict) else None
                for key in ("averageValue", "value"):
                    if isinstance(target, dict) and key in target:
                        yield f"spec.metrics[{index}].target.{key}", target, key


def _canonicalise(obj: dict[str, Any]) -> None:
    """Store every quantity of a built-in kind in canonical form, as the API server does
    (the request's ``1.5`` is read back as ``1500m``)."""
    for _path, holder, key in list(_quantity_slots(obj)):
        holder[key] = canonical_quantity(holder[key])


def _schema_cause(obj: Mapping[str, Any], k8s_version: str) -> dict[str, str] | None:
    body = {key: value for key, value in obj.items() if key != "status"}
    key = (obj.get("apiVersion"), obj.get("kind"))
    schema = KUEUE_SCHEMAS.get(key) or CRD_SCHEMAS.get(key)
    try:
        if schema is not None:
            jsonschema.validate(body, schema)
        else:
            kubernetes_validate.validate(body, k8s_version, strict=True)
    except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as exc:
        where = ".".join(str(part) for part in exc.absolute_path) or "<root>"
        unknown = re.search(r"\('(.+?)' (?:was|were) unexpected\)", exc.message)
        if unknown:
            field_path = f"{where}.{unknown.group(1)}" if where != "<root>" else unknown.group(1)
            raise ApiError(
                400,
                "BadRequest",
                f'{obj.get("kind")} in version "{obj.get("apiVersion")}" cannot be handled as a '
                f'{obj.get("kind")}: strict decoding error: unknown field "{field_path}"',
                unknown_field=field_path,
            ) from exc
        return _cause("FieldValueInvalid", where, exc.message)
    except kubernetes_validate.SchemaNotFoundError as exc:
        raise ApiError(404, "NotFound", f"no schema for {obj.get('kind')}") from exc
    return None


# ------------------------------------------------------------------------------ the server

# (group, version, plural) -> (Kind, namespaced)
RESOURCES: dict[tuple[str, str, str], tuple[str, bool]] = {
    ("", "v1", "namespaces"): ("Namespace", False),
    ("", "v1", "nodes"): ("Node", False),
    ("", "v1", "resourcequotas"): ("ResourceQuota", True),
    ("", "v1", "limitranges"): ("LimitRange", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings"): ("RoleBinding", True),
    ("autoscaling", "v2", "horizontalpodautoscalers"): ("HorizontalPodAutoscaler", True),
    ("resource.k8s.io", "v1", "resourceslices"): ("ResourceSlice", False),
    ("resource.k8s.io", "v1", "deviceclasses"): ("DeviceClass", False),
    ("scheduling.k8s.io", "v1", "priorityclasses"): ("PriorityClass", False),
    # elastic quota CRDs, checked against scheduler_adapters.crd_schemas
    ("scheduling.volcano.sh", "v1beta1", "queues"): ("Queue", False),
    ("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas"): ("ElasticQuota", True),
}
KUEUE_RESOURCES: dict[tuple[str, str, str], tuple[str, bool]] = {
    ("kueue.x-k8s.io", "v1beta2", "resourceflavors"): ("ResourceFlavor", False),
    ("kueue.x-k8s.io", "v1beta2", "clusterqueues"): ("ClusterQueue", False),
    ("kueue.x-k8s.io", "v1beta2", "localqueues"): ("LocalQueue", True),
    ("kueue.x-k8s.io", "v1beta2", "workloads"): ("Workload", True),
    ("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses"): ("WorkloadPriorityClass", False),
}
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    headers: dict[str, str]
    status: int = 0

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class _Rule:
    method: str | tuple[str, ...] | None
    path: re.Pattern[str] | None
    times: int
    status: int | None = None
    body: Any = None
    hang: bool = False
    hook: Callable[[FakeApiServer, Recorded], None] | None = None
    raw: bytes | None = None

    def matches(self, method: str, path: str) -> bool:
        methods = (self.method,) if isinstance(self.method, str) else self.method
        return (methods is None or method in methods) and (
            self.path is None or bool(self.path.search(path))
        )


@dataclass
class _Stored:
    obj: dict[str, Any]
    # (manager, operation) -> field paths it owns; a path ends at a leaf or an atomic list
    owners: dict[tuple[str, str], set[tuple[str, ...]]] = field(default_factory=dict)


class FakeApiServer:
    """In-memory kube-apiserver on ``127.0.0.1:<free port>``, served from a thread."""

    def __init__(
        self,
        *,
        nodes: Iterable[Mapping[str, Any]] = (),
        k8s_version: str = K8S_VERSION,
        token: str | None = "portal-token",
        kueue: bool = True,
        kueue_versions: tuple[str, ...] = (),
    ) -> None:
        """``kueue``: Kueue's v1beta2 kinds are served; ``kueue_versions``: other Kueue
        versions discovery lists (served by no kind here: ``("v1beta1",)`` with
        ``kueue=False`` is Kueue 0.14)."""
        self.k8s_version = k8s_version
        self.token = token
        self.resources = {**RESOURCES, **(KUEUE_RESOURCES if kueue else {})}
        self.kueue_versions = kueue_versions
        self.objects: dict[tuple[str, str, str | None, str], _Stored] = {}
        self.requests: list[Recorded] = []
        self.lock = threading.RLock()
        self._rules: list[_Rule] = []
        self._versions = itertools.count(1000)
        self._released = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        for node in nodes:
            node = {"apiVersion": "v1", "kind": "Node", **copy.deepcopy(dict(node))}
            self._store(("", "v1", "nodes"), None, node, "kubelet", "Update")

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> FakeApiServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out as two writes; without NODELAY, Nagle and the
                # client's delayed ACK add ~40 ms per keep-alive request.
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def handle_any(self) -> None:
                server._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # a short poll keeps stop() (shutdown) quick
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # ---------------------------------------------------------------- faults and hooks

    def fail(
        self,
        method: str | tuple[str, ...] | None = None,
        path: str | None = None,
        *,
        status: int,
        reason: str = "",
        message: str = "",
        causes: list[dict[str, str]] | None = None,
        raw: bytes | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` matching requests with ``status`` and a Status body (or
        ``raw`` bytes, e.g. an HTML page from a proxy)."""
        details = {"causes": causes} if causes else None
        body = ApiError(status, reason, message, details).status()
        self._rules.append(_Rule(method, _rx(path), times, status=status, body=body, raw=raw))

    def hang(self, method: str | None = None, path: str | None = None, *, times: int = 1):
        """Never answer the next ``times`` matching requests (until :meth:`stop`)."""
        self._rules.append(_Rule(method, _rx(path), times, hang=True))

    def before(
        self,
        method: str | None,
        path: str | None,
        hook: Callable[[FakeApiServer, Recorded], None],
        *,
        times: int = 1,
    ) -> None:
        """Run ``hook(server, request)`` before handling the next ``times`` matching requests."""
        self._rules.append(_Rule(method, _rx(path), times, hook=hook))

    def concurrent_write(self, method: str = "PATCH", path: str | None = None, *, times: int = 1):
        """Before the next ``times`` matching requests, another client updates the object the
        request addresses (a new resourceVersion), as a concurrent ``kubectl edit`` would."""

        def touch(server: FakeApiServer, request: Recorded) -> None:
            key = server.key_for(request.path)
            if key in server.objects:

                def annotate(obj: dict[str, Any]) -> None:
                    annotations = obj["metadata"].setdefault("annotations", {})
                    annotations["example.com/touched"] = str(len(server.requests))

                server.edit(*key, annotate)

        self.before(method, path, touch, times=times)

    def key_for(self, path: str) -> tuple[str, str, str | None, str]:
        """The store key of an object URL (``/api/v1/namespaces/a/resourcequotas/q``)."""
        parts = [part for part in path.split("/") if part]
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        return group, rest[0], namespace, rest[1]

    def forbid(
        self,
        method: str,
        path: str,
        *,
        resource: str,
        user: str = "system:serviceaccount:portal:portal",
    ) -> None:
        """Answer every matching request 403, with the message RBAC gives."""
        message = (
            f'{resource} is forbidden: User "{user}" cannot {_VERBS[method]} resource '
            f'"{resource}" in API group "" at the cluster scope'
        )
        body = ApiError(403, "Forbidden", message, {"kind": resource}).status()
        self._rules.append(_Rule(method, _rx(path), 10**9, status=403, body=body))

    def terminate_namespace(self, name: str) -> None:
        """Mark a namespace as being deleted (its finalizers still running)."""
        with self.lock:
            stored = self.objects[("", "namespaces", None, name)]
            stored.obj["metadata"]["deletionTimestamp"] = _now()
            stored.obj["status"] = {"phase": "Terminating"}

    def edit(
        self,
        group: str,
        plural: str,
        namespace: str | None,
        name: str,
        change: Callable[[dict[str, Any]], None],
        *,
        manager: str = "kubectl-edit",
    ) -> None:
        """Change a stored object as another client's update would (``kubectl edit``): new
        resourceVersion, and ``manager`` owns the fields it changed."""
        with self.lock:
            stored = self.objects[(group, plural, namespace, name)]
            before = keyed(stored.obj)
            change(stored.obj)
            _canonicalise(stored.obj)  # the edit went through the API server too
            after = keyed(stored.obj)
            removed = {p for p in _paths(before) if _at(after, p) is None}
            changed = _paths(after) - _paths(before) | {
                p for p in _paths(before) if _at(before, p) != _at(after, p)
            }
            self._disown(stored, removed)
            self._own(stored, (manager, "Update"), changed - removed)
            self._bump(stored)

    def put_object(self, obj: Mapping[str, Any], *, manager: str = "other-controller") -> None:
        """Store an object as another client's create would (for races and pre-existing
        objects); validated like any request body."""
        with self.lock:
            group = obj["apiVersion"].rpartition("/")[0]
            version = obj["apiVersion"].rpartition("/")[2]
            gvr = next(
                g
                for g in self.resources
                if g[0] == group and g[1] == version and self.resources[g][0] == obj["kind"]
            )
            namespace = obj["metadata"].get("namespace")
            admitted = self._admit(gvr, obj["kind"], namespace, copy.deepcopy(dict(obj)))
            self._store(gvr, namespace, admitted, manager, "Update")

    def get(self, group: str, plural: str, namespace: str | None, name: str) -> dict | None:
        stored = self.objects.get((group, plural, namespace, name))
        return copy.deepcopy(stored.obj) if stored else None

    def writes(self) -> list[Recorded]:
        return [request for request in self.requests if request.is_write]

    # ---------------------------------------------------------------- HTTP

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        content_type = (handler.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            body = yaml.safe_load(raw) if raw else None  # JSON is YAML
        except yaml.YAMLError:
            body = raw
        record = Recorded(
            handler.command,
            url.path,
            query,
            content_type,
            body,
            {key.lower(): value for key, value in handler.headers.items()},
        )
        with self.lock:
            self.requests.append(record)
            rule = next((r for r in self._rules if r.matches(handler.command, url.path)), None)
            if rule is not None:
                rule.times -= 1
                if rule.times <= 0:
                    self._rules.remove(rule)
        if rule is not None and rule.hang:
            self._released.wait()
            return
        if rule is not None and rule.hook is not None:
            rule.hook(self, record)
            rule = None
        if rule is not None:
            code, payload, data = rule.status or 500, rule.body, rule.raw
        else:
            data = None
            try:
                code, payload = self._dispatch(handler, record)
            except ApiError as error:
                code, payload = error.code, error.status()
        record.status = code
        if data is None:
            data = json.dumps(payload).encode()
            kind = "application/json"
        else:
            kind = "text/html"
        handler.send_response(code)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _dispatch(self, handler: BaseHTTPRequestHandler, record: Recorded) -> tuple[int, Any]:
        if self.token is not None:
            if handler.headers.get("Authorization") != f"Bearer {self.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
        parts = [part for part in record.path.split("/") if part]
        if record.path.rstrip("/") == "/version":
            major, minor = self.k8s_version.split(".")
            return 200, {
                "major": major,
                "minor": minor,
                "gitVersion": f"v{self.k8s_version}.0-fake",
                "gitCommit": "0" * 40,
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.24",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if record.path.rstrip("/") == "/apis" and record.method == "GET":
            return 200, self._discovery()
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
        gvr = (group, version, plural)
        if len(rest) > 2 or gvr not in self.resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        kind, namespaced = self.resources[gvr]
        if (namespace is not None) != namespaced and not (record.method == "GET" and not name):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        with self.lock:
            method, query, body = record.method, record.query, record.body
            if method == "GET" and name is None:
                return 200, self._list(gvr, kind, namespace, query)
            if method == "GET":
                return 200, copy.deepcopy(self._stored(gvr, namespace, name).obj)
            if method == "POST" and name is None:
                return self._create(gvr, kind, namespace, body, query)
            if method == "PUT" and name:
                return self._replace(gvr, kind, namespace, name, body, query)
            if method == "PATCH" and name:
                return self._patch(gvr, kind, namespace, name, record, query)
            if method == "DELETE" and name:
                return self._delete(gvr, namespace, name)
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method: {method}")

    def _discovery(self) -> dict[str, Any]:
        """``GET /apis``: an APIGroupList of the groups and versions served."""
        versions: dict[str, list[str]] = {}
        for group, version, _ in self.resources:
            if group and version not in versions.setdefault(group, []):
                versions[group].append(version)
        for version in self.kueue_versions:
            if version not in versions.setdefault("kueue.x-k8s.io", []):
                versions["kueue.x-k8s.io"].append(version)
        groups = []
        for group, served in sorted(versions.items()):
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in served]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    # ---------------------------------------------------------------- verbs

    def _list(self, gvr, kind: str, namespace: str | None, query: dict[str, str]) -> dict:
        selector = _selector(query.get("labelSelector"))
        items = [
            stored.obj
            for (group, plural, ns, _), stored in sorted(self.objects.items(), key=_sort_key)
            if (group, plural) == (gvr[0], gvr[2])
            and (namespace is None or ns == namespace)
            and selector(stored.obj["metadata"].get("labels") or {})
        ]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items)
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(next(self._versions))}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
            metadata["remainingItemCount"] = len(items) - start - limit
        return {
            "apiVersion": _api_version(gvr),
            "kind": f"{kind}List",
            "metadata": metadata,
            "items": copy.deepcopy(page),
        }

    def _create(self, gvr, kind, namespace, body, query) -> tuple[int, dict]:
        obj = self._admit(gvr, kind, namespace, body)
        if obj["metadata"].get("resourceVersion"):
            raise ApiError(
                400, "BadRequest", "resourceVersion should not be set on objects to be created"
            )
        self._check_namespace(gvr, namespace, obj["metadata"]["name"])
        name = obj["metadata"]["name"]
        if (gvr[0], gvr[2], namespace, name) in self.objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{_resource(gvr)} "{name}" already exists',
                {"name": name, "group": gvr[0], "kind": gvr[2]},
            )
        manager = query.get("fieldManager") or "unknown-client"
        return 201, self._store(gvr, namespace, obj, manager, "Update")

    def _replace(self, gvr, kind, namespace, name, body, query) -> tuple[int, dict]:
        stored = self._stored(gvr, namespace, name)
        obj = self._admit(gvr, kind, namespace, body)
        self._precondition(gvr, stored, obj, name)
        self._immutable(kind, stored.obj, obj)
        for key in ("uid", "creationTimestamp"):
            obj["metadata"][key] = stored.obj["metadata"][key]
        manager = query.get("fieldManager") or "unknown-client"
        return 200, self._write(stored, obj, (manager, "Update"))

    def _patch(self, gvr, kind, namespace, name, record: Recorded, query) -> tuple[int, dict]:
        body = record.body
        if record.content_type == "application/apply-patch+yaml":
            return self._apply(gvr, kind, namespace, name, body, query)
        stored = self._stored(gvr, namespace, name)
        if record.content_type == "application/json-patch+json":
            return self._json_patch(gvr, kind, namespace, name, stored, body, query)
        if record.content_type not in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ):
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types "
                f"include: application/json-patch+json, application/merge-patch+json, "
                f"application/apply-patch+yaml, application/strategic-merge-patch+json "
                f"(got {record.content_type!r})",
            )
        merged = _merge_patch(stored.obj, body)
        self._precondition(gvr, stored, merged, name)
        merged["metadata"]["resourceVersion"] = stored.obj["metadata"]["resourceVersion"]
        obj = self._admit(gvr, kind, namespace, merged)
        self._immutable(kind, stored.obj, obj)
        manager = query.get("fieldManager") or "unknown-client"
        return 200, self._write(stored, obj, (manager, "Update"))

    def _json_patch(self, gvr, kind, namespace, name, stored, body, query) -> tuple[int, dict]:
        """RFC 6902 (``add``, ``remove``, ``replace``, ``test`` on object members). A
        ``resourceVersion`` written is a precondition; ``metadata.managedFields`` written
        replaces who owns what (how clients migrate ownership, k8s.io/client-go/util/
        csaupgrade), and the write bumps the resourceVersion even when no field changed."""
        patched = _apply_json_patch(stored.obj, body)
        self._precondition(gvr, stored, patched, name)
        entries = patched["metadata"].get("managedFields")
        owners_changed = entries != stored.obj["metadata"].get("managedFields")
        if owners_changed:
            stored.owners = _owners_of(entries)
        patched["metadata"]["resourceVersion"] = stored.obj["metadata"]["resourceVersion"]
        obj = self._admit(gvr, kind, namespace, patched)
        self._immutable(kind, stored.obj, obj)
        manager = query.get("fieldManager") or "unknown-client"
        version = stored.obj["metadata"]["resourceVersion"]
        result = self._write(stored, obj, (manager, "Update"))
        if owners_changed and result["metadata"]["resourceVersion"] == version:
            self._bump(stored)
            result = copy.deepcopy(stored.obj)
        return 200, result

    def _apply(self, gvr, kind, namespace, name, body, query) -> tuple[int, dict]:
        manager = query.get("fieldManager")
        if not manager:
            raise ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
            )
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "error decoding YAML: the body is not an object")
        if (body.get("metadata") or {}).get("name") not in (None, name):
            raise ApiError(
                400, "BadRequest", "the name of the object does not match the name on the URL"
            )
        applied = copy.deepcopy(body)
        applied.setdefault("metadata", {})["name"] = name
        if namespace is not None:
            applied["metadata"].setdefault("namespace", namespace)
        self._typed_patch(gvr, kind, namespace, applied)
        stored = self.objects.get((gvr[0], gvr[2], namespace, name))
        if stored is None:
            obj = self._admit(gvr, kind, namespace, applied)
            wanted = obj["metadata"].pop("resourceVersion", None)
            if wanted:
                raise self._not_found(gvr, name)
            self._check_namespace(gvr, namespace, name)
            # an applier owns what it applied, not what the server added (defaults, labels)
            created = self._store(gvr, namespace, obj, manager, "Apply")
            stored = self.objects[(gvr[0], gvr[2], namespace, name)]
            stored.owners[(manager, "Apply")] = _paths(keyed(_without_identity(applied), kind))
            self._bump(stored)
            return 201, {**created, "metadata": copy.deepcopy(stored.obj["metadata"])}
        self._precondition(gvr, stored, applied, name)
        applied["metadata"].pop("resourceVersion", None)
        mine = (manager, "Apply")
        new_paths = _paths(keyed(_without_identity(applied), kind))
        current = keyed(stored.obj)
        applied = keyed(applied)
        conflicts = [
            (owner, path)
            for owner, paths in stored.owners.items()
            if owner != mine
            for path in paths & new_paths
            if _at(current, path) != _at(applied, path)
        ]
        if conflicts and query.get("force") != "true":
            causes = [
                _cause(
                    "FieldManagerConflict",
                    _spelled(path),
                    f'conflict with "{owner[0]}" using {_api_version(gvr)}',
                )
                for owner, path in conflicts
            ]
            raise ApiError(
                409,
                "Conflict",
                f"Apply failed with {len(causes)} conflict(s): "
                + "; ".join(f"{c['message']}: {c['field']}" for c in causes),
                {"name": name, "group": gvr[0], "kind": gvr[2], "causes": causes},
            )
        # Fields this manager applied before and leaves out now go, unless someone else owns them.
        others = set().union(*(p for o, p in stored.owners.items() if o != mine))
        for path in stored.owners.get(mine, set()) - new_paths:
            if path not in others:
                _remove(current, path)
        merged = unkeyed(_merge_apply(current, applied), kind)
        obj = self._admit(gvr, kind, namespace, merged)
        self._immutable(kind, stored.obj, obj)
        for owner, paths in stored.owners.items():
            if owner != mine:
                paths -= {path for owner_, path in conflicts if owner_ == owner}
        return 200, self._write(stored, obj, mine, replace_owned=new_paths)

    def _typed_patch(self, gvr, kind: str, namespace: str | None, applied: dict) -> None:
        """An apply names only fields the schema declares: the API server's field manager
        turns the patch into a typed object first and answers a plain error, which becomes a
        500 with no reason (kubernetes/kubernetes#122480, #139253):
        ``failed to create typed patch object (<ns>/<name>; <group>/<version>, Kind=<Kind>):
        .spec.foo: field not declared in schema``."""
        name = applied["metadata"]["name"]
        for path, keys in MAP_LISTS.get(kind, {}).items():
            items = _at(applied, path)
            seen: set[str] = set()
            for item in items if isinstance(items, list) else []:
                element = element_key(item, keys) if isinstance(item, dict) else ""
                if element in seen:
                    fields = json.loads(element[2:])
                    spelled = ",".join(f"{key}={json.dumps(fields[key])}" for key in fields)
                    raise ApiError(
                        500,
                        "",
                        f"failed to create typed patch object ({namespace or ''}/{name}; "
                        f"{gvr[0]}/{gvr[1]}, Kind={kind}): .{'.'.join(path)}: duplicate entries "
                        f"for key [{spelled}]",
                    )
                seen.add(element)
        try:
            self._admit(gvr, kind, namespace, applied)
        except ApiError as error:
            if error.unknown_field is None:
                return  # other errors surface where the real server finds them
            raise ApiError(
                500,
                "",
                f"failed to create typed patch object ({namespace or ''}/{name}; "
                f"{gvr[0]}/{gvr[1]}, Kind={kind}): .{error.unknown_field}: field not declared "
                "in schema",
            ) from error

    def _delete(self, gvr, namespace, name) -> tuple[int, dict]:
        stored = self._stored(gvr, namespace, name)
        del self.objects[(gvr[0], gvr[2], namespace, name)]
        if gvr[2] == "namespaces":
            for key in [key for key in self.objects if key[2] == name]:
                del self.objects[key]
        return 200, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": gvr[0],
                "kind": gvr[2],
                "uid": stored.obj["metadata"]["uid"],
            },
        }

    # ---------------------------------------------------------------- helpers

    def _stored(self, gvr, namespace, name) -> _Stored:
        stored = self.objects.get((gvr[0], gvr[2], namespace, name))
        if stored is None:
            raise self._not_found(gvr, name)
        return stored

    def _not_found(self, gvr, name) -> ApiError:
        return ApiError(
            404,
            "NotFound",
            f'{_resource(gvr)} "{name}" not found',
            {"name": name, "group": gvr[0], "kind": gvr[2]},
        )

    def _check_namespace(self, gvr, namespace: str | None, name: str) -> None:
        if namespace is None:
            return
        stored = self.objects.get(("", "namespaces", None, namespace))
        if stored is None:
            raise ApiError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                {"name": namespace, "kind": "namespaces"},
            )
        if stored.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f'{_resource(gvr)} "{name}" is forbidden: unable to create new content in '
                f"namespace {namespace} because it is being terminated",
                {
                    "name": name,
                    "kind": gvr[2],
                    "causes": [
                        _cause(
                            "NamespaceTerminating",
                            "metadata.namespace",
                            f"namespace {namespace} is being terminated",
                        )
                    ],
                },
            )

    def _admit(self, gvr, kind: str, namespace: str | None, body: Any) -> dict[str, Any]:
        """Decode and validate a request body into the object that would be stored."""
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        obj = copy.deepcopy(body)
        if obj.get("kind") not in (None, kind) or obj.get("apiVersion") not in (
            None,
            _api_version(gvr),
        ):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                f"expected API version ({_api_version(gvr)})",
            )
        obj.setdefault("apiVersion", _api_version(gvr))
        obj.setdefault("kind", kind)
        metadata = obj.setdefault("metadata", {})
        if namespace is not None:
            if metadata.get("namespace") not in (None, namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                )
            metadata["namespace"] = namespace
        validate_object(obj, self.k8s_version)
        _canonicalise(obj)
        if kind == "Namespace":  # NamespaceStrategy sets it on create and on every update
            metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
        return obj

    def _precondition(self, gvr, stored: _Stored, body: Mapping[str, Any], name: str) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != stored.obj["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {_resource(gvr)} "{name}": the object has '
                "been modified; please apply your changes to the latest version and try again",
                {"name": name, "group": gvr[0], "kind": gvr[2]},
            )

    @staticmethod
    def _immutable(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if kind == "RoleBinding" and old.get("roleRef") != new.get("roleRef"):
            raise ApiError(
                422,
                "Invalid",
                f'RoleBinding.rbac.authorization.k8s.io "{new["metadata"]["name"]}" is invalid: '
                "roleRef: Invalid value: cannot change roleRef",
                {"causes": [_cause("FieldValueInvalid", "roleRef", "cannot change roleRef")]},
            )
        if kind == "PriorityClass":
            for key in ("value", "preemptionPolicy"):
                if old.get(key) != new.get(key):
                    raise ApiError(
                        422,
                        "Invalid",
                        f'PriorityClass.scheduling.k8s.io "{new["metadata"]["name"]}" is '
                        f"invalid: {key}: Forbidden: may not be changed in an update.",
                        {"causes": [_cause("FieldValueForbidden", key, "may not be changed")]},
                    )
        if kind == "LocalQueue":
            before = (old.get("spec") or {}).get("clusterQueue")
            after = (new.get("spec") or {}).get("clusterQueue")
            if before != after:
                raise ApiError(
                    422,
                    "Invalid",
                    f'LocalQueue.kueue.x-k8s.io "{new["metadata"]["name"]}" is invalid: '
                    "spec.clusterQueue: Invalid value: field is immutable",
                    {"causes": [_cause("FieldValueInvalid", "spec.clusterQueue", "immutable")]},
                )

    def _store(self, gvr, namespace, obj, manager: str, operation: str) -> dict[str, Any]:
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", _now())
        metadata["generation"] = 1
        if obj["kind"] == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        stored = _Stored(obj)
        self._own(stored, (manager, operation), _paths(keyed(_without_identity(obj), obj["kind"])))
        self.objects[(gvr[0], gvr[2], namespace, metadata["name"])] = stored
        self._bump(stored)
        return copy.deepcopy(stored.obj)

    def _write(
        self,
        stored: _Stored,
        obj: dict[str, Any],
        owner: tuple[str, str],
        *,
        replace_owned: set[tuple[str, ...]] | None = None,
    ) -> dict[str, Any]:
        before = {k: v for k, v in stored.obj.items() if k != "metadata"}
        after = {k: v for k, v in obj.items() if k != "metadata"}
        meta_before = {k: v for k, v in stored.obj["metadata"].items() if k not in _SERVER_FIELDS}
        meta_after = {k: v for k, v in obj["metadata"].items() if k not in _SERVER_FIELDS}
        if replace_owned is not None:
            stored.owners[owner] = set()
            self._own(stored, owner, replace_owned)
        if before == after and meta_before == meta_after:
            return copy.deepcopy(stored.obj)  # a no-op write keeps the resourceVersion
        if replace_owned is None:
            old, new = keyed(stored.obj), keyed(obj)
            changed = {p for p in _paths(new) if _at(old, p) != _at(new, p)}
            self._disown(stored, {p for p in _paths(old) if _at(new, p) is None})
            self._own(stored, owner, changed)
        for key in _SERVER_FIELDS:
            if key in stored.obj["metadata"]:
                obj["metadata"][key] = stored.obj["metadata"][key]
        if before != after:
            obj["metadata"]["generation"] = stored.obj["metadata"].get("generation", 1) + 1
        stored.obj = obj
        self._bump(stored)
        return copy.deepcopy(stored.obj)

    def _own(self, stored: _Stored, owner: tuple[str, str], paths: set[tuple[str, ...]]):
        for other, owned in stored.owners.items():
            if other != owner and owner[1] == "Update":
                owned -= paths  # an update takes over what it changed
        stored.owners.setdefault(owner, set()).update(paths)

    @staticmethod
    def _disown(stored: _Stored, removed: set[tuple[str, ...]]) -> None:
        """A field an update removed is nobody's any more (structured-merge-diff's Updater
        takes the removed fields out of every manager's set)."""
        for paths in stored.owners.values():
            paths -= removed

    def _bump(self, stored: _Stored) -> None:
        metadata = stored.obj["metadata"]
        metadata["resourceVersion"] = str(next(self._versions))
        metadata["managedFields"] = [
            {
                "manager": manager,
                "operation": operation,
                "apiVersion": stored.obj["apiVersion"],
                "time": _now(),
                "fieldsType": "FieldsV1",
                "fieldsV1": _fields_v1(paths),
            }
            for (manager, operation), paths in sorted(stored.owners.items())
            if paths
        ]


# ------------------------------------------------------------------------------ small helpers


def free_port() -> int:
    """A local port nobody listens on (for connection-refused tests)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rx(path: str | None) -> re.Pattern[str] | None:
    return re.compile(path) if path else None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _api_version(gvr: tuple[str, str, str]) -> str:
    return gvr[1] if not gvr[0] else f"{gvr[0]}/{gvr[1]}"


def _resource(gvr: tuple[str, str, str]) -> str:
    return gvr[2] if not gvr[0] else f"{gvr[2]}.{gvr[0]}"


def _sort_key(item: tuple[tuple[str, str, str | None, str], _Stored]) -> tuple[str, ...]:
    return tuple(str(part) for part in item[0])


def _without_identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind", "status")}
    metadata = {
        key: value
        for key, value in (obj.get("metadata") or {}).items()
        if key not in ("name", "namespace", *_SERVER_FIELDS)
    }
    if metadata:
        out["metadata"] = metadata
    else:
        out.pop("metadata", None)
    return out


def _paths(obj: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Leaf paths of an object; a list is one leaf (atomic). Associative lists are maps by
    the time paths are taken (``keyed``), so each element's fields are leaves of their own."""
    if isinstance(obj, dict) and obj:
        paths: set[tuple[str, ...]] = set()
        for key, value in obj.items():
            paths |= _paths(value, (*prefix, key))
        return paths
    return {prefix} if prefix else set()


def _spelled(path: tuple[str, ...]) -> str:
    """A field path as a conflict names it: ``.spec.taints[effect="NoSchedule",key="a"].value``
    (structured-merge-diff's ``fieldpath`` spelling of an associative list's element)."""
    out = ""
    for step in path:
        if step.startswith("k:"):
            fields = json.loads(step[2:])
            out += "[" + ",".join(f"{key}={json.dumps(fields[key])}" for key in fields) + "]"
        else:
            out += f".{step}"
    return out


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _remove(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    parents = [obj]
    for key in path[:-1]:
        nxt = parents[-1].get(key)
        if not isinstance(nxt, dict):
            return
        parents.append(nxt)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):  # drop maps left empty
        if parents[depth] == {}:
            parents[depth - 1].pop(path[depth - 1], None)


def _merge_apply(current: Any, applied: Any) -> Any:
    if isinstance(current, dict) and isinstance(applied, dict):
        merged = copy.deepcopy(current)
        for key, value in applied.items():
            merged[key] = _merge_apply(current.get(key), value)
        return merged
    return copy.deepcopy(applied)


def _owners_of(entries: Any) -> dict[tuple[str, str], set[tuple[str, ...]]]:
    """Who owns what, from ``managedFields`` entries a client wrote."""
    if not isinstance(entries, list):
        raise ApiError(422, "Invalid", "metadata.managedFields: Invalid value: must be a list")
    owners: dict[tuple[str, str], set[tuple[str, ...]]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("operation") not in ("Apply", "Update"):
            raise ApiError(
                422,
                "Invalid",
                "metadata.managedFields: Invalid value: every entry needs a manager and an "
                "operation of Apply or Update",
            )
        owner = (str(entry.get("manager") or ""), entry["operation"])
        owners.setdefault(owner, set()).update(_fields_paths(entry.get("fieldsV1") or {}))
    return owners


def _fields_paths(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Leaf paths of a FieldsV1 tree (``f:`` members and ``k:`` elements of associative
    lists; a ``v:``/``i:`` element ends at its list)."""
    members = {key: value for key, value in tree.items() if key != "."}
    if not members:
        return {prefix} if prefix else set()
    paths: set[tuple[str, ...]] = set()
    for key, value in members.items():
        if key.startswith("f:"):
            paths |= _fields_paths(value if isinstance(value, dict) else {}, (*prefix, key[2:]))
        elif key.startswith("k:") and prefix:
            paths |= _fields_paths(value if isinstance(value, dict) else {}, (*prefix, key))
        elif prefix:
            paths.add(prefix)
    return paths


def _apply_json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902 on object members (no array indices): ``add``, ``replace``, ``remove``,
    ``test``; a failed test or a missing member is a 422, like the real server."""
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value")
    doc = copy.deepcopy(target)
    for op in operations:
        keys = [
            part.replace("~1", "/").replace("~0", "~")
            for part in str(op.get("path", "")).split("/")[1:]
        ]
        parent = doc
        for key in keys[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict) or not keys:
            raise ApiError(422, "Invalid", f"doc is missing path: {op.get('path')}")
        last = keys[-1]
        if op.get("op") == "test":
            if parent.get(last) != op.get("value"):
                raise ApiError(
                    422, "Invalid", f"testing value {op.get('path')} failed: test failed"
                )
        elif op.get("op") in ("add", "replace"):
            if op["op"] == "replace" and last not in parent:
                raise ApiError(422, "Invalid", f"replace operation does not apply: {op['path']}")
            parent[last] = copy.deepcopy(op.get("value"))
        elif op.get("op") == "remove":
            if last not in parent:
                raise ApiError(422, "Invalid", f"remove operation does not apply: {op['path']}")
            del parent[last]
        else:
            raise ApiError(400, "BadRequest", f"unsupported JSON patch op {op.get('op')!r}")
    return doc


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _fields_v1(paths: set[tuple[str, ...]]) -> dict[str, Any]:
    """FieldsV1 of leaf paths; an associative list's element is ``k:{...}`` marked ``"."``."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            if key.startswith("k:"):
                node = node.setdefault(key, {".": {}})
            else:
                node = node.setdefault(f"f:{key}", {})
    return tree


def _selector(text: str | None) -> Callable[[Mapping[str, str]], bool]:
    """A labelSelector: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``,
    ``k notin (a,b)``."""
    tests: list[Callable[[Mapping[str, str]], bool]] = []
    for term in re.findall(r"[^,(]+(?:\([^)]*\))?", text or ""):
        term = term.strip()
        if not term:
            continue
        match = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term)
        if match:
            key, op = match.group(1), match.group(2)
            values = {value.strip() for value in match.group(3).split(",")}
            if op == "in":
                tests.append(lambda labels, k=key, v=values: labels.get(k) in v)
            else:
                tests.append(lambda labels, k=key, v=values: labels.get(k) not in v)
        elif "!=" in term:
            key, value = (part.strip() for part in term.split("!=", 1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = (part.strip() for part in re.split(r"==?", term, maxsplit=1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            absent = term[1:].strip()
            tests.append(lambda labels, k=absent: k not in labels)
        else:
            tests.append(lambda labels, k=term: k in labels)
    return lambda labels: all(test(labels) for test in tests)
