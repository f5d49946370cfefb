"""Pages of the explainer: a saved request's explanation (the request page loads it; a full page
without htmx), the live panel of the request form (an htmx fragment, debounced by the form),
and the verdicts the approval queue shows and sorts by (handed to
:func:`pools.capacity.views.approval_queue` by ``pools/urls.py``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers

from pools.capacity import selectors as capacity_selectors
from pools.capacity.forms import CapacityRequestForm
from pools.capacity.services.requests import START_GRACE, request_class
from pools.common.choices import RequestKind, RequestStatus
from pools.explain import selectors
from pools.explain.core import Explanation, stamp
from pools.tenancy import selectors as tenancy_selectors

TEMPLATE = "pools/explain/explanation.html"


def request_explanation(request, pk: int):
    """The explanation of request ``pk`` (404 for a request of a team the user cannot see):
    the fragment for htmx, else a page of its own."""
    obj = capacity_selectors.capacity_request_list(user=request.user).filter(pk=pk).first()
    if obj is None:
        raise Http404("No such request.")
    answer = None
    if obj.kind == RequestKind.CARDS and obj.status in (RequestStatus.DRAFT,
                                                        RequestStatus.SUBMITTED):  # fmt: skip
        answer = selectors.explanation_for_request(user=request.user, request=obj)
    name = f"{TEMPLATE}#answer" if request.htmx else TEMPLATE
    response = render(request, name, {"req": obj, "answer": _shown(answer), "links": False})
    patch_vary_headers(response, ["HX-Request"])
    return response


def draft_explanation(request):
    """The request form's live panel: the explanation of the fields typed so far (GET, the
    form's fields), with each alternative as a link to the form filled in with it. The
    fragment for htmx, else a page of its own with a link back to the form with these fields
    (opened directly, the fragment alone had no stylesheet)."""
    teams = tenancy_selectors.team_list(user=request.user).order_by("name")
    form = CapacityRequestForm(request.GET, teams=teams)
    answer, hint = None, ""
    if not form.is_valid():
        hint = "Fill in the team, the kind, the model (or memory), the cards and the window."
    elif form.cleaned_data["kind"] != RequestKind.CARDS:
        hint = "Capacity to add needs no free cards: a pool admin plans it."
    else:
        answer, hint = _draft_answer(request, form.cleaned_data)
    context = {"answer": _shown(answer, base=request.GET), "hint": hint, "links": True}
    if not request.htmx:
        context["form_href"] = _prefilled(request.GET, {})
        context["form_filled"] = any(request.GET.get(k) for k in FORM_FIELDS)
    response = render(request, f"{TEMPLATE}#answer" if request.htmx else TEMPLATE, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _draft_answer(request, d: dict[str, Any]) -> tuple[Explanation | None, str]:
    if d["ends_at"] <= d["starts_at"] or d["starts_at"] < timezone.now() - START_GRACE:
        return None, "Choose a window that starts now or later and ends after it starts."
    answer = selectors.explanation_for_fields(
        user=request.user,
        team=d["team"],
        workload_kind=d["workload_kind"],
        card_count=d["card_count"],
        starts_at=d["starts_at"],
        ends_at=d["ends_at"],
        pool=d.get("pool"),
        gpu_model=d.get("gpu_model"),
        min_memory_gib=d.get("min_memory_gib"),
        cuda_version=d.get("cuda_version") or "",
        cards_per_node=d.get("cards_per_node"),
        node_count=d.get("node_count"),
        one_nvlink_domain=bool(d.get("one_nvlink_domain")) and d.get("cards_per_node") is not None,
        shared_nodes=bool(d.get("shared_nodes")) and d.get("cards_per_node") is not None,
        workload_class=request_class(team=d["team"], workload_class=d.get("workload_class")),
    )
    return answer, ""


def _shown(answer: Explanation | None, base=None) -> dict[str, Any] | None:
    """The answer as the template reads it; with ``base`` (the form's fields) each
    alternative gets ``href``: the request form with its changes applied."""
    if answer is None:
        return None
    data = answer.as_dict()
    if base is not None:
        for row in data["where_instead"]:
            row["href"] = _prefilled(base, row["prefill"])
    return data


FORM_FIELDS = tuple(CapacityRequestForm.base_fields)


def _prefilled(base, changes: dict[str, Any]) -> str:
    """The request form's URL with ``base`` (its current fields) and ``changes`` applied;
    times as the form's ``datetime-local`` inputs write them (UTC)."""
    fields = {k: base.get(k) for k in FORM_FIELDS if base.get(k) not in (None, "")}
    for key, value in changes.items():
        if value is None:
            fields.pop(key, None)
            if key == "cards_per_node":
                fields.pop("one_nvlink_domain", None)
                fields.pop("shared_nodes", None)
        elif key in ("starts_at", "ends_at"):
            fields[key] = _local(value)
        else:
            fields[key] = value
    query = urlencode(fields)
    return f"{reverse('pools:request-new')}?{query}" if query else reverse("pools:request-new")


def _local(iso: str) -> str:
    return timezone.localtime(datetime.fromisoformat(iso.replace("Z", "+00:00"))).strftime(
        "%Y-%m-%dT%H:%M"
    )


def queue_verdicts(*, user, requests, budgets=None) -> dict[int, dict[str, Any]]:
    """For the approval queue: per request id, ``approvable`` (could be approved now as
    asked), ``reason`` (the first reason why not) and ``when`` (the earliest start anywhere,
    in words); requests for capacity to add are left out. One read of the facts for all;
    ``budgets``: the budgets' verdicts now, when the caller has them already."""
    cards = [r for r in requests if r.kind == RequestKind.CARDS]
    verdicts = {}
    answers = selectors.explanations_for_requests(user=user, requests=cards, budgets=budgets)
    for pk, answer in answers.items():
        dated = [w for w in answer.when if w["earliest_start"] is not None]
        soonest = min(dated, key=lambda w: w["earliest_start"]) if dated else None
        verdicts[pk] = {
            "approvable": answer.approvable_now,
            "reason": answer.why_not[0].text if answer.why_not else "",
            "when": stamp(soonest["earliest_start"]) if soonest else None,
        }
    return verdicts
