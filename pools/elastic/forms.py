"""The elastic policy editor's form: the model's fields and validators; the service checks the
numbers together (pools.elastic.policy.ScalingPolicy) and saves."""

from __future__ import annotations

from django import forms

from pools.elastic.models import ElasticPolicy
from pools.elastic.services import EDITABLE_FIELDS


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
