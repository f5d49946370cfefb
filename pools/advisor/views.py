"""The Advisor page (pool admins: every finding, filtered, sorted, paged, CSV), the findings
panels the allocation page and the team dashboard load with htmx, acknowledge / mute, the
digest opt-in and "run the advisor now". Thin: services and selectors do the work."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_POST

from pools.advisor import selectors
from pools.advisor.choices import LIVE_STATUSES
from pools.advisor.evidence import evidence_csv
from pools.advisor.filtersets import AdvisorFindingFilterSet
from pools.advisor.forms import TriageForm
from pools.advisor.models import AdvisorDigestOptIn
from pools.advisor.rules import RULE_TITLES, RULES
from pools.advisor.services import (
    TRIAGE,
    advisor_digest_set,
    advisor_finding_triage,
    allocation_undecided,
)
from pools.capacity.selectors import allocation_list
from pools.common import errors as domain_errors
from pools.common.errors import DomainError
from pools.jobs import ADVISOR_PASS, enqueue
from pools.tenancy.models import Team
from pools.tenancy.permissions import (
    may_administer_pools,
    may_get_advisor_digest,
    may_release,
    may_see_team,
    require_manager,
)
from pools.tenancy.selectors import managed_team_list
from pools.web.pages import (
    Column,
    UrlOfId,
    back_path,
    filtered_list,
    pool_admin_required,
    redirect_back,
)


def _iso(value):
    return value.isoformat() if value else None


FINDING_COLUMNS = [
    Column("finding", lambda f: f.pk),
    Column("rule", lambda f: f.rule),
    Column("title", lambda f: RULE_TITLES[f.rule]),
    Column("severity", lambda f: f.severity),
    Column("status", lambda f: f.status),
    Column("team", lambda f: f.team.slug),
    Column("pool", lambda f: f.allocation.pool.slug if f.allocation_id else None),
    Column("allocation", lambda f: f.allocation_id),
    Column("since", lambda f: _iso(f.since)),
    Column("opened_at", lambda f: _iso(f.opened_at)),
    Column("last_seen_at", lambda f: _iso(f.last_seen_at)),
    Column("closed_at", lambda f: _iso(f.closed_at)),
    Column("summary", lambda f: f.summary),
    Column("fix", lambda f: f.fix),
    Column("evidence", lambda f: evidence_csv(f.evidence)),
    Column("reason", lambda f: f.reason),
]


def advisor_findings(request):
    """The findings the user may see (live ones unless ``?status=`` says otherwise), most
    urgent first: pool admins every team's, members their own teams' (``visible_to``, the rule
    of :func:`pools.tenancy.permissions.may_see_team`, as the API's list). ``?team=`` a team
    the user may not see is a 400 (:class:`pools.web.team_picker.VisibleTeamFilter`). A row's
    acknowledge / mute form is shown to whom :func:`~pools.tenancy.permissions.may_release`
    allows (its team's managers, pool admins); "run the advisor now" to pool admins."""
    rows = selectors.finding_list(user=request.user)
    triage_all = may_administer_pools(request.user)
    managed = (
        set()
        if triage_all
        else set(managed_team_list(user=request.user).values_list("pk", flat=True))
    )
    serving = UrlOfId("pools:allocation-serving")
    if not request.GET.get("status"):
        rows = rows.filter(status__in=LIVE_STATUSES)
    return filtered_list(
        request,
        queryset=rows,
        filterset_class=AdvisorFindingFilterSet,
        template="pools/advisor/findings.html",
        columns=FINDING_COLUMNS,
        filename="advisor-findings.csv",
        default_ordering=("severity_rank", "-last_seen_at", "-id"),
        extra={
            # links of every row from one reverse each (a {% url %} a row costs ~50 µs x 4)
            "advisor_url": reverse("pools:advisor-findings"),
            "serving_head": serving.head,
            "serving_tail": serving.tail,
            "rules": RULES,
            "last_run": selectors.last_advisor_run(),
            "triage_form": TriageForm(),
            "triage_all": triage_all,
            "triage_team_ids": managed,
        },
    )


def allocation_findings(request, pk: int):
    """The findings panel of one allocation (an htmx fragment, or a page of its own)."""
    try:
        allocation = allocation_list(user=request.user).get(pk=pk)
    except Exception:  # DoesNotExist or a bad id: never say whether it exists
        raise Http404("No such allocation.") from None
    findings = selectors.findings_for_allocation(user=request.user, allocation_id=allocation.pk)
    context = {
        "allocation": allocation,
        "findings": findings,
        "undecided": allocation_undecided(allocation=allocation, now=timezone.now()),
        "may_triage": may_release(request.user, allocation.team),
        "rule_titles": RULE_TITLES,
        "next": back_path(request),
    }
    template = "pools/advisor/panel.html"
    response = render(request, f"{template}#panel" if request.htmx else template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def team_findings(request, slug: str):
    """The findings panel of one team (an htmx fragment for the team dashboard)."""
    team = get_object_or_404(Team, slug=slug)
    if not may_see_team(request.user, team):
        raise Http404("No such team.")
    findings = selectors.findings_for_teams(user=request.user, team_ids=[team.pk])
    context = {
        "team": team,
        "findings": findings,
        "may_triage": may_release(request.user, team),
        "rule_titles": RULE_TITLES,
        "digest": AdvisorDigestOptIn.objects.filter(user=request.user).exists(),
        "may_digest": may_get_advisor_digest(request.user),
        "next": back_path(request),
    }
    template = "pools/advisor/panel.html"
    response = render(request, f"{template}#panel" if request.htmx else template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_POST
def finding_action(request, pk: int, action: str):
    """Acknowledge, mute or unmute a finding with a reason (its team's managers, pool admins)."""
    if action not in TRIAGE:
        raise Http404("No such action.")
    finding = selectors.finding_list(user=request.user).filter(pk=pk).first()
    if finding is None:
        raise Http404("No such finding.")
    try:  # who may act is decided before the reason is read, as in the API
        require_manager(request.user, finding.team)
    except domain_errors.PermissionDenied as exc:
        raise PermissionDenied(exc.message) from exc
    form = TriageForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say why: a reason is required (at most 1,000 characters).")
        return redirect_back(request, "pools:advisor-findings")
    try:
        advisor_finding_triage(
            finding=finding,
            action=action,
            actor=request.user,
            reason=form.cleaned_data["reason"],
            request_id=getattr(request, "request_id", ""),
        )
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Finding #{finding.pk}: {action}d.")
    return redirect_back(request, "pools:advisor-findings")


@require_POST
def digest_toggle(request):
    """Opt in to (or out of) the weekly digest of the teams one manages (opting in: managers
    only, else 403), then back to the page the form was on (its ``next``)."""
    wanted = request.POST.get("digest") == "on"
    try:
        advisor_digest_set(user=request.user, wanted=wanted)
    except domain_errors.PermissionDenied as exc:
        raise PermissionDenied(exc.message) from exc
    messages.success(
        request,
        "You will get the weekly advisor digest of the teams you manage."
        if wanted
        else "No more advisor digests.",
    )
    return redirect_back(request, "pools:my-teams")


@require_POST
@pool_admin_required
def advisor_run_now(request):
    """Queue a pass now (beat runs one every 5 minutes) and say what it did once it ran."""
    counts = enqueue(ADVISOR_PASS)
    if counts is None:
        messages.info(request, "Advisor pass queued: findings appear here when it is done.")
    else:
        messages.success(
            request,
            f"Judged {counts['allocations']} allocations: {counts['opened']} opened, "
            f"{counts['updated']} still open, {counts['closed']} closed.",
        )
    return redirect("pools:advisor-findings")
