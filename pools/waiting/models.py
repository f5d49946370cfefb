"""Waiting work as last read from the schedulers, and who looked at it when."""

from __future__ import annotations

from django.db import models

from pools.clusters.models import Cluster
from pools.common.choices import Scheduler
from pools.tenancy.models import Team, team_owned
from pools.waiting.choices import WaitKind


class PendingWork(models.Model):
    """One pending Slurm job or not-admitted Kueue workload of a team, as of ``read_at``.

    ``ref`` is the Slurm job id or ``<namespace>/<name>``; ``queue`` the partition or
    LocalQueue; ``gres_type`` the GPU type asked for (Slurm GRES type, Kueue flavour; blank
    when untyped or unknown). ``reason_code`` / ``reason_message`` are the scheduler's words,
    verbatim; ``explanation`` the portal's (``translated`` false: no sentence for that reason,
    the scheduler's words are shown). ``expected_start_at`` Slurm's backfill estimate.
    ``cluster`` is where it waits (empty: the environment variables' cluster of ``scheduler``
    before it has a row); the rows of one cluster are replaced whole on every read of it.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="pending_work")
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="pending_work"
    )
    scheduler = models.CharField(max_length=12, choices=Scheduler.choices)
    ref = models.CharField(max_length=200)
    name = models.CharField(max_length=200, blank=True)
    user = models.CharField(max_length=100, blank=True)
    queue = models.CharField(max_length=100, blank=True)
    gres_type = models.CharField(max_length=100, blank=True)
    cards_requested = models.PositiveIntegerField()
    reason_code = models.CharField(max_length=100, blank=True)
    reason_message = models.TextField(blank=True)
    kind = models.CharField(max_length=20, choices=WaitKind.choices)
    translated = models.BooleanField()
    explanation = models.TextField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    expected_start_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField()

    objects = team_owned("team").as_manager()

    class Meta:
        ordering = ["team", "submitted_at", "ref"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "scheduler", "ref"],
                name="pending_work_unique_ref",
                nulls_distinct=False,
            )
        ]
        indexes = [models.Index(fields=["team", "scheduler"], name="pending_work_team_sched")]

    def __str__(self) -> str:
        return f"{self.scheduler} {self.ref} ({self.kind})"


class PendingWorkRead(models.Model):
    """The last read of one cluster's waiting work (``cluster`` empty: the environment
    variables' cluster of ``scheduler`` before it has a row): when, how many rows, or the error
    that stopped it (then the rows of the read before stay, with their older ``read_at``; the
    error is in the cluster's health too)."""

    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="waiting_reads"
    )
    scheduler = models.CharField(max_length=12, choices=Scheduler.choices)
    read_at = models.DateTimeField()
    ok = models.BooleanField()
    error = models.TextField(blank=True)
    rows = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "scheduler"],
                name="pending_work_read_one_per_cluster",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        return f"{self.scheduler} read at {self.read_at:%Y-%m-%d %H:%M:%S}"


class WaitingWatch(models.Model):
    """When someone last looked at a team's waiting work; the refresh task runs only while a
    watch is younger than ``pools.waiting.services.WATCH_WINDOW``."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="waiting_watch")
    viewed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.team} viewed at {self.viewed_at:%Y-%m-%d %H:%M:%S}"
