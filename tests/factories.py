"""factory_boy factories, one per model."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from billing import models as billing_models
from billing.budgets import models as budget_models
from billing.services.versions import (
    price_list_changed,
    shared_card_months_changed,
    usage_records_changed,
)
from pools.access import models as access_models
from pools.advisor import models as advisor_models
from pools.audit import models as audit_models
from pools.calendar import models as calendar_models
from pools.calendar.feed import feed_token, new_salt, token_sha256
from pools.capacity import models as capacity_models
from pools.capacity import shapes
from pools.classes import models as classes_models
from pools.clusters import models as cluster_models
from pools.common.choices import (
    AllocationStatus,
    NodeState,
    RequestStatus,
    Scheduler,
    TeamRole,
    WorkloadKind,
)
from pools.elastic import models as elastic_models
from pools.inventory import models as inventory_models
from pools.inventory.gpu_names import normalise_model_key
from pools.inventory.services.driver_groups import driver_group_for_version
from pools.jobs import models as jobs_models
from pools.maintenance import models as maintenance_models
from pools.overrides import models as override_models
from pools.reclamation import models as reclamation_models
from pools.recurring import models as recurring_models
from pools.serving import models as serving_models
from pools.sizing import models as sizing_models
from pools.tenancy import models as tenancy_models
from pools.tokenflow import models as tokenflow_models
from pools.waiting import models as waiting_models


class PoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = inventory_models.Pool
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"pool-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())
    scheduler = Scheduler.SLURM
    slurm_partition = factory.LazyAttribute(lambda o: o.slug)


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = inventory_models.Node

    hostname = factory.Sequence(lambda n: f"gpu-node-{n:04d}")
    pool = factory.SubFactory(PoolFactory)
    # a node is of its pool's cluster, as an import of that cluster makes it
    cluster = factory.LazyAttribute(
        lambda o: (
            o.pool.cluster
            if o.pool is not None and inventory_models.node_cluster_id(o.pool.cluster)
            else None
        )
    )
    scheduler = Scheduler.SLURM
    state = NodeState.UP
    driver_version = "550.54.15"
    driver_group = factory.LazyAttribute(lambda o: driver_group_for_version(o.driver_version))


class GpuFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = inventory_models.Gpu

    node = factory.SubFactory(NodeFactory)
    index = factory.Sequence(lambda n: n % 8)
    uuid = factory.Sequence(lambda n: f"GPU-{n:08x}-1111-2222-3333-444444444444")
    gpu_model = factory.LazyFunction(
        lambda: inventory_models.GpuModel.objects.get(slug="a100_80g_sxm")
    )
    raw_model_name = "NVIDIA A100-SXM4-80GB"
    memory_total_mib = 81920


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tenancy_models.Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    cost_centre = factory.Sequence(lambda n: f"CC-{1000 + n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user-{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    password = factory.django.Password("pw")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tenancy_models.Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    role = TeamRole.MEMBER


def _kind_of(pool: inventory_models.Pool | None) -> str:
    if pool is not None and pool.scheduler == Scheduler.SLURM:
        return WorkloadKind.TRAINING
    return WorkloadKind.INFERENCE


def next_week_9am() -> datetime:
    """09:00 UTC seven days from now: a window start every validation accepts."""
    return (timezone.now() + timedelta(days=7)).replace(hour=9, minute=0, second=0, microsecond=0)


class CapacityRequestFactory(factory.django.DjangoModelFactory):
    """A submitted request for 1 L40S card for a week from next week; no validation runs."""

    class Meta:
        model = capacity_models.CapacityRequest

    team = factory.SubFactory(TeamFactory)
    requested_by = factory.SubFactory(UserFactory)
    pool = factory.SubFactory(PoolFactory, scheduler=Scheduler.KUBERNETES, slurm_partition="")
    workload_kind = factory.LazyAttribute(lambda o: _kind_of(o.pool))
    gpu_model = factory.LazyFunction(lambda: inventory_models.GpuModel.objects.get(slug="l40s"))
    card_count = 1
    starts_at = factory.LazyFunction(next_week_9am)
    ends_at = factory.LazyAttribute(lambda o: o.starts_at + timedelta(days=7))
    justification = "factory"
    status = RequestStatus.SUBMITTED
    submitted_at = factory.LazyAttribute(
        lambda o: None if o.status == RequestStatus.DRAFT else timezone.now()
    )


class AllocationFactory(factory.django.DjangoModelFactory):
    """An allocation and the approved request it came from, both with the same fields."""

    class Meta:
        model = capacity_models.Allocation
        skip_postgeneration_save = True

    team = factory.SubFactory(TeamFactory)
    pool = factory.SubFactory(PoolFactory, scheduler=Scheduler.KUBERNETES, slurm_partition="")
    gpu_model = factory.LazyFunction(lambda: inventory_models.GpuModel.objects.get(slug="l40s"))
    card_count = 1
    mig_profile = ""
    starts_at = factory.LazyFunction(next_week_9am)
    ends_at = factory.LazyAttribute(lambda o: o.starts_at + timedelta(days=7))
    status = AllocationStatus.APPROVED
    request = factory.SubFactory(
        CapacityRequestFactory,
        team=factory.SelfAttribute("..team"),
        pool=factory.SelfAttribute("..pool"),
        gpu_model=factory.SelfAttribute("..gpu_model"),
        card_count=factory.SelfAttribute("..card_count"),
        mig_profile=factory.SelfAttribute("..mig_profile"),
        starts_at=factory.SelfAttribute("..starts_at"),
        ends_at=factory.SelfAttribute("..ends_at"),
        status=RequestStatus.APPROVED,
    )

    @factory.post_generation
    def placed_cards(obj, create, extracted, **kwargs):
        """A placement is indexed as the approval indexes it (:class:`PlacedCards` rows)."""
        if create and obj.placement:
            capacity_models.PlacedCards.objects.bulk_create(shapes.placed_cards(obj))


class PlacedCardsFactory(factory.django.DjangoModelFactory):
    """One node's cards of a placed allocation (GPUs 0 and 1 of ``dgx-1``)."""

    class Meta:
        model = capacity_models.PlacedCards

    allocation = factory.SubFactory(AllocationFactory)
    hostname = "dgx-1"
    gpu_mask = 0b11


# ---------------------------------------------------------------------------------------------
# Inventory input as the sources print it, for the importer, the API and the pages.

NVIDIA_SMI_CSV_HEADER = (
    "index, name, uuid, serial, pci.bus_id, memory.total [MiB], driver_version, mig.mode.current"
)
A100_SXM = "NVIDIA A100-SXM4-80GB"
MASKED_UUID = "GPU-00000000-0000-0000-0000-000000000000"


def gpu_uuid(host: int, index: int) -> str:
    """A well-formed, unique GPU UUID for card ``index`` of host number ``host``."""
    return f"GPU-{host:08x}-{index:04x}-4000-8000-{host * 16 + index:012x}"


def nvidia_smi_csv(
    cards: list[dict] | int,
    *,
    name: str = A100_SXM,
    host: int = 1,
    driver: str = "535.129.03",
    memory_mib: int = 81920,
) -> bytes:
    """``nvidia-smi --query-gpu=... --format=csv`` output.

    ``cards`` is a count (identical cards with unique UUIDs) or a list of dicts overriding
    ``name``, ``uuid``, ``serial``, ``memory_mib``, ``index`` per card.
    """
    if isinstance(cards, int):
        cards = [{} for _ in range(cards)]
    lines = [NVIDIA_SMI_CSV_HEADER]
    for position, card in enumerate(cards):
        index = card.get("index", position)
        lines.append(
            f"{index}, {card.get('name', name)}, {card.get('uuid', gpu_uuid(host, index))}, "
            f"{card.get('serial', 1320000000000 + host * 16 + index)}, "
            f"00000000:{0x18 + index * 0x10:02X}:00.0, {card.get('memory_mib', memory_mib)} MiB, "
            f"{driver}, Disabled"
        )
    return ("\n".join(lines) + "\n").encode()


def slurm_node(
    name: str, gres: str, *, state: str = "idle", flags=(), partitions=("train",), reason: str = ""
) -> dict:
    """One node of a slurmrestd v0.0.38 ``GET /nodes`` response."""
    return {
        "name": name,
        "hostname": name,
        "state": state,
        "state_flags": list(flags),
        "gres": gres,
        "partitions": list(partitions),
        "reason": reason,
    }


def slurm_nodes_json(*nodes: dict) -> bytes:
    return json.dumps(
        {"meta": {"Slurm": {"release": "22.05.8"}}, "errors": [], "nodes": list(nodes)}
    ).encode()


def node_with_gpus(
    count: int, *, gpu_model: str = "a100_80g_sxm", **node_fields
) -> inventory_models.Node:
    """A node and ``count`` cards of one catalogue model, indexed 0..count-1."""
    node = NodeFactory(**node_fields)
    model = inventory_models.GpuModel.objects.get(slug=gpu_model)
    for index in range(count):
        GpuFactory(node=node, index=index, gpu_model=model, raw_model_name=model.vendor_name)
    return node


def inference_fleet() -> inventory_models.Pool:
    """The demo's inference pool as factories: Kubernetes pool ``infer-k8s`` with 10 nodes x 4
    L40S and 4 nodes x 2 A100 80GB PCIe (driver 550), plus a Slurm pool ``train-slurm`` with
    2 nodes x 8 A100 SXM4 80GB that serving requests cannot use."""
    pool = PoolFactory(
        slug="infer-k8s",
        name="Inference (Kubernetes)",
        scheduler=Scheduler.KUBERNETES,
        slurm_partition="",
    )
    for host, (model, cards) in enumerate([("l40s", 4)] * 10 + [("a100_80g_pcie", 2)] * 4):
        node_with_gpus(
            cards,
            gpu_model=model,
            hostname=f"inf-{host:02d}",
            pool=pool,
            scheduler=Scheduler.KUBERNETES,
        )
    train = PoolFactory(slug="train-slurm", name="Training (Slurm)", slurm_partition="train")
    for host in range(2):
        node_with_gpus(8, hostname=f"trn-{host:02d}", pool=train)
    return pool


# ---------------------------------------------------------------------------------------------
# The other models, so every model has a factory (tests/test_factories.py saves each once).


class GpuModelFactory(factory.django.DjangoModelFactory):
    """A catalogue-like model (the shipped catalogue is loaded by migration 0002)."""

    class Meta:
        model = inventory_models.GpuModel

    slug = factory.Sequence(lambda n: f"test-gpu-{n}")
    name = factory.Sequence(lambda n: f"Test GPU {n}")
    vendor_name = factory.LazyAttribute(lambda o: f"NVIDIA {o.name}")
    card_class = "datacentre"
    form_factor = "pcie"
    memory_gib = Decimal("48.00")


class GpuModelAliasFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = inventory_models.GpuModelAlias

    gpu_model = factory.SubFactory(GpuModelFactory)
    value = factory.Sequence(lambda n: f"Test Alias {n}")
    kind = "admin"
    key = factory.LazyAttribute(lambda o: normalise_model_key(o.value))


class DriverGroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = inventory_models.DriverGroup
        django_get_or_create = ("branch",)

    branch = "999"


class MigDeviceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = inventory_models.MigDevice

    gpu = factory.SubFactory(GpuFactory)
    index = factory.Sequence(int)


class InventoryImportFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = inventory_models.InventoryImport

    source = "nvidia-smi"


class InventoryUploadFactory(factory.django.DjangoModelFactory):
    """A background import waiting for its task (pools/inventory/services/uploads.py)."""

    class Meta:
        model = inventory_models.InventoryUpload

    source = "slurm"
    filename = "nodes.json"
    data = b'{"nodes": []}'


class ApiTokenFactory(factory.django.DjangoModelFactory):
    """A CI client's token, made as the token endpoint makes it (knox draws and hashes it)."""

    class Meta:
        model = access_models.ApiToken

    user = factory.SubFactory(UserFactory)
    client = "ci"

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        token, _ = model_class.objects.create(*args, **kwargs)
        return token


class AuditEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = audit_models.AuditEvent

    action = "test.done"
    object_type = "pools.team"
    object_id = factory.Sequence(str)


class SchedulerDriftFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = capacity_models.SchedulerDrift

    scheduler = Scheduler.SLURM
    subject = factory.Sequence(lambda n: f"account team-{n} GrpTRES gres/gpu:a100")
    expected = "4"
    found = "8"


class QueuedJobFactory(factory.django.DjangoModelFactory):
    """A job the broker has not taken yet: the reconcile, no arguments."""

    class Meta:
        model = jobs_models.QueuedJob

    task_name = "pools.capacity.tasks.reconcile_task"


class SizingEstimateFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sizing_models.SizingEstimate

    inputs = factory.LazyFunction(lambda: {"model": "llama-3.1-8b"})
    created_by = factory.SubFactory(UserFactory)


class ReclamationPolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = reclamation_models.ReclamationPolicy

    pool = factory.SubFactory(PoolFactory)


class ExemptionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = reclamation_models.Exemption

    team = factory.SubFactory(TeamFactory)
    reason = "demo day"
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=7))


class IdleFindingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = reclamation_models.IdleFinding

    allocation = factory.SubFactory(AllocationFactory, status=AllocationStatus.ACTIVE)
    first_seen_at = factory.LazyFunction(timezone.now)
    last_seen_at = factory.LazyAttribute(lambda o: o.first_seen_at)
    card_count = factory.LazyAttribute(lambda o: o.allocation.card_count)
    cards_in_use = 0


class IdleGroupEvaluationFactory(factory.django.DjangoModelFactory):
    """A group's stored evaluation with no cards' numbers (what a finding reads as ``{}``)."""

    class Meta:
        model = reclamation_models.IdleGroupEvaluation

    evaluated_at = factory.LazyFunction(timezone.now)
    detail = factory.LazyFunction(dict)


class IdleScanRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = reclamation_models.IdleScanRun

    started_at = factory.LazyFunction(timezone.now)


class ElasticPolicyFactory(factory.django.DjangoModelFactory):
    """An allocation of 2 cards made elastic up to 4, holding its floor."""

    class Meta:
        model = elastic_models.ElasticPolicy

    allocation = factory.SubFactory(AllocationFactory, card_count=2)
    ceiling_cards = 4
    cards_held = 2


class ElasticWhatIfFactory(factory.django.DjangoModelFactory):
    """A what-if of the saved policy over 7 days, queued (pending)."""

    class Meta:
        model = elastic_models.ElasticWhatIf

    policy = factory.SubFactory(ElasticPolicyFactory)
    params = factory.LazyFunction(lambda: {"days": 7, "source": "", "fields": {}})


class ReclamationWhatIfFactory(factory.django.DjangoModelFactory):
    """A what-if of a pool's saved reclamation policy over 7 days, queued (pending)."""

    class Meta:
        model = reclamation_models.ReclamationWhatIf

    pool = factory.SubFactory(PoolFactory)
    params = factory.LazyFunction(lambda: {"days": 7, "overrides": {}})


class ScaleEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = elastic_models.ScaleEvent

    policy = factory.SubFactory(ElasticPolicyFactory)
    decided_at = factory.LazyFunction(timezone.now)
    effective_at = factory.SelfAttribute("decided_at")
    action = "up"
    reason = "scale_up"
    cards_from = 2
    cards_to = 4


class SignalReadingFactory(factory.django.DjangoModelFactory):
    """One minute's reading of a busy namespace, at the floor's cards."""

    class Meta:
        model = elastic_models.SignalReading

    policy = factory.SubFactory(ElasticPolicyFactory)
    read_at = factory.LazyFunction(timezone.now)
    util_pct = 80.0
    latency_ms = 900.0
    request_s = 10.0
    cards_held = 2


class ServingRollupFactory(factory.django.DjangoModelFactory):
    """One 5-minute bucket of a vLLM allocation: 4 running, 1 waiting, KV cache 60 %, 30,000
    output tokens; everything else unknown."""

    class Meta:
        model = serving_models.ServingRollup

    allocation = factory.SubFactory(AllocationFactory, status=AllocationStatus.ACTIVE)
    bucket_start = factory.LazyFunction(
        lambda: timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=10)
    )
    cards_held = factory.SelfAttribute("allocation.card_count")
    engine = "vllm"
    requests_running = 4.0
    requests_waiting = 1.0
    kv_cache_usage_pct = 60.0
    generation_tokens = 30_000.0

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        """Stored as a pass stores it: the allocation marked as rolled up beside the row."""
        from pools.serving.services import serving_coverage_note

        row = super()._create(model_class, *args, **kwargs)
        serving_coverage_note([row])
        return row


class ServingCoverageFactory(factory.django.DjangoModelFactory):
    """An allocation rolled up since ten minutes ago (as a pass marks it beside its rows)."""

    class Meta:
        model = serving_models.ServingCoverage

    allocation = factory.SubFactory(AllocationFactory, status=AllocationStatus.ACTIVE)
    first_bucket = factory.LazyFunction(
        lambda: timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=10)
    )


class ServingRollupRunFactory(factory.django.DjangoModelFactory):
    """A pass that read six families and wrote one row."""

    class Meta:
        model = serving_models.ServingRollupRun

    bucket_start = factory.LazyFunction(
        lambda: timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=10)
    )
    started_at = factory.LazyFunction(timezone.now)
    finished_at = factory.LazyFunction(timezone.now)
    ok = True
    queries = 6
    allocations = 1
    rollups = 1


class ServedModelFactory(factory.django.DjangoModelFactory):
    """An allocation serving Llama 3 8B in FP16 on one card per replica with vLLM."""

    class Meta:
        model = serving_models.ServedModel

    allocation = factory.SubFactory(AllocationFactory, status=AllocationStatus.ACTIVE)
    model_id = "llama3_8b"
    precision = "FP16"
    tp = 1
    engine = "vllm"


class ServingCalibrationDayFactory(factory.django.DjangoModelFactory):
    """Yesterday: 250 tok/s per card at 3 sequences per replica against 200 sized (1.25,
    above the throughput band 0.717-1.134)."""

    class Meta:
        model = serving_models.ServingCalibrationDay

    allocation = factory.SubFactory(AllocationFactory, status=AllocationStatus.ACTIVE)
    day = factory.LazyFunction(lambda: timezone.now().date() - timedelta(days=1))
    concurrency = 3.0
    measured_tok_s_per_card = 250.0
    sized_tok_s_per_card = 200.0
    band_low_factor = 0.717
    band_high_factor = 1.134
    ratio = 1.25
    position = "above"


class CalibrationRecordFactory(factory.django.DjangoModelFactory):
    """Llama 3 8B FP16 with vLLM on L40S, driver branch 550: 325 tok/s per card over 2 days."""

    class Meta:
        model = sizing_models.CalibrationRecord

    model_id = "llama3_8b"
    gpu_model = factory.LazyFunction(lambda: inventory_models.GpuModel.objects.get(slug="l40s"))
    engine = "vllm"
    precision = "FP16"
    driver_branch = 550
    days = 2
    allocations = 1
    median_tok_s_per_card = 325.0
    median_ratio = 1.6
    updated_at = factory.LazyFunction(timezone.now)


class RateCardFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = billing_models.RateCard
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Rates {n}")
    currency = "EUR"
    effective_from = factory.LazyFunction(lambda: timezone.now().date().replace(day=1))

    @factory.post_generation
    def price_list_version(obj, create, extracted, **kwargs):
        """A card is written as rate_card_create writes it: the price list's version raised."""
        if create:
            price_list_changed()


class RateCardEntryFactory(factory.django.DjangoModelFactory):
    """A reserved card-hour price for a catalogue GPU model."""

    class Meta:
        model = billing_models.RateCardEntry
        skip_postgeneration_save = True

    rate_card = factory.SubFactory(RateCardFactory)
    kind = "gpu-reserved"
    gpu_model = factory.LazyFunction(lambda: inventory_models.GpuModel.objects.get(slug="l40s"))
    price = Decimal("1.25")

    @factory.post_generation
    def price_list_version(obj, create, extracted, **kwargs):
        if create:
            price_list_changed()


class UsageRecordFactory(factory.django.DjangoModelFactory):
    """One hour of one card, reserved, this month."""

    class Meta:
        model = billing_models.UsageRecord
        skip_postgeneration_save = True

    team = factory.SubFactory(TeamFactory)
    gpu_model = factory.LazyFunction(lambda: inventory_models.GpuModel.objects.get(slug="l40s"))
    quantity = Decimal(3600)
    unit = "card-seconds"
    basis = "reserved"
    period_start = factory.LazyFunction(lambda: timezone.now().replace(minute=0, second=0))
    period_end = factory.LazyAttribute(lambda o: o.period_start + timedelta(hours=1))
    month = factory.LazyAttribute(lambda o: o.period_start.date().replace(day=1))
    source = "reservation"
    source_id = factory.Sequence(lambda n: f"test-{n}")
    created_at = factory.LazyFunction(timezone.now)
    updated_at = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def usage_version(obj, create, extracted, **kwargs):
        """A record is written as the importers write it: its team's month's version raised."""
        if create:
            usage_records_changed(records=[obj])


class UsageImportFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = billing_models.UsageImport

    source = "reservation"
    window_start = factory.LazyFunction(lambda: timezone.now() - timedelta(days=1))
    window_end = factory.LazyFunction(timezone.now)


class MetricsUrlSpanFactory(factory.django.DjangoModelFactory):
    """A Kubernetes cluster read from its own Prometheus since a day ago."""

    class Meta:
        model = billing_models.MetricsUrlSpan

    cluster = factory.SubFactory(
        "factories.ClusterFactory", kind=Scheduler.KUBERNETES, credential_kind="kubeconfig",
        credential_path="/run/secrets/kubeconfig", api_url="",
    )  # fmt: skip
    url = "http://prometheus.example.com:9090"
    since = factory.LazyFunction(lambda: timezone.now() - timedelta(days=1))


class StatementFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = billing_models.Statement

    team = factory.SubFactory(TeamFactory)
    month = factory.LazyFunction(lambda: timezone.now().date().replace(day=1))
    currency = "EUR"
    built_at = factory.LazyFunction(timezone.now)


class StatementLineFactory(factory.django.DjangoModelFactory):
    """10 card-hours at 1.25 EUR: amount 12.50 EUR."""

    class Meta:
        model = billing_models.StatementLine

    statement = factory.SubFactory(StatementFactory)
    position = factory.Sequence(int)
    period = factory.LazyAttribute(lambda o: o.statement.month)
    basis = "reserved"
    unit = "card-hours"
    quantity = Decimal(10)
    unit_price = Decimal("1.25")
    amount = Decimal("12.50")
    rate_from = factory.LazyAttribute(lambda o: o.statement.month)
    rate_to = factory.LazyAttribute(lambda o: o.statement.month + timedelta(days=1))


class BudgetFactory(factory.django.DjangoModelFactory):
    """A monthly budget of 100 card-hours from January 2026, warning beyond it."""

    class Meta:
        model = budget_models.Budget

    team = factory.SubFactory(TeamFactory)
    period = "month"
    starts_on = datetime(2026, 1, 1).date()
    card_hours_limit = Decimal(100)
    enforcement = "warn"


class BudgetConsumptionFactory(factory.django.DjangoModelFactory):
    """Kept figures of a team's month with no usage, current at versions 0."""

    class Meta:
        model = budget_models.BudgetConsumption

    team = factory.SubFactory(TeamFactory)
    month = datetime(2026, 1, 1).date()
    currency = "EUR"
    per_model = factory.LazyFunction(list)
    usage_version = 0
    price_version = 0
    computed_at = factory.LazyFunction(timezone.now)


class UsageMonthVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = billing_models.UsageMonthVersion

    team = factory.SubFactory(TeamFactory)
    month = datetime(2026, 1, 1).date()
    version = 1


class PriceListVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = billing_models.PriceListVersion
        django_get_or_create = ("id",)

    id = 1
    version = 1


class PendingWorkFactory(factory.django.DjangoModelFactory):
    """A Slurm job held by its team's cap (issue #33 item 2)."""

    class Meta:
        model = waiting_models.PendingWork

    team = factory.SubFactory(TeamFactory)
    scheduler = "slurm"
    ref = factory.Sequence(lambda n: str(1000 + n))
    name = "train"
    user = "alice"
    queue = "gpu"
    gres_type = "a100"
    cards_requested = 2
    reason_code = "AssocGrpGRES"
    kind = "cap_full"
    translated = True
    explanation = "Your team's cap of 8 cards is full"
    submitted_at = factory.LazyFunction(timezone.now)
    read_at = factory.LazyFunction(timezone.now)


class PendingWorkReadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = waiting_models.PendingWorkRead
        django_get_or_create = ("cluster", "scheduler")

    cluster = None
    scheduler = "slurm"
    read_at = factory.LazyFunction(timezone.now)
    ok = True
    rows = 0


class WaitingWatchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = waiting_models.WaitingWatch
        django_get_or_create = ("team",)

    team = factory.SubFactory(TeamFactory)
    viewed_at = factory.LazyFunction(timezone.now)


class AdvisorFindingFactory(factory.django.DjangoModelFactory):
    """An open batching finding of an active allocation, seen an hour ago and now."""

    class Meta:
        model = advisor_models.AdvisorFinding

    allocation = factory.SubFactory(AllocationFactory, status=AllocationStatus.ACTIVE)
    team = factory.SelfAttribute("allocation.team")
    rule = "batching"
    severity = "warning"
    severity_rank = 1
    since = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=1))
    opened_at = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=1))
    last_seen_at = factory.LazyFunction(timezone.now)
    summary = "The GPU is mostly idle while requests queue and the KV cache has room."
    fix = "Raise the engine's batch limits."
    evidence = factory.LazyFunction(lambda: {"minutes": 20, "gpu_util_pct_mean": 25.0})


class AdvisorRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = advisor_models.AdvisorRun

    started_at = factory.LazyFunction(timezone.now)
    evaluated_at = factory.LazyFunction(timezone.now)


class AdvisorDigestOptInFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = advisor_models.AdvisorDigestOptIn

    user = factory.SubFactory(UserFactory)


class AgentCallFactory(factory.django.DjangoModelFactory):
    """One metered ``ok`` call of an agent task (3,000 input tokens, 2,000 cached, 150 out)."""

    class Meta:
        model = tokenflow_models.AgentCall

    team = factory.SubFactory(TeamFactory)
    served_model = "qwen"
    task_id = "task-1"
    source_key = factory.Sequence(lambda n: f"call-{n}")
    called_at = factory.LazyFunction(timezone.now)
    input_tokens = 3000
    cached_tokens = 2000
    output_tokens = 150
    outcome = "ok"


class AgentTaskFactory(factory.django.DjangoModelFactory):
    """A task's totals as of one such call."""

    class Meta:
        model = tokenflow_models.AgentTask

    team = factory.SubFactory(TeamFactory)
    served_model = "qwen"
    task_id = factory.Sequence(lambda n: f"task-{n}")
    first_call_at = factory.LazyFunction(timezone.now)
    last_call_at = factory.LazyAttribute(lambda o: o.first_call_at)
    calls = 1
    metered_calls = 1
    outcomes_known = 1
    input_tokens = 3000
    cached_tokens = 2000
    output_tokens = 150


class AgentTaskDayFactory(factory.django.DjangoModelFactory):
    """One day's rollup row of one-call tasks: two tasks of 3,000 input (2,000 cached) and 150
    output tokens each."""

    class Meta:
        model = tokenflow_models.AgentTaskDay

    team = factory.SubFactory(TeamFactory)
    served_model = "qwen"
    day = factory.LazyFunction(lambda: timezone.localdate())
    task_calls = 1
    tasks = 2
    tasks_metered = 2
    metered_calls = 2
    outcomes_known = 2
    input_tokens = 6000
    cached_tokens = 4000
    output_tokens = 300
    first_input_tokens = 6000
    last_input_tokens = 6000


class RecurringReservationFactory(factory.django.DjangoModelFactory):
    """4 L40S every weekday 09:00-18:00 Europe/Berlin for four weeks from next Monday."""

    class Meta:
        model = recurring_models.RecurringReservation

    team = factory.SubFactory(TeamFactory)
    pool = factory.SubFactory(PoolFactory)
    gpu_model = factory.LazyFunction(lambda: inventory_models.GpuModel.objects.get(slug="l40s"))
    name = factory.Sequence(lambda n: f"course-{n}")
    created_by = factory.SubFactory(UserFactory)
    card_count = 4
    recurrence = recurring_models.Recurrence.WEEKDAY
    time_zone = "Europe/Berlin"
    first_date = factory.LazyFunction(
        lambda: timezone.localdate() + timedelta(days=7 - timezone.localdate().weekday())
    )
    last_date = factory.LazyAttribute(lambda o: o.first_date + timedelta(days=27))
    start_time = factory.LazyFunction(lambda: datetime.strptime("09:00", "%H:%M").time())
    end_time = factory.LazyFunction(lambda: datetime.strptime("18:00", "%H:%M").time())


class TeamCalendarFeedFactory(factory.django.DjangoModelFactory):
    """A team's secret feed link, as ``team_calendar_feed_create`` makes it (salt, token hash)."""

    class Meta:
        model = calendar_models.TeamCalendarFeed

    team = factory.SubFactory(TeamFactory)
    salt = factory.LazyFunction(new_salt)
    token_sha256 = factory.LazyAttribute(lambda o: token_sha256(feed_token(o.salt)))
    created_by = factory.SubFactory(UserFactory)
    created_at = factory.LazyFunction(timezone.now)


class WorkloadClassFactory(factory.django.DjangoModelFactory):
    """A class beside the four seeded ones (migration 0037), on data-centre cards."""

    class Meta:
        model = classes_models.WorkloadClass
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"class-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    card_classes = factory.LazyFunction(lambda: ["datacentre"])
    priority = 300
    preemption_order = factory.Sequence(lambda n: 100 + n)


class ClusterFactory(factory.django.DjangoModelFactory):
    """A Slurm cluster reached with a JWT key file (nothing is read until it is checked)."""

    class Meta:
        model = cluster_models.Cluster
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"cluster-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())
    kind = Scheduler.SLURM
    api_url = factory.Sequence(lambda n: f"http://slurm-{n}.example.com:6820")
    slurm_cluster_name = factory.LazyAttribute(lambda o: o.slug)
    slurm_user = "portal"
    credential_kind = "jwt-key"
    credential_path = "/run/secrets/slurm-jwt.key"


class ClusterErrorFactory(factory.django.DjangoModelFactory):
    """A reconcile of the cluster that failed a minute ago."""

    class Meta:
        model = cluster_models.ClusterError

    cluster = factory.SubFactory(ClusterFactory)
    operation = "reconcile"
    message = "slurmrestd answered 503"
    at = factory.LazyFunction(lambda: timezone.now() - timedelta(minutes=1))


class TemporaryOverrideFactory(factory.django.DjangoModelFactory):
    """The team's A100 ceiling in its pool raised to 8 cards for a week (from 4)."""

    class Meta:
        model = override_models.TemporaryOverride

    team = factory.SubFactory(TeamFactory)
    pool = factory.SubFactory(PoolFactory)
    kind = override_models.OverrideKind.CEILING
    gpu_model = factory.LazyFunction(
        lambda: inventory_models.GpuModel.objects.get(slug="a100_80g_sxm")
    )
    cards = 8
    cards_before = 4
    reason = "paper deadline on Friday"
    created_at = factory.LazyFunction(timezone.now)
    until = factory.LazyAttribute(lambda o: o.created_at + timedelta(days=7))
    created_by = factory.SubFactory(UserFactory)


class MaintenanceWindowFactory(factory.django.DjangoModelFactory):
    """A whole pool out tomorrow 06:00-12:00 (its nodes are added by the service, not here)."""

    class Meta:
        model = maintenance_models.MaintenanceWindow

    title = factory.Sequence(lambda n: f"driver upgrade {n}")
    scope = maintenance_models.MaintenanceScope.POOL
    pool = factory.SubFactory(PoolFactory)
    starts_at = factory.LazyFunction(
        lambda: (timezone.now() + timedelta(days=1)).replace(
            hour=6, minute=0, second=0, microsecond=0
        )
    )
    ends_at = factory.LazyAttribute(lambda o: o.starts_at + timedelta(hours=6))
    created_by = factory.SubFactory(UserFactory)


class BurstOptInFactory(factory.django.DjangoModelFactory):
    """A team allowed to place elastic cards in a burst pool (a Kubernetes pool marked burst)."""

    class Meta:
        model = elastic_models.BurstOptIn

    team = factory.SubFactory(TeamFactory)
    pool = factory.SubFactory(
        PoolFactory, scheduler=Scheduler.KUBERNETES, slurm_partition="", burst=True
    )


class SharedCardUseFactory(factory.django.DjangoModelFactory):
    """One replica of a card time-sliced into 4, held for the first hour of last month."""

    class Meta:
        model = billing_models.SharedCardUse
        skip_postgeneration_save = True

    gpu = factory.SubFactory(GpuFactory)
    team = factory.SubFactory(TeamFactory)
    basis = billing_models.ShareBasis.TIME_SLICING
    period_start = factory.LazyFunction(
        lambda: (timezone.now().replace(day=1) - timedelta(days=1)).replace(
            day=1, hour=0, minute=0, second=0, microsecond=0
        )
    )
    period_end = factory.LazyAttribute(lambda o: o.period_start + timedelta(hours=1))
    parts_held = 1
    parts_per_card = 4

    @factory.post_generation
    def usage_version(obj, create, extracted, **kwargs):
        """A use is written as the shared-card import writes it: its tenants' months raised."""
        if create:
            shared_card_months_changed(start=obj.period_start, end=obj.period_end)

    source_id = factory.Sequence(lambda n: f"factory/{n}")
