"""The reclamation pages' forms: a finding's exemption (reason, days), a pool's policy (its
numbers shown as people write them) and a team's or one allocation's exemption."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.utils import timezone

from pools.capacity.models import Allocation
from pools.common.validators import date_range_validator
from pools.reclamation.models import POLICY_FIELDS, ReclamationPolicy
from pools.web.pages import PlainSelect
from pools.web.team_picker import TeamChoiceField, TeamPicker


class ExemptFindingForm(forms.Form):
    reason = forms.CharField(max_length=1000)
    days = forms.IntegerField(min_value=1, max_value=90, initial=7)


class PolicyForm(forms.ModelForm):
    class Meta:
        model = ReclamationPolicy
        fields = list(POLICY_FIELDS)
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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, value in self.initial.items():
            if isinstance(value, Decimal):
                self.initial[name] = plain_decimal(value)


def plain_decimal(value):
    """30.00 -> "30", 0.90 -> "0.9": the policy's numbers as people write them (anything
    but a ``Decimal`` as it is)."""
    return format(value.normalize(), "f") if isinstance(value, Decimal) else value


class ExemptionForm(forms.Form):
    """A team's or one allocation's exemption; :func:`exemption_grant` creates it (a plain form:
    the service, not the model, says what is valid, so no constraint is reported twice)."""

    team = TeamChoiceField(required=False, widget=TeamPicker(attrs={"placeholder": "team slug"}))
    allocation = forms.ModelChoiceField(
        queryset=Allocation.objects.all(), required=False, widget=PlainSelect
    )
    reason = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    expires_at = forms.DateTimeField(
        validators=[date_range_validator],
        label="Expires at",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )

    def clean(self):
        data = super().clean()
        if bool(data.get("team")) == bool(data.get("allocation")):
            raise forms.ValidationError("Exempt either a team or one allocation.")
        if data.get("expires_at") and data["expires_at"] <= timezone.now():
            self.add_error("expires_at", "The exemption must end in the future.")
        return data
