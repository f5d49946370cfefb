"""The budget form of ``/costs/budgets/new/`` and ``/costs/budgets/<id>/edit/``: the model's
field types only (no model validation); every rule (period start, a limit, the rate card's
currency, the rollover cap, one budget per scope) is the service's, whose field errors the
page shows next to each field, as the API answers them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.models import fields_for_model, model_to_dict

from billing.budgets.choices import BudgetPeriod
from billing.budgets.models import STORAGE_ERRORS, Budget
from billing.budgets.services import FIELDS
from pools.web.widgets import IsoDateInput

HELP = {
    "team": "One team — or leave it empty and give a cost centre.",
    "cost_centre": "Instead of a team: every team of this cost centre, summed.",
    "pool": "Only this pool's usage, or all pools' usage summed.",
    "gpu_model": "Only this GPU model's usage, or all models' usage summed.",
    "starts_on": "The first day of the first period (1 Jan, 1 Apr, … for a quarter).",
    "card_hours_limit": "Card-hours per period; empty for a money-only budget.",
    "money_limit": "Per period, in the rate card's currency (e.g. EUR); empty for none.",
    "rollover_cap_percent": "Only when unused carries over: the most carried, in % of the limit.",
}


# What a budget with no pool or no GPU model counts.
BLANK_SCOPE = {"pool": "All pools", "gpu_model": "All GPU models"}

LABELS = {
    "gpu_model": "GPU model",
    "card_hours_limit": "Card-hours limit",
    "rollover_cap_percent": "Rollover cap (%)",
}


class BudgetForm(forms.Form):
    """``budget`` given: its values as the initial ones (an edit)."""

    def __init__(self, *args: Any, budget: Budget | None = None, **kwargs: Any) -> None:
        if budget is not None:
            kwargs.setdefault("initial", model_to_dict(budget, fields=FIELDS))
        super().__init__(*args, **kwargs)
        self.fields.update(
            fields_for_model(
                Budget,
                fields=FIELDS,
                widgets={"starts_on": IsoDateInput()},
                help_texts=HELP,
                labels=LABELS,
            )
        )
        # The blank of the form's pickers is a scope (a budget over every pool, every model:
        # Budget.scope_label's "all pools and models"); the list's filters leave theirs "Any"
        # (FILTERS_EMPTY_CHOICE_LABEL): a filter left blank matches budgets of any scope.
        for name, everything in BLANK_SCOPE.items():
            self.fields[name].empty_label = everything
        self.fields["team"].empty_label = "— (a cost centre)"
        # required: its blank is no choice yet ("---------" said nothing)
        self.fields["period"].choices = [("", "Choose a period"), *BudgetPeriod.choices]
        self.fields["currency"].required = False
        # Django formats a validator's message with its params: "%" is written "%%" here.
        for name, errors in STORAGE_ERRORS.items():
            self.fields[name].error_messages.update(
                {code: text.replace("%", "%%") for code, text in errors.items()}
            )
