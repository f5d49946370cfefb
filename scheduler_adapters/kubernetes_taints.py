"""Card classes in Kubernetes (issue #36): taints that keep work off the GPU nodes of a class it
may not use, and the tolerations that let permitted work back on. No I/O here but
:func:`ensure_card_class_taints`, which writes through the adapter.

Seed 004 §3.2: consumer cards (RTX 4090) and data-centre cards (L40S, A100, H800) share a pool
only when the scheduler keeps them apart. So every GPU node whose product the portal knows gets
the taint ``gpu-pool-portal/card-class=<consumer|datacentre>:NoSchedule`` (the kube-scheduler
places no pod there that does not tolerate it, https://kubernetes.io/docs/concepts/
scheduling-eviction/taint-and-toleration/), and permitted work gets the matching toleration:

- with Kueue, on each ResourceFlavor (``spec.tolerations``): Kueue adds a flavor's tolerations
  to the pods it admits on that flavor, and a team's ClusterQueue names only the flavors of its
  approved cards, so a team whose class may not use consumer cards never gets their toleration;
- without Kueue, on the team's namespace, through the PodTolerationRestriction admission plugin
  (``scheduler.alpha.kubernetes.io/defaultTolerations``: merged into every pod of the namespace;
  ``scheduler.alpha.kubernetes.io/tolerationsWhitelist``: a pod tolerating anything else is
  refused). Both are JSON arrays of tolerations. The plugin treats an empty whitelist as no
  whitelist, so a team allowed no card class gets neither annotation: its ResourceQuota of 0
  ``nvidia.com/gpu`` already refuses its GPU pods. The whitelist names only card-class
  tolerations: a pod that needs another one (a node's own ``NoSchedule`` taint) needs it
  listed by an operator in the plugin's cluster-wide whitelist, which the namespace's replaces.

The taint is applied with server-side apply as the portal's field manager. ``spec.taints`` is an
associative list keyed by (key, effect), owned per entry: the portal owns its one entry, the
kubelet's ``node.kubernetes.io/...`` and an operator's taints stay theirs and are never touched.
A taint removed by hand is drift: the next :func:`ensure_card_class_taints` applies it again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from scheduler_adapters.errors import NotFound

CARD_CLASS_TAINT_KEY = "gpu-pool-portal/card-class"
CARD_CLASS_TAINT_EFFECT = "NoSchedule"
ANNOTATION_DEFAULT_TOLERATIONS = "scheduler.alpha.kubernetes.io/defaultTolerations"
ANNOTATION_TOLERATIONS_WHITELIST = "scheduler.alpha.kubernetes.io/tolerationsWhitelist"

_LABEL_VALUE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def check_card_class(card_class: str) -> str:
    """``card_class`` when it can be a taint value (a label value: at most 63 characters of
    letters, digits, ``-``, ``_``, ``.``, alphanumeric at both ends); ``ValueError`` otherwise."""
    if not isinstance(card_class, str) or len(card_class) > 63:
        raise ValueError(f"card class {card_class!r} cannot be a taint value")
    if not _LABEL_VALUE.fullmatch(card_class):
        raise ValueError(f"card class {card_class!r} cannot be a taint value")
    return card_class


def card_class_taint(card_class: str) -> dict[str, str]:
    """The taint of a node of ``card_class`` cards."""
    return {
        "key": CARD_CLASS_TAINT_KEY,
        "value": check_card_class(card_class),
        "effect": CARD_CLASS_TAINT_EFFECT,
    }


def card_class_toleration(card_class: str) -> dict[str, str]:
    """The toleration of :func:`card_class_taint` (``operator: Equal``, so it tolerates only
    that class's taint)."""
    return {
        "key": CARD_CLASS_TAINT_KEY,
        "operator": "Equal",
        "value": check_card_class(card_class),
        "effect": CARD_CLASS_TAINT_EFFECT,
    }


def node_taint_manifest(node: str, card_class: str) -> dict[str, Any]:
    """What the portal applies to a Node: its name and its one taint (no label: the Node is
    the kubelet's; the portal owns only its taint entry)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node},
        "spec": {"taints": [card_class_taint(card_class)]},
    }


def toleration_annotations(card_classes: Iterable[str]) -> dict[str, str]:
    """The PodTolerationRestriction annotations of a namespace whose work may use
    ``card_classes`` (sorted, each once); ``{}`` for none (see the module docstring)."""
    tolerations = [card_class_toleration(c) for c in sorted(set(card_classes))]
    if not tolerations:
        return {}
    text = json.dumps(tolerations, sort_keys=True)
    return {ANNOTATION_DEFAULT_TOLERATIONS: text, ANNOTATION_TOLERATIONS_WHITELIST: text}


def node_card_classes(
    nodes: Iterable[Mapping[str, Any]], product_classes: Mapping[str, str], *, gpu_label: str
) -> dict[str, str]:
    """Node name -> card class, for the nodes whose ``gpu_label`` names a product of
    ``product_classes`` (others are left alone: the portal does not know their cards)."""
    found: dict[str, str] = {}
    for node in nodes:
        metadata = node.get("metadata") or {}
        product = (metadata.get("labels") or {}).get(gpu_label)
        if product in product_classes and metadata.get("name"):
            found[metadata["name"]] = check_card_class(product_classes[product])
    return dict(sorted(found.items()))


class TaintWriter(Protocol):
    """What :func:`ensure_card_class_taints` needs of a
    :class:`~scheduler_adapters.kubernetes.KubernetesAdapter` (which imports this module)."""

    gpu_label: str

    @property
    def product_card_classes(self) -> dict[str, str]: ...

    def list_node_objects(self) -> list[dict[str, Any]]: ...

    def read_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None: ...

    def ensure_objects(
        self, team: str | None, objects: list[dict[str, Any]], *, operation: str
    ) -> bool: ...


class CardClassTaints(NamedTuple):
    """What :func:`ensure_card_class_taints` did: ``nodes`` every node -> its card class;
    ``repaired`` node -> what its card-class taint was before the portal wrote it
    (``"none"``, or ``<value>:<effect>`` of each entry under the portal's key)."""

    nodes: dict[str, str]
    repaired: dict[str, str]


def ensure_card_class_taints(
    adapter: TaintWriter, *, nodes: Mapping[str, str] | None = None
) -> CardClassTaints:
    """Taint every GPU node of a known product with its card class: read each node, compare,
    apply only where its taint differs (a taint removed or changed by hand is drift, applied
    again). ``nodes`` (name -> class) overrides what the node labels and the adapter's
    ``product_card_classes`` say. A named node that does not exist raises
    :class:`~scheduler_adapters.errors.NotFound` before anything is written (an apply would
    create it); an API refusal raises the adapter's errors (the nodes before it are written,
    each node's apply is whole)."""
    operation = "ensure_card_class_taints"
    if nodes is None:
        listed = adapter.list_node_objects()
        nodes = node_card_classes(listed, adapter.product_card_classes, gpu_label=adapter.gpu_label)
    current: dict[str, dict[str, Any]] = {}
    for name in nodes:
        found = adapter.read_object("v1", "Node", name)
        if found is None:
            raise NotFound("node", name, operation=operation)
        current[name] = found
    repaired: dict[str, str] = {}
    for name, card_class in nodes.items():
        if adapter.ensure_objects(
            None, [node_taint_manifest(name, card_class)], operation=operation
        ):
            repaired[name] = _held(current[name])
    return CardClassTaints(dict(nodes), repaired)


def _held(node: Mapping[str, Any]) -> str:
    taints = (node.get("spec") or {}).get("taints") or []
    held = [
        f"{taint.get('value', '')}:{taint.get('effect')}"
        for taint in taints
        if isinstance(taint, Mapping) and taint.get("key") == CARD_CLASS_TAINT_KEY
    ]
    return ", ".join(held) or "none"
