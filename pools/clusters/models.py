"""Clusters: the Slurm and Kubernetes clusters the portal manages, as data.

Credentials are kept by reference only — a file the portal reads when it connects (a Slurm JWT
HS256 key, a bearer-token file such as a mounted Kubernetes Secret's ``token`` key, or a
kubeconfig) — never the secret itself. A cluster whose ``credential_kind`` is ``environment`` is
the one the environment variables define (``SLURM_REST_URL`` …, ``KUBERNETES_KUBECONFIG`` …,
read into ``settings.SCHEDULERS``): its connection is read from the settings each time, so a
deployment configured by environment keeps working unchanged.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone

from pools.clusters.fields import ServiceURLField
from pools.common.choices import ClusterOperation, ClusterStatus, CredentialKind, Scheduler
from pools.common.validators import (
    ServiceURLValidator,
    single_line_text_validator,
    slug_validator,
)

CLUSTER_KINDS = (Scheduler.SLURM, Scheduler.KUBERNETES)
CLUSTER_KIND_CHOICES = [(k.value, k.label) for k in CLUSTER_KINDS]
CREDENTIAL_WARNING = timedelta(days=7)
# A check asked for this long ago that no worker has begun is said to wait for one (the page
# stops its "checking…" spinner). The portal's choice: a worker that is up takes a queued task
# within seconds; the check itself may then run longer (30 s per slurmrestd read), which is why
# the test is whether a worker began it, not how old the request is.
CHECK_UNCLAIMED_AFTER = timedelta(seconds=60)
#: The two states a member is shown (:attr:`Cluster.summary_status`).
SUMMARY_OK, SUMMARY_DEGRADED = "ok", "degraded"
SUMMARY_STATUSES = (SUMMARY_OK, SUMMARY_DEGRADED)
# A cluster's Prometheus is read over HTTP(S) only (URLField alone also takes ftp/ftps).
PROMETHEUS_SCHEMES = ("http", "https")


class Cluster(models.Model):
    """One scheduler's cluster: its API, how to authenticate, and what the last check found.

    ``status`` / ``status_reason`` / ``api_version_served`` / ``checked_at`` are written by the
    connection check (:func:`pools.clusters.services.cluster_check`), never by a form.
    ``check_requested_at`` is set when a page or the API asks for a check (it is queued, never
    run in the request) and cleared by the check that answers it: until then the cluster shows
    *checking…* beside the last result, which still decides whether its pools are read-only.
    ``check_started_at`` is when a worker began a check of it while that request was pending
    (``None``: no worker has yet); a page says so once the request has waited
    :data:`CHECK_UNCLAIMED_AFTER` (:attr:`check_unclaimed`).
    """

    slug = models.SlugField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100, validators=[single_line_text_validator])
    kind = models.CharField(max_length=12, choices=CLUSTER_KIND_CHOICES)
    api_url = ServiceURLField(
        max_length=255,
        blank=True,
        help_text="slurmrestd's base URL, or the Kubernetes API server's (empty with a "
        "kubeconfig, which names it).",
    )
    slurm_cluster_name = models.CharField(
        max_length=64, blank=True, help_text="Slurm's ClusterName (slurm.conf)."
    )
    slurm_user = models.CharField(
        max_length=64, blank=True, help_text="The Slurm admin identity (AdminLevel=Administrator)."
    )
    credential_kind = models.CharField(max_length=12, choices=CredentialKind.choices)
    credential_path = models.CharField(
        max_length=255,
        blank=True,
        help_text="Path of the key, token or kubeconfig file the portal reads (never its content).",
    )
    ca_path = models.CharField(max_length=255, blank=True, help_text="Kubernetes CA bundle path.")
    kube_context = models.CharField(max_length=100, blank=True)
    time_zone = models.CharField(max_length=64, default="UTC")
    api_version = models.CharField(
        max_length=16, blank=True, help_text="Pinned API version (empty: the newest both know)."
    )
    kueue = models.BooleanField(default=False)
    prometheus_url = ServiceURLField(
        max_length=255,
        blank=True,
        validators=[ServiceURLValidator(schemes=list(PROMETHEUS_SCHEMES))],
        help_text="The Prometheus (or Thanos / Mimir query URL) holding this cluster's "
        "dcgm-exporter series, e.g. http://prometheus.train:9090; its idle scan reads only "
        "this one. Empty: the portal's PROMETHEUS_URL.",
    )
    site = models.CharField(max_length=64, blank=True, validators=[single_line_text_validator])
    provider = models.CharField(max_length=64, blank=True, validators=[single_line_text_validator])
    retiring = models.BooleanField(default=False, help_text="Being retired: no new pools.")
    status = models.CharField(
        max_length=12, choices=ClusterStatus.choices, default=ClusterStatus.UNKNOWN
    )
    status_reason = models.CharField(max_length=500, blank=True)
    api_version_served = models.CharField(max_length=16, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    check_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a check was asked for that has not recorded its result yet; "
        "empty: none pending.",
    )
    check_started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a worker began the check that answers the pending request (the "
        "worker's clock); empty: no worker has picked it up yet, or none is pending.",
    )
    reachable_at = models.DateTimeField(null=True, blank=True)
    class_qos_problem = models.CharField(
        max_length=500,
        blank=True,
        help_text="What the last Slurm reconcile found wrong with the workload-class QOS "
        "(issue 36): a QOS the portal writes missing or changed, or a cluster that cannot "
        "take an account's QOS list. Empty: nothing wrong.",
    )
    # Health (issue 35): when each per-cluster job last finished without an error, and when the
    # credentials stop working (a Slurm token's JWT exp, a kubeconfig's client certificate
    # notAfter; None: unknown or none — a JWT key mints fresh tokens), read at each check.
    reconciled_at = models.DateTimeField(null=True, blank=True)
    inventory_imported_at = models.DateTimeField(null=True, blank=True)
    usage_imported_at = models.DateTimeField(null=True, blank=True)
    credential_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=CLUSTER_KINDS), name="cluster_kind_scheduler"
            ),
            models.UniqueConstraint(
                fields=["slurm_cluster_name"],
                condition=Q(kind=Scheduler.SLURM),
                name="cluster_unique_slurm_name",
                violation_error_message="Another Slurm cluster has this ClusterName.",
            ),
            models.UniqueConstraint(
                fields=["api_url"],
                condition=Q(kind=Scheduler.KUBERNETES) & ~Q(api_url=""),
                name="cluster_unique_kubernetes_url",
                violation_error_message="Another Kubernetes cluster has this API URL.",
            ),
            models.UniqueConstraint(
                fields=["kind"],
                condition=Q(credential_kind=CredentialKind.ENVIRONMENT),
                name="cluster_one_environment_per_kind",
            ),
            # Pages and filters show clusters by name: two alike (ignoring case) could not be
            # told apart.
            models.UniqueConstraint(
                Lower("name"),
                name="cluster_unique_name",
                violation_error_message="Another cluster has this name.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def from_environment(self) -> bool:
        return self.credential_kind == CredentialKind.ENVIRONMENT

    @property
    def credential_state(self) -> str | None:
        """``"expired"``, ``"soon"`` (within :data:`CREDENTIAL_WARNING`, 7 days), ``"valid"``,
        or ``None`` when the expiry is unknown."""
        if self.credential_expires_at is None:
            return None
        left = self.credential_expires_at - timezone.now()
        if left <= timedelta(0):
            return "expired"
        return "soon" if left <= CREDENTIAL_WARNING else "valid"

    @property
    def summary_status(self) -> str:
        """What a member is told: ``"degraded"`` when the last check found the cluster
        unreachable or a per-cluster job failed in the last hour (``errors_last_hour``, which
        :func:`pools.clusters.selectors.cluster_list` annotates; 0 when not annotated), else
        ``"ok"`` (not checked yet included: nothing known to be wrong)."""
        if self.is_down or getattr(self, "errors_last_hour", 0):
            return SUMMARY_DEGRADED
        return SUMMARY_OK

    @property
    def check_pending(self) -> bool:
        """A check was asked for (a save that changed the connection, *check now*) and its
        task has not recorded the result yet."""
        return self.check_requested_at is not None

    @property
    def check_unclaimed(self) -> bool:
        """A check is pending that no worker has begun although it was asked over
        :data:`CHECK_UNCLAIMED_AFTER` (60 s) ago: no Celery worker takes the queue (none runs,
        or the broker is down). Both times compared are the web host's: the page or API that
        asked stamped ``check_requested_at``; the worker's ``check_started_at`` is only tested
        for being set."""
        return (
            self.check_requested_at is not None
            and self.check_started_at is None
            and timezone.now() - self.check_requested_at > CHECK_UNCLAIMED_AFTER
        )

    @property
    def is_down(self) -> bool:
        """Known to be unreachable at the last check (unknown is not down)."""
        return self.status == ClusterStatus.UNREACHABLE


class ClusterError(models.Model):
    """One failure of a per-cluster job (check, reconcile, imports, idle scan), kept a week so
    a cluster's health can say how many it had in the last hour and what the last one said."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="errors")
    operation = models.CharField(max_length=12, choices=ClusterOperation.choices)
    message = models.CharField(max_length=500)
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["cluster", "at"], name="clustererror_cluster_at")]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.operation}: {self.message}"
