"""The outbox: tasks queued by committed changes, kept until the broker has taken them."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


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
