"""The manager's form that says what an allocation serves by linking one of the team's saved
sizing estimates (:mod:`pools.calibration.served`). The Serving panel loads it with htmx (GET,
the ``form`` fragment); POST ``estimate`` links, ``unlink`` takes it off. A refusal re-renders
the form with the reason on the field; a change reloads the page (htmx) or redirects to it."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers

from pools.calibration.served import (
    linkable_estimates,
    served_model_link_estimate,
    served_model_unlink_estimate,
)
from pools.capacity.selectors import allocation_list
from pools.common.errors import DomainError
from pools.serving.models import ServedModel
from pools.tenancy.permissions import may_link_estimate


def served_estimate(request, pk: int):
    try:
        allocation = allocation_list(user=request.user).get(pk=pk)
    except Exception:  # DoesNotExist or a bad id: never say whether it exists
        raise Http404("No such allocation.") from None
    may_link = may_link_estimate(request.user, allocation.team)
    if request.method == "POST" and not may_link:
        raise PermissionDenied("Only the team's managers and pool admins say what it serves.")
    error = ""
    if request.method == "POST":
        try:
            if request.POST.get("unlink"):
                served_model_unlink_estimate(actor=request.user, allocation=allocation)
            else:
                served_model_link_estimate(
                    actor=request.user,
                    allocation=allocation,
                    estimate_id=request.POST.get("estimate"),
                )
        except DomainError as exc:
            error = (exc.data.get("errors") or {}).get("estimate") or exc.message
        else:
            messages.success(request, "Saved: the next calibration pass sizes the linked estimate.")
            if request.htmx:
                return HttpResponse(status=204, headers={"HX-Refresh": "true"})
            return redirect("pools:allocation-serving", pk=pk)
    served = ServedModel.objects.filter(allocation=allocation).first()
    context = {
        "allocation": allocation,
        "may_link": may_link,
        "served": served,
        "linkable": linkable_estimates(user=request.user, allocation=allocation)
        if may_link
        else [],
        "link_error": error,
    }
    template = "pools/calibration/served_estimate.html"
    response = render(request, f"{template}#form" if request.htmx else template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response
