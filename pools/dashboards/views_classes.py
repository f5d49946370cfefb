"""The workload classes page (issue 36): each class's rule, its Slurm QOS / PriorityClass, what
it may preempt, and the cards it holds now per GPU model class; as CSV; and the held-cards
table alone (``?part=held``), which the admin dashboard loads."""

from __future__ import annotations

from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import patch_vary_headers

from pools.common.choices import CardClass
from pools.dashboards.classes import CARD_CLASSES, class_holdings
from pools.web.pages import Column, checked_export, csv_response, pool_admin_required


def _class_value(attribute: str):
    return lambda r: getattr(r.workload_class, attribute) if r.workload_class else None


CLASS_COLUMNS = [
    Column("class", lambda r: r.workload_class.slug if r.workload_class else "unclassed"),
    Column("name", lambda r: r.workload_class.name if r.workload_class else "Unclassed"),
    Column("card_classes", lambda r: " ".join(r.card_classes)),
    Column("gpu_models", lambda r: "; ".join(r.models)),
    Column("exclusive", _class_value("exclusive")),
    Column("priority", _class_value("priority")),
    Column("preemption_order", _class_value("preemption_order")),
    Column("preempts", lambda r: "; ".join(r.preempts)),
    Column("qos", lambda r: r.qos),
    *[Column(f"cards_held_{c}", lambda r, c=c: r.cards[c]) for c in CARD_CLASSES],
    Column("cards_held", lambda r: r.total),
]


@pool_admin_required
def class_list(request):
    """Every workload class and the cards it holds now; ``?export=csv`` the same rows;
    ``?part=held`` the held-cards table alone (the dashboard's). Three queries."""
    export = checked_export(request)
    holdings = class_holdings(now=timezone.now())
    if export == "csv":
        return csv_response(holdings.rows, CLASS_COLUMNS, "workload-classes.csv")
    context = {"holdings": holdings, "card_classes": _card_class_headers()}
    template = "pools/dashboards/class_list.html"
    if request.GET.get("part") == "held":
        template += "#held"
    response = render(request, template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _card_class_headers() -> list[str]:
    return [CardClass(c).label for c in CARD_CLASSES]
