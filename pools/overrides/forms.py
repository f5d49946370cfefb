"""The *New override* page's form."""

from __future__ import annotations

from django import forms
from django.utils import timezone

from pools.classes.models import WorkloadClass
from pools.common.validators import MAX_REQUEST_CARDS
from pools.inventory.models import GpuModel, Pool
from pools.overrides.models import OverrideKind
from pools.tenancy.models import Team
from pools.web.pages import SlugChoiceField


class OverrideForm(forms.Form):
    """The *New override* page: the field types only; every rule (a raise, a future date, a
    team with cards in the pool, Kueue for a borrowing limit) is the service's, whose field
    errors the page shows next to each field, as the API answers them."""

    team = SlugChoiceField(Team.objects)
    pool = SlugChoiceField(Pool.objects)
    kind = forms.ChoiceField(choices=OverrideKind.choices, label="Raise")
    gpu_model = SlugChoiceField(
        GpuModel.objects,
        required=False,
        label="GPU model",
        help_text="For a ceiling or a borrowing limit.",
    )
    cards = forms.IntegerField(
        min_value=1,
        max_value=MAX_REQUEST_CARDS,
        required=False,
        label="Raise to (cards)",
        help_text="More than the team has now; at most the pool's usable cards.",
    )
    workload_class = SlugChoiceField(
        WorkloadClass.objects,
        order="-priority",
        required=False,
        label="Raise to class",
        help_text="For a priority: a class of higher priority than the team's.",
    )
    until = forms.DateTimeField(
        label="Until", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    reason = forms.CharField(max_length=500, help_text="Why: the team sees it.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        zone = timezone.get_current_timezone_name()  # the portal's TIME_ZONE, UTC by default
        self.fields["until"].label = f"Until ({zone})"
        self.fields["until"].help_text = f"A date and time in {zone}."
