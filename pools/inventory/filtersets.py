"""FilterSets of the inventory lists: the pages, their CSV exports and the API filter through
these."""

from __future__ import annotations

import django_filters as filters
from django import forms
from django.db.models import Q

from pools.common.choices import CardClass, FormFactor, GpuHealth, NodeState, Scheduler
from pools.inventory.models import Cluster, DriverGroup, Gpu, GpuModel, Node, Pool


class AnyYesNo(forms.Select):
    """A tri-state select for boolean filters: Any / Yes / No."""

    def __init__(self, attrs=None):
        super().__init__(attrs, choices=(("", "Any"), ("true", "Yes"), ("false", "No")))

    def format_value(self, value):
        return {True: "true", False: "false"}.get(value, value or "")


def yes_no(**kwargs) -> filters.BooleanFilter:
    return filters.BooleanFilter(widget=AnyYesNo, **kwargs)


class NodeFilterSet(filters.FilterSet):
    """Filters for nodes: free-text ``q``, cluster, pool, state, scheduler, driver branch, GPU
    model."""

    q = filters.CharFilter(method="search", label="Search")
    cluster = filters.ModelChoiceFilter(
        queryset=Cluster.objects.order_by("name"),
        to_field_name="slug",
        label="Cluster",
        empty_label="Any",
    )
    pool = filters.ModelChoiceFilter(
        queryset=Pool.objects.all(), to_field_name="slug", label="Pool", empty_label="Any"
    )
    state = filters.ChoiceFilter(choices=NodeState.choices)
    scheduler = filters.ChoiceFilter(choices=Scheduler.choices)
    driver_group = filters.ModelChoiceFilter(
        queryset=DriverGroup.objects.all(),
        to_field_name="branch",
        label="Driver branch",
        empty_label="Any",
    )
    gpu_model = filters.ModelChoiceFilter(
        queryset=GpuModel.objects.all(),
        to_field_name="slug",
        field_name="gpus__gpu_model",
        distinct=True,
        label="GPU model",
        empty_label="Any",
    )
    unrecognised = yes_no(method="filter_unrecognised", label="Unrecognised cards")
    ordering = filters.OrderingFilter(
        fields=(
            ("hostname", "hostname"),
            ("pool__name", "pool"),
            ("state", "state"),
            ("driver_version", "driver_version"),
            ("gpu_count", "gpus"),
            ("last_seen_at", "last_seen"),
        )
    )

    class Meta:
        model = Node
        fields = ["q", "pool", "state", "scheduler", "driver_group", "gpu_model"]

    def search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(hostname__icontains=value)
            | Q(driver_version__icontains=value)
            | Q(gpus__raw_model_name__icontains=value)
            | Q(gpus__uuid__iexact=value)
        ).distinct()

    def filter_unrecognised(self, queryset, name, value):
        if value is None:
            return queryset
        has = Q(gpus__gpu_model__isnull=True, gpus__isnull=False)
        return queryset.filter(has).distinct() if value else queryset.exclude(has)


class GpuFilterSet(filters.FilterSet):
    """Filters for GPUs: free-text ``q``, node, pool, model, driver branch, health, MIG mode."""

    q = filters.CharFilter(method="search", label="Search")
    node = filters.CharFilter(field_name="node__hostname", label="Node")
    pool = filters.ModelChoiceFilter(
        queryset=Pool.objects.all(),
        to_field_name="slug",
        field_name="node__pool",
        label="Pool",
        empty_label="Any",
    )
    gpu_model = filters.ModelChoiceFilter(
        queryset=GpuModel.objects.all(),
        to_field_name="slug",
        label="GPU model",
        empty_label="Any",
    )
    driver_group = filters.ModelChoiceFilter(
        queryset=DriverGroup.objects.all(),
        to_field_name="branch",
        field_name="node__driver_group",
        label="Driver branch",
        empty_label="Any",
    )
    health = filters.ChoiceFilter(choices=GpuHealth.choices)
    mig_mode = yes_no(label="MIG mode")
    recognised = yes_no(
        field_name="gpu_model", lookup_expr="isnull", exclude=True, label="Recognised model"
    )
    ordering = filters.OrderingFilter(
        fields=(
            ("node__hostname", "node"),
            ("index", "index"),
            ("gpu_model__name", "gpu_model"),
            ("memory_total_mib", "memory"),
            ("health", "health"),
        )
    )

    class Meta:
        model = Gpu
        fields = ["node", "pool", "gpu_model", "driver_group", "health", "mig_mode"]

    def search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(node__hostname__icontains=value)
            | Q(uuid__icontains=value)
            | Q(serial__icontains=value)
            | Q(raw_model_name__icontains=value)
        )


class GpuModelFilterSet(filters.FilterSet):
    q = filters.CharFilter(method="search", label="Search")
    card_class = filters.ChoiceFilter(choices=CardClass.choices)
    form_factor = filters.ChoiceFilter(choices=FormFactor.choices)
    nvlink = yes_no(field_name="nvlink_gbps", lookup_expr="isnull", exclude=True, label="NVLink")
    min_memory_gib = filters.NumberFilter(
        field_name="memory_gib", lookup_expr="gte", label="Memory at least (GiB)"
    )
    ordering = filters.OrderingFilter(
        fields=(("name", "name"), ("memory_gib", "memory"), ("memory_bandwidth_gbps", "bandwidth"))
    )

    class Meta:
        model = GpuModel
        fields = ["card_class", "form_factor"]

    def search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(name__icontains=value) | Q(slug__icontains=value) | Q(aliases__value__icontains=value)
        ).distinct()


class PoolFilterSet(filters.FilterSet):
    scheduler = filters.ChoiceFilter(choices=Scheduler.choices)
    ordering = filters.OrderingFilter(fields=(("name", "name"), ("slug", "slug")))

    class Meta:
        model = Pool
        fields = ["scheduler"]


class DriverGroupFilterSet(filters.FilterSet):
    ordering = filters.OrderingFilter(fields=(("branch", "branch"),))

    class Meta:
        model = DriverGroup
        fields = ["branch"]
