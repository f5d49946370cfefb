"""Capacity: requests for cards, the allocations approved from them, and scheduler drift.

A request asks for ``card_count`` cards of one GPU model in one pool over a half-open window
``[starts_at, ends_at)``; an allocation holds them while its status says so (see
``pools.capacity.lifecycle.HOLDING_STATUSES``; the filter is :func:`holding_q`, a window's
overlap :func:`overlap_q`)."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef, Q, Value
from django.db.models.functions import Coalesce

from pools.capacity.arithmetic import card_hours
from pools.capacity.lifecycle import HELD_STATUSES, HOLDING_STATUSES
from pools.capacity.placement import Shape
from pools.capacity.slices import PROFILE_MAX_LENGTH, card_share
from pools.classes.models import WorkloadClass
from pools.clusters.models import Cluster
from pools.common.choices import (
    AllocationStatus,
    PricingMethod,
    RequestKind,
    RequestStatus,
    Scheduler,
    WorkloadKind,
)
from pools.inventory.models import GpuModel, Pool
from pools.tenancy.models import Team, TeamOwnedQuerySet, team_owned

#: A window's start and end columns (half-open), as most models name them.
WINDOW = ("starts_at", "ends_at")


def _path(via: str, field: str) -> str:
    return f"{via}__{field}" if via else field


def holding_q(via: str = "") -> Q:
    """Allocations whose status holds cards (:data:`pools.capacity.lifecycle.HOLDING_STATUSES`:
    approved, provisioning, active, expiring), reached through the relation path ``via``
    (``"allocation"`` from an elastic policy or an idle finding; blank: the allocation itself).
    The one way to write the filter: ``Allocation.objects.holding()`` is this with no path."""
    return Q(**{_path(via, "status__in"): HOLDING_STATUSES})


def overlap_q(start, end, *, via: str = "", fields: tuple[str, str] = WINDOW) -> Q:
    """Rows whose half-open window ``[fields[0], fields[1])`` meets ``[start, end)`` (aware
    datetimes): ``fields[0] < end`` and ``fields[1] > start``, so one that ends as the other
    starts does not (the database's form of :func:`pools.capacity.arithmetic.clip` being
    non-empty). ``via``: the relation path to the windowed row (``"allocation"``,
    ``"node__maintenance_windows"``); ``fields``: its start and end columns
    (``("period_start", "period_end")`` for usage). The one way to write an overlap filter."""
    first, last = fields
    return Q(**{_path(via, f"{first}__lt"): end, _path(via, f"{last}__gt"): start})


def at_q(instant, *, via: str = "") -> Q:
    """Rows whose window ``[starts_at, ends_at)`` holds ``instant``: ``starts_at <= instant <
    ends_at``, through the relation path ``via`` as :func:`overlap_q`."""
    return Q(**{_path(via, "starts_at__lte"): instant, _path(via, "ends_at__gt"): instant})


class AllocationQuerySet(TeamOwnedQuerySet):
    """Allocations: who may see them (:class:`TeamOwnedQuerySet`), which hold cards, and when."""

    def holding(self) -> AllocationQuerySet:
        """Those whose status holds cards (:func:`holding_q`)."""
        return self.filter(holding_q())

    def held_during(self, start, end) -> AllocationQuerySet:
        """Those that held cards at some instant of ``[start, end)`` (aware datetimes): their
        status holds cards or held them until their end (:data:`pools.capacity.lifecycle.
        HELD_STATUSES`: an ended or reclaimed one's ``ends_at`` is when it ended) and their
        window overlaps it (:func:`overlap_q`). A 4-card allocation reclaimed (or released) at
        06:00 held 4 cards until 06:00, so today's past hours count it; one ended yesterday is
        not among today's. The cards it held at each instant are its ``card_count`` unless a
        reclamation changed them (:func:`pools.capacity.selectors.series_as_held`). The one
        selection of what a period's hours held: the timeline's and the plan's."""
        return self.filter(status__in=HELD_STATUSES).overlapping(start, end)

    def overlapping(self, start, end) -> AllocationQuerySet:
        """Those whose half-open window ``[starts_at, ends_at)`` meets ``[start, end)`` (aware
        datetimes; :func:`overlap_q`): one that ends as the other starts does not."""
        return self.filter(overlap_q(start, end))

    def at(self, instant) -> AllocationQuerySet:
        """Those whose window holds ``instant``: ``starts_at <= instant < ends_at``
        (:func:`at_q`)."""
        return self.filter(at_q(instant))

    def whole_cards(self) -> AllocationQuerySet:
        """Those of whole cards (``mig_profile`` blank): every count of cards per pool × GPU
        model reads these, so MIG slices are never counted as cards (issue 38)."""
        return self.filter(mig_profile="")

    def slices(self, profile: str | None = None) -> AllocationQuerySet:
        """Those of MIG slices: of ``profile`` (``"1g.10gb"``) when given, else of any profile.
        Their ``card_count`` counts slices, not cards."""
        if profile is None:
            return self.exclude(mig_profile="")
        return self.filter(mig_profile=profile)


class CapacityRequest(models.Model):
    """What a team asks for: cards of a GPU model (or any with enough memory) for a window.

    ``pool`` empty means "any eligible pool"; ``gpu_model`` empty means "any model with at least
    ``min_memory_gib`` GiB". ``starts_at``/``ends_at`` are aware datetimes, end exclusive.
    ``extends`` is set when the request asks for more time on an existing allocation.
    ``kind`` "growth" asks for capacity no pool has yet (``pool`` empty, or the pool that must
    grow): it is accepted as a planning note or rejected, never approved into an allocation.
    """

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="capacity_requests"
    )
    workload_kind = models.CharField(max_length=10, choices=WorkloadKind.choices)
    # What the work is (issue 36): the team's default class unless the request names one;
    # empty for an unclassed team's requests, to which no class rule applies.
    workload_class = models.ForeignKey(
        WorkloadClass, null=True, blank=True, on_delete=models.PROTECT, related_name="requests"
    )
    kind = models.CharField(max_length=8, choices=RequestKind.choices, default=RequestKind.CARDS)
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="requests"
    )
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="requests"
    )
    min_memory_gib = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True)
    card_count = models.PositiveIntegerField()
    # Blank: whole cards. A MIG profile ("1g.10gb"): card_count slices of that profile of
    # gpu_model in pool (issue 38); such a request names both and has no shape.
    mig_profile = models.CharField(max_length=PROFILE_MAX_LENGTH, blank=True, default="")
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
    # What the team's budgets said at submission (pools/capacity/budget_gate.py): "" within
    # them, "warn" or "needs_admin" (then no auto-approval), and why, for the queue.
    budget_verdict = models.CharField(max_length=12, blank=True, default="")
    budget_reason = models.TextField(blank=True, default="")
    extends = models.ForeignKey(
        "Allocation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="extension_requests",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # Placement shape (pools.capacity.placement.Shape): node_count groups of cards_per_node
    # cards (card_count = the product), optionally each in one NVLink domain; groups may share
    # a node (inference replicas) with shared_nodes. Both counts empty: "any" card_count cards.
    cards_per_node = models.PositiveSmallIntegerField(null=True, blank=True)
    node_count = models.PositiveSmallIntegerField(null=True, blank=True)
    one_nvlink_domain = models.BooleanField(default=False)
    shared_nodes = models.BooleanField(default=False)
    # The token of the page's form that created it (a fresh UUID each time the form is shown):
    # unique per requester, so a second POST of the same form cannot write a second request
    # (pools.capacity.services.requests.capacity_request_create_once). Empty from the API.
    form_token = models.UUIDField(null=True, blank=True, editable=False)

    objects = team_owned("team").as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(card_count__gt=0), name="request_cards_positive"),
            models.UniqueConstraint(
                fields=["requested_by", "form_token"], name="request_form_token_once"
            ),
            models.CheckConstraint(
                condition=(Q(cards_per_node__isnull=True) & Q(node_count__isnull=True))
                | (
                    Q(cards_per_node__gt=0)
                    & Q(node_count__gt=0)
                    & Q(card_count=models.F("cards_per_node") * models.F("node_count"))
                ),
                name="request_shape_matches_cards",
            ),
            models.CheckConstraint(
                condition=Q(cards_per_node__isnull=False)
                | (Q(one_nvlink_domain=False) & Q(shared_nodes=False)),
                name="request_shape_flags_need_shape",
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="request_window_positive"
            ),
            models.CheckConstraint(
                condition=Q(gpu_model__isnull=False) | Q(min_memory_gib__isnull=False),
                name="request_names_model_or_memory",
            ),
            models.CheckConstraint(
                condition=~Q(kind=RequestKind.GROWTH) | Q(gpu_model__isnull=False),
                name="request_growth_names_model",
            ),
            models.CheckConstraint(
                condition=Q(kind=RequestKind.GROWTH) | ~Q(status=RequestStatus.ACCEPTED),
                name="request_accepted_is_growth",
            ),
            models.CheckConstraint(
                condition=Q(mig_profile="")
                | (
                    Q(gpu_model__isnull=False, pool__isnull=False, cards_per_node__isnull=True)
                    & Q(kind=RequestKind.CARDS)
                ),
                name="request_slices_name_pool_model_no_shape",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "status"]),
            # the orderings of the lists: newest first (pages, API), the queue's oldest first
            models.Index(fields=["created_at", "id"], name="request_created_id"),
            models.Index(fields=["status", "submitted_at", "id"], name="request_status_submitted"),
        ]

    def __str__(self) -> str:
        return f"Request #{self.pk} {self.team.slug} {self.card_count}× {self.model_label}"

    @property
    def model_label(self) -> str:
        if self.gpu_model_id:
            return self.gpu_model.name + (f" MIG {self.mig_profile}" if self.mig_profile else "")
        return f"any ≥ {self.min_memory_gib} GiB"

    @property
    def duration_hours(self) -> Decimal:
        return card_hours(1, self.starts_at, self.ends_at)

    @property
    def shape_label(self) -> str:
        """The shape in words ("1 node × 8 cards, one NVLink domain"); "" without one."""
        if self.cards_per_node is None or self.node_count is None:
            return ""
        return Shape(
            cards_per_node=self.cards_per_node,
            nodes=self.node_count,
            one_nvlink_domain=self.one_nvlink_domain,
            shared_nodes=self.shared_nodes,
        ).describe()


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
    # The request's class at approval (issue 36); empty: unclassed.
    workload_class = models.ForeignKey(
        WorkloadClass, null=True, blank=True, on_delete=models.PROTECT, related_name="allocations"
    )
    card_count = models.PositiveIntegerField()
    # Blank: card_count whole cards. A MIG profile ("1g.10gb"): card_count slices of it, never
    # counted as cards (AllocationQuerySet.whole_cards / slices); billed at card_share each.
    mig_profile = models.CharField(max_length=PROFILE_MAX_LENGTH, blank=True, default="")
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
    # The cards the shape check counted on: [{"node": hostname, "gpus": [index, ...]}, ...];
    # empty for an unshaped grant (any cards of the pool). A reclamation that shrinks the
    # allocation keeps its first card_count cards (pools.capacity.shapes.placement_kept).
    placement = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = AllocationQuerySet.as_manager()

    class Meta:
        ordering = ["starts_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(card_count__gt=0), name="allocation_cards_positive"),
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="allocation_window_positive"
            ),
            models.CheckConstraint(
                condition=Q(mig_profile="") | Q(placement=[]),
                name="allocation_slices_unplaced",
            ),
        ]
        indexes = [
            models.Index(fields=["pool", "gpu_model", "status"]),
            models.Index(fields=["team", "status"]),
            # the orderings of the lists: the API's by start, the page's and My teams' by end
            models.Index(fields=["starts_at", "id"], name="allocation_starts_id"),
            models.Index(fields=["ends_at", "id"], name="allocation_ends_id"),
            # My teams pages through the holding allocations by end: on the index of all of
            # them it stepped over every ended one first (9,000 at fleet size, and growing)
            models.Index(
                fields=["ends_at", "id"],
                name="allocation_holding_ends_id",
                condition=holding_q(),
            ),
            # The charts of the holding allocations (the dashboard's plan, over-commit and top
            # teams, the timeline's series and its first allocations per pool × model by start)
            # read these columns only: an index-only scan in the timeline's order, where a
            # bitmap scan of allocation_holding_ends_id read every row's page (2,073 buffers
            # against 434 at 100,800 allocations, and the timeline's sort of 36,800 rows gone).
            models.Index(
                fields=["pool", "gpu_model", "starts_at", "id"],
                include=["ends_at", "card_count", "team", "mig_profile"],
                name="allocation_holding_chart",
                condition=holding_q(),
            ),
            # The over-commit check's MIG slices: a handful among the holding allocations,
            # which it read all of to find none (2,073 buffers against 5).
            models.Index(
                fields=["ends_at"],
                name="allocation_holding_slices",
                condition=holding_q() & ~Q(mig_profile=""),
            ),
            # What is held at an instant (the dashboard's allocated cards now and its top teams):
            # the holding allocations started by then, a few thousand, read from the index
            # alone, where allocation_holding_ends_id reached every one ending later (40,481
            # rows and 1,875 table pages at 100,800 allocations, to keep 3,271).
            models.Index(
                fields=["starts_at"],
                include=["ends_at", "pool", "gpu_model", "team", "card_count", "mig_profile", "id"],
                name="allocation_holding_started",
                condition=holding_q(),
            ),
        ]

    def __str__(self) -> str:
        what = self.gpu_model.name + (f" MIG {self.mig_profile}" if self.mig_profile else "")
        return f"Allocation #{self.pk} {self.team.slug} {self.card_count}× {what}"

    @property
    def card_share(self):
        """What one of ``card_count`` is of a card (a :class:`fractions.Fraction`): 1 for whole
        cards, ``g``/7 for a ``<g>g.<m>gb`` slice (:func:`pools.capacity.slices.card_share`)."""
        return card_share(self.mig_profile, model_key=self.gpu_model.slug)


class PlacedCards(models.Model):
    """The cards an allocation's placement holds on one node, as a row: one per entry of
    :attr:`Allocation.placement`, the GPU indices as a bit mask (bit *i* set = GPU index *i*;
    indices 0–62, so the mask is a positive 64-bit integer).

    ``Allocation.placement`` stays the record that is shown, audited and sent to the scheduler;
    these rows are its index for the question every shaped approval asks, "which cards do the
    holding allocations of this window hold on each node": a join and a ``bit_or`` instead of
    expanding ~1,500 JSON documents (issue #20). Written with the allocation
    (:func:`pools.capacity.services.requests.capacity_request_approve`) and rewritten only
    where its placement changes, in the same transaction: a reclamation that shrinks it and
    the undo that gives it back (:mod:`pools.reclamation.services.scan`);
    ``tests/pools/capacity/test_placed_cards.py`` holds the two together.
    """

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="placed_cards"
    )
    hostname = models.CharField(max_length=253)
    gpu_mask = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["allocation", "hostname"], name="placed_cards_one_row_per_node"
            ),
            models.CheckConstraint(condition=Q(gpu_mask__gt=0), name="placed_cards_mask_positive"),
        ]

    def __str__(self) -> str:
        return f"Allocation #{self.allocation_id} on {self.hostname}: mask {self.gpu_mask:#x}"


class SchedulerDriftQuerySet(models.QuerySet):
    def unrepaired(self) -> SchedulerDriftQuerySet:
        """Drifts not repaired that are still the newest of their object: scheduler, team (none
        counting as one) and subject, the object the allocation panel
        (:func:`pools.capacity.scheduler_panel.scheduler_panel`) reads the newest drift of. A
        drift a later reconcile repaired (a newer drift of the same object, repaired) is not
        listed; newer means a later ``detected_at``, or the same and a higher id, among every
        drift (not only this queryset's). Unordered; one query. Here, on the model, so that
        cluster health (:mod:`pools.clusters.selectors`, a layer below capacity) counts the
        same rows as the dashboard without importing capacity."""
        team = Coalesce("team_id", Value(0))
        newer = (
            SchedulerDrift.objects.alias(team_key=team)
            .filter(
                scheduler=OuterRef("scheduler"),
                subject=OuterRef("subject"),
                team_key=OuterRef("team_key"),
            )
            .filter(
                Q(detected_at__gt=OuterRef("detected_at"))
                | Q(detected_at=OuterRef("detected_at"), id__gt=OuterRef("id"))
            )
        )
        return self.alias(team_key=team).filter(repaired=False).exclude(Exists(newer))


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
    # The cluster reconcile found it in (the environment's cluster row for the environment's
    # scheduler; empty before clusters were data or without that row): its health counts it.
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="drifts"
    )

    objects = SchedulerDriftQuerySet.as_manager()

    class Meta:
        ordering = ["-detected_at", "-id"]

    def __str__(self) -> str:
        return f"{self.subject}: expected {self.expected}, found {self.found}"
