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
    # Issue 35: cards an elastic allocation placed in a burst pool (another cluster, a cloud).
    BURST_POOL = "burst-pool", "Burst pool (elastic cards placed in another pool)"
    # Shared storage (GB-month) and network egress (GB) per team, from a CSV or Prometheus.
    EXTRA_CHARGES_CSV = "extra-csv", "Storage / egress CSV"
    EXTRA_CHARGES_PROMETHEUS = "extra-prometheus", "Storage / egress from Prometheus"


class UsageUnit(models.TextChoices):
    CARD_SECONDS = "card-seconds", "card-seconds"
    INPUT_TOKENS = "input-tokens", "input tokens (uncached)"
    CACHED_INPUT_TOKENS = "cached-input-tokens", "cached input tokens"
    OUTPUT_TOKENS = "output-tokens", "output tokens"
    # A gateway request that reported no usage: counted, never read as 0 tokens.
    UNMETERED_REQUESTS = "unmetered-requests", "requests without usage (unmetered)"
    # Extra charges (seed 004 §5.2): storage held (GB x the share of the billing month held)
    # and network egress (GB, 10^9 bytes).
    GB_MONTHS = "gb-months", "GB-months"
    GB = "gb", "GB"


TOKEN_UNITS = (
    UsageUnit.INPUT_TOKENS,
    UsageUnit.CACHED_INPUT_TOKENS,
    UsageUnit.OUTPUT_TOKENS,
)


class ChargeBasis(models.TextChoices):
    """How a usage record is charged. ``reserved``, ``used`` and ``tokens`` are the allocation's
    pricing methods; ``included`` is GPU time used inside the window and place of an allocation
    whose own price pays for its cards — reserved card-hours or tokens — within its cards
    (:mod:`billing.reserved_cover`): already paid by that allocation's reserved card-hours or
    tokens, kept for showback, never charged again."""

    RESERVED = "reserved", "Reserved card-hours"
    # Cards an elastic allocation held above its guaranteed floor (pools/elastic/).
    BURST = "burst", "Burst card-hours (elastic)"
    USED = "used", "Used card-hours"
    TOKENS = "tokens", "Tokens"
    INCLUDED = "included", "Used within an allocation's own pricing (not charged)"
    # Tokens of a response a gateway cache replayed: no GPU computed them. Priced or not by the
    # rate card's ``replayed_tokens_charged``.
    REPLAYED = "replayed", "Replayed from a gateway cache (no GPU)"
    # A tenant's share of a time-sliced, MPS or MIG-shared card (billing/shared_cards.py).
    SHARED = "shared", "Share of a shared card"
    # Issue 35: elastic cards placed in a burst pool, at that pool's price.
    BURST_POOL = "burst-pool", "Burst-pool card-hours (elastic, another pool)"
    STORAGE = "storage", "Shared storage"
    EGRESS = "egress", "Network egress"


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
    # Issue 35: prices of one pool (``RateCardEntry.pool``). The burst pool's card-hour (with
    # its GPU model); storage and egress with or without a pool (without: every pool's).
    POOL_BURST = "pool-burst", "Burst pool, per card-hour"
    STORAGE_GB_MONTH = "storage-gb-month", "Shared storage, per GB-month"
    EGRESS_GB = "egress-gb", "Network egress, per GB"


GPU_RATE_KINDS = (RateKind.GPU_RESERVED, RateKind.GPU_USED, RateKind.GPU_BURST)
EXTRA_RATE_KINDS = (RateKind.STORAGE_GB_MONTH, RateKind.EGRESS_GB)
TOKEN_RATE_KINDS = (RateKind.TOKEN_INPUT, RateKind.TOKEN_CACHED_INPUT, RateKind.TOKEN_OUTPUT)


class StatementStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    FINAL = "final", "Final"


STATEMENT_IN_PROGRESS = "in-progress"
"""The status of the month in progress, which has no statement until the month close drafts it
on the 1st: the unsaved statement :func:`billing.services.statements.statement_preview` builds
carries it, so its page and its CSV (``so-far-<team>-<month>.csv``) say so rather than "draft".
Never stored (the column holds five characters and its constraint draft or final), so the API,
which lists stored statements, still answers ``draft`` / ``final`` only."""

STATEMENT_STATUS_LABELS = {
    **dict(StatementStatus.choices),
    STATEMENT_IN_PROGRESS: "not drafted yet",
}
"""Every status a statement page shows, in words: the stored ones' labels and the month in
progress's."""


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
