"""Serializers of the inventory API. Units are in the field names (MiB, GiB, GB/s, TFLOPS, W)."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from pools.clusters.models import Cluster
from pools.common.choices import InventorySource, QuotaBackend, Scheduler
from pools.inventory.models import (
    DriverGroup,
    Gpu,
    GpuModel,
    GpuModelAlias,
    InventoryImport,
    InventoryUpload,
    MigDevice,
    Node,
    Pool,
)
from pools.inventory.services.catalogue import GPU_MODEL_FIELDS


class GpuModelAliasSerializer(serializers.ModelSerializer):
    class Meta:
        model = GpuModelAlias
        fields = ["value", "kind"]


class GpuModelSerializer(serializers.ModelSerializer):
    """A catalogue model; pool admins create and edit it (``slug`` is fixed once created).

    ``aliases``, when written, become the model's aliases (each normalised key unique across the
    catalogue); ``pci_device_ids`` are ``0xNNNN`` strings; spec values are positive or null
    (unknown), never 0. The identity checks live in
    :mod:`pools.inventory.services.catalogue`.
    """

    aliases = GpuModelAliasSerializer(many=True, required=False)
    pci_device_ids = serializers.ListField(
        child=serializers.CharField(max_length=12), required=False, max_length=16
    )
    gpu_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = GpuModel
        fields = ["slug", *GPU_MODEL_FIELDS, "aliases", "gpu_count"]
        extra_kwargs = {
            field: {"min_value": Decimal("0.01")}
            for field in (
                "memory_gib",
                "memory_bandwidth_gbps",
                "fp16_dense_tflops",
                "bf16_dense_tflops",
                "fp8_dense_tflops",
                "int8_dense_tops",
                "nvlink_gbps",
            )
        } | {"tdp_w": {"min_value": 1}, "cuda_cores": {"min_value": 1}}

    def validate_slug(self, value):
        if self.instance is not None and value != self.instance.slug:
            raise serializers.ValidationError(
                "A model's slug cannot change: rate cards, estimates and imports refer to it."
            )
        return value

    def validate_sources(self, value):
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise serializers.ValidationError(
                'Give an object of field name -> citation, e.g. {"memory_gib": "datasheet URL"}.'
            )
        if any("\x00" in k or "\x00" in v for k, v in value.items()):
            # PostgreSQL's jsonb cannot hold U+0000
            raise serializers.ValidationError("A citation cannot contain a NUL character.")
        return value


class DriverGroupSerializer(serializers.ModelSerializer):
    name = serializers.CharField(read_only=True)
    node_count = serializers.IntegerField(read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = DriverGroup
        fields = [
            "branch",
            "name",
            "min_driver_version",
            "max_driver_version",
            "max_cuda",
            "node_count",
            "gpu_count",
        ]


class PoolSerializer(serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)
    cluster = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=Cluster.objects.all(),
        required=False,
        allow_null=True,
        help_text="The cluster's slug (/api/v1/clusters/); empty: the cluster the environment "
        "variables define for the scheduler.",
    )

    class Meta:
        model = Pool
        fields = [
            "slug",
            "name",
            "description",
            "scheduler",
            "cluster",
            "slurm_partition",
            "k8s_node_selector",
            "overcommit_ratio",
            "quota_backend",
            "quota_cohort",
            "burst",
            "node_count",
            "gpu_count",
        ]

    def validate(self, attrs):
        """The quota backend and cohort together (also database constraints): another backend
        than the ResourceQuota only on Kubernetes pools, and Kueue only with a cohort."""

        def value(name):
            if name in attrs:
                return attrs[name]
            if self.instance is not None:
                return getattr(self.instance, name)
            return Pool._meta.get_field(name).get_default()

        errors = {}
        backend = value("quota_backend")
        if backend != QuotaBackend.RESOURCE_QUOTA and value("scheduler") != Scheduler.KUBERNETES:
            errors["quota_backend"] = "Only Kubernetes pools have another quota backend."
        if backend == QuotaBackend.KUEUE and not value("quota_cohort"):
            errors["quota_cohort"] = "A Kueue pool needs its cohort (where teams borrow)."
        if value("burst") and value("scheduler") != Scheduler.KUBERNETES:
            errors["burst"] = "Only Kubernetes pools can be burst pools (elastic scale-up)."
        errors |= _cluster_errors(value("cluster"), value("scheduler"), self.instance)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    def validate_k8s_node_selector(self, value):
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise serializers.ValidationError("Must be an object of label name -> value strings.")
        return value


def _cluster_errors(cluster: Cluster | None, scheduler: str, pool: Pool | None) -> dict:
    """A pool's cluster runs its scheduler; a retiring cluster takes no new pools."""
    if cluster is None:
        return {}
    if cluster.kind != scheduler:
        return {"cluster": f"{cluster.slug} is a {cluster.get_kind_display()} cluster."}
    if cluster.retiring and (pool is None or pool.cluster_id != cluster.pk):
        return {"cluster": f"{cluster.slug} is being retired: it takes no new pools."}
    return {}


class MigSliceCountSerializer(serializers.Serializer):
    profile = serializers.CharField(help_text="MIG profile, e.g. 1g.10gb")
    slices = serializers.IntegerField()


class PoolModelCapacitySerializer(serializers.Serializer):
    """A pool's cards of one GPU model, whole cards and MIG slices apart
    (:class:`pools.inventory.selectors.PoolModelCapacity`)."""

    gpu_model = serializers.CharField(source="gpu_model.slug", help_text="GPU model slug.")
    cards = serializers.IntegerField(help_text="Every card of the model in the pool.")
    whole_cards = serializers.IntegerField(
        help_text="Schedulable whole cards: node up, not in error, not in MIG mode (what "
        "card requests are checked against, before over-commit and CUDA)."
    )
    mig_cards = serializers.IntegerField(
        help_text="Cards in MIG mode whose instances are schedulable slices."
    )
    mig_slices = serializers.SerializerMethodField()

    @extend_schema_field(MigSliceCountSerializer(many=True))
    def get_mig_slices(self, row) -> list[dict]:
        return MigSliceCountSerializer(
            [{"profile": p, "slices": n} for p, n in sorted(row.mig_slices.items())], many=True
        ).data


class MigDeviceSerializer(serializers.ModelSerializer):
    class Meta:
        model = MigDevice
        fields = [
            "index",
            "uuid",
            "profile",
            "gpu_instance_id",
            "compute_instance_id",
            "memory_total_mib",
        ]


class GpuSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname", read_only=True)
    pool = serializers.CharField(
        source="node.pool.slug", read_only=True, default=None, allow_null=True
    )
    driver_version = serializers.CharField(source="node.driver_version", read_only=True)
    # None: a card whose reported name matches no catalogue model (see raw_model_name).
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    mig_device_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Gpu
        fields = [
            "id",
            "node",
            "pool",
            "index",
            "uuid",
            "serial",
            "pci_bus_id",
            "gpu_model",
            "raw_model_name",
            "memory_total_mib",
            "mig_mode",
            "mig_device_count",
            "health",
            "driver_version",
            "last_seen_at",
        ]


class NodeGpuSerializer(serializers.ModelSerializer):
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    mig_devices = MigDeviceSerializer(many=True, read_only=True)

    class Meta:
        model = Gpu
        fields = [
            "index",
            "uuid",
            "serial",
            "pci_bus_id",
            "gpu_model",
            "raw_model_name",
            "memory_total_mib",
            "mig_mode",
            "mig_devices",
            "health",
            "last_seen_at",
        ]


class NodeSerializer(serializers.ModelSerializer):
    pool = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    cluster = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    driver_group = serializers.SlugRelatedField(
        slug_field="branch", read_only=True, allow_null=True
    )
    gpu_count = serializers.IntegerField(read_only=True)
    unrecognised_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Node
        fields = [
            "hostname",
            "cluster",
            "pool",
            "scheduler",
            "state",
            "state_reason",
            "driver_version",
            "driver_group",
            "cuda_version",
            "partitions",
            "gpu_replicas",
            "gpu_count",
            "unrecognised_count",
            "last_source",
            "last_seen_at",
        ]


class NodeDetailSerializer(NodeSerializer):
    gpus = NodeGpuSerializer(many=True, read_only=True)

    class Meta(NodeSerializer.Meta):
        fields = NodeSerializer.Meta.fields + ["labels", "gpus"]


class InventoryImportRequestSerializer(serializers.Serializer):
    """Multipart upload: ``file``, ``source``, and ``node`` (required for nvidia-smi)."""

    file = serializers.FileField()
    source = serializers.ChoiceField(choices=InventorySource.choices)
    node = serializers.CharField(required=False, allow_blank=True, max_length=253)
    pool = serializers.SlugRelatedField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, allow_null=True
    )


class InventoryUploadSerializer(serializers.ModelSerializer):
    """A background import: its state, progress (per cent) and, once done, the import report
    (the same object a synchronous import answers); ``error`` when it failed."""

    pool = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    status_url = serializers.SerializerMethodField()
    report = serializers.JSONField(read_only=True, allow_null=True)

    class Meta:
        model = InventoryUpload
        fields = [
            "id", "source", "node", "pool", "filename", "status", "progress", "report", "error",
            "created_at", "finished_at", "status_url",
        ]  # fmt: skip
        read_only_fields = fields

    def get_status_url(self, upload) -> str:
        return f"/api/v1/inventory/uploads/{upload.pk}/"


class InventoryImportSerializer(serializers.ModelSerializer):
    actor = serializers.StringRelatedField(allow_null=True)  # None: run by the system

    class Meta:
        model = InventoryImport
        fields = [
            "id",
            "source",
            "filename",
            "actor",
            "nodes_created",
            "nodes_updated",
            "nodes_unchanged",
            "nodes_rejected",
            "gpus_seen",
            "errors",
            "created_at",
        ]


class UnrecognisedModelSerializer(serializers.Serializer):
    raw_model_name = serializers.CharField()
    gpu_count = serializers.IntegerField()
    node_count = serializers.IntegerField()


class AliasMapRequestSerializer(serializers.Serializer):
    raw_model_name = serializers.CharField(max_length=120)
    gpu_model = serializers.SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.all())
