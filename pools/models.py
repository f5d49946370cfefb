"""Inventory and tenancy: GPU models, driver groups, pools, nodes, GPUs, teams, audit events.

Units are in the field names: ``memory_gib`` (GiB, 2**30 B), ``memory_total_mib`` (MiB, 2**20 B),
``memory_bandwidth_gbps`` (GB/s, 10**9 B/s), ``*_tflops`` (10**12 FLOP/s, dense), ``tdp_w`` (W).
``None`` means "the source did not say", never zero.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse

from pools.choices import (
    AliasKind,
    AllocationStatus,
    CardClass,
    EstimateStatus,
    FormFactor,
    GpuHealth,
    IdleFindingState,
    InventorySource,
    NodeState,
    PricingMethod,
    RequestStatus,
    Scheduler,
    TeamRole,
    WorkloadKind,
)

# RFC 1123 host names, plus '_' which Slurm node names allow. No spaces.
hostname_validator = RegexValidator(
    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})$",
    "A node name is letters, digits, '.', '-' and '_' (no spaces), at most 253 characters.",
)
slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9_-]*$", "Lower-case letters, digits, - and _.")


class GpuModel(models.Model):
    """A catalogue row: one GPU SKU with its published specs (``sources`` cites each value)."""

    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=80)
    vendor_name = models.CharField(max_length=120, help_text="Exact name nvidia-smi prints.")
    architecture = models.CharField(max_length=40, blank=True)
    card_class = models.CharField(max_length=12, choices=CardClass.choices)
    form_factor = models.CharField(max_length=8, choices=FormFactor.choices)
    memory_gib = models.DecimalField(max_digits=7, decimal_places=2)
    memory_bandwidth_gbps = models.DecimalField(
        max_digits=8, decimal_places=1, null=True, blank=True
    )
    fp16_dense_tflops = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    bf16_dense_tflops = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    fp8_dense_tflops = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    int8_dense_tops = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    nvlink_gbps = models.DecimalField(
        max_digits=7, decimal_places=1, null=True, blank=True, help_text="Empty: no NVLink."
    )
    tdp_w = models.PositiveIntegerField(null=True, blank=True)
    cuda_cores = models.PositiveIntegerField(null=True, blank=True)
    sources = models.JSONField(default=dict, blank=True, help_text="Field name -> citation.")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(memory_gib__gt=0), name="gpumodel_memory_positive")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_gbps is not None and self.nvlink_gbps > 0


class GpuModelAlias(models.Model):
    """A string under which a source reports a GPU model; ``key`` is its normalised form.

    ``key`` is :func:`pools.gpu_names.normalise_model_key` of ``value`` and is unique, so one
    reported string maps to at most one model: matching is exact on the key, never by substring.
    """

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="aliases")
    value = models.CharField(max_length=120)
    kind = models.CharField(max_length=12, choices=AliasKind.choices)
    key = models.CharField(max_length=120, unique=True)

    class Meta:
        ordering = ["gpu_model__name", "kind", "value"]
        verbose_name_plural = "GPU model aliases"

    def __str__(self) -> str:
        return f"{self.value} -> {self.gpu_model.slug}"


class DriverGroup(models.Model):
    """Nodes sharing one NVIDIA driver branch (535, 550, 570 ...).

    ``max_cuda`` is the highest CUDA version the *oldest* driver of the group supports, from
    NVIDIA's CUDA release notes table (``pools/catalogue/cuda_drivers.json``), so every node of the
    group can run it. Empty when the table has no row the driver satisfies.
    """

    branch = models.PositiveIntegerField(unique=True)
    min_driver_version = models.CharField(max_length=32, blank=True)
    max_driver_version = models.CharField(max_length=32, blank=True)
    max_cuda = models.CharField(max_length=8, blank=True)

    class Meta:
        ordering = ["branch"]

    def __str__(self) -> str:
        return f"R{self.branch}"

    @property
    def name(self) -> str:
        return str(self)


class Pool(models.Model):
    """Schedulable capacity of one scheduler: a Slurm partition or a Kubernetes node group.

    ``overcommit_ratio`` multiplies schedulable cards when allocations are checked (1.0 = none).
    """

    slug = models.SlugField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    scheduler = models.CharField(max_length=12, choices=Scheduler.choices)
    slurm_partition = models.CharField(max_length=64, blank=True)
    k8s_node_selector = models.JSONField(default=dict, blank=True)
    overcommit_ratio = models.DecimalField(
        max_digits=4,
        decimal_places=2,
        default=Decimal("1.00"),
        validators=[MinValueValidator(Decimal("0.10"))],
    )
    auto_approve_max_cards = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests of at most this many cards … (empty: never)"
    )
    auto_approve_max_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="… lasting at most this many days are approved at once."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(overcommit_ratio__gt=0), name="pool_overcommit_pos")
        ]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A host with GPUs, the scheduler that owns it, its state and when a source last saw it."""

    hostname = models.CharField(max_length=253, unique=True, validators=[hostname_validator])
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes"
    )
    scheduler = models.CharField(max_length=12, choices=Scheduler.choices, default=Scheduler.NONE)
    state = models.CharField(max_length=12, choices=NodeState.choices, default=NodeState.UNKNOWN)
    state_reason = models.CharField(max_length=255, blank=True)
    driver_version = models.CharField(max_length=32, blank=True)
    driver_group = models.ForeignKey(
        DriverGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes"
    )
    cuda_version = models.CharField(max_length=8, blank=True, help_text="Max CUDA as reported.")
    partitions = models.JSONField(default=list, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    gpu_replicas = models.PositiveIntegerField(null=True, blank=True)
    # Slurm: cards allocated to jobs when last imported (GRES used); empty when unknown.
    gpus_allocated = models.PositiveIntegerField(null=True, blank=True)
    last_source = models.CharField(max_length=12, choices=InventorySource.choices, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["hostname"]
        indexes = [models.Index(fields=["state"]), models.Index(fields=["pool", "state"])]

    def __str__(self) -> str:
        return self.hostname


class Gpu(models.Model):
    """One physical card. ``gpu_model`` is empty while ``raw_model_name`` matches no alias."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    # NULL, not "", for unknown: the partial unique constraint below must ignore unknown UUIDs.
    uuid = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    serial = models.CharField(max_length=64, blank=True)
    pci_bus_id = models.CharField(max_length=32, blank=True)
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="gpus"
    )
    raw_model_name = models.CharField(max_length=120, blank=True)
    # nvidia-smi's 32-bit PCI id as printed ("0x233010DE"); "" when the source does not say.
    pci_device_id = models.CharField(max_length=12, blank=True)
    # Slugs the reported name could be when it names several SKUs (``gpu_model`` is then empty
    # and an admin decides); empty when the name is exact or plainly unrecognised.
    model_candidates = models.JSONField(default=list, blank=True)
    memory_total_mib = models.PositiveIntegerField(null=True, blank=True)
    mig_mode = models.BooleanField(null=True, blank=True)
    health = models.CharField(max_length=8, choices=GpuHealth.choices, default=GpuHealth.UNKNOWN)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node__hostname", "index"]
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_node_index"),
            models.UniqueConstraint(
                fields=["uuid"], condition=Q(uuid__isnull=False), name="gpu_unique_uuid"
            ),
        ]
        indexes = [models.Index(fields=["gpu_model", "health"])]

    def __str__(self) -> str:
        return f"{self.node.hostname}:{self.index}"

    @property
    def recognised(self) -> bool:
        return self.gpu_model_id is not None


class MigDevice(models.Model):
    """A MIG instance of a GPU, recorded under its parent card (never as a card of its own)."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="mig_devices")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, blank=True)
    profile = models.CharField(max_length=32, blank=True)
    gpu_instance_id = models.PositiveSmallIntegerField(null=True, blank=True)
    compute_instance_id = models.PositiveSmallIntegerField(null=True, blank=True)
    memory_total_mib = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["gpu", "index"]
        constraints = [
            models.UniqueConstraint(fields=["gpu", "index"], name="migdevice_unique_gpu_index")
        ]

    def __str__(self) -> str:
        return f"{self.gpu} MIG {self.index} {self.profile}"


class InventoryImport(models.Model):
    """One run of an importer and its report (what was created, updated, rejected and why)."""

    source = models.CharField(max_length=12, choices=InventorySource.choices)
    filename = models.CharField(max_length=255, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    nodes_created = models.PositiveIntegerField(default=0)
    nodes_updated = models.PositiveIntegerField(default=0)
    nodes_unchanged = models.PositiveIntegerField(default=0)
    nodes_rejected = models.PositiveIntegerField(default=0)
    gpus_seen = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.source} import {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def ok(self) -> bool:
        return not self.errors


class Team(models.Model):
    """A tenant that holds allocations and is charged; ``cost_centre`` is finance's code."""

    slug = models.SlugField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100)
    cost_centre = models.CharField(max_length=40, blank=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in a team (member or manager)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=8, choices=TeamRole.choices, default=TeamRole.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class AuditEvent(models.Model):
    """Who changed what, when, from where: written explicitly by every service (no signals)."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    action = models.CharField(max_length=64, db_index=True)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=255, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"


class CapacityRequest(models.Model):
    """What a team asks for: cards of a GPU model (or any with enough memory) for a window.

    ``pool`` empty means "any eligible pool"; ``gpu_model`` empty means "any model with at least
    ``min_memory_gib`` GiB". ``starts_at``/``ends_at`` are aware datetimes, end exclusive.
    ``extends`` is set when the request asks for more time on an existing allocation.
    """

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="capacity_requests"
    )
    workload_kind = models.CharField(max_length=10, choices=WorkloadKind.choices)
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="requests"
    )
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="requests"
    )
    min_memory_gib = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True)
    card_count = models.PositiveIntegerField()
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    cuda_version = models.CharField(max_length=8, blank=True)
    justification = models.TextField()
    status = models.CharField(
        max_length=10, choices=RequestStatus.choices, default=RequestStatus.DRAFT, db_index=True
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    extends = models.ForeignKey(
        "Allocation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="extension_requests",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(card_count__gt=0), name="request_cards_positive"),
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="request_window_positive"
            ),
            models.CheckConstraint(
                condition=Q(gpu_model__isnull=False) | Q(min_memory_gib__isnull=False),
                name="request_names_model_or_memory",
            ),
        ]
        indexes = [models.Index(fields=["team", "status"])]

    def __str__(self) -> str:
        return f"Request #{self.pk} {self.team.slug} {self.card_count}× {self.model_label}"

    @property
    def model_label(self) -> str:
        if self.gpu_model_id:
            return self.gpu_model.name
        return f"any ≥ {self.min_memory_gib} GiB"

    @property
    def duration_hours(self) -> Decimal:
        return Decimal((self.ends_at - self.starts_at).total_seconds()) / Decimal(3600)


class Allocation(models.Model):
    """What was granted: team × pool × GPU model × cards × window, and its scheduler binding.

    One per approved request (``request`` is unique, so approving twice cannot grant twice).
    Holding states (approved, provisioning, active, expiring) count against the pool's capacity.
    """

    request = models.OneToOneField(
        CapacityRequest, on_delete=models.PROTECT, related_name="allocation"
    )
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="allocations")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="allocations")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="allocations")
    card_count = models.PositiveIntegerField()
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    status = models.CharField(
        max_length=12,
        choices=AllocationStatus.choices,
        default=AllocationStatus.APPROVED,
        db_index=True,
    )
    pricing_method = models.CharField(
        max_length=8, choices=PricingMethod.choices, default=PricingMethod.RESERVED
    )
    scheduler_binding = models.JSONField(
        default=dict, blank=True, help_text="Slurm account/association or namespace."
    )
    status_reason = models.TextField(blank=True)
    expiry_notified_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["starts_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(card_count__gt=0), name="allocation_cards_positive"),
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="allocation_window_positive"
            ),
        ]
        indexes = [
            models.Index(fields=["pool", "gpu_model", "status"]),
            models.Index(fields=["team", "status"]),
        ]

    def __str__(self) -> str:
        return f"Allocation #{self.pk} {self.team.slug} {self.card_count}× {self.gpu_model.name}"


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


class SchedulerDrift(models.Model):
    """A difference found between what allocations require and what a scheduler holds.

    Written by reconcile each time it finds one; ``repaired`` says whether reconcile put the
    scheduler back (it does unless the scheduler refused).
    """

    detected_at = models.DateTimeField(auto_now_add=True, db_index=True)
    scheduler = models.CharField(max_length=12, choices=Scheduler.choices)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="drifts"
    )
    subject = models.CharField(max_length=200, help_text="e.g. account vision GrpTRES a100")
    expected = models.CharField(max_length=200)
    found = models.CharField(max_length=200)
    repaired = models.BooleanField(default=False)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["-detected_at", "-id"]

    def __str__(self) -> str:
        return f"{self.subject}: expected {self.expected}, found {self.found}"


# Bounds of a reclamation policy. The window is read from Prometheus at 60 s steps in one range
# query, so a day (1,441 steps) is well inside its 11,000-point limit; a month of grace and a week
# of cooldown are longer than any use; 256 GiB is more memory than any GPU has.
MIN_WINDOW_MINUTES = 5
MAX_WINDOW_MINUTES = 1440
MAX_GRACE_HOURS = 720
MAX_COOLDOWN_MINUTES = 10080
MAX_PROCESS_MEMORY_MIB = 262144


class ReclamationPolicy(models.Model):
    """When a pool's allocated cards count as idle and what happens then (issue 7).

    Idle: mean utilisation below ``idle_below_pct`` (%) over ``window_minutes``; reclaimed only
    when *certainly* idle: peak below ``certainly_idle_below_pct`` (%) and ``DCGM_FI_DEV_FB_USED``
    at most ``process_memory_max_mib`` (MiB). Utilisation is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
    x 100, else ``DCGM_FI_DEV_GPU_UTIL``. ``min_coverage`` (0-1) of the window must carry samples.
    A warned allocation is reclaimed ``grace_hours`` later, not within ``cooldown_minutes`` of
    any change to it; ``dry_run`` (the default) records what would happen and changes nothing.
    """

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, related_name="reclamation_policy")
    idle_below_pct = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("30"),
        validators=[MinValueValidator(Decimal("0.01")), MaxValueValidator(Decimal("100"))],
    )
    certainly_idle_below_pct = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("5"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
    )
    process_memory_max_mib = models.PositiveIntegerField(
        default=64, validators=[MaxValueValidator(MAX_PROCESS_MEMORY_MIB)]
    )
    window_minutes = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(MIN_WINDOW_MINUTES), MaxValueValidator(MAX_WINDOW_MINUTES)],
    )
    min_coverage = models.DecimalField(
        max_digits=3,
        decimal_places=2,
        default=Decimal("0.90"),
        validators=[MinValueValidator(Decimal("0.01")), MaxValueValidator(Decimal("1"))],
    )
    grace_hours = models.PositiveIntegerField(
        default=24, validators=[MaxValueValidator(MAX_GRACE_HOURS)]
    )
    cooldown_minutes = models.PositiveIntegerField(
        default=15, validators=[MaxValueValidator(MAX_COOLDOWN_MINUTES)]
    )
    dry_run = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "reclamation policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(idle_below_pct__gt=0) & Q(idle_below_pct__lte=100),
                name="reclamation_policy_idle_pct_range",
                violation_error_message="The idle threshold must be above 0 % and at most 100 %.",
            ),
            models.CheckConstraint(
                condition=Q(certainly_idle_below_pct__gte=0)
                & Q(certainly_idle_below_pct__lte=models.F("idle_below_pct")),
                name="reclamation_policy_certain_below_idle",
                violation_error_message=(
                    "The certainly-idle threshold must be at most the idle threshold."
                ),
            ),
            models.CheckConstraint(
                condition=Q(min_coverage__gt=0) & Q(min_coverage__lte=1),
                name="reclamation_policy_coverage_ratio",
                violation_error_message="Coverage is a share: above 0 and at most 1.",
            ),
            models.CheckConstraint(
                condition=Q(window_minutes__gte=MIN_WINDOW_MINUTES)
                & Q(window_minutes__lte=MAX_WINDOW_MINUTES),
                name="reclamation_policy_window_range",
                violation_error_message=(
                    f"The window is {MIN_WINDOW_MINUTES} to {MAX_WINDOW_MINUTES} minutes."
                ),
            ),
            models.CheckConstraint(
                condition=Q(grace_hours__lte=MAX_GRACE_HOURS)
                & Q(cooldown_minutes__lte=MAX_COOLDOWN_MINUTES)
                & Q(process_memory_max_mib__lte=MAX_PROCESS_MEMORY_MIB),
                name="reclamation_policy_upper_bounds",
                violation_error_message=(
                    f"Grace is at most {MAX_GRACE_HOURS} h, cooldown at most "
                    f"{MAX_COOLDOWN_MINUTES} min, process memory at most "
                    f"{MAX_PROCESS_MEMORY_MIB} MiB."
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"Reclamation policy of {self.pool}"


class Exemption(models.Model):
    """A team or one allocation that is never reclaimed until ``expires_at``, and why."""

    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="exemptions"
    )
    allocation = models.ForeignKey(
        Allocation, null=True, blank=True, on_delete=models.CASCADE, related_name="exemptions"
    )
    reason = models.TextField()
    expires_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-expires_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(team__isnull=False) & Q(allocation__isnull=True))
                | (Q(team__isnull=True) & Q(allocation__isnull=False)),
                name="exemption_team_xor_allocation",
            ),
        ]

    def __str__(self) -> str:
        subject = f"team {self.team_id}" if self.team_id else f"allocation {self.allocation_id}"
        return f"Exemption of {subject} until {self.expires_at:%Y-%m-%d}"


class IdleFinding(models.Model):
    """An allocation seen idle by the scan, and what became of it.

    Numbers from the latest scan that saw it idle: ``mean_util_pct`` (%), ``peak_util_pct`` (%),
    ``cards_in_use`` of ``card_count``; ``cards_reclaimed`` once reclaimed (``card_count`` before
    minus after). ``would_reclaim_at`` is set instead of reclaiming under a dry-run policy.
    ``detail`` holds the per-card evaluation. At most one open finding per allocation.
    """

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="idle_findings"
    )
    state = models.CharField(
        max_length=10,
        choices=IdleFindingState.choices,
        default=IdleFindingState.OPEN,
        db_index=True,
    )
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    warned_at = models.DateTimeField(null=True, blank=True)
    reclaimed_at = models.DateTimeField(null=True, blank=True)
    would_reclaim_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    dry_run = models.BooleanField(default=True)
    certainly_idle = models.BooleanField(default=False)
    mean_util_pct = models.DecimalField(max_digits=6, decimal_places=2, null=True, blank=True)
    peak_util_pct = models.DecimalField(max_digits=6, decimal_places=2, null=True, blank=True)
    card_count = models.PositiveIntegerField()
    cards_in_use = models.PositiveIntegerField()
    cards_reclaimed = models.PositiveIntegerField(default=0)
    ends_at_before = models.DateTimeField(null=True, blank=True)
    status_before = models.CharField(max_length=12, blank=True)
    note = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-last_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation"],
                condition=Q(state="open"),
                name="idle_finding_one_open_per_allocation",
            ),
            models.CheckConstraint(
                condition=Q(cards_in_use__lte=models.F("card_count")),
                name="idle_finding_in_use_within_count",
            ),
        ]

    def __str__(self) -> str:
        return f"Idle finding #{self.pk} allocation {self.allocation_id} ({self.state})"


class IdleScanRun(models.Model):
    """One run of the idle scan (:func:`pools.services.reclamation.idle_scan`): what it saw and
    did, so that admins can tell a quiet fleet from a scan that could not read Prometheus.
    Counts are allocations; ``devices`` dcgm-exporter series; ``seconds`` wall time."""

    started_at = models.DateTimeField(db_index=True)
    seconds = models.FloatField(default=0.0)
    allocations = models.PositiveIntegerField(default=0)
    busy = models.PositiveIntegerField(default=0)
    idle = models.PositiveIntegerField(default=0)
    unknown = models.PositiveIntegerField(default=0)
    warned = models.PositiveIntegerField(default=0)
    reclaimed = models.PositiveIntegerField(default=0)
    would_reclaim = models.PositiveIntegerField(default=0)
    resolved = models.PositiveIntegerField(default=0)
    exempt = models.PositiveIntegerField(default=0)
    dismissed = models.PositiveIntegerField(default=0)
    devices = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    notes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"Idle scan at {self.started_at:%Y-%m-%d %H:%M}"
