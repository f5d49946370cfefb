"""The dashboards' filter form (pool, GPU model, driver group, window)."""

from __future__ import annotations

from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe


class PlainSelect(forms.Select):
    """A ``<select>`` built in Python. Django renders each option through a template, about
    0.3 ms each: too slow for a list of every team of a fleet (1,600 teams, 0.5 s)."""

    def render(self, name, value, attrs=None, renderer=None):
        selected = {str(v) for v in self.format_value(value)}
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            (
                (key, mark_safe(" selected") if str(key) in selected else "", label)
                for key, label in self.choices
            ),
        )
        return format_html(
            '<select name="{}"{}>{}</select>',
            name,
            flatatt(self.build_attrs(self.attrs, attrs)),
            options,
        )


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
