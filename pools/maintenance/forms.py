"""Forms of the maintenance pages: a window, an upgrade-wave plan."""

from __future__ import annotations

import re

from django import forms

from pools.common.validators import date_range_validator
from pools.inventory.models import DriverGroup, Pool
from pools.maintenance.models import TITLE_MAX_LENGTH
from pools.web.pages import SlugChoiceField


class MaintenanceWindowForm(forms.Form):
    """A maintenance window: what to take out (named nodes, a pool, a driver group, within a
    pool when one is chosen) and when, in ``TIME_ZONE``."""

    title = forms.CharField(max_length=TITLE_MAX_LENGTH, help_text="e.g. Driver R570 upgrade")
    scope = forms.ChoiceField(
        choices=[
            ("nodes", "Named nodes"),
            ("pool", "A whole pool"),
            ("driver_group", "A driver group"),
        ],  # fmt: skip
        widget=forms.RadioSelect,
        initial="nodes",
    )
    hostnames = forms.CharField(
        required=False,
        label="Nodes",
        help_text="Host names, separated by spaces or commas (scope: named nodes).",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    pool = SlugChoiceField(Pool.objects, required=False, empty_label="Any pool")
    driver_group = forms.ModelChoiceField(
        queryset=DriverGroup.objects.order_by("branch"), to_field_name="branch", required=False,
        empty_label="—",
    )  # fmt: skip
    starts_at = forms.DateTimeField(
        validators=[date_range_validator],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        label="Start",
    )
    ends_at = forms.DateTimeField(
        validators=[date_range_validator],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        label="End",
    )
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean_hostnames(self) -> list[str]:
        return sorted({h for h in re.split(r"[\s,]+", self.cleaned_data["hostnames"]) if h})

    def service_fields(self) -> dict:
        data = self.cleaned_data
        return {
            "title": data["title"], "scope": data["scope"], "pool": data["pool"],
            "driver_group": data["driver_group"], "hostnames": data["hostnames"],
            "starts_at": data["starts_at"], "ends_at": data["ends_at"], "reason": data["reason"],
        }  # fmt: skip


class MaintenanceWaveForm(forms.Form):
    """An upgrade of a driver group as waves (:mod:`pools.maintenance.waves`)."""

    title = forms.CharField(max_length=40, initial="Driver upgrade")
    driver_group = forms.ModelChoiceField(
        queryset=DriverGroup.objects.order_by("branch"), to_field_name="branch"
    )
    pool = SlugChoiceField(Pool.objects, required=False, empty_label="Every pool")
    first_start = forms.DateTimeField(
        validators=[date_range_validator],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        label="First wave starts",
    )
    window_hours = forms.IntegerField(min_value=1, max_value=31 * 24, initial=6,
                                      label="Hours per wave")  # fmt: skip
    gap_hours = forms.IntegerField(min_value=0, max_value=31 * 24, initial=18,
                                   label="Hours between waves")  # fmt: skip
    nodes_per_wave = forms.IntegerField(min_value=1, max_value=2000, initial=2)
    max_waves = forms.IntegerField(min_value=1, max_value=52, initial=12,
                                   label="Try at most this many waves")  # fmt: skip
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
