"""Enumerations stored in the database (values are the field's own words)."""

from django.db import models


class CardClass(models.TextChoices):
    CONSUMER = "consumer", "Consumer"
    DATACENTRE = "datacentre", "Data-centre"


class FormFactor(models.TextChoices):
    SXM = "sxm", "SXM"
    PCIE = "pcie", "PCIe"
    NVL = "nvl", "NVL (PCIe pair with NVLink bridge)"


class AliasKind(models.TextChoices):
    NVIDIA_SMI = "nvidia-smi", "nvidia-smi name"
    SLURM_GRES = "slurm-gres", "Slurm GRES type"
    K8S_LABEL = "k8s-label", "Kubernetes nvidia.com/gpu.product"
    ADMIN = "admin", "Mapped by an admin"


class Scheduler(models.TextChoices):
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"
    NONE = "none", "None"


class NodeState(models.TextChoices):
    UP = "up", "Up"
    DRAIN = "drain", "Drain"
    DOWN = "down", "Down"
    MAINTENANCE = "maintenance", "Maintenance"
    UNKNOWN = "unknown", "Unknown"


class GpuHealth(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"
    UNKNOWN = "unknown", "Unknown"


class InventorySource(models.TextChoices):
    NVIDIA_SMI = "nvidia-smi", "nvidia-smi"
    SLURM = "slurm", "Slurm (slurmrestd nodes)"
    KUBERNETES = "kubernetes", "Kubernetes Node objects"


class TeamRole(models.TextChoices):
    MEMBER = "member", "Member"
    MANAGER = "manager", "Manager"


class WorkloadKind(models.TextChoices):
    TRAINING = "training", "Training (Slurm)"
    INFERENCE = "inference", "Inference (Kubernetes)"


class RequestKind(models.TextChoices):
    """What a request asks for: cards a pool has (approved into an allocation), or capacity no
    pool has yet (a GPU model no eligible pool hosts, or more cards than it holds), which a pool
    admin accepts as a note for procurement or a pool's expansion, or declines (issue #21)."""

    CARDS = "cards", "Cards from a pool"
    GROWTH = "growth", "Capacity to add"


class RequestStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    APPROVED = "approved", "Approved"
    ACCEPTED = "accepted", "Accepted: capacity planned"  # a growth request only
    REJECTED = "rejected", "Rejected"
    CANCELLED = "cancelled", "Cancelled"


class AllocationStatus(models.TextChoices):
    APPROVED = "approved", "Approved"
    PROVISIONING = "provisioning", "Provisioning"
    ACTIVE = "active", "Active"
    EXPIRING = "expiring", "Expiring"
    ENDED = "ended", "Ended"
    FAILED = "failed", "Failed"
    RECLAIMED = "reclaimed", "Reclaimed"
    CANCELLED = "cancelled", "Cancelled"


class PricingMethod(models.TextChoices):
    RESERVED = "reserved", "Reserved card-hours"
    USED = "used", "Used card-hours"
    TOKENS = "tokens", "Tokens"


class EstimateStatus(models.TextChoices):
    """A sizing estimate's job: pending → running → done, or failed (with the reason)."""

    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class IdleFindingState(models.TextChoices):
    """An idle finding: open (idle, team warned, grace running) → reclaimed (→ undone), or
    resolved (busy again, or the allocation stopped) / dismissed (by an admin)."""

    OPEN = "open", "Open"
    RECLAIMED = "reclaimed", "Reclaimed"
    UNDONE = "undone", "Reclamation undone"
    RESOLVED = "resolved", "Resolved"
    DISMISSED = "dismissed", "Dismissed"


class QuotaBackend(models.TextChoices):
    """Where a Kubernetes pool's elastic decisions land (scheduler_adapters.kubernetes_elastic)."""

    RESOURCE_QUOTA = "resourcequota", "ResourceQuota (the portal's own loop)"
    KUEUE = "kueue", "Kueue ClusterQueue (nominalQuota + borrowingLimit in a cohort)"
    VOLCANO = "volcano", "Volcano Queue (guarantee / deserved / capability)"
    KOORDINATOR = "koordinator", "Koordinator ElasticQuota (min / max)"


class ClusterStatus(models.TextChoices):
    """What the last connection check of a cluster found (pools/clusters/)."""

    UNKNOWN = "unknown", "Not checked yet"
    REACHABLE = "reachable", "Reachable"
    UNREACHABLE = "unreachable", "Unreachable"


class ClusterOperation(models.TextChoices):
    """The per-cluster jobs whose last success and errors a cluster's health shows."""

    CHECK = "check", "Connection check"
    RECONCILE = "reconcile", "Reconcile"
    INVENTORY = "inventory", "Inventory import"
    USAGE = "usage", "Usage import"
    IDLE_SCAN = "idle-scan", "Idle scan"
    WAITING = "waiting", "Waiting work read"


class CredentialKind(models.TextChoices):
    """How a cluster's credentials are referred to: a file the portal reads (a Slurm JWT HS256
    key, a token file, a kubeconfig), or the environment variables (the cluster they define)."""

    JWT_KEY = "jwt-key", "Slurm JWT key file (tokens minted by the portal)"
    TOKEN_FILE = "token-file", "Token file (bearer token)"
    KUBECONFIG = "kubeconfig", "Kubeconfig file"
    ENVIRONMENT = "environment", "Environment variables"
