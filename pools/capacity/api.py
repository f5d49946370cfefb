"""API of capacity requests and allocations (``/api/v1/``).

Lists and details are scoped by the selectors (a member sees their teams' objects; others are
404, never 403, so existence does not leak). Writes call the services; their domain errors become
400 / 403 / 409 bodies in :func:`portal.api.exception_handler`."""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.capacity import selectors
from pools.capacity.budget_gate import budget_verdicts
from pools.capacity.filtersets import AllocationFilterSet, CapacityRequestFilterSet
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.scheduler_panel import scheduler_panel
from pools.capacity.services import allocations as allocation_services
from pools.capacity.services import classes as class_services
from pools.capacity.services import idempotency
from pools.capacity.services import requests as request_services
from pools.capacity.slices import PROFILE_MAX_LENGTH
from pools.classes.models import WorkloadClass
from pools.common.choices import RequestKind, RequestStatus, WorkloadKind
from pools.common.validators import MAX_REQUEST_CARDS
from pools.inventory.models import GpuModel, Pool
from pools.inventory.selectors import mig_profiles
from pools.tenancy import permissions
from pools.web.api import AwareDateTimeField, SlugLookupField, VisibleTeamField
from pools.web.csv_numbers import plain_number
from pools.web.numbers import CARD_HOUR_PLACES
from scheduler_adapters.types import MAX_GPUS_PER_NODE


class _WindowCardHoursList(serializers.ListSerializer):
    """Many allocations: their window card-hours (the cards held over time) read at once."""

    def to_representation(self, data):
        rows = list(data.all() if hasattr(data, "all") else data)
        self.context["window_card_hours"] = selectors.allocations_window_card_hours(rows)
        return super().to_representation(rows)


class AllocationSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    workload_class = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )  # null: unclassed
    request = serializers.PrimaryKeyRelatedField(read_only=True)
    card_hours = serializers.SerializerMethodField()

    class Meta:
        model = Allocation
        list_serializer_class = _WindowCardHoursList
        fields = [
            "id",
            "request",
            "team",
            "pool",
            "gpu_model",
            "workload_class",
            "card_count",
            "mig_profile",
            "starts_at",
            "ends_at",
            "status",
            "status_reason",
            "pricing_method",
            "scheduler_binding",
            "placement",
            "card_hours",
            "created_at",
            "updated_at",
        ]

    def get_card_hours(self, obj) -> str:
        """Reserved card-hours of the whole window, a string with 3 decimals rounded half-up, as
        the pages, CSVs and statements give them (2 cards for 1 h 0 min 45 s: ``"2.025"``):
        cards × hours, with the cards held at each moment (a reclamation shrink changes them
        from then on, as the reservation import charges); a MIG slice counts its share of a
        card, ``g``/7. Read for every allocation of a list at once, else one query here."""
        known = self.context.setdefault("window_card_hours", {})
        if obj.pk not in known:
            known.update(selectors.allocations_window_card_hours([obj]))
        return plain_number(known[obj.pk], CARD_HOUR_PLACES)


class AllocationDetailSerializer(AllocationSerializer):
    """An allocation with what the portal wrote (or will write) in its scheduler and its reserved
    cost so far: a few queries per allocation, so only ``GET /api/v1/allocations/<id>/`` carries
    them (the lists keep a fixed query count)."""

    scheduler = serializers.SerializerMethodField()
    cost_so_far = serializers.SerializerMethodField()

    class Meta(AllocationSerializer.Meta):
        fields = [*AllocationSerializer.Meta.fields, "scheduler", "cost_so_far"]

    def get_scheduler(self, obj) -> dict:
        """``state`` (``written`` / ``will write`` / ``portal only``), ``objects`` (``kind``,
        ``name``, ``detail`` each), ``notes``, ``read_back_at``, ``read_back``, ``drift``,
        ``unrepaired_drifts`` (with the scheduler's message as ``detail``)."""
        return scheduler_panel(obj).as_dict()

    def get_cost_so_far(self, obj) -> dict | None:
        """``card_hours`` (:data:`pools.web.numbers.CARD_HOUR_PLACES` decimals, as the pages and
        statements show them), ``amount`` (minor unit, string) and ``currency`` —
        both ``null`` when unknown, with ``reason`` — ``price_per_card_hour``; ``null`` when
        no pricing hook is configured."""
        cost = selectors.allocations_cost_so_far([obj], now=timezone.now()).get(obj.pk)
        if cost is None:
            return None
        return {
            "card_hours": plain_number(cost.card_hours, CARD_HOUR_PLACES),
            "price_per_card_hour": cost.price_plain,
            "amount": None if cost.amount is None else str(cost.amount),
            "currency": cost.currency,
            "reason": cost.reason or None,
        }


TEAM_SLUG_HELP = "Team slug, not its name: `nlp`, not `NLP` (`GET /api/v1/teams/`)."
POOL_SLUG_HELP = "Pool slug, not its name: `train-slurm` (`GET /api/v1/pools/`)."
GPU_MODEL_SLUG_HELP = (
    "GPU model slug, not its name: `a100_80g_sxm`, not `A100 SXM4 80GB` "
    "(`GET /api/v1/gpu-models/`)."
)


class MigProfileField(serializers.CharField):
    """A MIG profile the inventory holds slices of (:func:`pools.inventory.selectors.
    mig_profiles`), or blank for whole cards; a 400 names the profiles there are. Whether the
    pool × model has it is the service's check (a 400 on ``mig_profile`` too)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("default", "")
        kwargs.setdefault("max_length", PROFILE_MAX_LENGTH)
        kwargs.setdefault(
            "help_text",
            "Blank: whole cards. A MIG profile (`1g.10gb`): card_count counts slices of it on "
            "gpu_model in pool (both required, no shape); one the inventory has slices of.",
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        profile = super().to_internal_value(data)
        if not profile:
            return ""
        known = mig_profiles()
        if profile not in known:
            raise serializers.ValidationError(
                f"Unknown MIG profile {profile!r}; the pools have slices of: "
                f"{', '.join(known) or 'none'}."
            )
        return profile


class _BudgetsNowList(serializers.ListSerializer):
    """Many requests: the budgets' verdicts now on the submitted ones and their allocations'
    window card-hours, all read at once."""

    def to_representation(self, data):
        rows = list(data.all() if hasattr(data, "all") else data)
        submitted = [r for r in rows if r.status == RequestStatus.SUBMITTED]
        self.context["budgets_now"] = budget_verdicts(requests=submitted)
        allocations = []
        for row in rows:
            try:
                allocations.append(row.allocation)
            except ObjectDoesNotExist:  # not approved (yet)
                continue
        self.context["window_card_hours"] = selectors.allocations_window_card_hours(allocations)
        return super().to_representation(rows)


class CapacityRequestSerializer(serializers.ModelSerializer):
    team = VisibleTeamField(help_text=f"{TEAM_SLUG_HELP} One of your teams.")
    pool = SlugLookupField(
        slug_field="slug",
        queryset=Pool.objects.all(),
        required=False,
        allow_null=True,
        help_text=f"{POOL_SLUG_HELP} Null: any pool with the cards.",
    )
    gpu_model = SlugLookupField(
        slug_field="slug",
        queryset=GpuModel.objects.all(),
        required=False,
        allow_null=True,
        help_text=f"{GPU_MODEL_SLUG_HELP} Null: any model (with min_memory_gib).",
    )
    workload_class = SlugLookupField(
        slug_field="slug",
        queryset=WorkloadClass.objects.all(),
        required=False,
        allow_null=True,
        help_text="Workload class slug (production, internal, development, batch). Absent or "
        "null: the team's default class. Decides which GPU models the request may use.",
    )
    requested_by = serializers.StringRelatedField()
    decided_by = serializers.StringRelatedField(allow_null=True)  # None until decided
    starts_at = AwareDateTimeField()
    ends_at = AwareDateTimeField()
    card_count = serializers.IntegerField(min_value=1, max_value=MAX_REQUEST_CARDS)
    min_memory_gib = serializers.DecimalField(
        max_digits=7, decimal_places=2, required=False, allow_null=True, min_value=1
    )
    workload_kind = serializers.ChoiceField(choices=WorkloadKind.choices)
    kind = serializers.ChoiceField(
        choices=RequestKind.choices,
        default=RequestKind.CARDS,
        help_text="cards: from a pool, approved into an allocation; growth: capacity no pool "
        "has yet, accepted as a plan or rejected by a pool admin.",
    )
    cards_per_node = serializers.IntegerField(
        min_value=1, max_value=MAX_GPUS_PER_NODE, required=False, allow_null=True
    )
    node_count = serializers.IntegerField(
        min_value=1, max_value=1024, required=False, allow_null=True
    )
    mig_profile = MigProfileField()
    submit = serializers.BooleanField(write_only=True, default=True)
    allocation = AllocationSerializer(read_only=True, allow_null=True)  # None until approved
    budget_verdict_now = serializers.SerializerMethodField(
        help_text="While submitted: what the budgets in force now say of the request, as the "
        'approval queue shows it and an approval would find ("" within every budget, warn, '
        "needs_admin, refuse); budget_verdict is what they said at submission. Null once decided."
    )
    budget_reason_now = serializers.SerializerMethodField(
        help_text='While submitted: why, when budget_verdict_now is not "". Null once decided.'
    )

    class Meta:
        model = CapacityRequest
        list_serializer_class = _BudgetsNowList
        fields = [
            "id",
            "team",
            "workload_kind",
            "workload_class",
            "kind",
            "pool",
            "gpu_model",
            "min_memory_gib",
            "card_count",
            "mig_profile",
            "cards_per_node",
            "node_count",
            "one_nvlink_domain",
            "shared_nodes",
            "starts_at",
            "ends_at",
            "cuda_version",
            "justification",
            "status",
            "requested_by",
            "decided_by",
            "decided_at",
            "decision_reason",
            "budget_verdict",
            "budget_reason",
            "budget_verdict_now",
            "budget_reason_now",
            "extends",
            "created_at",
            "submitted_at",
            "submit",
            "allocation",
        ]
        read_only_fields = [
            "status",
            "decided_at",
            "decision_reason",
            "budget_verdict",
            "budget_reason",
            "extends",
            "created_at",
            "submitted_at",
        ]

    def _budget_now(self, obj) -> tuple[str, str] | None:
        if obj.status != RequestStatus.SUBMITTED:
            return None
        if "budgets_now" not in self.context:  # one request: judged alone
            self.context["budgets_now"] = budget_verdicts(requests=[obj])
        verdict = self.context["budgets_now"].get(obj.pk)
        return (verdict.enforcement, verdict.reason) if verdict else ("", "")

    def get_budget_verdict_now(self, obj) -> str | None:
        found = self._budget_now(obj)
        return found[0] if found else None

    def get_budget_reason_now(self, obj) -> str | None:
        found = self._budget_now(obj)
        return found[1] if found else None

    def request_fields(self) -> RequestFields:
        """The validated input as the service takes it (call after ``is_valid``)."""
        return RequestFields.from_data(self.validated_data)


class ApproveSerializer(serializers.Serializer):
    card_count = serializers.IntegerField(min_value=1, max_value=MAX_REQUEST_CARDS, required=False)
    ends_at = AwareDateTimeField(required=False)
    pool = serializers.SlugRelatedField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, help_text=POOL_SLUG_HELP
    )
    gpu_model = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=GpuModel.objects.all(),
        required=False,
        help_text=GPU_MODEL_SLUG_HELP,
    )
    reason = serializers.CharField(required=False, allow_blank=True, default="")


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="")


class ClassChangeSerializer(ReasonSerializer):
    workload_class = SlugLookupField(
        slug_field="slug",
        queryset=WorkloadClass.objects.all(),
        allow_null=True,
        help_text="The new workload class slug; null: unclassed.",
    )


class ExtendSerializer(serializers.Serializer):
    ends_at = AwareDateTimeField()
    justification = serializers.CharField()


REQUEST_EXAMPLE = OpenApiExample(
    "8 A100 cards on one node for training",
    value={
        "team": "nlp",
        "workload_kind": "training",
        "pool": "train-slurm",
        "gpu_model": "a100_80g_sxm",
        "card_count": 8,
        "cards_per_node": 8,
        "node_count": 1,
        "one_nvlink_domain": True,
        "starts_at": "2027-01-11T09:00:00+01:00",
        "ends_at": "2027-01-25T18:00:00+01:00",
        "justification": "Fine-tuning the support agent's 8B model; 8 cards in one NVLink domain.",
    },
    request_only=True,
)
GROWTH_EXAMPLE = OpenApiExample(
    "Capacity no pool has yet (growth)",
    value={
        "team": "vision",
        "workload_kind": "inference",
        "kind": "growth",
        "gpu_model": "h100_nvl",
        "card_count": 6,
        "starts_at": "2027-03-01T00:00:00Z",
        "ends_at": "2027-08-31T00:00:00Z",
        "justification": "The sizing estimate says 6 H100 NVL for the detector's serving.",
    },
    request_only=True,
)


class CapacityRequestViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Capacity requests of the caller's teams; create, then submit / approve / reject / cancel;
    a request of kind ``growth`` (capacity no pool has yet) is accepted, not approved."""

    queryset = CapacityRequest.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = CapacityRequestSerializer
    filterset_class = CapacityRequestFilterSet

    def get_queryset(self):
        if self.action == "list":  # read only: the columns it writes
            rows = selectors.capacity_request_api_list(user=self.request.user)
        else:
            rows = selectors.capacity_request_list(user=self.request.user)
        return rows.order_by("-created_at")

    @extend_schema(
        examples=[REQUEST_EXAMPLE, GROWTH_EXAMPLE],
        parameters=[
            OpenApiParameter(
                idempotency.KEY_HEADER,
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="Optional; 1-255 printable ASCII characters (a UUID will do). The "
                "same key from the same user within 24 h answers the first request's 201 again "
                "(nothing written, header Idempotent-Replayed: true); with a body asking for "
                "something else, 422 idempotency_key_reused. Older, the key is forgotten.",
            ),
            OpenApiParameter(
                "Idempotent-Replayed",
                str,
                OpenApiParameter.HEADER,
                response=[201],
                enum=["true"],
                description="Present (true) when the answer is an earlier request of the same "
                "Idempotency-Key, as it is now.",
            ),
        ],
    )
    def create(self, request, *args, **kwargs):
        """Ask for cards (``kind`` ``cards``) or for capacity no pool has yet (``growth``).
        ``team``, ``pool`` and ``gpu_model`` are slugs. With an ``Idempotency-Key`` header, a
        retry answers the first request (:mod:`pools.capacity.services.idempotency`)."""
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        key = request.headers.get(idempotency.KEY_HEADER)
        headers = {}
        if key is None:
            created = request_services.capacity_request_create(
                actor=request.user,
                fields=form.request_fields(),
                submit=form.validated_data["submit"],
            )
        else:
            created, replayed = idempotency.capacity_request_create_idempotent(
                actor=request.user,
                fields=form.request_fields(),
                key=key,
                submit=form.validated_data["submit"],
            )
            if replayed:
                headers["Idempotent-Replayed"] = "true"
        return Response(
            self.get_serializer(self._fresh(created)).data,
            status=status.HTTP_201_CREATED,
            headers=headers,
        )

    def _fresh(self, obj):
        return self.get_queryset().get(pk=obj.pk)

    @extend_schema(request=None, responses=CapacityRequestSerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        obj = request_services.capacity_request_submit(
            request=self.get_object(), actor=request.user
        )
        return Response(self.get_serializer(self._fresh(obj)).data)

    @extend_schema(request=ApproveSerializer, responses=AllocationSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve (pool admins): answers with the allocation; again → the same allocation."""
        # Who may act is decided before the body is read: 404 / 403 whatever it holds.
        obj = self.get_object()
        permissions.require_pool_admin(request.user, request_services.ADMINS_DECIDE)
        form = ApproveSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        allocation = request_services.capacity_request_approve(
            request=obj, actor=request.user, **form.validated_data
        )
        # Read again (provisioning may have run on commit, eager tasks), with team, pool and
        # model joined: one query, where refresh_from_db() and three lazy loads were four.
        allocation = selectors.allocation_list(user=request.user).get(pk=allocation.pk)
        return Response(AllocationSerializer(allocation).data)

    @extend_schema(request=ReasonSerializer, responses=CapacityRequestSerializer)
    @action(detail=True, methods=["post"])
    def accept(self, request, pk=None):
        """Accept a ``growth`` request as planned capacity (pool admins); ``reason`` says how
        (required); no allocation is made. Again → the same request."""
        obj = self.get_object()
        permissions.require_pool_admin(request.user, request_services.ADMINS_DECIDE)
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        obj = request_services.capacity_request_accept(
            request=obj, actor=request.user, reason=form.validated_data["reason"]
        )
        return Response(self.get_serializer(self._fresh(obj)).data)

    @extend_schema(request=ReasonSerializer, responses=CapacityRequestSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        obj = self.get_object()
        permissions.require_pool_admin(request.user, request_services.ADMINS_DECIDE)
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        obj = request_services.capacity_request_reject(
            request=obj, actor=request.user, reason=form.validated_data["reason"]
        )
        return Response(self.get_serializer(self._fresh(obj)).data)

    @extend_schema(request=ReasonSerializer, responses=CapacityRequestSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        obj = self.get_object()
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        obj = request_services.capacity_request_cancel(
            request=obj, actor=request.user, reason=form.validated_data["reason"]
        )
        return Response(self.get_serializer(self._fresh(obj)).data)


class AllocationViewSet(viewsets.ReadOnlyModelViewSet):
    """Allocations of the caller's teams; release early or ask to extend."""

    queryset = Allocation.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = AllocationSerializer
    filterset_class = AllocationFilterSet

    def get_serializer_class(self):
        # The list keeps a fixed query count; one allocation also says what its scheduler
        # holds and what it has cost so far.
        return AllocationDetailSerializer if self.action == "retrieve" else AllocationSerializer

    def get_queryset(self):
        return selectors.allocation_list(user=self.request.user).order_by("starts_at", "id")

    @extend_schema(request=ReasonSerializer, responses=AllocationSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        """Team managers and pool admins: end the allocation now (cancelled when its window
        has not opened); its extensions, granted or waiting, are cancelled. An allocation
        with a Slurm reservation (``scheduler_binding.reservation``) ends it too, and
        slurmctld then ends the jobs still running in it (slurm.conf ResvOverRun: 0 minutes
        by default)."""
        allocation = self.get_object()
        permissions.require_manager(request.user, allocation.team)
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        allocation = allocation_services.allocation_release(
            allocation=allocation, actor=request.user, reason=form.validated_data["reason"]
        )
        return Response(self.get_serializer(allocation).data)

    @extend_schema(request=ClassChangeSerializer, responses=AllocationSerializer)
    @action(detail=True, methods=["post"], url_path="class")
    def change_class(self, request, pk=None):
        """Pool admins: set the allocation's workload class; 409 ``class_conflict`` with
        ``conflicts`` when it would share cards with other classes."""
        allocation = self.get_object()
        form = ClassChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        allocation = class_services.allocation_class_change(
            allocation=allocation, actor=request.user, **form.validated_data
        )
        return Response(self.get_serializer(self.get_queryset().get(pk=allocation.pk)).data)

    @extend_schema(
        request=ExtendSerializer,
        responses={201: CapacityRequestSerializer},
        examples=[
            OpenApiExample(
                "Two more weeks",
                value={
                    "ends_at": "2027-02-15T18:00:00+01:00",
                    "justification": "The fine-tuning run needs two more weeks.",
                },
                request_only=True,
            )
        ],
    )
    @action(detail=True, methods=["post"])
    def extend(self, request, pk=None):
        """Ask for more time: creates a request for the extra window."""
        allocation = self.get_object()
        form = ExtendSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        new_request = allocation_services.allocation_extend(
            allocation=allocation, actor=request.user, **form.validated_data
        )
        fresh = selectors.capacity_request_list(user=request.user).get(pk=new_request.pk)
        return Response(CapacityRequestSerializer(fresh).data, status=status.HTTP_201_CREATED)
