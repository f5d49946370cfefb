"""Forms of the inventory pages; errors are shown next to their field."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from django import forms
from django.conf import settings
from django.core.validators import MinValueValidator

from pools.common.choices import AliasKind, InventorySource
from pools.common.validators import hostname_validator
from pools.inventory.models import GpuModel, GpuModelAlias, Pool
from pools.inventory.services.catalogue import GPU_MODEL_FIELDS


class InventoryUploadForm(forms.Form):
    """Upload of nvidia-smi output, slurmrestd nodes JSON or Kubernetes Node objects."""

    source = forms.ChoiceField(choices=InventorySource.choices)
    file = forms.FileField(
        help_text="nvidia-smi capture (-L, -q, -q -x or --query-gpu CSV), "
        "slurmrestd /nodes JSON, or kubectl get nodes -o json/yaml.",
        # hx-preserve: the answer swaps the form's fields, and a browser cannot refill a file
        # input, so the chosen file is kept across an error; the node name is suggested from it
        widget=forms.ClearableFileInput(
            attrs={"hx-preserve": "true", "data-node-from-file": "id_node"}
        ),
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
            message = "nvidia-smi output needs the name of the node it came from."
            suggested = _node_from_filename(getattr(data.get("file"), "name", ""))
            if suggested:
                # shown filled in: one click on Import accepts it
                self.data = self.data.copy()
                self.data["node"] = suggested
                message += f" Suggested from the file name: {suggested} — check it and import."
            self.add_error("node", message)
        return data


def _node_from_filename(name: str) -> str | None:
    """The file name without its extension when that is a valid host name (``gpu-a100-01.txt``
    → ``gpu-a100-01``), as ``import_inventory --node-from-filename`` takes it; else None."""
    stem = Path(name).stem
    try:
        hostname_validator(stem)
    except forms.ValidationError:
        return None
    return stem or None


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


class GpuModelForm(forms.ModelForm):
    """A catalogue model as pool admins edit it on the page.

    Aliases are one per line as ``kind: value`` (``nvidia-smi: NVIDIA RTX A6000``), device ids
    ``0xNNNN`` separated by spaces or commas, citations one per line as ``field: source``. The
    identity checks (aliases unique across models, ids claimed once) are the service's
    (:mod:`pools.inventory.services.catalogue`); their errors come back on these fields.
    """

    aliases_text = forms.CharField(
        label="Aliases",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One per line, kind: value. Kinds: "
        + ", ".join(kind.value for kind in AliasKind)
        + ". Case, spaces, hyphens and the NVIDIA/GeForce prefix do not count when matching.",
    )
    pci_device_ids_text = forms.CharField(
        label="PCI device ids",
        required=False,
        help_text="16-bit ids as 0xNNNN, separated by spaces or commas (e.g. 0x2330).",
    )
    sources_text = forms.CharField(
        label="Sources",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One per line, field: citation (datasheet URL and the figure it gives).",
    )

    class Meta:
        model = GpuModel
        fields = ["slug", *GPU_MODEL_FIELDS[:-2]]
        labels = {
            "vendor_name": "nvidia-smi name",
            "memory_gib": "Memory (GiB)",
            "memory_bandwidth_gbps": "Memory bandwidth (GB/s)",
            "fp16_dense_tflops": "FP16 dense (TFLOPS)",
            "bf16_dense_tflops": "BF16 dense (TFLOPS)",
            "fp8_dense_tflops": "FP8 dense (TFLOPS)",
            "int8_dense_tops": "INT8 dense (TOPS)",
            "nvlink_gbps": "NVLink (GB/s, bidirectional)",
            "tdp_w": "TDP (W)",
            "cuda_cores": "CUDA cores",
        }
        help_texts = {
            "slug": "Fixed once created: rate cards, estimates and imports refer to it.",
            "nvlink_gbps": "Empty when the card has no NVLink or it is unknown: say which under "
            "Sources (none: … / unknown: …).",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in _POSITIVE_FIELDS:
            self.fields[name].min_value = Decimal("0.01")
            self.fields[name].validators.append(MinValueValidator(Decimal("0.01")))
        for name in ("tdp_w", "cuda_cores"):
            self.fields[name].validators.append(MinValueValidator(1))
        if self.instance.pk:
            self.fields["slug"].disabled = True
            self.initial["aliases_text"] = "\n".join(
                f"{a.kind}: {a.value}" for a in self.instance.aliases.order_by("kind", "value")
            )
            self.initial["pci_device_ids_text"] = " ".join(self.instance.pci_device_ids)
            self.initial["sources_text"] = "\n".join(
                f"{field}: {source}" for field, source in self.instance.sources.items()
            )

    def clean_aliases_text(self):
        """``[{"kind", "value"}]``; a line that is not ``kind: value`` or whose value is longer
        than the alias column (``GpuModelAlias.value``, 120 characters) is an error, never cut."""
        aliases, kinds = [], {kind.value for kind in AliasKind}
        longest = GpuModelAlias._meta.get_field("value").max_length
        for number, line in enumerate(self.cleaned_data["aliases_text"].splitlines(), 1):
            if not line.strip():
                continue
            kind, sep, value = line.partition(":")
            if not sep or kind.strip() not in kinds or not value.strip():
                raise forms.ValidationError(
                    f"Line {number}: write kind: value with a kind of {', '.join(sorted(kinds))}."
                )
            if len(value.strip()) > longest:
                raise forms.ValidationError(
                    f"Line {number}: an alias has at most {longest} characters "
                    f"(this one has {len(value.strip())})."
                )
            aliases.append({"kind": kind.strip(), "value": value.strip()})
        return aliases

    def clean_pci_device_ids_text(self):
        return [v for v in re.split(r"[\s,]+", self.cleaned_data["pci_device_ids_text"]) if v]

    def clean_sources_text(self):
        sources = {}
        for number, line in enumerate(self.cleaned_data["sources_text"].splitlines(), 1):
            if not line.strip():
                continue
            field, sep, citation = line.partition(":")
            if not sep or not field.strip() or not citation.strip():
                raise forms.ValidationError(f"Line {number}: write field: citation.")
            sources[field.strip()] = citation.strip()
        return sources

    def service_values(self) -> tuple[dict, list[dict[str, str]]]:
        """The validated fields and aliases, as the catalogue service takes them."""
        data = self.cleaned_data
        fields = {name: data[name] for name in GPU_MODEL_FIELDS[:-2]}
        fields["sources"] = data["sources_text"]
        fields["pci_device_ids"] = data["pci_device_ids_text"]
        return fields, data["aliases_text"]


_POSITIVE_FIELDS = (
    "memory_gib",
    "memory_bandwidth_gbps",
    "fp16_dense_tflops",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "int8_dense_tops",
    "nvlink_gbps",
)
