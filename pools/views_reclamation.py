"""Idle findings, reclamation policies and exemptions: the pages of issue #7.

Members see their teams' findings; pool admins see all, edit each pool's policy, grant
exemptions, dismiss findings and undo a reclamation within a day. Thin: services do the work.
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from pools import selectors
from pools.audit import audit_event_record
from pools.choices import IdleFindingState
from pools.errors import DomainError
from pools.models import Allocation, Exemption, IdleFinding, Pool, ReclamationPolicy, Team
from pools.services.reclamation import idle_finding_dismiss, reclamation_undo
from pools.services.reclamation_whatif import OVERRIDABLE, reclamation_what_if
from pools.views import Column, csv_response, pool_admin_required

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
]


def _visible_findings(user):
    qs = IdleFinding.objects.select_related(
        "allocation__team", "allocation__pool", "allocation__gpu_model"
    ).order_by("-last_seen_at", "-id")
    if not user.is_staff:
        qs = qs.filter(allocation__team__in=selectors.team_list(user=user))
    return qs


def idle_findings(request):
    """Idle findings, newest first; ``?state=open`` (or any state) filters; CSV export."""
    rows = _visible_findings(request.user)
    state = request.GET.get("state", "")
    if state in IdleFindingState.values:
        rows = rows.filter(state=state)
    if request.GET.get("export") == "csv":
        return csv_response(rows.iterator(), FINDING_COLUMNS, "idle-findings.csv")
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "pools/reclamation/idle_findings.html",
        {
            "page": page,
            "state": state,
            "states": IdleFindingState.choices,
            "undo_until": timezone.now() - timedelta(days=1),
        },
    )


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=1000)


@require_POST
@pool_admin_required
def idle_finding_action(request, pk: int, action: str):
    finding = get_object_or_404(IdleFinding, pk=pk)
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
                messages.error(request, "Say why the finding is dismissed.")
                return redirect("pools:idle-findings")
            idle_finding_dismiss(
                finding=finding, actor=request.user, reason=form.cleaned_data["reason"]
            )
            messages.success(request, f"Finding #{finding.pk} dismissed.")
        else:
            raise Http404("No such action.")
    except DomainError as exc:
        messages.error(request, exc.message)
    return redirect("pools:idle-findings")


class PolicyForm(forms.ModelForm):
    class Meta:
        model = ReclamationPolicy
        fields = [
            "idle_below_pct",
            "certainly_idle_below_pct",
            "process_memory_max_mib",
            "window_minutes",
            "min_coverage",
            "grace_hours",
            "cooldown_minutes",
            "dry_run",
        ]
        labels = {
            "idle_below_pct": "Idle below (% utilisation, window average)",
            "certainly_idle_below_pct": "Certainly idle below (% peak)",
            "process_memory_max_mib": "…and process memory at most (MiB)",
            "window_minutes": "Window (minutes)",
            "min_coverage": "Minimum sample coverage (0–1)",
            "grace_hours": "Grace after the warning (hours)",
            "cooldown_minutes": "Cooldown after any change (minutes)",
            "dry_run": "Dry run (record what would be reclaimed, change nothing)",
        }


class ExemptionForm(forms.ModelForm):
    class Meta:
        model = Exemption
        fields = ["team", "allocation", "reason", "expires_at"]
        widgets = {"expires_at": forms.DateTimeInput(attrs={"type": "datetime-local"})}

    def clean(self):
        data = super().clean()
        if bool(data.get("team")) == bool(data.get("allocation")):
            raise forms.ValidationError("Exempt either a team or one allocation.")
        if data.get("expires_at") and data["expires_at"] <= timezone.now():
            self.add_error("expires_at", "The exemption must end in the future.")
        return data


@pool_admin_required
@require_http_methods(["GET", "POST"])
def reclamation_policies(request):
    """Every pool's policy (defaults until edited) and the exemptions in force."""
    pools = list(Pool.objects.order_by("name"))
    policies = {p.pool_id: p for p in ReclamationPolicy.objects.all()}
    edit = request.GET.get("pool") or request.POST.get("pool_slug")
    form = exemption_form = None
    if request.method == "POST" and request.POST.get("kind") == "policy":
        pool = get_object_or_404(Pool, slug=edit)
        policy = policies.get(pool.pk) or ReclamationPolicy(pool=pool)
        before = PolicyForm(instance=policy).initial if policy.pk else None
        form = PolicyForm(request.POST, instance=policy)
        if form.is_valid():
            saved = form.save()
            audit_event_record(
                actor=request.user,
                action="reclamation_policy.saved",
                obj=saved,
                before={k: str(v) for k, v in (before or {}).items()},
                after={k: str(v) for k, v in form.cleaned_data.items()},
            )
            messages.success(request, f"Policy of {pool.name} saved.")
            return redirect("pools:reclamation-policies")
    elif request.method == "POST" and request.POST.get("kind") == "exemption":
        exemption_form = ExemptionForm(request.POST)
        if exemption_form.is_valid():
            exemption = exemption_form.save(commit=False)
            exemption.created_by = request.user
            exemption.save()
            audit_event_record(
                actor=request.user,
                action="exemption.created",
                obj=exemption,
                after={"reason": exemption.reason, "expires_at": exemption.expires_at.isoformat()},
            )
            messages.success(request, "Exemption granted.")
            return redirect("pools:reclamation-policies")
    whatif = None
    if edit and form is None:
        pool = get_object_or_404(Pool, slug=edit)
        form = PolicyForm(instance=policies.get(pool.pk) or ReclamationPolicy(pool=pool))
        if request.GET.get("whatif"):
            whatif = _what_if(request, pool, policies.get(pool.pk))
            if whatif["form"] is not None:
                form = whatif["form"]
    exemption_form = exemption_form or ExemptionForm()
    exemption_form.fields["allocation"].queryset = Allocation.objects.select_related(
        "team", "gpu_model"
    ).order_by("-id")[:200]
    exemption_form.fields["team"].queryset = Team.objects.order_by("name")
    rows = [
        {
            "pool": p,
            "policy": policies.get(p.pk) or ReclamationPolicy(pool=p),
            "saved": p.pk in policies,
        }
        for p in pools
    ]
    exemptions = (
        Exemption.objects.select_related("team", "allocation__team")
        .filter(expires_at__gt=timezone.now())
        .order_by("expires_at")
    )
    return render(
        request,
        "pools/reclamation/policies.html",
        {
            "rows": rows,
            "form": form,
            "edit": edit,
            "exemption_form": exemption_form,
            "exemptions": exemptions,
            "whatif": whatif,
        },
    )


def _what_if(request, pool: Pool, policy: ReclamationPolicy | None) -> dict:
    """The what-if of the policy form's values (GET, so the page can be linked); read-only."""
    form = None
    overrides: dict = {}
    if any(name in request.GET for name in OVERRIDABLE):
        # The what-if asks only for the numbers it replays; cooldown and dry run stay the saved
        # policy's, so that the form it leaves behind saves what was there.
        current = policy or ReclamationPolicy(pool=pool)
        data = {name: getattr(current, name) for name in PolicyForm.Meta.fields}
        data.update({name: request.GET[name] for name in OVERRIDABLE if name in request.GET})
        if not data["dry_run"]:
            data.pop("dry_run")  # an unticked checkbox is an absent key
        form = PolicyForm(data, instance=ReclamationPolicy(pool=pool))
        if not form.is_valid():
            return {"form": form, "report": None, "invalid": True}
        overrides = {name: form.cleaned_data[name] for name in OVERRIDABLE}
    try:
        days = min(max(int(request.GET.get("days", 7)), 1), 30)
    except ValueError:
        days = 7
    report = reclamation_what_if(pool=pool, policy_overrides=overrides, days=days)
    return {"form": form, "report": report, "invalid": False, "days": days}
