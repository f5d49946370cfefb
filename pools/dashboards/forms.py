"""The dashboards' filter form (pool, GPU model, driver group, team)."""

from __future__ import annotations

from django import forms

from pools.web.team_picker import TeamChoiceField, TeamPicker


class DashboardFilterForm(forms.Form):
    """Filters of the capacity dashboard: pool, GPU model, driver group and team, by slug/branch.
    An unknown value (a team the user may not see among them) is a form error, and the
    dashboard a 400 with no figures, as every page's filters.
    The team is typed (:class:`~pools.web.team_picker.TeamPicker`): a fleet has too many teams
    for a ``<select>``."""

    pool = forms.ChoiceField(required=False)
    gpu_model = forms.ChoiceField(required=False, label="GPU model")
    driver_branch = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, label="Driver group"
    )
    team = TeamChoiceField(required=False, widget=TeamPicker(attrs={"placeholder": "All teams"}))

    def __init__(self, *args, pools=(), gpu_models=(), branches=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["pool"].choices = [("", "All pools"), *pools]
        self.fields["gpu_model"].choices = [("", "All models"), *gpu_models]
        self.fields["driver_branch"].choices = [("", "All driver groups")] + [
            (b, f"R{b}") for b in branches
        ]
