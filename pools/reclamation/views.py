"""Idle findings, reclamation policies and exemptions: the pages of issue #7.

Members see their teams' findings; pool admins see all, edit each pool's policy, grant
exemptions, dismiss findings and undo a reclamation within a day. Thin: services do the work.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods, require_POST

from pools.capacity.forms import RequiredReasonForm as ReasonForm
from pools.capacity.models import Allocation
from pools.common.choices import IdleFindingState
from pools.common.errors import DomainError
from pools.inventory.models import Pool
from pools.jobs import IDLE_SCAN_CLUSTER, enqueue
from pools.reclamation import selectors
from pools.reclamation.filtersets import IdleFindingFilterSet
from pools.reclamation.forms import ExemptFindingForm, ExemptionForm, PolicyForm, plain_decimal
from pools.reclamation.models import (
    Exemption,
    IdleFinding,
    IdleScanRun,
    ReclamationPolicy,
)
from pools.reclamation.services.actions import (
    exemption_grant,
    exemption_revoke,
    idle_finding_reclaim_now,
    reclamation_policy_save,
)
from pools.reclamation.services.runs import idle_scan_clusters, last_scan_runs
from pools.reclamation.services.scan import (
    DISMISSAL_HOLDS,
    finding_policy,
    idle_finding_dismiss,
    reclaim_due_at,
    reclamation_undo,
)
from pools.reclamation.services.whatif import (
    OVERRIDABLE,
    reclamation_whatif_queue,
    reclamation_whatif_unavailable,
)
from pools.web.csv_numbers import card_hours_csv
from pools.web.pages import (
    Column,
    checked_export,
    checked_page,
    csv_response,
    filter_refusal,
    form_add_domain_errors,
    pool_admin_required,
    refuse_export,
    whole_number,
)

FINDING_COLUMNS = [
    Column("finding", lambda f: f.pk),
    Column("allocation", lambda f: f.allocation_id),
    Column("team", lambda f: f.allocation.team.slug),
    Column("pool", lambda f: f.allocation.pool.slug),
    Column("gpu_model", lambda f: f.allocation.gpu_model.slug),
    Column("state", lambda f: f.state),
    Column("dry_run", lambda f: f.dry_run),
    Column("card_count", lambda f: f.card_count),
    Column("cards_in_use", lambda f: f.cards_in_use),
    Column("cards_reclaimed", lambda f: f.cards_reclaimed),
    Column("mean_util_pct", lambda f: f.mean_util_pct),
    Column("peak_util_pct", lambda f: f.peak_util_pct),
    Column("first_seen_at", lambda f: f.first_seen_at.isoformat()),
    Column("warned_at", lambda f: f.warned_at.isoformat() if f.warned_at else None),
    Column(
        "would_reclaim_at", lambda f: f.would_reclaim_at.isoformat() if f.would_reclaim_at else None
    ),
    Column("reclaimed_at", lambda f: f.reclaimed_at.isoformat() if f.reclaimed_at else None),
    Column("reclaim_due_at", lambda f: _iso(reclaim_due_at(f, finding_policy(f)))),
]
"""``reclaim_due_at``: when the scan reclaims (under dry run: would reclaim) an open finding's
cards, the instant the page counts down to (:func:`reclaim_due_at`); ``would_reclaim_at`` is
what a dry run recorded once that instant had passed."""


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def idle_findings(request):
    """Idle findings, newest first, filtered as the API's list (:class:`IdleFindingFilterSet`:
    ``?state=open``, ``?team=<slug>`` among the teams the user may see, ``pool``, ``dry_run``);
    ``?export=csv`` the same rows. Filters it cannot use (a team the user may not see, a state
    that is none) are a 400: the page with the error and no rows, the CSV
    :func:`pools.web.pages.refuse_export`. 50 findings a page (:func:`checked_page`)."""
    export = checked_export(request)
    filterset = IdleFindingFilterSet(
        request.GET or None,
        queryset=selectors.idle_finding_list(user=request.user),
        request=request,
    )
    refused = filterset.is_bound and not filterset.is_valid()
    rows = filterset.queryset.none() if refused else filterset.qs
    if export and refused:
        refuse_export(request, filterset.form)  # htmx: the page says why, as without export
    elif export == "csv":
        return csv_response(rows.iterator(), FINDING_COLUMNS, "idle-findings.csv")
    page = checked_page(request, Paginator(rows, 50), refused=refused)
    policies = {
        p.pool_id: p
        for p in ReclamationPolicy.objects.filter(pool_id__in={f.allocation.pool_id for f in page})
    }
    now = timezone.now()
    sparklines = []
    for finding in page:
        policy = policies.get(finding.allocation.pool_id)
        finding.time_to_reclaim = time_to_reclaim(finding, policy, now)
        finding.reclaim_action = reclaim_action(finding)
        # as idle_finding_reclaim_now: never under dry run (the team was not warned)
        finding.no_reclaim_now = (
            "The pool has no policy."
            if policy is None
            else "Dry run: no reclaim now."
            if policy.dry_run or finding.dry_run
            else ""
        )
        points = (finding.detail or {}).get("sparkline") or []
        if points:
            sparklines.append(
                {
                    "id": finding.pk,
                    "points": points,
                    "threshold": float(policy.idle_below_pct) if policy else None,
                }
            )
        finding.has_sparkline = bool(points)
    query = request.GET.copy()
    for name in ("page", "export"):
        query.pop(name, None)
    return render(
        request,
        "pools/reclamation/idle_findings.html",
        {
            "filterset": filterset,
            "refusal": filter_refusal(filterset.form) if refused else "",
            "query": query.urlencode(),
            "page": page,
            "state": request.GET.get("state", ""),
            "states": IdleFindingState.choices,
            "undo_until": now - timedelta(days=1),
            "sparklines": sparklines,
            "dismissal_days": DISMISSAL_HOLDS.days,
            "exempt_form": ExemptFindingForm(),
            "last_scans": last_scan_runs(),
            "unscanned_pools": Pool.objects.filter(reclamation_policy__isnull=True).count(),
        },
        status=400 if refused else 200,
    )


@require_POST
@pool_admin_required
def idle_scan_now(request):
    """Scan now, one scan per cluster with a policy (the beat runs them every 5 minutes), and
    say what each found once it has run; a scan reads Prometheus and may call schedulers, so
    never in this request's thread (eager only in the demo, which has no worker)."""
    results = [enqueue(IDLE_SCAN_CLUSTER, c) for c in idle_scan_clusters() or [None]]
    ran = [r["run"] for r in results if r is not None]
    if len(ran) < len(results):
        messages.info(request, "Scan queued: its findings appear here when it is done.")
    for run in IdleScanRun.objects.filter(pk__in=ran).select_related("cluster").order_by("pk"):
        where = f" of {run.cluster.name}" if run.cluster else ""
        if run.error:
            messages.error(request, f"Scan{where} could not run: {run.error}")
        else:
            messages.success(
                request,
                f"Scanned{where} {run.allocations} allocation"
                f"{'s' if run.allocations != 1 else ''}: {run.busy} busy, {run.idle} idle, "
                f"{run.unknown} unknown; {run.warned} warned, {run.reclaimed} reclaimed.",
            )
    return redirect("pools:idle-findings")


def _duration(delta: timedelta) -> str:
    """A wait for people: "40 min", "5 h", "4 h 30 min", "3 d 2 h" (to the minute under an
    hour, then to 5 minutes)."""
    minutes = max(1, round(delta.total_seconds() / 60))
    if minutes < 60:
        return f"{minutes} min"
    minutes = 5 * round(minutes / 5)
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h" + (f" {minutes} min" if minutes and hours < 10 else "")
    days, hours = divmod(hours, 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def time_to_reclaim(finding: IdleFinding, policy: ReclamationPolicy | None, now: datetime) -> str:
    """When the scan reclaims an open finding's cards, or why it does not: the grace runs from
    the warning (from first seen under dry run); once over, the finding's note says what holds
    it (exempt, not certainly idle, cooldown), else the next scan does it."""
    if finding.state != IdleFindingState.OPEN:
        return ""
    if policy is None:
        return "the pool has no policy: never reclaimed"
    verb = "would reclaim" if finding.dry_run else "reclaim"
    due = reclaim_due_at(finding, policy)
    if due is None:
        return "not warned yet: the grace starts with the warning"
    if due > now:
        return f"{verb} in {_duration(due - now)}"
    if finding.dry_run and finding.would_reclaim_at:
        when = timezone.localtime(finding.would_reclaim_at)
        return f"would have been reclaimed on {when:%Y-%m-%d %H:%M}"
    if finding.note:
        return f"held: {finding.note}"
    return "would reclaim at the next scan" if finding.dry_run else "due at the next scan"


def reclaim_action(finding: IdleFinding) -> str:
    """What reclaiming the finding does to its allocation, in words for the confirm dialog."""
    held = finding.allocation.card_count
    keep = min(finding.cards_in_use, held)
    if keep == 0:
        return f"end allocation #{finding.allocation_id} and return its {_cards(held)} to the pool"
    return f"shrink allocation #{finding.allocation_id} from {held} to {_cards(keep)}"


def _cards(count: int) -> str:
    return f"{count} card" if count == 1 else f"{count} cards"


def _form_error(form: forms.Form, default: str) -> str:
    """One line for a flash message: the first error of the form, by field label."""
    for name, errors in form.errors.items():
        if name in form.fields and form.data.get(name):
            return f"{form.fields[name].label or name.title()}: {errors[0]}"
    return default


@require_POST
@pool_admin_required
def idle_finding_action(request, pk: int, action: str):
    finding = get_object_or_404(
        IdleFinding.objects.select_related("allocation__team", "allocation__pool"), pk=pk
    )
    try:
        if action == "undo":
            reclamation_undo(finding=finding, actor=request.user)
            messages.success(
                request,
                f"Reclamation of allocation #{finding.allocation_id} undone: its cards are back.",
            )
        elif action == "dismiss":
            form = ReasonForm(request.POST)
            if not form.is_valid():
                messages.error(request, _form_error(form, "Say why the finding is dismissed."))
                return redirect("pools:idle-findings")
            idle_finding_dismiss(
                finding=finding, actor=request.user, reason=form.cleaned_data["reason"]
            )
            messages.success(
                request,
                f"Finding #{finding.pk} dismissed: allocation #{finding.allocation_id} is not "
                f"flagged again for {DISMISSAL_HOLDS.days} days.",
            )
        elif action == "exempt":
            form = ExemptFindingForm(request.POST)
            if not form.is_valid():
                messages.error(
                    request,
                    _form_error(form, "Say why the allocation is exempt, and for how long."),
                )
                return redirect("pools:idle-findings")
            days = form.cleaned_data["days"]
            exemption = exemption_grant(
                actor=request.user,
                reason=form.cleaned_data["reason"],
                expires_at=timezone.now() + timedelta(days=days),
                allocation=finding.allocation,
            )
            messages.success(
                request,
                f"Allocation #{finding.allocation_id} is exempt from reclamation until "
                f"{timezone.localtime(exemption.expires_at):%Y-%m-%d %H:%M} "
                f"({days} day{'s' if days != 1 else ''}).",
            )
        elif action == "reclaim":
            done = idle_finding_reclaim_now(finding=finding, actor=request.user)
            messages.success(
                request,
                f"Allocation #{finding.allocation_id} reclaimed: {_cards(done.cards_reclaimed)} "
                "back to the pool. It can be undone within a day.",
            )
        else:
            raise Http404("No such action.")
    except DomainError as exc:
        messages.error(request, exc.message)
    return redirect("pools:idle-findings")


POLICY_COLUMNS = [
    Column("pool", lambda r: r["pool"].slug),
    Column("saved", lambda r: r["saved"]),
    Column("idle_below_pct", lambda r: r["idle_pct"]),
    Column("certainly_idle_below_pct", lambda r: r["certainly_idle_pct"]),
    Column("process_memory_max_mib", lambda r: r["policy"].process_memory_max_mib),
    Column("window_minutes", lambda r: r["policy"].window_minutes),
    Column("min_coverage", lambda r: r["policy"].min_coverage),
    Column("grace_hours", lambda r: r["policy"].grace_hours),
    Column("cooldown_minutes", lambda r: r["policy"].cooldown_minutes),
    Column("dry_run", lambda r: r["policy"].dry_run),
]
EXEMPTION_COLUMNS = [
    Column("exemption", lambda e: e.pk),
    Column("team", lambda e: e.team.slug if e.team_id else None),
    Column("allocation", lambda e: e.allocation_id),
    Column("allocation_team", lambda e: e.allocation.team.slug if e.allocation_id else None),
    Column("reason", lambda e: e.reason),
    Column("expires_at", lambda e: e.expires_at.isoformat()),
]


def _policies_csv(table: str, pools: list[Pool], policies: dict[int, ReclamationPolicy]):
    """The policies page's ``table`` (``policies`` or ``exemptions``) as CSV."""
    if table == "policies":
        rows = _policy_rows(pools, policies)
        return csv_response(rows, POLICY_COLUMNS, "reclamation-policies.csv")
    return csv_response(_exemptions_in_force(), EXEMPTION_COLUMNS, "idle-exemptions.csv")


def _exemptions_in_force():
    """Exemptions not yet expired, soonest to expire first (the page's table and its CSV)."""
    return (
        Exemption.objects.select_related("team", "allocation__team")
        .filter(expires_at__gt=timezone.now())
        .order_by("expires_at", "pk")
    )


def _policy_rows(pools: list[Pool], policies: dict[int, ReclamationPolicy]) -> list[dict[str, Any]]:
    """One row per pool: its policy (an unsaved default when never edited), whether it is
    saved, and its idle thresholds as plain numbers (%)."""
    rows = []
    for pool in pools:
        policy = policies.get(pool.pk) or ReclamationPolicy(pool=pool)
        rows.append(
            {
                "pool": pool,
                "policy": policy,
                "saved": pool.pk in policies,
                "idle_pct": plain_decimal(Decimal(policy.idle_below_pct)),
                "certainly_idle_pct": plain_decimal(Decimal(policy.certainly_idle_below_pct)),
            }
        )
    return rows


def _exemption_granted(request, exemption_form: ExemptionForm) -> bool:
    """Grant the posted exemption (a success message); ``False`` with the service's error on
    the form (on its field when it names one) when it is invalid or refused."""
    if not exemption_form.is_valid():
        return False
    data = exemption_form.cleaned_data
    try:
        exemption = exemption_grant(
            actor=request.user,
            reason=data["reason"],
            expires_at=data["expires_at"],
            team=data.get("team"),
            allocation=data.get("allocation"),
        )
    except DomainError as exc:
        form_add_domain_errors(exemption_form, exc)
        return False
    messages.success(
        request,
        f"Exemption of {_exempted(exemption)} granted until "
        f"{timezone.localtime(exemption.expires_at):%Y-%m-%d %H:%M}.",
    )
    return True


def _exemption_revoke(request) -> None:
    """Revoke the posted exemption (404 when unknown); the outcome as a message."""
    exemption = get_object_or_404(Exemption, pk=whole_number(request.POST.get("exemption")))
    try:
        exemption_revoke(exemption=exemption, actor=request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Exemption of {_exempted(exemption)} revoked.")


@pool_admin_required
@require_http_methods(["GET", "POST"])
def reclamation_policies(request):
    """Every pool's policy (defaults until edited) and the exemptions in force;
    ``?export=policies`` the policies table as CSV (:data:`POLICY_COLUMNS`),
    ``?export=exemptions`` the exemptions' (:data:`EXEMPTION_COLUMNS`); with ``?pool=``,
    ``?export=csv`` that pool's what-if rows (:data:`WHATIF_COLUMNS`)."""
    export = checked_export(request, ("policies", "exemptions", "csv"))
    pools = list(Pool.objects.order_by("name"))
    policies = {p.pool_id: p for p in ReclamationPolicy.objects.all()}
    if export in ("policies", "exemptions"):
        return _policies_csv(export, pools, policies)
    edit = request.GET.get("pool") or request.POST.get("pool_slug")
    form = exemption_form = None
    if request.method == "POST" and request.POST.get("kind") == "policy":
        pool = get_object_or_404(Pool, slug=edit)
        policy = policies.get(pool.pk) or ReclamationPolicy(pool=pool)
        form = PolicyForm(request.POST, instance=policy)
        if form.is_valid():  # one save path with the API: validated again, audited there
            reclamation_policy_save(actor=request.user, pool=pool, **form.cleaned_data)
            messages.success(request, f"Policy of {pool.name} saved.")
            return redirect("pools:reclamation-policies")
    elif request.method == "POST" and request.POST.get("kind") == "exemption":
        exemption_form = ExemptionForm(request.POST)
        if _exemption_granted(request, exemption_form):
            return redirect("pools:reclamation-policies")
    elif request.method == "POST" and request.POST.get("kind") == "revoke":
        _exemption_revoke(request)
        return redirect("pools:reclamation-policies")
    elif request.method == "POST" and request.POST.get("kind") == "whatif":
        pool = get_object_or_404(Pool, slug=edit)
        form = _what_if_queue(request, pool, policies.get(pool.pk))
        if not isinstance(form, PolicyForm):
            return form
    whatif = None
    edit_pool = next((p for p in pools if p.slug == edit), None)
    if edit and form is None:
        pool = get_object_or_404(Pool, slug=edit)
        whatif = _what_if(request, pool)
        if whatif and whatif["result"] and export == "csv":
            name = f"reclamation-whatif-{pool.slug}-{whatif['run'].pk}.csv"
            return csv_response(whatif["run"].result["rows"], WHATIF_COLUMNS, name)
        if whatif and request.htmx:  # the what-if's poll
            response = render(request, "pools/reclamation/policies.html#whatif_result",
                              {"whatif": whatif, "edit": edit})  # fmt: skip
            patch_vary_headers(response, ["HX-Request"])
            return response
        form = _what_if_form(pool, policies.get(pool.pk), whatif)
    exemption_form = exemption_form or ExemptionForm()
    exemption_form.fields["allocation"].queryset = Allocation.objects.select_related(
        "team", "gpu_model"
    ).order_by("-id")[:200]
    rows = _policy_rows(pools, policies)
    exemptions = _exemptions_in_force()
    return render(
        request,
        "pools/reclamation/policies.html",
        {
            "rows": rows,
            "form": form,
            "edit": edit,
            "edit_pool": edit_pool,
            "exemption_form": exemption_form,
            "exemptions": exemptions,
            "whatif": whatif,
            "whatif_unavailable": edit_pool and reclamation_whatif_unavailable(pool=edit_pool),
        },
    )


def _exempted(exemption: Exemption) -> str:
    if exemption.team_id:
        return f"team {exemption.team.name}"
    return f"allocation #{exemption.allocation_id}"


# A what-if's rows as its report stores them (ISO 8601 times), card-hours to 3 places as the
# page shows them (a what-if stored before kept them as numbers to 2: 0.17 -> 0.170).
WHATIF_COLUMNS = [
    Column(name, lambda row, name=name: card_hours_csv(row[name]) if name == "card_hours_freed"
           else row[name])
    for name in (
        "allocation", "team", "card_count", "first_idle", "would_reclaim_at", "cards_reclaimed",
        "card_hours_freed", "findings", "note",
    )
]  # fmt: skip


def _what_if_queue(request, pool: Pool, policy: ReclamationPolicy | None):
    """Queue the what-if of the POSTed thresholds (:func:`reclamation_whatif_queue`) and send the
    browser to ``?pool=<slug>&whatif=<id>``, where it polls; or the form with its errors."""
    # The what-if asks only for the numbers it replays; cooldown and dry run stay the saved
    # policy's, so that the form it leaves behind saves what was there.
    current = policy or ReclamationPolicy(pool=pool)
    data = {name: plain_decimal(getattr(current, name)) for name in PolicyForm.Meta.fields}
    data.update({name: request.POST[name] for name in OVERRIDABLE if name in request.POST})
    if not data["dry_run"]:
        data.pop("dry_run")  # an unticked checkbox is an absent key
    form = PolicyForm(data, instance=ReclamationPolicy(pool=pool))
    raw_days = request.POST.get("days", "")
    form.days, form.whatif = raw_days, True
    if not form.is_valid():
        return form
    try:
        whatif = reclamation_whatif_queue(
            pool=pool, actor=request.user,
            overrides={name: form.cleaned_data[name] for name in OVERRIDABLE},
            days=raw_days if (days := whole_number(raw_days)) is None else days,
        )  # fmt: skip
    except DomainError as exc:
        form_add_domain_errors(form, exc, name_other_fields=True)
        return form
    url = reverse("pools:reclamation-policies")
    return redirect(f"{url}?pool={pool.slug}&whatif={whatif.pk}#whatif")


def _what_if(request, pool: Pool) -> dict | None:
    """The queued what-if ``?whatif=<id>`` of this pool (``None``: none asked, or another
    pool's): the run and, once done, its result with datetimes parsed."""
    pk = whole_number(request.GET.get("whatif", ""))
    if pk is None:
        return None
    run = selectors.reclamation_whatif_list().filter(pool=pool, pk=pk).first()
    if run is None:
        return None
    result = dict(run.result) if run.status == "done" else None
    if result:
        result["start"] = datetime.fromisoformat(result["start"])
        result["end"] = datetime.fromisoformat(result["end"])
        result["rows"] = [
            {
                **row,
                "first_idle": row["first_idle"] and datetime.fromisoformat(row["first_idle"]),
                "would_reclaim_at": row["would_reclaim_at"]
                and datetime.fromisoformat(row["would_reclaim_at"]),
            }
            for row in result["rows"]
        ]
    return {"run": run, "result": result, "days": run.params["days"]}


def _what_if_form(pool: Pool, policy: ReclamationPolicy | None, whatif: dict | None) -> PolicyForm:
    """The policy form: the saved policy (defaults until saved), with the shown what-if's
    thresholds and days in place."""
    params = whatif["run"].params if whatif else {}
    form = PolicyForm(
        instance=policy or ReclamationPolicy(pool=pool), initial=params.get("overrides")
    )
    form.days = params.get("days", 7)
    return form
