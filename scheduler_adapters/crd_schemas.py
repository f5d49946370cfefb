"""JSON schemas of the scheduler CRDs the elastic quota backends write, for ``jsonschema``.

kubernetes-validate ships only built-in kinds, so the fields the portal sets are transcribed by
hand from each project's published CRD (``openAPIV3Schema``), with ``additionalProperties:
false`` where the portal writes (the API server rejects unknown fields under
``fieldValidation=Strict``, which the adapter sends). Only those fields are transcribed; a
sub-object the portal never writes is typed as an object.

- Volcano ``Queue`` (``scheduling.volcano.sh/v1beta1``, cluster-scoped): volcano-sh/volcano
  ``config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml`` at commit ed72c7c8 (2026-08-20,
  after v1.15.1): ``spec.capability``, ``spec.deserved`` (ResourceList), ``spec.guarantee.
  resource`` (ResourceList), ``spec.reclaimable`` (bool), ``spec.weight`` (int32, 1-65535),
  ``spec.parent`` (DNS-1123 subdomain, at most 253).
- Koordinator / scheduler-plugins ``ElasticQuota`` (``scheduling.sigs.k8s.io/v1alpha1``,
  namespaced): koordinator-sh/koordinator ``config/crd/bases/scheduling.sigs.k8s.io_
  elasticquotas.yaml`` at commit a7a1b76b (2026-07-24, after v1.8.0): ``spec.min``, ``spec.max``
  (ResourceList).

The quantity pattern is ``k8s.io/apimachinery`` ``resource.Quantity``'s, as both CRDs spell it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

VOLCANO_QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
ELASTIC_QUOTA_API_VERSION = "scheduling.sigs.k8s.io/v1alpha1"

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_RESOURCE_LIST = {
    "type": "object",
    "additionalProperties": {
        "anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}]
    },
}


def _root(api_version: str, kind: str, spec_properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata"],
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "properties": spec_properties,
            },
            "status": {"type": "object"},
        },
    }


CRD_SCHEMAS: Mapping[tuple[str, str], dict[str, Any]] = {
    (VOLCANO_QUEUE_API_VERSION, "Queue"): _root(
        VOLCANO_QUEUE_API_VERSION,
        "Queue",
        {
            "capability": _RESOURCE_LIST,
            "deserved": _RESOURCE_LIST,
            "guarantee": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"resource": _RESOURCE_LIST},
            },
            "reclaimable": {"type": "boolean"},
            "weight": {"type": "integer", "minimum": 1, "maximum": 65535},
            "parent": {"type": "string", "maxLength": 253, "pattern": _DNS1123_SUBDOMAIN},
            "affinity": {"type": "object"},
            "dequeueStrategy": {"type": "string", "enum": ["fifo", "traverse"]},
            "extendClusters": {"type": "array"},
            "priority": {"type": "integer", "minimum": 0},
            "type": {"type": "string", "maxLength": 253},
        },
    ),
    (ELASTIC_QUOTA_API_VERSION, "ElasticQuota"): _root(
        ELASTIC_QUOTA_API_VERSION,
        "ElasticQuota",
        {"min": _RESOURCE_LIST, "max": _RESOURCE_LIST},
    ),
}


def validate_crd_object(obj: Mapping[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``obj`` fits its transcribed schema;
    ``KeyError`` when no schema is transcribed for its ``(apiVersion, kind)``."""
    schema = CRD_SCHEMAS[(obj.get("apiVersion"), obj.get("kind"))]
    body = {key: value for key, value in obj.items() if key != "status"}
    jsonschema.validate(body, schema)
