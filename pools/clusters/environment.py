"""The clusters the environment variables define, as rows (pure: no models, no Django).

``settings.SCHEDULERS`` (read from ``SLURM_REST_URL`` …, ``KUBERNETES_KUBECONFIG`` … in
``portal/settings/base.py``) holds at most one Slurm and one Kubernetes connection. Each becomes
a cluster named after the variables (slug ``env-slurm`` / ``env-kubernetes``) whose connection
stays the settings' (``credential_kind`` ``environment``); the fields here only describe it on
the cluster's page. Used by the migration that introduced clusters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ENVIRONMENT_SLUGS = {"slurm": "env-slurm", "kubernetes": "env-kubernetes"}
_NAMES = {
    "slurm": "Slurm (SLURM_REST_URL)",
    "kubernetes": "Kubernetes (KUBERNETES_* variables)",
}


def environment_clusters(schedulers: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``[{"slug", "name", "kind", "api_url", …}]`` for each real connection in
    ``schedulers`` (``settings.SCHEDULERS``); fakes (``BACKEND`` ``fake`` / ``kubernetes-fake``)
    and absent schedulers give none."""
    rows = []
    for kind, config in schedulers.items():
        if kind not in ENVIRONMENT_SLUGS or config.get("BACKEND") != kind:
            continue
        row: dict[str, Any] = {
            "slug": ENVIRONMENT_SLUGS[kind],
            "name": _NAMES[kind],
            "kind": kind,
            "credential_kind": "environment",
        }
        if kind == "slurm":
            row |= {
                "api_url": config.get("URL", ""),
                "slurm_cluster_name": config.get("CLUSTER", ""),
                "slurm_user": config.get("USER", ""),
                "time_zone": config.get("TIME_ZONE", "UTC"),
                "api_version": config.get("API_VERSION") or "",
            }
        else:
            row |= {"api_url": config.get("HOST", ""), "kueue": bool(config.get("KUEUE"))}
        rows.append(row)
    return rows
