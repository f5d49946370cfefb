"""The outbox: tasks queued by committed changes, kept until the broker has taken them; and
the abstract run a task computes for a page (:class:`QueuedRun`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from pools.common.choices import EstimateStatus


class QueuedJob(models.Model):
    """One task a change queued (``task_name`` with JSON ``args``), written in that change's
    transaction so the two commit together or not at all.

    Deleted as soon as the broker accepts the message; a row that stays means the broker could
    not be reached: ``attempts`` sends failed, the last at ``last_attempt_at`` with
    ``last_error`` (the exception's class name, never its text: it names hosts and ports).
    Beat and every starting worker drain what is left (:func:`pools.jobs.outbox.outbox_drain`).
    """

    task_name = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.task_name}{tuple(self.args)}"


class QueuedRun(models.Model):
    """A computation a page or the API asks for and a Celery task runs, so that no web request
    waits on it (issue 29; :mod:`pools.jobs.runs` queues, runs and sweeps it): pending →
    running (``progress``, per cent) → done (``result``: the JSON the API answers) or failed
    (``error`` in words, ``error_code`` for programs: ``internal`` for a bug, else the
    computation's own codes). ``params``: what was asked, JSON. Concrete runs add what they
    are about (a policy, a pool) and their own computation.
    """

    params = models.JSONField(default=dict)
    status = models.CharField(
        max_length=8, choices=EstimateStatus.choices, default=EstimateStatus.PENDING
    )
    progress = models.PositiveSmallIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=30, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=100),
                name="%(class)s_progress_0_100",
            ),
            models.CheckConstraint(
                condition=~Q(status=EstimateStatus.DONE) | Q(result__isnull=False),
                name="%(class)s_done_has_result",
            ),
        ]

    @property
    def finished(self) -> bool:
        return self.status in (EstimateStatus.DONE, EstimateStatus.FAILED)
