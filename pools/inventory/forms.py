"""Forms of the inventory pages; errors are shown next to their field."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from pools.choices import InventorySource
from pools.inventory.models import GpuModel, Pool
from pools.validators import hostname_validator


class InventoryUploadForm(forms.Form):
    """Upload of nvidia-smi output, slurmrestd nodes JSON or Kubernetes Node objects."""

    source = forms.ChoiceField(choices=InventorySource.choices)
    file = forms.FileField(
        help_text="nvidia-smi capture (-L, -q, -q -x or --query-gpu CSV), "
        "slurmrestd /nodes JSON, or kubectl get nodes -o json/yaml."
    )
    node = forms.CharField(
        required=False,
        max_length=253,
        validators=[hostname_validator],
        help_text="Host name the nvidia-smi output came from (required for nvidia-smi).",
    )
    pool = forms.ModelChoiceField(
        queryset=Pool.objects.all(),
        required=False,
        to_field_name="slug",
        empty_label="(from the source)",
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        limit = settings.INVENTORY_UPLOAD_MAX_BYTES
        if upload.size > limit:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; the limit is {limit:,} bytes."
            )
        if upload.size == 0:
            raise forms.ValidationError("The file is empty.")
        return upload

    def clean(self):
        data = super().clean()
        if data.get("source") == InventorySource.NVIDIA_SMI and not data.get("node"):
            self.add_error("node", "nvidia-smi output needs the name of the node it came from.")
        return data


class AliasMapForm(forms.Form):
    """Map a reported model name onto a catalogue model (pool admins)."""

    raw_model_name = forms.CharField(max_length=120, label="Reported name")
    gpu_model = forms.ModelChoiceField(
        queryset=GpuModel.objects.all(), to_field_name="slug", label="Catalogue model"
    )


class CudaCheckForm(forms.Form):
    """Which pools can run CUDA X.Y?"""

    cuda = forms.CharField(max_length=8, label="CUDA version", help_text="For example 12.4")

    def clean_cuda(self):
        value = self.cleaned_data["cuda"].strip()
        if not re.fullmatch(r"\d{1,2}\.\d{1,2}", value):
            raise forms.ValidationError("Write a CUDA version as MAJOR.MINOR, e.g. 12.4.")
        return value
