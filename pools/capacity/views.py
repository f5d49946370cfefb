"""Server-rendered request and allocation pages: my teams, requests, the approval
queue, allocations, the capacity timeline and the scheduler drift reconcile found. Thin: forms
in, services and selectors out."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, timedelta

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods, require_POST

from pools.audit import selectors as audit_selectors
from pools.capacity import request_page_csv
from pools.capacity import selectors as capacity_selectors
from pools.capacity.arithmetic import card_hours, free_after_peak, usable_cards
from pools.capacity.availability import (
    MAINTENANCE_AWAY,
    RECURRING_HELD,
    CapacitySnapshot,
    blocked_cards_at,
    blocked_intervals,
    pool_free_slices,
    pool_slices,
    request_options,
    schedulable_cards_by_pool_model,
    team_usage,
)
from pools.capacity.budget_gate import budget_verdicts
from pools.capacity.filtersets import (
    AllocationFilterSet,
    CapacityRequestFilterSet,
    TimelineFilterSet,
)
from pools.capacity.forms import ApproveForm, CapacityRequestForm, ExtendForm, ReasonForm
from pools.capacity.models import Allocation, SchedulerDrift
from pools.capacity.placement import Shape
from pools.capacity.scheduler_panel import scheduler_panel
from pools.capacity.services import allocations as allocation_services
from pools.capacity.services import requests as request_services
from pools.capacity.shapes import request_shape, shape_fit
from pools.common import errors as domain_errors
from pools.common.choices import RequestKind, RequestStatus
from pools.common.errors import DomainError
from pools.inventory.models import GpuModel, Pool
from pools.jobs import RECONCILE, enqueue
from pools.tenancy import permissions
from pools.tenancy import selectors as tenancy_selectors
from pools.web.csv_numbers import card_hours_csv
from pools.web.pages import (
    PALETTE,
    Column,
    UrlOfId,
    checked_export,
    checked_page,
    csv_response,
    filter_refusal,
    filtered_list,
    form_add_domain_errors,
    minute_text,
    pool_admin_required,
    redirect_back,
    refuse_export,
)

QUEUE_PAGE_SIZE = 50  # submitted requests per page of the approval queue
TIMELINE_ALLOCATIONS = 10  # of the user's allocations listed under each timeline chart

# How a service's field errors are named in a flash message (the form's labels).
_FIELD_LABELS = {
    "card_count": "Cards",
    "starts_at": "Start",
    "ends_at": "End",
    "gpu_model": "GPU model",
    "min_memory_gib": "Minimum memory (GiB)",
}


def _allocation_cards(request) -> int | None:
    """Cards the request's allocation holds now (an admin may grant fewer than asked, and
    reclamation may shrink it); ``None`` until approved."""
    allocation = getattr(request, "allocation", None) if request.status == "approved" else None
    return allocation.card_count if allocation is not None else None


# A request page's audit trail as CSV (the request's events and its allocation's, in time order,
# as the page's table): instants ISO 8601 in UTC.
AUDIT_TRAIL_COLUMNS = [
    Column("at", lambda e: e.created_at.astimezone(UTC).isoformat()),
    Column("actor", lambda e: e.actor.username if e.actor else "system"),
    Column("action", lambda e: e.action),
    Column("object_type", lambda e: e.object_type),
    Column("object_id", lambda e: e.object_id),
    Column("from_status", lambda e: (e.before or {}).get("status")),
    Column("to_status", lambda e: (e.after or {}).get("status")),
    Column("reason", lambda e: e.reason),
]


REQUEST_COLUMNS = [
    Column("id", lambda r: r.pk),
    Column("team", lambda r: r.team.slug),
    Column("status", lambda r: r.status),
    Column("kind", lambda r: r.kind),
    Column("workload_kind", lambda r: r.workload_kind),
    Column("workload_class", lambda r: r.workload_class.slug if r.workload_class else None),
    Column("pool", lambda r: r.pool.slug if r.pool else "any"),
    Column("gpu_model", lambda r: r.gpu_model.slug if r.gpu_model else None),
    Column("min_memory_gib", lambda r: r.min_memory_gib),
    Column("card_count", lambda r: r.card_count),
    Column("allocation_card_count", lambda r: _allocation_cards(r)),
    Column("starts_at", lambda r: r.starts_at.isoformat()),
    Column("ends_at", lambda r: r.ends_at.isoformat()),
    Column("requested_by", lambda r: r.requested_by.username),
    Column("decision_reason", lambda r: r.decision_reason),
]


ALLOCATION_COLUMNS = [
    Column("id", lambda a: a.pk),
    Column("team", lambda a: a.team.slug),
    Column("pool", lambda a: a.pool.slug),
    Column("gpu_model", lambda a: a.gpu_model.slug),
    Column("workload_class", lambda a: a.workload_class.slug if a.workload_class else None),
    Column("card_count", lambda a: a.card_count),
    Column("status", lambda a: a.status),
    Column("starts_at", lambda a: a.starts_at.isoformat()),
    Column("ends_at", lambda a: a.ends_at.isoformat()),
    Column(
        "reserved_card_hours",
        lambda a: card_hours_csv(card_hours(a.card_count, a.starts_at, a.ends_at)),
    ),
]


def _request_or_404(request, pk: int):
    try:
        return capacity_selectors.capacity_request_list(user=request.user).get(pk=pk)
    except Exception:  # DoesNotExist or a bad id: never leak whether it exists
        raise Http404("No such request.") from None


def _allocation_or_404(request, pk: int):
    try:
        return capacity_selectors.allocation_list(user=request.user).get(pk=pk)
    except Exception:
        raise Http404("No such allocation.") from None


def request_list(request):
    return filtered_list(
        request,
        queryset=capacity_selectors.capacity_request_list(user=request.user),
        filterset_class=CapacityRequestFilterSet,
        template="pools/requests/request_list.html",
        columns=REQUEST_COLUMNS,
        filename="requests.csv",
        default_ordering=("-created_at",),
    )


def allocation_list(request):
    return filtered_list(
        request,
        queryset=capacity_selectors.allocation_list(user=request.user),
        filterset_class=AllocationFilterSet,
        template="pools/requests/allocation_list.html",
        columns=ALLOCATION_COLUMNS,
        filename="allocations.csv",
        # open and future allocations first, then the ended ones, latest first
        default_ordering=("-ends_at", "-pk"),
    )


@require_http_methods(["GET", "POST"])
def request_new(request):
    """New request; htmx re-renders the eligible-pools panel as the form changes."""
    teams = tenancy_selectors.team_list(user=request.user).order_by("name")
    initial = _initial_window()
    prefill = {k: v for k, v in request.GET.items() if k in CapacityRequestForm.base_fields}
    if request.method == "POST":
        data = request.POST
    elif request.htmx:
        data = request.GET
    elif prefill:  # a link from a sizing estimate: show the form filled in, and its options
        first_team = teams.first()
        data = {
            "team": first_team.slug if first_team else "",
            "justification": "",
            "kind": RequestKind.CARDS,  # a bound form ticks no radio its data lacks
            **initial,
            **prefill,
        }
    else:
        data = None
    form = CapacityRequestForm(data, teams=teams, initial=initial)
    if request.method == "GET" and not request.htmx and prefill and _panel_errors(form):
        # A link that names only some fields (the team dashboard's ?team=nlp): nothing was
        # submitted yet, so show what it names filled in rather than "This field is required".
        form, data = CapacityRequestForm(None, teams=teams, initial={**initial, **prefill}), None
    options = _options_for(form) if data is not None else None
    if request.method == "POST" and not request.htmx and form.is_valid():
        try:
            created, new = request_services.capacity_request_create_once(
                actor=request.user,
                fields=form.request_fields(),
                submit="save_draft" not in request.POST,
            )
        except DomainError as exc:
            form_add_domain_errors(form, exc)
        else:
            said = "is" if new else "was already sent; it is"
            messages.success(
                request, f"Request #{created.pk} {said} {created.get_status_display()}."
            )
            return redirect("pools:request-detail", pk=created.pk)
    template = "pools/requests/request_new.html"
    name = f"{template}#options" if request.htmx else template
    response = render(
        request,
        name,
        {
            "form": form,
            "options": options,
            "panel_errors": _panel_errors(form) if data is not None else [],
            "has_teams": teams.exists(),
            "growth": form.data.get("kind") == RequestKind.GROWTH,
        },
    )
    patch_vary_headers(response, ["HX-Request"])
    return response


def _initial_window() -> dict:
    """The form's initial window (the next whole hour, a week) and a fresh form token."""
    start = timezone.localtime().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return {
        "form_token": uuid.uuid4(),
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (start + timedelta(days=7)).strftime("%Y-%m-%dT%H:%M"),
    }


PANEL_FIELDS = (
    "workload_kind",
    "card_count",
    "starts_at",
    "ends_at",
    "cuda_version",
    "min_memory_gib",
)


def _panel_errors(form) -> list[str]:
    """The field errors that make the eligibility panel meaningless, as readable lines."""
    form.is_valid()
    lines = [
        f"{form[name].label}: {' '.join(form.errors[name])}"
        for name in PANEL_FIELDS
        if name in form.errors
    ]
    start, end = form.cleaned_data.get("starts_at"), form.cleaned_data.get("ends_at")
    if start and end and end <= start:
        lines.append("End: must be after the start.")
    if start and start < timezone.now() - request_services.START_GRACE:
        lines.append("Start: is in the past.")
    return lines


def _options_for(form):
    if _panel_errors(form):
        return None
    d = form.cleaned_data
    needed = ("workload_kind", "starts_at", "ends_at")
    if any(not d.get(k) for k in needed) or d["ends_at"] <= d["starts_at"]:
        return None
    if not d.get("gpu_model") and not d.get("min_memory_gib"):
        return None
    if d.get("mig_profile"):
        return _slice_option(d)
    options = request_options(
        workload_kind=d["workload_kind"],
        card_count=d.get("card_count") or 1,
        start=d["starts_at"],
        end=d["ends_at"],
        pool=d.get("pool"),
        gpu_model=d.get("gpu_model"),
        min_memory_gib=d.get("min_memory_gib"),
        cuda=(d.get("cuda_version") or "").strip() or None,
        rule=_class_rule(d),
    )
    if d.get("cards_per_node") and d.get("node_count"):
        shape = Shape(
            cards_per_node=d["cards_per_node"],
            nodes=d["node_count"],
            one_nvlink_domain=bool(d.get("one_nvlink_domain")),
            shared_nodes=bool(d.get("shared_nodes")),
        )
        cuda = (d.get("cuda_version") or "").strip() or None
        _fit_shape_on(options, shape, d["starts_at"], d["ends_at"], cuda)
    return options


def _class_rule(d: dict):
    """The rule of the class the form states, or of the chosen team's default (issue 36)."""
    team = d.get("team")
    chosen = request_services.request_class(
        team=team, workload_class=d.get("workload_class")
    ) if team is not None else d.get("workload_class")  # fmt: skip
    return chosen.rule() if chosen is not None else None


@dataclass(frozen=True)
class SliceOption:
    """The panel's one row for a request of MIG slices: the slices of ``profile`` the pool ×
    model holds now (``total``) and those free for the whole window (``free``)."""

    pool: Pool
    gpu_model: GpuModel
    profile: str
    total: int
    free: int
    wanted: int

    @property
    def eligible(self) -> bool:
        return self.free >= self.wanted

    @property
    def usable(self) -> int:
        return self.total  # no over-commit on slices

    @property
    def reasons(self) -> list[str]:
        if self.eligible:
            return []
        return [f"only {self.free} of {self.total} {self.profile} slices free in that window"]


def slice_options(*, pool, gpu_model, profile, start, end, wanted) -> list[SliceOption]:
    """The one (pool, model) a request for ``wanted`` slices of ``profile`` names, with its
    slices and those free for ``[start, end)``. Two queries."""
    free = pool_free_slices(pool=pool, gpu_model=gpu_model, profile=profile, start=start, end=end)
    total = pool_slices(pool=pool, gpu_model=gpu_model).get(profile, 0)
    return [SliceOption(pool, gpu_model, profile, total, free, wanted)]


def _slice_option(d) -> list[SliceOption] | None:
    """The new-request page's slices panel (pool and model named: the form's own check)."""
    if d.get("pool") is None or d.get("gpu_model") is None:
        return None
    return slice_options(pool=d["pool"], gpu_model=d["gpu_model"], profile=d["mig_profile"],
                         start=d["starts_at"], end=d["ends_at"],
                         wanted=d.get("card_count") or 1)  # fmt: skip


def _fit_shape_on(options, shape: Shape, start, end, cuda: str | None) -> None:
    """Set ``shape_fit`` on each option: does the shape fit node by node in the window, and if
    not, the largest that does (one statement per option with cards), and ``fits`` = eligible
    by card count *and* shape, which is what approval checks."""
    for option in options:
        option.shape_fit = (
            shape_fit(
                pool=option.pool,
                gpu_model=option.gpu_model,
                shape=shape,
                start=start,
                end=end,
                cuda=cuda,
            )
            if option.total
            else None
        )
        option.fits = option.eligible and (option.shape_fit is None or option.shape_fit.fits)


def lifecycle_clock() -> str:
    """Who opens and closes allocation windows, in words: the demo's clock (``DEMO_CLOCK_S``,
    ``manage.py demo_clock``) or Celery beat's ``allocation-lifecycle`` task, with its period."""
    if settings.DEMO_CLOCK_S:
        return f"the demo's clock, every {settings.DEMO_CLOCK_S} s"
    every = settings.CELERY_BEAT_SCHEDULE["allocation-lifecycle"]["schedule"]
    return f"the allocation-lifecycle task (Celery beat), every {every // 60} min"


def request_detail(request, pk: int):
    obj = _request_or_404(request, pk)
    allocation = getattr(obj, "allocation", None) if obj.status == RequestStatus.APPROVED else None
    context = {
        "req": obj,
        "allocation": allocation,
        "trail": list(audit_selectors.object_audit_trail(obj=obj))
        + (list(audit_selectors.object_audit_trail(obj=allocation)) if allocation else []),
        "approve_form": ApproveForm(),
        "reason_form": ReasonForm(),
        "extend_form": ExtendForm(),
        "may_release": permissions.may_release(request.user, obj.team),
        "may_decide": permissions.may_decide(request.user),
        "may_cancel": request_services.capacity_request_may_cancel(request=obj, actor=request.user),
    }
    context["trail"].sort(key=lambda e: (e.created_at, e.pk))
    export = checked_export(request, ("audit", *request_page_csv.EXPORTS))
    if export == "audit":
        return csv_response(context["trail"], AUDIT_TRAIL_COLUMNS, f"request-{pk}-audit.csv")
    if allocation is not None:
        context["lifecycle"] = lifecycle_clock()
        context["scheduler"] = scheduler_panel(allocation)
        context["cost"] = capacity_selectors.allocations_cost_so_far(
            [allocation], now=timezone.now()
        ).get(allocation.pk)
    if export in request_page_csv.EXPORTS:
        return request_page_csv.request_page_csv(
            export, req=obj, allocation=allocation, scheduler=context.get("scheduler"),
            cost=context.get("cost"),
        )  # fmt: skip
    if context["may_decide"] and obj.status == RequestStatus.SUBMITTED and obj.mig_profile:
        context["options"] = slice_options(pool=obj.pool, gpu_model=obj.gpu_model,
                                           profile=obj.mig_profile, start=obj.starts_at,
                                           end=obj.ends_at, wanted=obj.card_count)  # fmt: skip
    elif (
        context["may_decide"]
        and obj.status == RequestStatus.SUBMITTED
        and obj.kind == RequestKind.CARDS
    ):
        context["options"] = options = request_options(
            workload_kind=obj.workload_kind,
            card_count=obj.card_count,
            start=obj.starts_at,
            end=obj.ends_at,
            pool=obj.pool,
            gpu_model=obj.gpu_model,
            min_memory_gib=obj.min_memory_gib,
            cuda=obj.cuda_version or None,
        )
        shape = request_shape(obj)
        if shape is not None:
            _fit_shape_on(options, shape, obj.starts_at, obj.ends_at, obj.cuda_version or None)
    return render(request, "pools/requests/request_detail.html", context)


@require_POST
def request_action(request, pk: int, action: str):
    """submit / cancel / approve / accept / reject from the detail page or the queue. As the API:
    a request the user may not see is a 404; a decision by someone who may not decide a 403
    before the fields are read, as is any other action the service refuses for who asks."""
    obj = _request_or_404(request, pk)
    if action in ("approve", "accept", "reject") and not permissions.may_decide(request.user):
        raise PermissionDenied(request_services.ADMINS_DECIDE)
    try:
        if action == "submit":
            request_services.capacity_request_submit(request=obj, actor=request.user)
            messages.success(request, f"Request #{obj.pk} submitted.")
        elif action == "cancel":
            form = ReasonForm(request.POST)
            form.is_valid()
            request_services.capacity_request_cancel(
                request=obj, actor=request.user, reason=form.cleaned_data.get("reason", "")
            )
            messages.success(request, f"Request #{obj.pk} cancelled.")
        elif action == "approve":
            form = ApproveForm(request.POST)
            if not form.is_valid():
                raise DomainError("Check the approval fields.", errors=form.errors)
            d = {k: v for k, v in form.cleaned_data.items() if v not in (None, "")}
            allocation = request_services.capacity_request_approve(
                request=obj,
                actor=request.user,
                card_count=d.get("card_count"),
                ends_at=d.get("ends_at"),
                pool=d.get("pool"),
                gpu_model=d.get("gpu_model"),
                reason=d.get("reason", ""),
            )
            messages.success(
                request,
                f"Approved: allocation #{allocation.pk}, "
                f"{allocation.card_count}× {allocation.gpu_model.name} in "
                f"{allocation.pool.name}.",
            )
        elif action == "accept":
            form = ReasonForm(request.POST)
            form.is_valid()
            request_services.capacity_request_accept(
                request=obj, actor=request.user, reason=form.cleaned_data.get("reason", "")
            )
            messages.success(request, f"Request #{obj.pk} accepted: capacity planned.")
        elif action == "reject":
            form = ReasonForm(request.POST)
            form.is_valid()
            request_services.capacity_request_reject(
                request=obj, actor=request.user, reason=form.cleaned_data.get("reason", "")
            )
            messages.success(request, f"Request #{obj.pk} rejected.")
        else:
            raise Http404("No such action.")
    except domain_errors.PermissionDenied as exc:
        raise PermissionDenied(exc.message) from exc
    except DomainError as exc:
        messages.error(request, _refusal_message(exc))
    return redirect_back(request, "pools:request-detail", pk=obj.pk)


def _refusal_message(exc: DomainError) -> str:
    """The flash message of a refused action: the refusal, then each field's errors
    ("Check the extension fields. Justification: This field is required.")."""
    errors = exc.data.get("errors") or {}
    detail = "; ".join(
        f"{_FIELD_LABELS.get(k, k.replace('_', ' ').capitalize())}: "
        f"{v if isinstance(v, str) else ' '.join(v)}"
        for k, v in errors.items()
    )
    return f"{exc.message} {detail}".strip()


@require_POST
def allocation_action(request, pk: int, action: str):
    """release / extend an allocation; a refusal for who asks is a 403, as the API answers."""
    allocation = _allocation_or_404(request, pk)
    try:
        if action == "release":
            form = ReasonForm(request.POST)
            form.is_valid()
            allocation_services.allocation_release(
                allocation=allocation,
                actor=request.user,
                reason=form.cleaned_data.get("reason", ""),
            )
            messages.success(
                request, f"Allocation #{allocation.pk} released; its cards are back in the pool."
            )
        elif action == "extend":
            form = ExtendForm(request.POST)
            if not form.is_valid():
                raise DomainError("Check the extension fields.", errors=form.errors)
            new = allocation_services.allocation_extend(
                allocation=allocation,
                actor=request.user,
                ends_at=form.cleaned_data["ends_at"],
                justification=form.cleaned_data["justification"],
            )
            messages.success(request, f"Extension requested as request #{new.pk}.")
            return redirect("pools:request-detail", pk=new.pk)
        else:
            raise Http404("No such action.")
    except domain_errors.PermissionDenied as exc:
        raise PermissionDenied(exc.message) from exc
    except DomainError as exc:
        messages.error(request, _refusal_message(exc))  # which field, and why
    return redirect("pools:request-detail", pk=allocation.request_id)


QUEUE_VERDICTS_MAX = 500  # submitted requests explained to sort the queue by "could approve"


QUEUE_COLUMNS = [
    Column("request", lambda r: r["req"].pk),
    Column("team", lambda r: r["req"].team.slug),
    Column("kind", lambda r: r["req"].kind),
    Column("workload_kind", lambda r: r["req"].workload_kind),
    Column("pool", lambda r: r["req"].pool.slug if r["req"].pool_id else None),
    Column("gpu_model", lambda r: r["req"].model_label),
    Column("cards", lambda r: r["req"].card_count),
    Column("mig_profile", lambda r: r["req"].mig_profile),
    Column("starts_at", lambda r: r["req"].starts_at.isoformat()),
    Column("ends_at", lambda r: r["req"].ends_at.isoformat()),
    Column("team_cards_now", lambda r: r["team_cards"]),
    Column("free_in_pool", lambda r: r["free"]),
    Column("suggested_pool", lambda r: r["suggestion"].pool.slug if r["suggestion"] else None),
    Column("could_approve_now", lambda r: r["verdict"]["approvable"] if r["verdict"] else None),
    Column("why_not", lambda r: r["verdict"]["reason"] if r["verdict"] else None),
    Column("budget_verdict", lambda r: r["budget"].enforcement if r["budget"] else ""),
    Column("submitted_at", lambda r: r["req"].submitted_at.isoformat()),
]
QUEUE_ORDERINGS = {
    "submitted_at", "-submitted_at", "starts_at", "-starts_at",
    "card_count", "-card_count", "team__name", "-team__name",
}  # fmt: skip


@pool_admin_required
def approval_queue(request, verdicts=None):
    """Submitted requests with the team's current usage and the pool's free cards beside each.

    ``verdicts`` (``pools/urls.py`` hands in :func:`pools.explain.views.queue_verdicts`, which
    sits above this sub-domain): per request whether it could be approved now, and why not;
    ordering ``approvable`` / ``-approvable`` sorts by it (over at most
    :data:`QUEUE_VERDICTS_MAX` requests, oldest first). ``?export=csv``: the queue in the same
    order as CSV (:data:`QUEUE_COLUMNS`), its first :data:`QUEUE_VERDICTS_MAX` requests (each
    explained as on the page)."""
    export = checked_export(request) == "csv"
    ordering = request.GET.get("ordering", "submitted_at")
    pending = (
        capacity_selectors.capacity_request_list(user=request.user, decider=False)
        .filter(status=RequestStatus.SUBMITTED)
        .order_by(ordering if ordering in QUEUE_ORDERINGS else "submitted_at", "pk")
    )
    judged: dict = {}
    budgets: dict | None = None  # each request's budget verdict as of now, not at submission
    if export or (verdicts is not None and ordering in ("approvable", "-approvable")):
        pending = list(pending[:QUEUE_VERDICTS_MAX])
        budgets = budget_verdicts(requests=pending)
        if verdicts is not None:
            judged = verdicts(user=request.user, requests=pending, budgets=budgets)
    if verdicts is not None and ordering in ("approvable", "-approvable"):
        first = ordering == "approvable"  # those that could be approved now first, or last

        def rank(r) -> int:  # growth requests (not explained) after both
            if r.pk not in judged:
                return 2
            return 0 if judged[r.pk]["approvable"] == first else 1

        pending.sort(key=rank)  # stable: oldest first within each
    if export:
        return csv_response(
            _queue_rows(pending, judged, budgets), QUEUE_COLUMNS, "approval-queue.csv"
        )
    page = checked_page(request, Paginator(pending, QUEUE_PAGE_SIZE))
    items = list(page.object_list)
    if budgets is None:
        budgets = budget_verdicts(requests=items)
    if verdicts is not None and not judged:
        judged = verdicts(user=request.user, requests=items, budgets=budgets)
    return render(
        request,
        "pools/requests/approval_queue.html",
        {
            "rows": _queue_rows(items, judged, budgets),
            "page": page,
            "ordering": ordering,
            "reason_form": ReasonForm(),
        },
    )


def _queue_rows(items: list, judged: dict, budgets: dict) -> list[dict]:
    """The queue's rows: each request with its team's cards held now, the cards free for it
    (``None``: unknown), where approval would place an "any" request, its verdict, and the
    budgets' verdict on it now (``budget``; ``budget_changed``: not what they said at
    submission, which the request keeps)."""
    held = team_usage(team_ids=list({r.team_id for r in items}), at=timezone.now())
    # One read of pools, cards and holdings for all the rows, not one per request.
    snapshot = (
        CapacitySnapshot.load(
            start=min(r.starts_at for r in items), end=max(r.ends_at for r in items)
        )
        if items
        else None
    )
    rows = []
    for item in items:
        suggestion = None
        if item.kind == RequestKind.GROWTH:  # capacity to add: no pool has it to approve
            free = (
                snapshot.free(
                    pool=item.pool,
                    gpu_model=item.gpu_model,
                    start=item.starts_at,
                    end=item.ends_at,
                    cuda=item.cuda_version or None,
                )
                if item.pool_id
                else None
            )
        elif item.mig_profile:  # slices of a profile: free slices, not cards (two queries)
            free = pool_free_slices(
                pool=item.pool,
                gpu_model=item.gpu_model,
                profile=item.mig_profile,
                start=item.starts_at,
                end=item.ends_at,
            )
        elif item.pool_id and item.gpu_model_id:
            free = snapshot.free(
                pool=item.pool,
                gpu_model=item.gpu_model,
                start=item.starts_at,
                end=item.ends_at,
                cuda=item.cuda_version or None,
            )
        else:  # "any eligible pool / model": show where approval would place it
            options = request_options(
                workload_kind=item.workload_kind,
                card_count=item.card_count,
                start=item.starts_at,
                end=item.ends_at,
                pool=item.pool,
                gpu_model=item.gpu_model,
                min_memory_gib=item.min_memory_gib,
                cuda=item.cuda_version or None,
                snapshot=snapshot,
            )
            suggestion = next((o for o in options if o.eligible), None)
            free = suggestion.free if suggestion else 0
        rows.append(
            {
                "req": item,
                "team_cards": held.get(item.team_id, 0),
                "free": free,
                "suggestion": suggestion,
                "verdict": judged.get(item.pk),
                "budget": budgets.get(item.pk),
                "budget_changed": (
                    getattr(budgets.get(item.pk), "enforcement", "") != item.budget_verdict
                ),
            }
        )
    return rows


# Greys, apart from the teams' palette: cards no team of the chart holds by allocation.
BLOCKED_COLOURS = {RECURRING_HELD: "#8d96a0", MAINTENANCE_AWAY: "#4b5563"}

OTHER_TEAMS = "other teams"
"""The timeline's bar (and CSV ``team``) of the cards of teams it does not name."""

TIMELINE_COLUMNS = [
    Column("pool", lambda r: r["pool"].slug),
    Column("gpu_model", lambda r: r["gpu_model"].slug),
    Column("day", lambda r: r["day"].date().isoformat()),
    Column("team", lambda r: r["team"]),  # a slug, "other teams" or a blocked kind
    Column("cards_held_at_peak", lambda r: r["cards"]),
    Column("peak_at", lambda r: r["peak_at"].isoformat()),
    Column("usable_cards", lambda r: r["usable"]),
]


def timeline(request):
    """Cards held per day for the next 8 weeks, per pool and GPU model, against usable cards.

    Each day of a chart is drawn at its busiest instant: the first instant of the day at which
    the most cards are held (:func:`pools.capacity.availability.peaks_by_pool_model`, every
    allocation start and end a breakpoint, so an allocation of a few hours counts), and
    ``free`` is :func:`pools.capacity.arithmetic.free_after_peak` of that peak: the free cards
    the approval, the explainer and the week calendar give for the whole day. The bars are each
    team's cards at that instant (summed in the database,
    ``capacity_selectors.timeline_holdings``), so they stack to the peak. Each chart lists the
    first :data:`TIMELINE_ALLOCATIONS` of the user's allocations in it, with a link to all of
    them. ``?export=csv``: the charts' bars as CSV (:data:`TIMELINE_COLUMNS`, ``peak_at`` the
    busiest instant), one row per pool × GPU model × day × team, the team by slug as in the
    requests' and allocations' CSVs (teams the user is not in summed as :data:`OTHER_TEAMS`),
    in the page's order.

    Besides the allocations, the cards recurring reservations hold and planned maintenance
    windows take away (:func:`pools.capacity.availability.blocked_cards_at`) are bars of their
    own, after the teams' (in the CSV, rows whose ``team`` is :data:`RECURRING_HELD` or
    :data:`MAINTENANCE_AWAY`), as the approval counts them; each chart's ``free`` is usable
    minus all of them at each day's busiest instant, never below 0.

    ``?team=<slug>`` (a team the user may see, :class:`TimelineFilterSet`): that team alone is
    named and its allocations alone listed, every other team's cards "other teams" (the bars'
    total, and so ``free``, the same). Any other slug is a 400: the page with the refusal and no
    charts, the CSV :func:`refuse_export`."""
    export = checked_export(request)
    filterset = TimelineFilterSet(request.GET or None, queryset=Allocation.objects.none(),
                                  request=request)  # fmt: skip
    if filterset.is_bound and not filterset.is_valid():
        if export:
            refuse_export(request, filterset.form)  # htmx: the page says why, as without export
        context = {"form": filterset.form, "refusal": filter_refusal(filterset.form), "charts": []}
        return render(request, "pools/requests/timeline.html", context, status=400)
    chosen = filterset.form.cleaned_data.get("team") if filterset.is_bound else None
    start = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    days = [start + timedelta(days=i) for i in range(56)]
    end = days[-1] + timedelta(days=1)
    spans = blocked_intervals(start=start, end=end)
    peaks = capacity_selectors.timeline_peaks(bounds=[*days, end], blocked=spans)
    # every chart's busiest instants, one list for the database's sums; each chart reads its own
    instants = sorted({at for per_day in peaks.values() for _, at in per_day})
    position = {at: i for i, at in enumerate(instants)}
    # Capacity is shared, so every team's holdings count; a member sees other teams' cards
    # summed as "other teams", never their names or allocations (the selector says how).
    series = capacity_selectors.timeline_holdings(
        user=request.user, start=start, end=end, instants=instants, team=chosen
    )
    # per chart: (team name, team slug) -> cards, "other teams" both for the rest (no slug
    # holds a space); two teams of one name stay two bars
    groups: dict[tuple, dict[tuple[str, str], list[int]]] = defaultdict(dict)
    for line in series:
        team = (line.team, line.team_slug) if line.team_slug else (OTHER_TEAMS, OTHER_TEAMS)
        at = [position[t] for _, t in peaks[(line.pool_id, line.gpu_model_id)]]
        groups[(line.pool_id, line.gpu_model_id)][team] = [line.cards[i] for i in at]
    blocked: dict[tuple, dict[str, list[int]]] = {}
    for key, kinds in blocked_cards_at(
        start=start, end=end, instants=instants, intervals=spans
    ).items():
        at = [position[t] for _, t in peaks[key]]
        blocked[key] = {kind: [cards[i] for i in at] for kind, cards in kinds.items()}
        groups.setdefault(key, {})  # a pair with only reservations or maintenance: a chart too
    pools = Pool.objects.in_bulk({p for p, _ in groups})
    models = GpuModel.objects.in_bulk({m for _, m in groups})
    usable_of = schedulable_cards_by_pool_model()
    ordered = sorted(groups.items(), key=lambda kv: (pools[kv[0][0]].name, models[kv[0][1]].name))
    if export == "csv":
        lines = [
            {"pool": pools[pool_id], "gpu_model": models[model_id], "day": day, "team": team,
             "cards": cards[i], "peak_at": peaks[(pool_id, model_id)][i][1],
             "usable": usable_cards(usable_of.get((pool_id, model_id), 0),
                                    pools[pool_id].overcommit_ratio)}
            for (pool_id, model_id), per_team in ordered
            for i, day in enumerate(days)
            for team, cards in [*((slug, v) for (_, slug), v in sorted(per_team.items())),
                                *blocked.get((pool_id, model_id), {}).items()]
        ]  # fmt: skip
        return csv_response(lines, TIMELINE_COLUMNS, "capacity-timeline.csv")
    counts, listed = capacity_selectors.timeline_allocations(
        user=request.user, start=start, end=end, first=TIMELINE_ALLOCATIONS, team=chosen
    )
    # Each listed row's link and window written here once, not by a {% url %} and two date
    # filters per row (16 charts × 10 rows cost 20 ms of template).
    detail_url = UrlOfId("pools:request-detail")
    for rows in listed.values():
        for a in rows:
            a.detail_url = detail_url(a.request_id)
            a.window = f"{minute_text(a.starts_at)} → {minute_text(a.ends_at)}"
    all_url = reverse("pools:allocation-list")
    team_query = f"&team={chosen.slug}" if chosen else ""
    # one colour per team (and "other teams") on the whole page, not per chart by position
    teams = sorted({team for _, per_team in ordered for team in per_team})
    colour = {team: PALETTE[i % len(PALETTE)] for i, team in enumerate(teams)}
    charts = []
    for (pool_id, model_id), per_team in ordered:
        pool, model = pools[pool_id], models[model_id]
        usable = usable_cards(usable_of.get((pool_id, model_id), 0), pool.overcommit_ratio)
        kinds = blocked.get((pool_id, model_id), {})
        schedulable = usable_of.get((pool_id, model_id), 0)
        free = [
            free_after_peak(schedulable=schedulable, overcommit_ratio=pool.overcommit_ratio,
                            peak=peak)
            for peak, _ in peaks[(pool_id, model_id)]
        ]  # fmt: skip
        fewest = min(range(len(days)), key=lambda i: (free[i], i))
        charts.append(
            {
                "id": f"tl-{pool.pk}-{model.pk}",
                "data_id": f"tl-{pool.pk}-{model.pk}-data",
                "title": f"{pool.name} · {model.name}",
                "calendar_url": reverse("pools:pool-calendar", args=[pool.slug, model.slug]),
                "usable": usable,
                "free": free,
                "fewest_free": free[fewest],
                "fewest_free_day": days[fewest],
                "data": {
                    "labels": [d.strftime("%d %b") for d in days],
                    # each day's busiest instant, local "HH:MM", for the tooltips
                    "peaks": [
                        timezone.localtime(at).strftime("%H:%M")
                        for _, at in peaks.get((pool_id, model_id), [])
                    ],
                    "datasets": [
                        {
                            "type": "bar",
                            "label": team[0],
                            "data": values,
                            "stack": "held",
                            "backgroundColor": colour[team],
                        }
                        for team, values in sorted(per_team.items())
                    ]
                    + [
                        {
                            "type": "bar",
                            "label": kind,
                            "data": values,
                            "stack": "held",
                            "backgroundColor": BLOCKED_COLOURS[kind],
                        }
                        for kind, values in kinds.items()
                    ]
                    + [
                        {
                            "type": "line",
                            "label": "usable cards",
                            "data": [usable] * len(days),
                            "pointRadius": 0,
                            "borderDash": [6, 4],
                            "borderColor": "#b42318",
                            "stack": "usable",
                        }
                    ],
                },
                "allocations": listed.get((pool_id, model_id), []),
                "allocation_count": counts.get((pool_id, model_id), 0),
                "all_url": f"{all_url}?pool={pool.slug}&gpu_model={model.slug}{team_query}",
            }
        )
    context = {"charts": charts, "start": start, "end": end, "form": filterset.form, "team": chosen}
    return render(request, "pools/requests/timeline.html", context)


DRIFT_COLUMNS = [
    Column("detected_at", lambda d: d.detected_at.isoformat()),
    Column("scheduler", lambda d: d.scheduler),
    Column("team", lambda d: d.team.slug if d.team else None),
    Column("subject", lambda d: d.subject),
    Column("expected", lambda d: d.expected),
    Column("found", lambda d: d.found),
    Column("repaired", lambda d: d.repaired),
    Column("detail", lambda d: d.detail),
]


@pool_admin_required
@require_http_methods(["GET", "POST"])
def scheduler_drift(request):
    """Drift found by reconcile (newest first), and a button to reconcile now."""
    if request.method == "POST":
        # Reconcile calls the schedulers: a task does it, never this request's thread.
        report = enqueue(RECONCILE)
        if report is None:
            messages.info(request, "Reconcile queued: differences appear here when it is done.")
        elif report["drifts"]:
            messages.warning(
                request,
                f"Reconciled: {report['drifts']} difference(s) found "
                f"and {report['repaired']} repaired.",
            )
        elif report["checked"] or report["nodes"]:
            messages.success(request, f"Reconciled: {report['checked']} cap(s) checked, no drift.")
        else:
            messages.info(request, "No scheduler connection is configured: nothing to reconcile.")
        if (report or {}).get("clusters_queued"):
            messages.info(
                request,
                f"{report['clusters_queued']} more cluster(s) are reconciled by their own "
                "tasks: their differences appear here when they are done.",
            )
        for error in (report or {}).get("errors", []):
            messages.error(request, error)
        return redirect("pools:scheduler-drift")
    export = checked_export(request) if request.method == "GET" else None
    rows = SchedulerDrift.objects.select_related("team")
    if export == "csv":
        return csv_response(rows.iterator(), DRIFT_COLUMNS, "scheduler-drift.csv")
    return render(
        request,
        "pools/scheduler_drift.html",
        {
            "page": checked_page(request, Paginator(rows, 50)),
            "configured": sorted(settings.SCHEDULERS),
        },
    )
