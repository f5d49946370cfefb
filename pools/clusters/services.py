"""Clusters: create, edit, delete (each in one transaction with its audit event), the
connection check, and the clusters the environment variables define.

A cluster is saved whatever its connection does: one whose credentials cannot be read, whose URL
answers something that is not the expected API, or whose API versions are all unsupported is
kept as *unreachable* with that reason (:func:`cluster_check`), and its pools are not touched.
No request calls the scheduler: a save that needs a check, and *check now*, queue one
(:data:`pools.jobs.CLUSTER_CHECK`, once the change commits) and mark the cluster
``check_requested_at`` until it answers; where there is no broker the task runs at commit, in
the request, as every queued task does there.
Refused outright (nothing written): a second Slurm cluster with the same ClusterName or a second
Kubernetes cluster with the same API URL (:class:`ClusterTaken`, 409), a cluster that holds pools
being deleted or changing kind (:class:`ClusterInUse`, 409), and inconsistent fields
(:class:`InvalidInput`, 400).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Case, F, When
from django.utils import timezone

from pools.audit.services import audit_event_record
from pools.clusters.adapters import cluster_adapter_unshared, cluster_settings, scheduler_config
from pools.clusters.credentials import credential_expiry
from pools.clusters.models import PROMETHEUS_SCHEMES, Cluster, ClusterError
from pools.common.choices import ClusterOperation, ClusterStatus, CredentialKind, Scheduler
from pools.common.errors import (
    ClusterInUse,
    ClusterNameTaken,
    ClusterTaken,
    ClusterUnreachable,
    InvalidInput,
)
from pools.common.validators import single_line_text_validator
from pools.jobs import CLUSTER_CHECK, enqueue_on_commit
from pools.tenancy.permissions import may_see_cluster_details
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.slurm.dialects import DIALECTS, known_versions

# The fields a connection is made of: the environment's clusters take them from the settings.
CONNECTION_FIELDS = (
    "kind",
    "api_url",
    "slurm_cluster_name",
    "slurm_user",
    "credential_kind",
    "credential_path",
    "ca_path",
    "kube_context",
    "time_zone",
    "api_version",
    "kueue",
)
# What a pool admin may set on a cluster, in the order the page and the API show them.
# ``prometheus_url`` is not a connection field: the environment's clusters may set it too, and
# changing it needs no connection check (the next idle scan reads it).
EDITABLE_FIELDS = (
    "slug", "name", *CONNECTION_FIELDS, "prometheus_url", "site", "provider", "retiring",
)  # fmt: skip
_CREDENTIALS = {
    Scheduler.SLURM: (CredentialKind.JWT_KEY, CredentialKind.TOKEN_FILE),
    Scheduler.KUBERNETES: (CredentialKind.KUBECONFIG, CredentialKind.TOKEN_FILE),
}
_API_VERSION = re.compile(r"v\d+\.\d+\.\d+")
# Where a per-cluster job's last success is kept (the check keeps ``reachable_at``).
_SUCCESS_FIELD = {
    ClusterOperation.RECONCILE: "reconciled_at",
    ClusterOperation.INVENTORY: "inventory_imported_at",
    ClusterOperation.USAGE: "usage_imported_at",
}
ERRORS_KEPT = timedelta(days=7)


def cluster_create(*, fields: dict[str, Any], actor: Any, render: Any) -> Cluster:
    """Create a cluster from ``fields`` and audit it, and queue its connection check
    (:func:`cluster_check_request`'s way). Returns the row as it stands after the commit:
    pending (``check_requested_at`` set), or already checked where tasks run in-process.

    ``render(cluster)`` is the caller's representation (the audit event's ``after``). Raises
    :class:`InvalidInput` for inconsistent fields and :class:`ClusterTaken` for a ClusterName or
    API URL another cluster has; nothing is written or queued then.
    """
    cluster = Cluster(**_one_spelling(fields))
    _validate(cluster)
    try:
        with transaction.atomic():
            _refuse_taken(cluster)
            cluster.check_requested_at, cluster.check_started_at = timezone.now(), None
            cluster.save()
            audit_event_record(
                actor=actor, action="cluster.created", obj=cluster, after=render(cluster)
            )
            enqueue_on_commit(CLUSTER_CHECK, cluster.pk)
    except IntegrityError:  # a concurrent create took the name or URL between check and insert
        _refuse_taken(cluster)
        raise
    return Cluster.objects.get(pk=cluster.pk)


def cluster_update(
    *, cluster: Cluster, changes: dict[str, Any], actor: Any, before: dict, render: Any
) -> Cluster:
    """Apply ``changes`` and audit them; when the connection changed, a check is queued as
    :func:`cluster_create` queues it. Returns the row as it stands after the commit.

    Raises :class:`InvalidInput` for a connection field of an environment cluster (the
    variables define it) or inconsistent fields, :class:`ClusterInUse` for a kind change while
    pools are in the cluster, :class:`ClusterTaken` as :func:`cluster_create`.
    """
    changes = _one_spelling(changes)
    moved = [f for f in CONNECTION_FIELDS if f in changes and changes[f] != getattr(cluster, f)]
    if moved and cluster.from_environment:
        raise InvalidInput(
            f"{', '.join(moved)} of {cluster.slug} come from the environment variables.",
            field=moved[0],
        )
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        if "kind" in moved and locked.pools.exists():
            raise ClusterInUse(
                f"Cluster {locked.slug} holds pools; its kind cannot change.",
                pools=_pool_slugs(locked),
            )
        for field, value in changes.items():
            setattr(locked, field, value)
        _validate(locked)
        _refuse_taken(locked)
        if moved:
            locked.check_requested_at, locked.check_started_at = timezone.now(), None
        locked.save()
        audit_event_record(
            actor=actor, action="cluster.updated", obj=locked, before=before, after=render(locked)
        )
        if moved:
            enqueue_on_commit(CLUSTER_CHECK, locked.pk)
    return Cluster.objects.get(pk=locked.pk) if moved else locked


def cluster_delete(*, cluster: Cluster, actor: Any, before: dict) -> None:
    """Delete a cluster that holds no pools and no nodes and audit it; :class:`ClusterInUse`
    (409) listing the pools' slugs otherwise, or saying how many nodes its imports left outside
    any pool (a node is its cluster's: names are unique per cluster only)."""
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        pools = _pool_slugs(locked)
        if pools:
            raise ClusterInUse(
                f"Cluster {locked.slug} holds {len(pools)} pool(s): {', '.join(pools)}; move "
                "or delete them first.",
                pools=pools,
            )
        nodes = locked.nodes.count()
        if nodes:
            raise ClusterInUse(
                f"Cluster {locked.slug} still has {nodes} node(s) its imports found outside "
                "any pool; delete them first.",
                pools=[],
                nodes=nodes,
            )
        audit_event_record(actor=actor, action="cluster.deleted", obj=locked, before=before)
        locked.delete()


def cluster_check_request(*, cluster: Cluster) -> Cluster:
    """Ask for a connection check of ``cluster`` without making it here: mark it
    ``check_requested_at`` (now) and queue :data:`~pools.jobs.CLUSTER_CHECK` once that commits.
    Returns the row as it stands after the commit: pending, or already checked where tasks run
    in-process (no broker: the demo). A second request before the first is answered queues a
    second check; both only record what they find."""
    with transaction.atomic():
        Cluster.objects.filter(pk=cluster.pk).update(
            check_requested_at=timezone.now(), check_started_at=None
        )
        enqueue_on_commit(CLUSTER_CHECK, cluster.pk)
    return Cluster.objects.get(pk=cluster.pk)


def cluster_check(*, cluster: Cluster) -> Cluster:
    """Connect to ``cluster`` (list its nodes) and record what happened: ``reachable`` with the
    API version in use (Slurm), or ``unreachable`` with the reason — credentials that cannot be
    read (``OSError``), settings the registry refuses (``ValueError``), or any
    :class:`~scheduler_adapters.errors.SchedulerError` (down, refused, not the expected API, no
    supported version). Only the status fields are written; the cluster's pools are untouched.
    The call is made with no lock or transaction held: by :data:`~pools.jobs.CLUSTER_CHECK`'s
    task, never in a request.

    The request it answers is marked begun (``check_started_at``, so a page stops saying that
    no worker has picked it up) and, once the result is in, cleared (``check_requested_at`` and
    ``check_started_at`` back to ``None``), both only if it is still the one ``cluster`` was
    read with: a request made while the scheduler was being asked stays pending, not begun, for
    the check it queued."""
    now = timezone.now()
    if cluster.check_requested_at is not None:
        Cluster.objects.filter(pk=cluster.pk, check_requested_at=cluster.check_requested_at).update(
            check_started_at=now
        )
    if cluster.from_environment and scheduler_config(cluster.kind) is None:
        return _not_configured(cluster, now)
    try:
        version = _probe(cluster)
    except (OSError, ValueError, SchedulerError) as error:
        updates = {
            "status": ClusterStatus.UNREACHABLE,
            "status_reason": _reason(error)[:500],
            "checked_at": now,
        }
    else:
        updates = {
            "status": ClusterStatus.REACHABLE,
            "status_reason": "",
            "api_version_served": version,
            "checked_at": now,
            "reachable_at": now,
        }
    updates["credential_expires_at"] = _credential_expiry(cluster)
    _check_record(cluster, updates)
    if updates["status"] == ClusterStatus.UNREACHABLE:
        cluster_operation_record(
            cluster=cluster, operation=ClusterOperation.CHECK, errors=[updates["status_reason"]]
        )
    return cluster


def cluster_require_reachable(*, cluster_id: int | None, actor: Any) -> None:
    """Refuse a write into a pool of ``cluster_id`` when the cluster was unreachable at its
    last check: :class:`ClusterUnreachable` (409). A pool without a cluster (the environment's)
    and a cluster never checked pass: only a known outage makes pools read-only.

    What the refusal says depends on ``actor``
    (:func:`pools.tenancy.permissions.may_see_cluster_details`): a pool admin gets the
    cluster's slug, the check's reason and when it was checked (data ``cluster``, ``reason``,
    ``checked_at``); anyone else -- a member, a system rule (``None``) -- the slug and when,
    never the reason, which names the hosts, URLs and files the check could not reach
    (``"scheduler_unavailable: connection refused (slurm.example.internal:6820)"``)."""
    if cluster_id is None:
        return
    cluster = Cluster.objects.only("slug", "status", "status_reason", "checked_at").get(
        pk=cluster_id
    )
    if not cluster.is_down:
        return
    checked_at = cluster.checked_at.isoformat() if cluster.checked_at else None
    read_only = "its pools are read-only until it answers again."
    if may_see_cluster_details(actor):
        raise ClusterUnreachable(
            f"Cluster {cluster.slug} is unreachable ({cluster.status_reason}); {read_only}",
            cluster=cluster.slug,
            reason=cluster.status_reason,
            checked_at=checked_at,
        )
    raise ClusterUnreachable(
        f"Cluster {cluster.slug} is unreachable; {read_only}",
        cluster=cluster.slug,
        checked_at=checked_at,
    )


def cluster_operation_record(
    *,
    cluster: Cluster | None,
    operation: str,
    errors: Sequence[str],
    at: datetime | None = None,
) -> None:
    """Record how one per-cluster job (:class:`~pools.common.choices.ClusterOperation`) ended in
    ``cluster``'s health: with no ``errors``, its last success (``reconciled_at``,
    ``inventory_imported_at``, ``usage_imported_at``) becomes ``at`` (default now); else one
    :class:`ClusterError` per error, and errors older than :data:`ERRORS_KEPT` (7 days) go.
    ``None`` (no cluster row, e.g. a scheduler configured but its row not made yet) records
    nothing."""
    if cluster is None:
        return
    at = at or timezone.now()
    if errors:
        ClusterError.objects.bulk_create(
            ClusterError(cluster=cluster, operation=operation, message=str(m)[:500], at=at)
            for m in errors
        )
        ClusterError.objects.filter(cluster=cluster, at__lt=at - ERRORS_KEPT).delete()
        return
    field = _SUCCESS_FIELD.get(ClusterOperation(operation))
    if field is not None:
        Cluster.objects.filter(pk=cluster.pk).update(**{field: at})


def cluster_of(*, kind: str, cluster: Cluster | None) -> Cluster | None:
    """The cluster a job ran in: ``cluster`` itself, or for ``None`` (the environment's
    connection) the row the environment variables define for ``kind`` (``None`` if absent)."""
    if cluster is not None:
        return cluster
    return Cluster.objects.filter(kind=kind, credential_kind=CredentialKind.ENVIRONMENT).first()


def clusters_check_fan_out() -> int:
    """Queue one connection check per cluster (:data:`pools.jobs.CLUSTER_CHECK`), so 8
    clusters are checked by parallel workers and a slow one holds up none of the others;
    returns how many were queued."""
    ids = list(Cluster.objects.order_by("pk").values_list("pk", flat=True))
    for cluster_id in ids:
        enqueue_on_commit(CLUSTER_CHECK, cluster_id)
    return len(ids)


def _probe(cluster: Cluster) -> str:
    adapter = cluster_adapter_unshared(cluster)
    if adapter is None:
        raise ValueError(f"the environment variables no longer configure {cluster.kind}")
    try:
        adapter.list_nodes()
        return str(getattr(adapter, "api_version", "") or "")
    finally:
        adapter.close()


def _not_configured(cluster: Cluster, now: datetime) -> Cluster:
    """An environment cluster whose variables are not set (the demo, a deployment that keeps
    records only): nothing to reach, and nothing down — its pools stay writable, portal only."""
    updates = {
        "status": ClusterStatus.UNKNOWN,
        "status_reason": f"the environment variables configure no {cluster.kind} connection: "
        "the portal keeps records only",
        "checked_at": now,
    }
    _check_record(cluster, updates)
    return cluster


def _check_record(cluster: Cluster, updates: dict[str, Any]) -> None:
    """Write a check's ``updates`` to ``cluster``'s row and object, and clear the request it
    answers: ``check_requested_at`` and ``check_started_at`` go back to ``None`` where the
    first still holds the value ``cluster`` was read with (compare-and-set; no clock is
    compared, so a web host and a worker whose clocks differ cannot leave a request pending for
    ever)."""
    seen = cluster.check_requested_at
    answered = {}
    if seen is not None:
        for field in ("check_requested_at", "check_started_at"):
            answered[field] = Case(When(check_requested_at=seen, then=None), default=F(field))
    Cluster.objects.filter(pk=cluster.pk).update(**updates, **answered)
    for field, value in updates.items():
        setattr(cluster, field, value)
    if answered:
        cluster.refresh_from_db(fields=["check_requested_at", "check_started_at"])


def _credential_expiry(cluster: Cluster) -> datetime | None:
    """When the cluster's credentials expire (:mod:`pools.clusters.credentials`); ``None`` when
    unknown, unreadable (the probe reports that) or not configured."""
    try:
        return credential_expiry(cluster_settings(cluster))
    except (OSError, ValueError):
        return None


def pinned_api_version_validator(value: str) -> None:
    """Refuse a pinned slurmrestd API version the Slurm adapter does not speak
    (:data:`~scheduler_adapters.slurm.dialects.DIALECTS`), naming the ones it does; empty (the
    newest both know) passes. The cluster page and the API run it on a pin entered or changed;
    a row stored with one is kept, and its check says ``scheduler_unsupported_api_version``."""
    if value and value not in DIALECTS:
        raise ValidationError(
            f"The portal's Slurm adapter speaks {known_versions()}; {value!r} is none of them "
            "(empty: the newest both know).",
            code="unsupported_api_version",
        )


def _reason(error: Exception) -> str:
    if isinstance(error, OSError):
        return f"credentials cannot be read: {error}"
    if isinstance(error, SchedulerError):
        return f"{error.code}: {error}"
    return f"settings refused: {error}"


def _validate(cluster: Cluster) -> None:
    """Fields that fit together, else :class:`InvalidInput` naming the first wrong one."""
    problem = _text_problem(cluster) or _problem(cluster) or _prometheus_problem(cluster)
    if problem is not None:
        field, message = problem
        raise InvalidInput(message, field=field)


# Names shown on one line and sent to the scheduler: the form leaves ``name`` and
# ``slurm_cluster_name`` to this service (their uniqueness is a field error here), so their
# character rule is checked here too, for the form and the API alike.
_ONE_LINE_FIELDS = ("name", "slurm_cluster_name", "slurm_user", "kube_context")


def _text_problem(cluster: Cluster) -> tuple[str, str] | None:
    """The first of :data:`_ONE_LINE_FIELDS` with a control character or a bidirectional mark
    (:func:`pools.common.validators.single_line_text_validator`), and its message."""
    for field in _ONE_LINE_FIELDS:
        try:
            single_line_text_validator(getattr(cluster, field))
        except ValidationError as error:
            return field, error.messages[0]
    return None


def _problem(cluster: Cluster) -> tuple[str, str] | None:
    if cluster.kind not in _CREDENTIALS:
        return "kind", "A cluster is a Slurm or a Kubernetes cluster."
    if cluster.kueue and cluster.kind != Scheduler.KUBERNETES:  # it showed as "Slurm + Kueue"
        return "kueue", f"Kueue queues Kubernetes workloads: a {cluster.kind} cluster has none."
    if cluster.from_environment:
        return None
    if cluster.credential_kind not in _CREDENTIALS[cluster.kind]:
        allowed = " or ".join(_CREDENTIALS[cluster.kind])
        return "credential_kind", f"A {cluster.kind} cluster's credentials are a {allowed}."
    if not cluster.credential_path:
        return "credential_path", "Give the path of the credentials file."
    for field in ("credential_path", "ca_path"):  # the web and the workers' directories differ
        path = getattr(cluster, field)
        if path and not path.startswith("/"):
            return field, (
                f"Give an absolute path: {path!r} would be read from each process's working "
                "directory."
            )
    needed = {
        Scheduler.SLURM: ("api_url", "slurm_cluster_name", "slurm_user"),
        Scheduler.KUBERNETES: (
            ("api_url",) if cluster.credential_kind == CredentialKind.TOKEN_FILE else ()
        ),
    }[cluster.kind]
    for field in needed:
        if not getattr(cluster, field):
            return field, f"A {cluster.kind} cluster needs its {field.replace('_', ' ')}."
    if cluster.api_version and not _API_VERSION.fullmatch(cluster.api_version):
        return "api_version", "An API version looks like v0.0.42 (empty: discover)."
    try:
        ZoneInfo(cluster.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        return "time_zone", f"Not a time zone: {cluster.time_zone!r} (e.g. Europe/Berlin)."
    return None


def _prometheus_problem(cluster: Cluster) -> tuple[str, str] | None:
    """A ``prometheus_url`` that is not ``http(s)://`` with a host
    (:data:`~pools.clusters.models.PROMETHEUS_SCHEMES`; the API's URL field alone would take
    ``ftp://``), as ``(field, message)``; ``None`` when it is fine or blank."""
    url = cluster.prometheus_url
    if not url:
        return None
    try:
        parts = urlsplit(url)
        fine = parts.scheme.lower() in PROMETHEUS_SCHEMES and bool(parts.hostname)
    except ValueError:  # an unparseable port or bracketed host
        fine = False
    if fine:
        return None
    return "prometheus_url", (
        "A Prometheus URL is http:// or https:// and a host, e.g. "
        "http://prometheus.example.org:9090 (empty: the portal's PROMETHEUS_URL)."
    )


def _one_spelling(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with a Slurm ClusterName in lower case, as Slurm keeps it (slurm.conf(5):
    "any upper case letters in the name will be silently mapped to lower case"), and
    ``api_url`` in one spelling, so one API server is one URL (the
    uniqueness of a Kubernetes API URL compares strings): scheme and host in lower case (they
    are case-insensitive, RFC 3986 §3.1 and §3.2.2; a user name is not), no trailing ``/``
    (an empty path is ``/``, §6.2.3); the path's case is kept. ``HTTPS://K8S.Example.COM:6443/`` ->
    ``https://k8s.example.com:6443``."""
    if fields.get("slurm_cluster_name"):  # slurm.conf(5): upper case is mapped to lower
        fields = {**fields, "slurm_cluster_name": fields["slurm_cluster_name"].lower()}
    url = fields.get("api_url")
    if not url:
        return fields
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")  # a user name keeps its case
    spelt = urlunsplit(
        (parts.scheme.lower(), userinfo + at + host.lower(), parts.path.rstrip("/"), parts.query,
         parts.fragment)
    )  # fmt: skip
    return {**fields, "api_url": spelt}


def _refuse_taken(cluster: Cluster) -> None:
    """:class:`ClusterNameTaken` (400) when another cluster has the same name, ignoring case;
    :class:`ClusterTaken` (409) when another has the same Slurm ClusterName or the same
    Kubernetes API URL (the database constraints say the same; this names the other)."""
    namesake = Cluster.objects.exclude(pk=cluster.pk).filter(name__iexact=cluster.name).first()
    if namesake is not None:
        raise ClusterNameTaken(
            f"Cluster {namesake.slug} is already named {namesake.name!r}; give this one "
            "another name.",
            field="name",
            cluster=namesake.slug,
        )
    others = Cluster.objects.filter(kind=cluster.kind).exclude(pk=cluster.pk)
    if cluster.kind == Scheduler.SLURM:
        field, value = "slurm_cluster_name", cluster.slurm_cluster_name
    elif cluster.api_url:
        field, value = "api_url", cluster.api_url
    else:
        return
    other = others.filter(**{field: value}).first()
    if other is not None:
        raise ClusterTaken(
            f"Cluster {other.slug} already has {field.replace('_', ' ')} {value!r}.",
            field=field,
            cluster=other.slug,
        )


def _pool_slugs(cluster: Cluster) -> list[str]:
    return list(cluster.pools.order_by("slug").values_list("slug", flat=True))
