"""Enumerations stored in the database (values are the field's own words)."""

from django.db import models


class UsageSource(models.TextChoices):
    SLURM_ACCOUNTING = "slurm-accounting", "Slurm accounting"
    KUBERNETES = "kubernetes", "Kubernetes (kube-state-metrics)"
    TOKEN_API = "token-api", "Token API (inference gateway)"
    PROMETHEUS_TOKENS = "prometheus-tokens", "Prometheus vLLM counters"
    RESERVATION = "reservation", "Reservation (allocation)"
    ELASTIC_BURST = "elastic-burst", "Elastic burst (cards held above the floor)"
    # SharedCardUse rows (pods on replicas of time-sliced / MPS cards), not usage records
    KUBERNETES_SHARED = "k8s-shared", "Kubernetes shared cards (dcgm-exporter virtual GPUs)"


class UsageUnit(models.TextChoices):
    CARD_SECONDS = "card-seconds", "card-seconds"
    INPUT_TOKENS = "input-tokens", "input tokens (uncached)"
    CACHED_INPUT_TOKENS = "cached-input-tokens", "cached input tokens"
    OUTPUT_TOKENS = "output-tokens", "output tokens"
    # A gateway request that reported no usage: counted, never read as 0 tokens.
    UNMETERED_REQUESTS = "unmetered-requests", "requests without usage (unmetered)"


TOKEN_UNITS = (
    UsageUnit.INPUT_TOKENS,
    UsageUnit.CACHED_INPUT_TOKENS,
    UsageUnit.OUTPUT_TOKENS,
)


class ChargeBasis(models.TextChoices):
    """How a usage record is charged. The first three are the allocation's pricing methods;
    ``included`` is GPU time used inside a reserved allocation, already paid by the reservation
    (kept for showback, never charged again)."""

    RESERVED = "reserved", "Reserved card-hours"
    # Cards an elastic allocation held above its guaranteed floor (pools/elastic/).
    BURST = "burst", "Burst card-hours (elastic)"
    USED = "used", "Used card-hours"
    TOKENS = "tokens", "Tokens"
    INCLUDED = "included", "Used within a reservation (not charged)"
    # Tokens of a response a gateway cache replayed: no GPU computed them. Priced or not by the
    # rate card's ``replayed_tokens_charged``.
    REPLAYED = "replayed", "Replayed from a gateway cache (no GPU)"
    # A tenant's share of a time-sliced, MPS or MIG-shared card (billing/shared_cards.py).
    SHARED = "shared", "Share of a shared card"


class UsageFlag(models.TextChoices):
    NONE = "", "—"
    CLOCK_SKEW = "clock_skew", "End before start (clock skew): clamped to 0, review"
    UNKNOWN_GPU_MODEL = "unknown_gpu_model", "GPU type matches no catalogue model"
    AMBIGUOUS_TIME = (
        "ambiguous_time",
        "Start or end in the hour repeated when DST ended, no elapsed time: billed at the first "
        "reading, the other kept",
    )


class RateKind(models.TextChoices):
    GPU_RESERVED = "gpu-reserved", "Reserved, per card-hour"
    GPU_USED = "gpu-used", "On use, per card-hour"
    GPU_BURST = "gpu-burst", "Elastic burst, per card-hour (default: the reserved price)"
    TOKEN_INPUT = "token-input", "Input, per million tokens"
    TOKEN_CACHED_INPUT = "token-cached-input", "Cached input, per million tokens"
    TOKEN_OUTPUT = "token-output", "Output, per million tokens"


GPU_RATE_KINDS = (RateKind.GPU_RESERVED, RateKind.GPU_USED, RateKind.GPU_BURST)
TOKEN_RATE_KINDS = (RateKind.TOKEN_INPUT, RateKind.TOKEN_CACHED_INPUT, RateKind.TOKEN_OUTPUT)


class StatementStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    FINAL = "final", "Final"


class LineKind(models.TextChoices):
    USAGE = "usage", "Usage"
    ADJUSTMENT = "adjustment", "Adjustment (late usage of a closed month)"


class ShareBasis(models.TextChoices):
    """What a tenant's share of a shared card is read from (:mod:`billing.shared_cards`)."""

    TIME_SLICING = "time-slicing", "Time-slicing: pod time × replicas held ÷ replicas"
    MPS = "mps", "MPS: pod time × replicas held ÷ replicas"
    MIG = "mig", "MIG: slice time × compute slices ÷ the card's"
    DCGM_UTILISATION = "dcgm-util", "DCGM utilisation per pod: pod time × utilisation"


PART_SHARE_BASES = (ShareBasis.TIME_SLICING, ShareBasis.MPS, ShareBasis.MIG)
