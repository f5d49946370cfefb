"""Forms of the request and allocation pages; errors are shown next to their field."""

from __future__ import annotations

import re
from dataclasses import replace

from django import forms

from pools.capacity.request_fields import RequestFields
from pools.classes.models import WorkloadClass
from pools.common.choices import RequestKind, WorkloadKind
from pools.common.validators import MAX_REQUEST_CARDS, date_range_validator
from pools.inventory.models import GpuModel, Pool
from pools.inventory.selectors import mig_profiles, pooled_gpu_model_ids
from pools.tenancy.models import Team
from pools.web.pages import SlugChoiceField
from scheduler_adapters.types import MAX_GPUS_PER_NODE

JUSTIFICATION_MAX = 5000
NO_POOL_HAS_IT = "no pool has this card"


class GpuModelSelect(forms.Select):
    """The GPU model choice: a model no pool holds a card of is labelled "— no pool has this
    card" and marked ``data-no-pool``; it is disabled while the request asks for cards a pool
    has (``disable_unpooled``), and enabled for capacity no pool has yet (portal.js toggles it
    as the *Ask for* radio changes)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pooled: set[str] | None = None  # model slugs some pool holds; None: not marked
        self.disable_unpooled = True

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        if self.pooled is not None and value and str(value) not in self.pooled:
            option["label"] = f"{label} — {NO_POOL_HAS_IT}"
            option["attrs"]["data-no-pool"] = True
            if self.disable_unpooled:
                option["attrs"]["disabled"] = True
        return option


class CapacityRequestForm(forms.Form):
    """A new capacity request; the service validates capacity and eligibility."""

    team = SlugChoiceField(None, empty_label=None)  # the caller's teams (__init__)
    # A fresh UUID each time the page shows the form (the view's initial): its second POST
    # answers with the request the first wrote (capacity_request_create_once). Optional: a
    # script that posts without it is not guarded.
    form_token = forms.UUIDField(required=False, widget=forms.HiddenInput)
    kind = forms.ChoiceField(
        choices=[
            (RequestKind.CARDS, "Cards a pool has"),
            (RequestKind.GROWTH, "Capacity no pool has yet (a pool admin plans it)"),
        ],
        initial=RequestKind.CARDS,
        widget=forms.RadioSelect,
        label="Ask for",
        required=False,  # absent (an old link, a script): cards
    )
    workload_kind = forms.ChoiceField(
        choices=WorkloadKind.choices, initial=WorkloadKind.TRAINING, widget=forms.RadioSelect
    )
    workload_class = SlugChoiceField(
        WorkloadClass.objects.all(),
        order=None,  # the classes' own order: highest preemption order first
        required=False,
        empty_label="The team's default class",
        label="Workload class",
        help_text="Decides the GPU models the work may use (production: data-centre cards).",
    )
    pool = SlugChoiceField(Pool.objects, required=False, empty_label="Any eligible pool")
    gpu_model = SlugChoiceField(
        GpuModel.objects,
        required=False,
        empty_label="Any model with enough memory",
        label="GPU model",
        help_text="Models no pool has a card of are greyed out; ask for capacity no pool has "
        "yet to name one.",
        widget=GpuModelSelect(attrs={"data-unpooled-for-kind": RequestKind.GROWTH}),
    )
    min_memory_gib = forms.DecimalField(
        required=False,
        min_value=1,
        max_digits=7,
        decimal_places=2,
        label="…with at least (GiB per card)",
    )
    card_count = forms.IntegerField(
        min_value=1, max_value=MAX_REQUEST_CARDS, initial=1, label="Cards"
    )
    mig_profile = forms.ChoiceField(
        required=False,
        choices=[("", "Whole cards")],  # and the profiles the inventory has (__init__)
        label="Whole cards or MIG slices",
        help_text="A MIG profile asks for that many slices of it (pool and GPU model named).",
    )
    cards_per_node = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_GPUS_PER_NODE,
        label="Shape: cards per node",
        help_text="Optional: e.g. 8 for a TP=8 job on one node; empty means any cards.",
    )
    node_count = forms.IntegerField(
        required=False, min_value=1, max_value=1024, label="Shape: nodes (or replica groups)"
    )
    one_nvlink_domain = forms.BooleanField(
        required=False, label="Each node's cards joined by NVLink (one NVLink domain)"
    )
    shared_nodes = forms.BooleanField(
        required=False, label="Groups may share a node (inference replicas)"
    )
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
    cuda_version = forms.CharField(
        required=False, max_length=8, label="CUDA version needed", help_text="Optional, e.g. 12.4"
    )
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,  # a draft may leave it empty; submitting needs it (the service says so)
        max_length=JUSTIFICATION_MAX,
        label="What the cards are for",
        help_text="Required to submit; a draft may leave it empty.",
    )

    def __init__(self, *args, teams=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams if teams is not None else Team.objects.none()
        self.fields["mig_profile"].choices = [("", "Whole cards")] + [
            (profile, f"MIG {profile} slices") for profile in mig_profiles()
        ]
        pooled = pooled_gpu_model_ids()
        self.pooled_model_ids = pooled
        widget = self.fields["gpu_model"].widget
        widget.pooled = set(GpuModel.objects.filter(pk__in=pooled).values_list("slug", flat=True))
        kind = self.data.get("kind") if self.is_bound else self.initial.get("kind")
        widget.disable_unpooled = kind != RequestKind.GROWTH

    def clean_cuda_version(self):
        value = self.cleaned_data["cuda_version"].strip()
        if value and not re.fullmatch(r"\d{1,2}\.\d{1,2}", value):
            raise forms.ValidationError("Write a CUDA version as MAJOR.MINOR, e.g. 12.4.")
        return value

    def clean_kind(self):
        return self.cleaned_data.get("kind") or RequestKind.CARDS

    def clean(self):
        data = super().clean()
        model = data.get("gpu_model")
        if data.get("kind") == RequestKind.GROWTH and not model:
            self.add_error("gpu_model", "Name the GPU model the pool should add.")
        elif (
            model is not None
            and model.pk not in self.pooled_model_ids
            and (data.get("kind") != RequestKind.GROWTH)
        ):
            self.add_error(
                "gpu_model",
                f"No pool has {model.name} cards: ask for capacity no pool has yet, or choose "
                "a model a pool has.",
            )
        elif not data.get("gpu_model") and not data.get("min_memory_gib"):
            self.add_error("gpu_model", "Choose a GPU model, or a minimum memory per card.")
        per_node, nodes = data.get("cards_per_node"), data.get("node_count")
        if data.get("mig_profile") and not (data.get("pool") and data.get("gpu_model")):
            self.add_error("mig_profile", "Name the pool and the GPU model of the slices.")
        if data.get("mig_profile") and (per_node is not None or nodes is not None):
            self.add_error("cards_per_node", "MIG slices are asked for without a shape.")
        elif (per_node is None) != (nodes is None):
            self.add_error("node_count", "Give both cards per node and nodes, or neither.")
        elif per_node is not None and data.get("card_count") not in (None, per_node * nodes):
            self.add_error(
                "card_count",
                f"{nodes} × {per_node} is {per_node * nodes} cards, not {data['card_count']}.",
            )
        return data

    def request_fields(self) -> RequestFields:
        """The cleaned input as the service takes it (call after ``is_valid``). The NVLink and
        shared-node boxes say something only with a shape: ticked without cards per node,
        they are left unticked rather than refused."""
        fields = RequestFields.from_data(self.cleaned_data)
        shaped = fields.cards_per_node is not None
        return replace(
            fields,
            one_nvlink_domain=fields.one_nvlink_domain and shaped,
            shared_nodes=fields.shared_nodes and shaped,
        )


class ApproveForm(forms.Form):
    """A pool admin's decision: grant as asked, or fewer cards / a shorter window."""

    card_count = forms.IntegerField(
        min_value=1, max_value=MAX_REQUEST_CARDS, required=False, label="Cards to grant"
    )
    ends_at = forms.DateTimeField(
        validators=[date_range_validator],
        required=False,
        label="Grant until",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    pool = SlugChoiceField(
        Pool.objects, required=False, empty_label="(as requested / first eligible)"
    )
    gpu_model = SlugChoiceField(
        GpuModel.objects,
        required=False,
        empty_label="(as requested / first eligible)",
        label="GPU model",
    )
    reason = forms.CharField(required=False, max_length=500)


class ReasonForm(forms.Form):
    """A reason for the audit trail, optional (cancel, release)."""

    reason = forms.CharField(max_length=1000, required=False)


class RequiredReasonForm(ReasonForm):
    """A reason the action cannot go without (the idle-finding actions)."""

    reason = forms.CharField(max_length=1000)


class ExtendForm(forms.Form):
    ends_at = forms.DateTimeField(
        validators=[date_range_validator],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        label="New end",
    )
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), max_length=JUSTIFICATION_MAX
    )
