"""Inventory: GPU models, driver groups, pools, nodes, GPUs, MIG devices and import runs.

Units are in the field names: ``memory_gib`` (GiB, 2**30 B), ``memory_total_mib`` (MiB, 2**20 B),
``memory_bandwidth_gbps`` (GB/s, 10**9 B/s), ``*_tflops`` (10**12 FLOP/s, dense), ``tdp_w`` (W).
``None`` means "the source did not say", never zero."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from pools.clusters.models import Cluster
from pools.common.choices import (
    AliasKind,
    CardClass,
    CredentialKind,
    EstimateStatus,
    FormFactor,
    GpuHealth,
    InventorySource,
    NodeState,
    QuotaBackend,
    Scheduler,
)
from pools.common.validators import (
    MAX_AUTO_APPROVE_DAYS,
    MAX_REQUEST_CARDS,
    dns_label_validator,
    hostname_validator,
    single_line_text_validator,
    slug_validator,
)
from pools.inventory.catalogue import load_cuda_driver_table
from pools.inventory.driver_versions import cuda_beyond_table


class GpuModel(models.Model):
    """A catalogue row: one GPU SKU with its published specs (``sources`` cites each value)."""

    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=80, validators=[single_line_text_validator])
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
    pci_device_ids = models.JSONField(
        default=list,
        blank=True,
        help_text='16-bit PCI device ids, e.g. ["0x2330"]: the tie-breaker between SKUs '
        "sharing a name.",
    )

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

    ``key`` is :func:`pools.inventory.gpu_names.normalise_model_key` of ``value`` and is unique, so
    one
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
    NVIDIA's CUDA release notes table (``pools/inventory/catalogue/cuda_drivers.json``), so every
    node of the
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
    """Schedulable capacity of one scheduler: a Slurm partition or a Kubernetes node group, in
    one cluster (:class:`pools.clusters.models.Cluster`).

    ``overcommit_ratio`` multiplies schedulable cards when allocations are checked (1.0 = none).
    """

    slug = models.SlugField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100, validators=[single_line_text_validator])
    description = models.TextField(blank=True)
    scheduler = models.CharField(max_length=12, choices=Scheduler.choices)
    # Empty: the cluster the environment variables define for ``scheduler`` (as before clusters
    # were data); a cluster that holds pools cannot be deleted.
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="pools"
    )
    slurm_partition = models.CharField(max_length=64, blank=True)
    k8s_node_selector = models.JSONField(default=dict, blank=True)
    overcommit_ratio = models.DecimalField(
        max_digits=4,
        decimal_places=2,
        default=Decimal("1.00"),
        validators=[MinValueValidator(Decimal("0.10"))],
    )
    auto_approve_max_cards = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(MAX_REQUEST_CARDS)],
        help_text="Requests of at most this many cards … (empty: never)",
    )
    auto_approve_max_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(MAX_AUTO_APPROVE_DAYS)],
        help_text="… lasting at most this many days are approved at once.",
    )
    # Kubernetes pools: where elastic allocations' floor/ceiling land (pools/elastic/).
    quota_backend = models.CharField(
        max_length=16, choices=QuotaBackend.choices, default=QuotaBackend.RESOURCE_QUOTA
    )
    quota_cohort = models.CharField(
        max_length=63,
        blank=True,
        validators=[dns_label_validator],
        help_text="Kueue cohort / Volcano parent queue / Koordinator parent quota of the pool "
        "(required for Kueue: borrowing happens in a cohort).",
    )
    # Issue 35: capacity in another cluster or a rented cloud pool (seed 004 §3.3 "across
    # clouds"), priced per the rate card's burst-pool entries; elastic allocations of the teams
    # that opted in (pools.elastic.models.BurstOptIn) spill into it when their home pool is full.
    burst = models.BooleanField(
        default=False,
        help_text="A burst pool: elastic scale-up of opted-in teams lands here when their home "
        "pool is full, at the rate card's burst-pool price.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(overcommit_ratio__gt=0), name="pool_overcommit_pos"),
            models.CheckConstraint(
                condition=Q(quota_backend=QuotaBackend.RESOURCE_QUOTA)
                | Q(scheduler=Scheduler.KUBERNETES),
                name="pool_quota_backend_kubernetes",
                violation_error_message="Only Kubernetes pools have another quota backend than "
                "the ResourceQuota.",
            ),
            models.CheckConstraint(
                condition=~Q(quota_backend=QuotaBackend.KUEUE) | ~Q(quota_cohort=""),
                name="pool_kueue_has_cohort",
                violation_error_message="A Kueue pool needs its cohort.",
            ),
            models.CheckConstraint(
                condition=Q(burst=False) | Q(scheduler=Scheduler.KUBERNETES),
                name="pool_burst_kubernetes",
                violation_error_message="Only Kubernetes pools can be burst pools.",
            ),
        ]

    def __str__(self) -> str:
        return self.name


def node_cluster_id(cluster: Cluster | None) -> int | None:
    """The ``Node.cluster_id`` of nodes imported from ``cluster``: ``None`` for the environment
    variables' cluster (``None`` itself, or its row) — one cluster, as for pools — else its id."""
    if cluster is None or cluster.from_environment:
        return None
    return cluster.pk


def pool_node_cluster_id(via: str) -> models.Case:
    """:func:`node_cluster_id` in SQL for the pool at the lookup path ``via``
    (``"allocation__pool"``): the ``Node.cluster_id`` of that pool's nodes, so a host name
    found through a pool (an allocation's placed cards) is matched to its node by
    ``(cluster_id, hostname)`` — names are unique per cluster only."""
    return models.Case(
        models.When(
            **{f"{via}__cluster__credential_kind": CredentialKind.ENVIRONMENT},
            then=models.Value(None),
        ),
        default=models.F(f"{via}__cluster_id"),
        output_field=models.IntegerField(),
    )


class Node(models.Model):
    """A host with GPUs, the scheduler that owns it, its state and when a source last saw it.

    A host name is unique within its ``cluster`` (issue 35: two clusters may name nodes alike —
    both test Slurms do). ``cluster`` is set by the import that creates the node: the cluster
    reconcile imported it from, or the pool's cluster of a file import; empty for the
    environment variables' clusters (as :attr:`Pool.cluster`) and for a file imported without a
    pool. Lookups by host name name the cluster too (:func:`node_cluster_id`).
    """

    hostname = models.CharField(max_length=253, validators=[hostname_validator])
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes"
    )
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
    # NVLink/NVSwitch domains: lists of GPU indices joined by NVLink, from nvidia-smi topo -m /
    # nvlink -s (pools.inventory.topology); NULL when no capture said (the catalogue's facts
    # are the fallback at read time, never stored here).
    nvlink_domains = models.JSONField(null=True, blank=True)
    nvlink_read_at = models.DateTimeField(null=True, blank=True)
    last_source = models.CharField(max_length=12, choices=InventorySource.choices, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["hostname", "cluster_id"]
        indexes = [
            models.Index(fields=["state"]),
            models.Index(fields=["pool", "state"]),
            models.Index(fields=["hostname"], name="node_hostname"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "hostname"],
                name="node_unique_hostname_per_cluster",
                nulls_distinct=False,
                violation_error_message="This cluster already has a node of this name.",
            )
        ]

    def __str__(self) -> str:
        return self.hostname

    @property
    def cuda_table_behind(self) -> str | None:
        """The CUDA version the node reports when it is newer than NVIDIA's table in the
        portal (``catalogue/cuda_drivers.json``) gives its driver — the table needs updating,
        and the driver group's "CUDA ≤" shows the older figure; else None."""
        beyond = cuda_beyond_table(
            self.driver_version, self.cuda_version or None, load_cuda_driver_table()
        )
        return None if beyond is None else "{}.{}".format(*beyond[0])


# Which cards the capacity invariant counts as whole cards: ONE rule, read by every count
# (approval, request panel, dashboard, stranded report, placement). A card is *schedulable* when
# its node is up, its model is recognised, its own health is not ``error`` and it is not in MIG
# mode. A card in MIG mode (``mig_mode`` True) is cut into MIG instances that the schedulers
# hand out as slices (Slurm ``gres/gpu:1g.10gb``, Kubernetes ``nvidia.com/mig-1g.10gb`` or, under
# the *single* strategy, ``nvidia.com/gpu`` slices): no job can be given the whole card while its
# instances exist (NVIDIA MIG user guide), so it is never counted as one. Unknown MIG mode
# (``None``: a source that does not say, such as slurmrestd's node list or ``nvidia-smi -L``
# without MIG lines) counts as whole, as every card did before MIG was read.
# Spelt twice for the two ways cards are read, and kept equal by
# tests/pools/inventory/test_schedulable_rule.py: a Q for the ORM, SQL for raw statements.
WHOLE_CARD = ~Q(health=GpuHealth.ERROR) & ~Q(mig_mode=True)
SCHEDULABLE_CARD = Q(node__state=NodeState.UP, gpu_model__isnull=False) & WHOLE_CARD
# Its MIG twin: cards whose MIG instances are schedulable slices (node up, model recognised, not
# in error, in MIG mode). Every count of slices reads these cards' ``MigDevice`` rows.
SLICED_CARD = Q(node__state=NodeState.UP, gpu_model__isnull=False, mig_mode=True) & ~Q(
    health=GpuHealth.ERROR
)
# The card-level half of the rule over ``pools_gpu`` aliased ``g`` (the node's state and the
# model are the statement's own joins); the health value is a code constant, not input.
WHOLE_CARD_SQL = f"(g.health <> '{GpuHealth.ERROR.value}' AND g.mig_mode IS NOT TRUE)"


class GpuQuerySet(models.QuerySet):
    def schedulable(self) -> GpuQuerySet:
        """The cards the capacity invariant counts (:data:`SCHEDULABLE_CARD`)."""
        return self.filter(SCHEDULABLE_CARD)

    def sliced(self) -> GpuQuerySet:
        """The cards whose MIG instances count as slices (:data:`SLICED_CARD`)."""
        return self.filter(SLICED_CARD)


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

    objects = GpuQuerySet.as_manager()

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
    # The GRES type Slurm counts this slice under (gres.conf ``Type=1g.10gb``, or AutoDetect's
    # ``nvidia_a100_80gb_pcie_1g.10gb``); blank from other sources. Provisioning caps it.
    gres_type = models.CharField(max_length=64, blank=True, default="")

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


class InventoryUpload(models.Model):
    """A file too large to import within the request (over ``INVENTORY_ASYNC_IMPORT_BYTES``),
    imported by a Celery task (``pools.inventory.tasks.inventory_upload_task``): pending →
    running (``progress``, per cent of nodes written) → done (``report``: the import report's
    dict) or failed (``error``). The file's bytes are kept only until the task has read them."""

    source = models.CharField(max_length=12, choices=InventorySource.choices)
    node = models.CharField(max_length=253, blank=True)
    pool = models.ForeignKey(Pool, null=True, blank=True, on_delete=models.SET_NULL)
    filename = models.CharField(max_length=255, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    data = models.BinaryField(default=bytes)
    status = models.CharField(
        max_length=8, choices=EstimateStatus.choices, default=EstimateStatus.PENDING
    )
    progress = models.PositiveSmallIntegerField(default=0)
    report = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.filename or self.source} upload ({self.status})"
