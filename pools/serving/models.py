"""Stored serving signals: one :class:`ServingRollup` per allocation and bucket, and one
:class:`ServingRollupRun` per pass of the beat task (what it read, what it could not place).

Every signal is ``None`` when unknown (its series was missing); ``missing`` names the metrics
that were looked for. Token and request counts are *increases over the bucket* (Prometheus
``increase``: counter resets handled there), so sums over buckets are totals.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from pools.serving.choices import Resolution


class ServingRollup(models.Model):
    allocation = models.ForeignKey(
        "pools.Allocation", on_delete=models.CASCADE, related_name="serving_rollups"
    )
    bucket_seconds = models.PositiveIntegerField(
        choices=Resolution.choices, default=Resolution.FIVE_MINUTES
    )
    bucket_start = models.DateTimeField()
    cards_held = models.PositiveIntegerField(help_text="The allocation's cards in the bucket.")
    engine = models.CharField(max_length=30, blank=True, help_text="vllm, sglang, or both.")
    # engine: requests (mean over the bucket), KV cache (%), latency quantiles (s)
    requests_running = models.FloatField(null=True, blank=True)
    requests_waiting = models.FloatField(null=True, blank=True)
    kv_cache_usage_pct = models.FloatField(null=True, blank=True)
    prefix_cache_hit_pct = models.FloatField(null=True, blank=True)
    ttft_p50_s = models.FloatField(null=True, blank=True)
    ttft_p95_s = models.FloatField(null=True, blank=True)
    itl_p50_s = models.FloatField(null=True, blank=True)
    itl_p95_s = models.FloatField(null=True, blank=True)
    e2e_p50_s = models.FloatField(null=True, blank=True)
    e2e_p95_s = models.FloatField(null=True, blank=True)
    # engine: increases over the bucket
    prompt_tokens = models.FloatField(null=True, blank=True)
    generation_tokens = models.FloatField(null=True, blank=True)
    requests_finished = models.FloatField(null=True, blank=True)
    requests_failed = models.FloatField(null=True, blank=True)
    preemptions = models.FloatField(null=True, blank=True)
    # GPU (dcgm-exporter): means over the bucket; framebuffer summed over cards, MiB
    gpu_util_pct = models.FloatField(null=True, blank=True)
    sm_active_pct = models.FloatField(null=True, blank=True)
    dram_active_pct = models.FloatField(null=True, blank=True)
    fb_used_mib = models.FloatField(null=True, blank=True)
    fb_free_mib = models.FloatField(null=True, blank=True)
    temperature_c = models.FloatField(null=True, blank=True)
    xid_last = models.FloatField(null=True, blank=True, help_text="Last XID code; 0 none.")
    nvlink_bytes_s = models.FloatField(null=True, blank=True)
    cards_reporting = models.FloatField(null=True, blank=True)
    cards_busy = models.FloatField(null=True, blank=True)
    missing = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["allocation", "bucket_seconds", "bucket_start"],
                name="serving_rollup_once_per_bucket",
            ),
            models.CheckConstraint(
                condition=Q(bucket_seconds__in=[300, 3600]), name="serving_rollup_resolution"
            ),
        ]
        indexes = [models.Index(fields=["bucket_seconds", "bucket_start"])]
        ordering = ["allocation_id", "bucket_start"]

    def __str__(self) -> str:
        return f"allocation #{self.allocation_id} @ {self.bucket_start:%Y-%m-%d %H:%M}"


class ServingCoverage(models.Model):
    """One row per allocation that has any stored rollup (the first bucket stored): the API's
    list of served allocations joins this instead of asking the rollups, some 300 rows per
    allocation a day, whether each allocation has one (a 2,000-probe count on every page).

    Written beside the rollups by :func:`~pools.serving.services.serving_coverage_note` (every
    pass and replay); the compaction deletes it with the allocation's last rollup."""

    allocation = models.OneToOneField(
        "pools.Allocation",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="serving_coverage",
    )
    first_bucket = models.DateTimeField()

    def __str__(self) -> str:
        return f"allocation #{self.allocation_id} rolled up since {self.first_bucket:%Y-%m-%d}"


class ServingRollupRun(models.Model):
    """One pass: the bucket it covered, how many PromQL requests it sent, what it wrote, and
    the series whose labels matched no allocation (``unmatched``: target, reason, series)."""

    bucket_start = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField(db_index=True)  # every page asks for the newest pass
    finished_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    queries = models.PositiveIntegerField(default=0)
    allocations = models.PositiveIntegerField(default=0)
    rollups = models.PositiveIntegerField(default=0)
    unmatched_count = models.PositiveIntegerField(default=0)
    unmatched = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        state = "ok" if self.ok else "failed"
        return f"serving rollup {self.bucket_start:%Y-%m-%d %H:%M} ({state})"


class ServedModel(models.Model):
    """What an allocation serves, so its measured throughput can be set against the sizing
    engine's: the sizing catalogue model id (``pools/sizing/models.json``, or ``custom``), the
    precision it runs, its TP degree (cards per replica) and the engine (a sizing engine name).

    Set by a pool admin (the admin), or by the team linking one of its saved sizing estimates
    (``estimate``; :func:`pools.serving.served.served_model_link_estimate`): the fields are then
    the estimate's (its TP the one it chose for the allocation's GPU model, its KV-cache dtype,
    and for a custom model its architecture), so calibration sizes what the team sized."""

    allocation = models.OneToOneField(
        "pools.Allocation", on_delete=models.CASCADE, related_name="served_model"
    )
    model_id = models.CharField(max_length=120)
    precision = models.CharField(max_length=16)
    tp = models.PositiveSmallIntegerField(default=1)
    engine = models.CharField(max_length=30)
    kv_cache_dtype = models.CharField(
        max_length=16, blank=True, help_text="Blank: the weights' precision (FP16 for integers)."
    )
    estimate = models.ForeignKey(
        "pools.SizingEstimate",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="served_models",
        help_text="The team's saved estimate these fields come from; blank: set by an admin.",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(tp__gt=0), name="served_model_tp_positive")
        ]

    def __str__(self) -> str:
        return f"allocation #{self.allocation_id} serves {self.model_id} (TP {self.tp})"


class ServingCalibrationDay(models.Model):
    """One allocation's UTC day, measured against sized (written by the calibration beat,
    :mod:`pools.calibration.services`): output tok/s per card over the buckets where the engine
    reported tokens, at ``concurrency`` (mean running requests per replica), beside the sizing
    engine's tok/s per card at that concurrency and the P10/P90 factors of its error band.
    Sized figures are ``None`` when the estimate could not be made (``note`` says why)."""

    allocation = models.ForeignKey(
        "pools.Allocation", on_delete=models.CASCADE, related_name="calibration_days"
    )
    day = models.DateField()
    concurrency = models.FloatField()
    measured_tok_s_per_card = models.FloatField()
    sized_tok_s_per_card = models.FloatField(null=True, blank=True)
    band_low_factor = models.FloatField(null=True, blank=True)
    band_high_factor = models.FloatField(null=True, blank=True)
    ratio = models.FloatField(null=True, blank=True, help_text="measured ÷ sized")
    position = models.CharField(max_length=8, blank=True, help_text="inside, below or above")
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["allocation", "day"], name="calibration_day_once")
        ]
        ordering = ["allocation_id", "day"]

    def __str__(self) -> str:
        return f"allocation #{self.allocation_id} on {self.day}: {self.ratio}"
