"""Reads of workload classes: the catalogue models a class may use, and why one is refused."""

from __future__ import annotations

from django.db.models import Q

from pools.classes.models import WorkloadClass
from pools.classes.rules import ClassRule
from pools.common.choices import AliasKind
from pools.inventory.models import Gpu, GpuModel, GpuModelAlias


def catalogue_card_classes() -> dict[str, str]:
    """Kubernetes GPU product label -> card class (``consumer``, ``datacentre``) of every model
    of the catalogue: the label is the model's Kubernetes alias, else its NVML name with blanks
    as ``-`` (as GPU Feature Discovery writes it; the same rule as the quota's product keys,
    ``k8s_product_label``). Two queries."""
    labels: dict[int, str] = {}
    for model_id, value in (
        GpuModelAlias.objects.filter(kind=AliasKind.K8S_LABEL)
        .order_by("gpu_model_id", "value")
        .values_list("gpu_model_id", "value")
    ):
        labels.setdefault(model_id, value)  # the first by value, as k8s_product_label picks
    return {
        labels.get(pk) or "-".join(vendor_name.split()): card_class
        for pk, vendor_name, card_class in GpuModel.objects.values_list(
            "pk", "vendor_name", "card_class"
        )
    }


def class_list() -> list[WorkloadClass]:
    """Every workload class, the most protected first, with its named models prefetched."""
    return list(WorkloadClass.objects.prefetch_related("gpu_models"))


def class_permitted_models(rule: ClassRule) -> list[GpuModel]:
    """The models of the fleet (at least one card in the inventory) that ``rule`` permits
    (:meth:`ClassRule.permits`), by name: the catalogue's forty would drown the answer."""
    permitted = Q(card_class__in=rule.card_classes) | Q(slug__in=rule.model_slugs)
    in_fleet = GpuModel.objects.filter(pk__in=Gpu.objects.values("gpu_model"))
    return list(in_fleet.filter(permitted).order_by("name"))


def class_model_refusal(*, workload_class: WorkloadClass | None, gpu_model: GpuModel) -> str:
    """Why ``workload_class`` may not run on ``gpu_model`` ("production may not run on GeForce
    RTX 4090: consumer class (it may use: A100 SXM4 80GB, L40S)": the fleet's models it may
    use, :func:`class_permitted_models`), or "" when it may or when
    there is no class (unclassed work)."""
    if workload_class is None:
        return ""
    rule = workload_class.rule()
    if rule.permits(model_slug=gpu_model.slug, card_class=gpu_model.card_class):
        return ""
    allowed = [m.name for m in class_permitted_models(rule)]
    return rule.refusal(model_name=gpu_model.name, card_class=gpu_model.card_class, allowed=allowed)
