"""The admin's form of what an allocation serves (:class:`~pools.serving.models.ServedModel`),
checked against the sizing engine the calibration pass sets it against."""

from __future__ import annotations

from django import forms

from pools.serving.models import ServedModel
from pools.sizing import SizingInputError
from pools.sizing.engines import engine_profile
from pools.sizing.memory import precision_parse
from pools.sizing.presets import model_preset


class ServedModelForm(forms.ModelForm):
    """Refuses what the sizing engine would refuse, naming the field: an unknown catalogue
    model, precision or engine, and a TP that does not divide the model's attention heads."""

    class Meta:
        model = ServedModel
        fields = ["allocation", "model_id", "precision", "tp", "engine"]

    def clean(self):
        data = super().clean()
        checks = (
            ("model_id", model_preset),
            ("precision", precision_parse),
            ("engine", engine_profile),
        )
        for field, check in checks:
            if data.get(field):
                try:
                    check(data[field])
                except SizingInputError as exc:
                    self.add_error(field, str(exc))
        if data.get("tp") and "model_id" not in self.errors and data.get("model_id"):
            heads = model_preset(data["model_id"]).num_attention_heads
            if heads % data["tp"]:
                self.add_error("tp", f"TP {data['tp']} does not divide the {heads} attention heads")
        return data
