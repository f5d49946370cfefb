"""The dashboards' filter form (pool, GPU model, driver group, window)."""

from __future__ import annotations

from django import forms

from pools.web.pages import PlainSelect


class DashboardFilterForm(forms.Form):
    """Filters of the capacity dashboard: pool, GPU model, driver group and team, by slug/branch.
    An unknown value is a form error, and the dashboard shows everything rather than nothing."""

    pool = forms.ChoiceField(required=False)
    gpu_model = forms.ChoiceField(required=False, label="GPU model")
    driver_branch = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, label="Driver group"
    )
    team = forms.ChoiceField(required=False, widget=PlainSelect)

    def __init__(self, *args, pools=(), gpu_models=(), branches=(), teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["pool"].choices = [("", "All pools"), *pools]
        self.fields["gpu_model"].choices = [("", "All models"), *gpu_models]
        self.fields["driver_branch"].choices = [("", "All driver groups")] + [
            (b, f"R{b}") for b in branches
        ]
        self.fields["team"].choices = [("", "All teams"), *teams]
