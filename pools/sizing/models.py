"""Saved sizing estimates: the inputs, the status of the Celery job and its result."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from pools.common.choices import (
    EstimateStatus,
)
from pools.tenancy.models import Team, TeamOwnedQuerySet


class SizingEstimateQuerySet(TeamOwnedQuerySet):
    """Estimates are seen by their creator too, shared with a team or not."""

    def member_q(self, user) -> Q:
        return Q(created_by=user) | super().member_q(user)


class SizingEstimate(models.Model):
    """An LLM sizing run (issue 5): the inputs as asked, and the per-GPU-model results once the
    Celery job has computed them.

    ``inputs`` and ``results`` are plain JSON: Decimal money as strings, bytes as integers, other
    quantities as numbers with the unit in the key (``_bytes``, ``_ms``, ``_tok_s``). ``status``
    goes pending → running → done or failed; ``progress`` (0–100) counts GPU models computed.
    ``team`` (optional) shares the estimate with that team's members.
    """

    inputs = models.JSONField()
    status = models.CharField(
        max_length=8, choices=EstimateStatus.choices, default=EstimateStatus.PENDING, db_index=True
    )
    progress = models.PositiveSmallIntegerField(default=0)
    results = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="sizing_estimates"
    )
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="sizing_estimates"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = SizingEstimateQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=100),
                name="sizing_estimate_progress_0_100",
            ),
            models.CheckConstraint(
                condition=~Q(status="done") | Q(results__isnull=False),
                name="sizing_estimate_done_has_results",
            ),
        ]

    def __str__(self) -> str:
        return f"Sizing estimate #{self.pk} {self.inputs.get('model', '?')} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("pools:sizing-estimate-detail", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (EstimateStatus.DONE, EstimateStatus.FAILED)


class CalibrationRecord(models.Model):
    """Measured on this fleet, per (served model, GPU model, engine, precision, driver group):
    over ``days`` allocation-days of serving rollups, the median output tok/s per card and the
    median ratio measured ÷ sized (``None`` when no day could be sized). Written by the
    calibration beat (:mod:`pools.calibration.services`); ``driver_branch`` ``None`` = the
    allocation's cards span several driver groups or none is known."""

    model_id = models.CharField(max_length=120)
    gpu_model = models.ForeignKey(
        "pools.GpuModel", on_delete=models.CASCADE, related_name="calibration_records"
    )
    engine = models.CharField(max_length=30)
    precision = models.CharField(max_length=16)
    driver_branch = models.PositiveIntegerField(null=True, blank=True)
    days = models.PositiveIntegerField()
    allocations = models.PositiveIntegerField()
    median_tok_s_per_card = models.FloatField()
    median_ratio = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["model_id", "gpu_model", "engine", "precision", "driver_branch"],
                name="calibration_record_once_per_key",
                nulls_distinct=False,
            )
        ]
        ordering = ["model_id", "gpu_model_id", "engine", "precision", "driver_branch"]

    def __str__(self) -> str:
        return (
            f"{self.model_id} on {self.gpu_model_id}: {self.median_tok_s_per_card:.0f} tok/s/card"
        )
