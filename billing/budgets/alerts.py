"""Budget alerts: each threshold of 50 / 80 / 100 % (:data:`billing.budgets.periods.
ALERT_THRESHOLDS`) is e-mailed to the team's managers once per period, when the beat task
first finds it reached."""

from __future__ import annotations

from datetime import datetime

from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import BudgetStatus, budget_statuses, centre_teams
from pools.tenancy.selectors import team_manager_emails


def budget_alerts_send(*, now: datetime | None = None) -> list[int]:
    """Check every budget (one :func:`budget_statuses` for all) and, where a threshold higher
    than the one already sent this period is reached, remember it and e-mail the managers
    once the row is saved. Safe to run twice: the second run finds nothing new. Returns the
    ids of the budgets that alerted."""
    now = now or timezone.now()
    budgets = list(Budget.objects.select_related("team", "pool", "gpu_model"))
    alerted = []
    for status in budget_statuses(budgets, now=now).values():
        budget, level = status.budget, status.alert
        already = budget.last_alert_percent if budget.last_alert_period == status.period else None
        if level is None or (already is not None and level <= already):
            continue
        with transaction.atomic():
            updated = (
                Budget.objects.filter(pk=budget.pk)
                .exclude(last_alert_period=status.period, last_alert_percent__gte=level)
                .update(last_alert_period=status.period, last_alert_percent=level)
            )
            if updated:  # another run may have sent it meanwhile: compare-and-set
                transaction.on_commit(lambda s=status, lv=level: _email(s, lv))
                alerted.append(budget.pk)
    return alerted


def _email(status: BudgetStatus, level: int) -> None:
    budget = status.budget
    team_ids = (
        [budget.team_id] if budget.team_id else sorted(centre_teams([budget])[budget.cost_centre])
    )
    emails = sorted({e for t in team_ids for e in team_manager_emails(team_id=t)})
    if not emails:
        return
    lines = [
        f"{d.unit}: {d.used} used of {d.limit}" for d in status.dimensions if d.used is not None
    ]
    send_mail(
        subject=f"GPU budget of {budget.owner_label}: {level} % reached ({status.period:%Y-%m})",
        message=(
            f"The {budget.get_period_display().lower()} budget of {budget.owner_label} "
            f"({budget.scope_label}) has reached {level} % in the period starting "
            f"{status.period:%Y-%m-%d}.\n" + "\n".join(lines) + "\n"
            + (f"Forecast run-out: {status.run_out_at:%Y-%m-%d %H:%M %Z}.\n"
               if status.run_out_at else "")
            + f"Beyond it: {budget.get_enforcement_display()}.\n"
        ),
        from_email=None,
        recipient_list=emails,
    )  # fmt: skip
