"""The token-flow filters, one form for the page, its CSV and the API: served model, the period
of the tasks' first calls (whole days in the billing time zone, ``since`` to ``until``
inclusive; default the last 30 days) and the order of the task table."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms

from billing.conf import billing_zone
from billing.pricing import local_midnight
from pools.common.validators import date_range_validator
from pools.web.widgets import IsoDateInput

ORDERINGS = {
    "-cost": "Costliest first",
    "-wasted_cost": "Most wasted cost first",
    "-calls": "Most calls first",
    "-retries": "Most retries first",
    "-first_call_at": "Newest first",
    "first_call_at": "Oldest first",
}
DEFAULT_DAYS = 30


class DayField(forms.DateField):
    """A day as ``YYYY-MM-DD``; an ISO 8601 date-time (``2026-12-01T09:00:00Z``) is read by the
    day it names as written, its time and offset dropped, so a year-1 instant is refused for its
    range (:data:`pools.common.validators.DATE_RANGE_MESSAGE`) as a year-1 day is, not as text
    that is no date."""

    def to_python(self, value):
        if isinstance(value, str) and len(value.strip()) > 10 and value.strip()[10] in "Tt ":
            try:
                return datetime.fromisoformat(value.strip()).date()
            except ValueError:
                pass
        return super().to_python(value)


class TokenFlowFilterForm(forms.Form):
    model = forms.ChoiceField(required=False, label="Served model")
    # The labels are the page's (templates/billing/token_flow.html renders them) and the
    # refusal's (pools.web.pages.filter_refusal names a field by its label).
    since = DayField(required=False, validators=[date_range_validator],
                     label="First call from", widget=IsoDateInput())  # fmt: skip
    until = DayField(required=False, validators=[date_range_validator],
                     label="First call until", widget=IsoDateInput())  # fmt: skip
    ordering = forms.ChoiceField(required=False, choices=list(ORDERINGS.items()), label="Order")

    def __init__(self, *args, models: list[str], today, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = [("", "All models"), *((m, m) for m in models)]
        self.today = today
        self.fields["since"].widget.attrs["placeholder"] = str(today - timedelta(DEFAULT_DAYS - 1))

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "Must be on or after the “First call from” day.")
        return data

    def window(self) -> tuple[datetime, datetime, str, str]:
        """``[since, until)`` as aware instants (local midnights), the model ("" all) and the
        ordering; call after ``is_valid()``."""
        data = self.cleaned_data if self.is_bound else {}
        until_day = data.get("until") or self.today
        since_day = data.get("since") or until_day - timedelta(DEFAULT_DAYS - 1)
        zone = billing_zone()
        return (
            local_midnight(since_day, zone),
            local_midnight(until_day + timedelta(days=1), zone),
            data.get("model") or "",
            data.get("ordering") or "-cost",
        )
