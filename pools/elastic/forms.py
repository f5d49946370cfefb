"""The elastic policy editor's form: the model's fields and validators; the service checks the
numbers together (pools.elastic.policy.ScalingPolicy) and saves."""

from __future__ import annotations

from django import forms

from pools.elastic.models import ElasticPolicy
from pools.elastic.services import EDITABLE_FIELDS, MAX_WHATIF_DAYS, WhatIfSource
from pools.inventory.models import Pool
from pools.tenancy.models import Team


class ElasticPolicyForm(forms.ModelForm):
    class Meta:
        model = ElasticPolicy
        fields = list(EDITABLE_FIELDS)
        labels = {
            "ceiling_cards": "Ceiling (cards)",
            "step_cards": "Step (cards)",
            "cards_per_replica": "Cards per replica",
            "min_replicas": "Minimum replicas",
            "up_util_pct": "Up above utilisation (%)",
            "up_latency_ms": "… and latency above (ms)",
            "up_window_minutes": "… for (minutes)",
            "down_util_pct": "Down below utilisation (%)",
            "down_window_minutes": "… for (minutes)",
            "cooldown_minutes": "Cooldown (minutes)",
            "prescale_lead_minutes": "Pre-scale lead (minutes)",
            "per_card_tok_s": "Per-card tok/s (sizing)",
            "deployment": "Serving Deployment (for the HPA)",
        }


class ElasticWhatIfForm(ElasticPolicyForm):
    """The what-if's GET form: the policy's numbers to try, the ``days`` of history to replay
    (1-:data:`~pools.elastic.services.MAX_WHATIF_DAYS`, 7 when not given) and its ``source``
    (empty: Prometheus when configured, else the loop's recorded readings)."""

    days = forms.IntegerField(min_value=1, max_value=MAX_WHATIF_DAYS, initial=7, required=False)
    source = forms.ChoiceField(
        choices=[("", "Prometheus if configured, else recorded"),
                 (WhatIfSource.PROMETHEUS.value, "Prometheus"),
                 (WhatIfSource.RECORDED.value, "Recorded by the loop")],
        required=False,
    )  # fmt: skip

    def clean_days(self) -> int:
        return self.cleaned_data["days"] or self.fields["days"].initial


class BurstOptInForm(forms.Form):
    """Opt a team into a burst pool: the teams the user manages (every team for pool admins)
    and the pools marked burst, each labelled with its card-hour prices on the rate card in
    force (``prices``: pool id -> objects with ``text``,
    :func:`pools.elastic.selectors.burst_pool_prices`)."""

    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    pool = forms.ModelChoiceField(
        queryset=Pool.objects.none(), label="Burst pool", empty_label=None
    )

    def __init__(self, *args, teams, pools, prices: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams
        self.fields["pool"].queryset = pools
        self.fields["pool"].label_from_instance = lambda pool: (
            f"{pool.name}: "
            + ("; ".join(p.text for p in prices.get(pool.pk, [])) or "no price on the rate card")
        )
