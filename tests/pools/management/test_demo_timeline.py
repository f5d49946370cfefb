"""The demo's requests happened before the allocations they granted: the
loaders move some allocations' windows into the past (``load_demo``'s idle findings and
elastic history, ``load_demo_billing``'s past months), and move with them the requests they
came from and those requests' and allocations' audit events, so that a request's page never
shows it approved after its allocation started."""

from __future__ import annotations

from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from billing.demo import demo_billing_load
from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation

pytestmark = pytest.mark.django_db

SAME_MOMENT = timedelta(seconds=1)  # a field and its audit event are written one after the other


def test_every_demo_request_was_submitted_then_decided_before_its_allocation_started():
    loaded_at = timezone.now()
    call_command("load_demo", stdout=StringIO())
    demo_billing_load(months=1)
    allocations = list(Allocation.objects.filter(request__isnull=False).select_related("request"))
    # started before the demo was loaded: nlp's serving, fine-tune and retriever evaluation and
    # vision's idle pre-training, the elastic one (load_demo) and last month's three
    # reservations (billing.demo.RESERVATIONS)
    assert sum(a.starts_at < loaded_at for a in allocations) == 8
    wrong = []
    for allocation in allocations:
        request = allocation.request
        order = (request.created_at, request.submitted_at, request.decided_at,
                 allocation.starts_at)  # fmt: skip
        if None in order or not (order[0] <= order[1] < order[2] <= order[3]):
            wrong.append((allocation.pk, order))
            continue
        wrong += _events_off(request, allocation)
    assert wrong == []


def _events_off(request, allocation) -> list[tuple]:
    """The request's submission and decision events and the allocation's grant event that do
    not say what the rows say: written at the moment the row records (``submitted_at``,
    ``decided_at``, within :data:`SAME_MOMENT`), the window starting where it now starts."""
    off = []
    at = {"request.submitted": request.submitted_at, "request.approved": request.decided_at,
          "allocation.approved": request.decided_at}  # fmt: skip
    starts = {"request.submitted": request.starts_at, "request.approved": request.starts_at,
              "allocation.approved": allocation.starts_at}  # fmt: skip
    events = AuditEvent.objects.about(
        type(request).objects.filter(pk=request.pk), Allocation.objects.filter(pk=allocation.pk)
    ).filter(action__in=at)
    for event in events:
        if abs(event.created_at - at[event.action]) > SAME_MOMENT:
            off.append((allocation.pk, event.action, event.created_at, at[event.action]))
        said = (event.after or {}).get("starts_at")
        if said is not None and datetime.fromisoformat(said) != starts[event.action]:
            off.append((allocation.pk, event.action, said, starts[event.action]))
    return off
