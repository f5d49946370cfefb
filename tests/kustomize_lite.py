"""Render the Kustomize overlays in ``deploy/kubernetes/`` without kustomize, for CI machines
that have no ``kubectl`` (neither helm nor kustomize installs from PyPI, Debian or npm).

Only what those overlays use: ``resources`` (files and directories), ``namespace`` (not on
cluster-scoped kinds; a binding's subjects keep theirs, as Kustomize's ``defaultOnly`` rule
does for a ServiceAccount not named ``default``), ``images``
(``newName``/``newTag``), ``replicas`` and ``patches`` given by ``path`` (strategic-merge
patches aimed by kind and name). Strategic merge here: mappings merge key by key, lists of
mappings that all have a ``name`` merge by name (containers, env, volumes), other lists are
replaced, as Kubernetes' merge keys do for the fields patched. Where ``kubectl`` exists,
``tests/deploy/test_kubernetes_manifests.py`` checks this renders exactly what
``kubectl kustomize`` does.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml


def _load_documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            merged[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(i, dict) and "name" in i for i in base + patch)
    ):
        merged = [copy.deepcopy(i) for i in base]
        index = {item["name"]: n for n, item in enumerate(merged)}
        for item in patch:
            if item["name"] in index:
                merged[index[item["name"]]] = _merge(merged[index[item["name"]]], item)
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def _containers(obj: dict) -> list[dict]:
    spec = obj.get("spec", {})
    pod = spec.get("template", {}).get("spec", {}) if "template" in spec else {}
    return pod.get("initContainers", []) + pod.get("containers", [])


def render(directory: Path) -> list[dict]:
    """The objects ``kubectl kustomize directory`` would print, in file order."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    objects: list[dict] = []
    for resource in kustomization.get("resources", []):
        path = (directory / resource).resolve()
        objects.extend(render(path) if path.is_dir() else _load_documents(path))
    for entry in kustomization.get("patches", []):
        for patch in _load_documents(directory / entry["path"]):
            key = (patch["kind"], patch["metadata"]["name"])
            matches = [
                n for n, o in enumerate(objects) if (o["kind"], o["metadata"]["name"]) == key
            ]
            if len(matches) != 1:
                raise ValueError(f"patch {entry['path']} matches {len(matches)} objects: {key}")
            objects[matches[0]] = _merge(objects[matches[0]], patch)
    for entry in kustomization.get("replicas", []):
        for obj in objects:
            if obj["metadata"]["name"] == entry["name"] and "replicas" in obj.get("spec", {}):
                obj["spec"]["replicas"] = entry["count"]
    for image in kustomization.get("images", []):
        for obj in objects:
            for container in _containers(obj):
                name = container["image"].split(":")[0]
                if name == image["name"]:
                    container["image"] = f"{image.get('newName', name)}:{image['newTag']}"
    if "namespace" in kustomization:
        for obj in objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = kustomization["namespace"]
    return objects


# Kinds Kustomize's namespace transformer leaves without a namespace (cluster-scoped).
CLUSTER_SCOPED = frozenset({"ClusterRole", "ClusterRoleBinding", "Namespace"})
