"""Build a :class:`~scheduler_adapters.base.SchedulerAdapter` (or, for Kubernetes, a
:class:`~scheduler_adapters.base.NamespaceQuotaAdapter`) from a plain settings dict.

No Django here: the portal passes ``settings.SCHEDULERS["slurm"]`` (or any mapping). Keys,
upper case like Django's ``DATABASES``:

- ``BACKEND``: ``"slurm"`` (slurmrestd) or ``"fake"`` (in memory); required.
- ``URL``, ``USER``, ``CLUSTER``: slurmrestd's base URL (``http://127.0.0.1:6820``), the admin
  identity (AdminLevel=Administrator in slurmdbd) and the ClusterName; required*.
- ``JWT_KEY_PATH`` (the HS256 key file; tokens are minted here) or ``TOKEN`` (one fixed token
  for every user, e.g. a SlurmUser token); exactly one*.
- ``TOKEN_LIFESPAN_S``: lifespan of minted tokens, default 900.
- ``API_VERSION``: ``"v0.0.38"``, ``"v0.0.40"``, ``"v0.0.41"`` or ``"v0.0.42"``; discovered
  from the server (the newest both know) when absent or empty.
- ``TIMEOUT_S`` (default 30; keep it above slurmrestd's own ~9 s wait for a controller that
  is down) and ``CONNECT_TIMEOUT_S`` (default 5).
- ``PARENT_ACCOUNT`` (default ``root``) and ``SENTINEL_ACCOUNT`` (default
  ``zz-portal-sentinel``, an empty sibling used to work around a 22.05 slurmdbd bug).
- ``TIME_ZONE``: the slurmdbd host's zone, in which accounting query times are read; ``UTC``.
- ``SACCTMGR``: ``{"ENABLED": bool, "PATH": str, "PREFIX": str, "TIMEOUT_S": float}``;
  disabled by default. ``PREFIX`` (shell words) is put before the command to reach the
  cluster's client: ``"chroot /opt/portal-slurm-modern"``, ``"ssh slurm-head"``.
- ``SCONTROL``: ``{"ENABLED": bool, "PATH": str, "PREFIX": str, "TIMEOUT_S": float}``, the
  same shape: ``scontrol`` next to the cluster for advance reservations (placement shapes);
  disabled by default, when the adapter refuses reservation calls with the reason.
- ``PARTITIONS``: fake only, ``{partition: {gres_type: cards}}``; default the test cluster.

(* slurm backend only.) :func:`slurm_settings_from_env` reads the same names the test
cluster's env file (``scripts/services/slurm.sh``) writes.

Kubernetes (``BACKEND`` ``"kubernetes"``, or ``"kubernetes-fake"`` in memory):

- ``KUBECONFIG`` (a kubeconfig path, with optional ``CONTEXT``), or ``HOST`` and ``TOKEN``
  (a bearer token) with optional ``CA`` (CA bundle path); with neither, the portal must run
  in the cluster it manages (its pod's service-account token is used), unless ``DRY_RUN``.
- ``KUEUE``: per-GPU-model quotas through Kueue (bool, default ``False``).
- ``DRY_RUN``: write nothing to the cluster, render YAML instead (bool, default ``False``);
  ``DRY_RUN_DIR``: where each team's YAML is kept.
- ``NAMESPACE_PREFIX``: default ``"team-"``.
- ``GPU_LABEL``: the node label telling GPU models apart, ``"nvidia.com/gpu.product"`` (GPU
  Feature Discovery, default) or ``"gpu-type"``; ``NAMESPACE_NODE_SELECTOR`` (bool, default
  ``False``): put the PodNodeSelector annotation on a one-product team's namespace.
- ``DRA_DEVICE_CLASS``: with DRA, the DeviceClass whose devices a team's ResourceQuota caps too
  (``gpu.nvidia.com`` for NVIDIA's DRA driver), and with Kueue its ClusterQueue (through the
  Kueue Configuration's ``deviceClassMappings`` the dry-run shows); default none.
- ``TIMEOUT_S`` (default 30) and ``CONNECT_TIMEOUT_S`` (default 5).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler_adapters.base import NamespaceQuotaAdapter, SchedulerAdapter
from scheduler_adapters.fake import DEFAULT_PARTITIONS, FakeScheduler

if TYPE_CHECKING:
    from scheduler_adapters.slurm.reservations import ScontrolReservations
    from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback

# The Slurm and Kubernetes adapters are imported when one is built, not with this module:
# every portal process imports the registry (through the Celery task registry), and the
# official Kubernetes client alone costs about 0.4 s of start-up that a management command
# such as ``estimate`` never uses (issue 34, "Speed"; measured with ``python -X importtime``).

_SLURM_KEYS = {
    "BACKEND",
    "URL",
    "USER",
    "CLUSTER",
    "JWT_KEY_PATH",
    "TOKEN",
    "TOKEN_LIFESPAN_S",
    "API_VERSION",
    "TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "PARENT_ACCOUNT",
    "SENTINEL_ACCOUNT",
    "TIME_ZONE",
    "SACCTMGR",
    "SCONTROL",
}
_FAKE_KEYS = {"BACKEND", "PARTITIONS"}
_KUBERNETES_KEYS = {
    "BACKEND",
    "KUBECONFIG",
    "CONTEXT",
    "HOST",
    "TOKEN",
    "CA",
    "KUEUE",
    "DRY_RUN",
    "DRY_RUN_DIR",
    "NAMESPACE_PREFIX",
    "GPU_LABEL",
    "NAMESPACE_NODE_SELECTOR",
    "DRA_DEVICE_CLASS",
    "TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
}
_KUBERNETES_FAKE_KEYS = {"BACKEND", "KUEUE", "NAMESPACE_PREFIX"}
_SACCTMGR_KEYS = {"ENABLED", "PATH", "PREFIX", "TIMEOUT_S"}


def build_scheduler_adapter(
    settings: Mapping[str, Any],
) -> SchedulerAdapter | NamespaceQuotaAdapter:
    """Return the adapter ``settings`` describe; ``ValueError`` names a missing or unknown key
    (a typo must not silently fall back to a default)."""
    backend = settings.get("BACKEND")
    if backend == "fake":
        _check_keys(settings, _FAKE_KEYS)
        return FakeScheduler(settings.get("PARTITIONS") or DEFAULT_PARTITIONS)
    if backend in ("kubernetes", "kubernetes-fake"):
        return _kubernetes(settings)
    if backend != "slurm":
        raise ValueError(
            f"BACKEND must be 'slurm', 'fake', 'kubernetes' or 'kubernetes-fake', got {backend!r}"
        )
    _check_keys(settings, _SLURM_KEYS)
    for key in ("URL", "USER", "CLUSTER"):
        if not settings.get(key):
            raise ValueError(f"Slurm adapter settings need {key}")
    key_path, token = settings.get("JWT_KEY_PATH"), settings.get("TOKEN")
    if bool(key_path) == bool(token):
        raise ValueError("Slurm adapter settings need exactly one of JWT_KEY_PATH and TOKEN")
    credentials: dict[str, Any]
    if key_path:
        credentials = {"jwt_key": Path(key_path).read_bytes()}
    else:
        fixed = str(token)
        credentials = {"token_provider": lambda _user: fixed}
    from scheduler_adapters.slurm.client import SlurmRestAdapter

    return SlurmRestAdapter(
        url=settings["URL"],
        user=settings["USER"],
        cluster=settings["CLUSTER"],
        token_lifespan_s=int(settings.get("TOKEN_LIFESPAN_S", 900)),
        api_version=settings.get("API_VERSION") or None,
        timeout_s=float(settings.get("TIMEOUT_S", 30)),
        connect_timeout_s=float(settings.get("CONNECT_TIMEOUT_S", 5)),
        parent_account=settings.get("PARENT_ACCOUNT", "root"),
        sentinel_account=settings.get("SENTINEL_ACCOUNT", "zz-portal-sentinel"),
        time_zone=settings.get("TIME_ZONE", "UTC"),
        sacctmgr=_sacctmgr(settings.get("SACCTMGR"), settings["CLUSTER"]),
        reservations=_scontrol(settings.get("SCONTROL"), settings.get("TIME_ZONE", "UTC")),
        **credentials,
    )


def _kubernetes(settings: Mapping[str, Any]) -> NamespaceQuotaAdapter:
    prefix = settings.get("NAMESPACE_PREFIX", "team-")
    if settings["BACKEND"] == "kubernetes-fake":
        from scheduler_adapters.kubernetes_fake import FakeKubernetes

        _check_keys(settings, _KUBERNETES_FAKE_KEYS)
        return FakeKubernetes(kueue=_flag(settings, "KUEUE"), namespace_prefix=prefix)
    from scheduler_adapters.kubernetes import KubernetesAdapter
    from scheduler_adapters.kubernetes_nodes import LABEL_PRODUCT
    from scheduler_adapters.kubernetes_transport import api_client_from_settings

    _check_keys(settings, _KUBERNETES_KEYS)
    dry_run = _flag(settings, "DRY_RUN")
    connected = bool(settings.get("KUBECONFIG") or settings.get("HOST") or settings.get("TOKEN"))
    api_client = None
    if connected or not dry_run:
        if settings.get("KUBECONFIG") and (settings.get("HOST") or settings.get("TOKEN")):
            raise ValueError("Kubernetes settings take KUBECONFIG or HOST and TOKEN, not both")
        api_client = api_client_from_settings(
            kubeconfig=settings.get("KUBECONFIG") or None,
            context=settings.get("CONTEXT") or None,
            host=settings.get("HOST") or None,
            token=settings.get("TOKEN") or None,
            ca_cert=settings.get("CA") or None,
        )
    return KubernetesAdapter(
        api_client=api_client,
        kueue=_flag(settings, "KUEUE"),
        dry_run=dry_run,
        dry_run_dir=settings.get("DRY_RUN_DIR") or None,
        namespace_prefix=prefix,
        timeout_s=float(settings.get("TIMEOUT_S", 30)),
        connect_timeout_s=float(settings.get("CONNECT_TIMEOUT_S", 5)),
        gpu_label=settings.get("GPU_LABEL") or LABEL_PRODUCT,
        namespace_node_selector=_flag(settings, "NAMESPACE_NODE_SELECTOR"),
        dra_device_class=settings.get("DRA_DEVICE_CLASS") or None,
    )


def _flag(settings: Mapping[str, Any], key: str) -> bool:
    value = settings.get(key, False)
    if not isinstance(value, bool):  # "false" from an env file must not read as True
        raise ValueError(f"Kubernetes setting {key} must be True or False, got {value!r}")
    return value


def slurm_settings_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Settings for the slurm backend from environment-style names: ``SLURMRESTD_URL``,
    ``SLURM_ADMIN_USER``, ``SLURM_CLUSTER``, ``SLURM_JWT_KEY`` (key path) or
    ``SLURM_JWT`` (token), ``SLURM_API_VERSION`` (empty: discover), ``SLURM_TIME_ZONE``,
    ``SLURM_SACCTMGR`` (``1`` enables the fallback), ``SLURM_SCONTROL`` (``1`` enables
    reservations; also on when a command prefix is set, since ``scontrol`` is then there), and
    how to run the cluster's own commands: ``SLURM_COMMAND_PREFIX`` (shell words) or
    ``SLURM_MODERN_ROOT`` (a chroot, as ``scripts/services/slurm-modern.sh`` writes), see
    :func:`slurm_command_prefix`."""
    settings: dict[str, Any] = {
        "BACKEND": "slurm",
        "URL": env.get("SLURMRESTD_URL", ""),
        "USER": env.get("SLURM_ADMIN_USER", ""),
        "CLUSTER": env.get("SLURM_CLUSTER", ""),
        "API_VERSION": env.get("SLURM_API_VERSION") or None,
        "TIME_ZONE": env.get("SLURM_TIME_ZONE", "UTC"),
        "SACCTMGR": {
            "ENABLED": env.get("SLURM_SACCTMGR", "") in ("1", "true", "yes"),
            "PREFIX": shlex.join(slurm_command_prefix(env)),
        },
        "SCONTROL": {
            "ENABLED": env.get("SLURM_SCONTROL", "") in ("1", "true", "yes")
            or bool(slurm_command_prefix(env)),
            "PREFIX": shlex.join(slurm_command_prefix(env)),
        },
    }
    if env.get("SLURM_JWT_KEY"):
        settings["JWT_KEY_PATH"] = env["SLURM_JWT_KEY"]
    elif env.get("SLURM_JWT"):
        settings["TOKEN"] = env["SLURM_JWT"]
    return settings


def slurm_command_prefix(env: Mapping[str, str]) -> list[str]:
    """What to put before ``sacctmgr``/``scontrol``/``sbatch`` to run them on the cluster an
    env file describes: ``SLURM_COMMAND_PREFIX`` (shell words, e.g. ``ssh slurm-head``) wins;
    else ``SLURM_MODERN_ROOT`` means ``chroot <root>``; else nothing (the local client)."""
    if env.get("SLURM_COMMAND_PREFIX"):
        return shlex.split(env["SLURM_COMMAND_PREFIX"])
    if env.get("SLURM_MODERN_ROOT"):
        return ["chroot", env["SLURM_MODERN_ROOT"]]
    return []


def read_env_file(path: str | Path) -> dict[str, str]:
    """``KEY=value`` lines (``#`` comments, optional double quotes), as written by
    ``scripts/services/slurm.sh``."""
    values: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        values[key.strip()] = value.strip().strip('"')
    return values


def _sacctmgr(config: Mapping[str, Any] | None, cluster: str) -> SacctmgrFallback | None:
    if not config:
        return None
    _check_keys(config, _SACCTMGR_KEYS, where="SACCTMGR")
    if not config.get("ENABLED"):
        return None
    from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback

    return SacctmgrFallback(
        cluster=cluster,
        executable=config.get("PATH", "sacctmgr"),
        prefix=shlex.split(config.get("PREFIX", "")),
        timeout_s=float(config.get("TIMEOUT_S", 30)),
    )


def _scontrol(config: Mapping[str, Any] | None, time_zone: str) -> ScontrolReservations | None:
    if not config:
        return None
    _check_keys(config, _SACCTMGR_KEYS, where="SCONTROL")
    if not config.get("ENABLED"):
        return None
    from scheduler_adapters.slurm.reservations import ScontrolReservations

    return ScontrolReservations(
        executable=config.get("PATH", "scontrol"),
        prefix=shlex.split(config.get("PREFIX", "")),
        time_zone=time_zone,
        timeout_s=float(config.get("TIMEOUT_S", 30)),
    )


def _check_keys(settings: Mapping[str, Any], allowed: set[str], where: str = "settings") -> None:
    unknown = set(settings) - allowed
    if unknown:
        raise ValueError(f"unknown scheduler {where} keys: {', '.join(sorted(unknown))}")
