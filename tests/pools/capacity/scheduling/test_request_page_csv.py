"""Every table of a request's page has its CSV (README: "every table of a page has its CSV"):
beside the audit trail's ``?export=audit``, ``?export=request`` (what was asked),
``?export=allocation``, ``?export=scheduler`` (the objects in the scheduler) and
``?export=drifts`` (the drifts the scheduler refused to repair). Instants in UTC, money as an
amount beside its currency, card-hours to 2 decimals."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    RateCardEntryFactory,
    RateCardFactory,
)

from pools.capacity.models import SchedulerDrift
from pools.capacity.scheduler_panel import scheduler_panel
from pools.capacity.services.scheduler_binding import reservation_drift_subject
from pools.common.choices import AllocationStatus, RequestStatus

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
# 1 Dec 01:00 in Berlin is 1 Dec 00:00 UTC; the window runs 20 days to 21 Dec 00:00 UTC.
START = datetime(2026, 12, 1, 1, 0, tzinfo=ZoneInfo("Europe/Berlin"))
END = datetime(2026, 12, 21, tzinfo=UTC)


def _csv(response) -> list[dict]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.fixture
def placed(setup):
    """Vision's 2 A100 on GPUs 0 and 1 of the pool's node, active, written in Slurm; the rate
    card prices an A100 card-hour at 2.50 EUR from 1 Dec; a drift of its reservation the
    scheduler refused to repair, found 9 Dec 08:30 UTC."""
    pool, a100, team, bob, admin = setup
    node = pool.nodes.get()
    request = CapacityRequestFactory(
        team=team, requested_by=bob, pool=pool, gpu_model=a100, card_count=2,
        workload_kind="training", starts_at=START, ends_at=END, status=RequestStatus.APPROVED,
        justification="fine-tune =SUM(A1)", decided_by=admin, decided_at=START,
        decision_reason="ok",
    )  # fmt: skip
    allocation = AllocationFactory(
        request=request, team=team, pool=pool, gpu_model=a100, card_count=2,
        status=AllocationStatus.ACTIVE, starts_at=START, ends_at=END,
        placement=[{"node": node.hostname, "gpus": [0, 1]}],
    )  # fmt: skip
    allocation.scheduler_binding = {"applied": True, "account": "vision", "partition": "gpu",
                                    "reservation": f"portal-alloc-{allocation.pk}"}  # fmt: skip
    allocation.save(update_fields=["scheduler_binding"])
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, gpu_model=a100, price=Decimal("2.50"))
    drift = SchedulerDrift.objects.create(
        scheduler="slurm", team=team,
        subject=reservation_drift_subject(f"portal-alloc-{allocation.pk}", pool.cluster),
        expected="present", found="still there", repaired=False,
        detail="Reservation is in use",
    )  # fmt: skip
    SchedulerDrift.objects.filter(pk=drift.pk).update(
        detected_at=datetime(2026, 12, 9, 8, 30, tzinfo=UTC)
    )
    client = Client()
    client.force_login(bob)
    return client, allocation, node


def get(client, url):
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        return client.get(url)


def test_the_page_links_a_csv_for_each_of_its_tables(fake_slurm, placed):
    client, allocation, _ = placed
    page = get(client, f"/requests/{allocation.request_id}/").content.decode()
    for name in ("request", "allocation", "scheduler", "drifts", "audit"):
        assert f'href="?export={name}"' in page
    response = get(client, f"/requests/{allocation.request_id}/?export=scheduler")
    assert response["Content-Disposition"] == (
        f'attachment; filename="request-{allocation.request_id}-scheduler.csv"'
    )


def test_what_was_asked(fake_slurm, placed):
    client, allocation, _ = placed
    [row] = _csv(get(client, f"/requests/{allocation.request_id}/?export=request"))
    assert {k: row[k] for k in (
        "request", "status", "team", "kind", "workload_kind", "pool", "gpu_model", "card_count",
        "starts_at", "ends_at", "hours", "justification", "requested_by", "decided_by",
        "decided_at", "decision_reason",
    )} == {
        "request": str(allocation.request_id), "status": "approved", "team": "vision",
        "kind": "cards", "workload_kind": "training", "pool": "train",
        "gpu_model": "a100_80g_sxm", "card_count": "2",
        "starts_at": "2026-12-01T00:00:00+00:00", "ends_at": "2026-12-21T00:00:00+00:00",
        "hours": "480.00",  # 20 days x 24 h
        "justification": "fine-tune =SUM(A1)", "requested_by": "bob", "decided_by": "admin",
        "decided_at": "2026-12-01T00:00:00+00:00", "decision_reason": "ok",
    }  # fmt: skip


def test_the_allocation_with_its_cost_so_far(fake_slurm, placed):
    """Held 1 Dec 00:00 to now, 10 Dec 12:00 UTC: 9.5 days x 24 h x 2 cards = 456 card-h x
    2.50 EUR = 1140.00 EUR; the window's 20 days x 24 h x 2 cards = 960 card-h reserved."""
    client, allocation, node = placed
    [row] = _csv(get(client, f"/requests/{allocation.request_id}/?export=allocation"))
    assert {k: row[k] for k in (
        "allocation", "status", "card_count", "gpu_model", "pool", "placement", "starts_at",
        "ends_at", "reserved_card_hours", "held_card_hours", "price_per_card_hour",
        "cost_so_far", "currency", "cost_reason", "scheduler_applied",
    )} == {
        "allocation": str(allocation.pk), "status": "active", "card_count": "2",
        "gpu_model": "a100_80g_sxm", "pool": "train", "placement": f"{node.hostname} (GPU 0, 1)",
        "starts_at": "2026-12-01T00:00:00+00:00", "ends_at": "2026-12-21T00:00:00+00:00",
        "reserved_card_hours": "960.000", "held_card_hours": "456.000",
        "price_per_card_hour": "2.5", "cost_so_far": "1140.00", "currency": "EUR",
        "cost_reason": "", "scheduler_applied": "True",
    }  # fmt: skip


def test_the_scheduler_objects_as_the_panel_lists_them(fake_slurm, placed):
    client, allocation, node = placed
    rows = _csv(get(client, f"/requests/{allocation.request_id}/?export=scheduler"))
    got = {r["object"]: (r["name"], r["holds"]) for r in rows}
    assert got["Slurm account"][0] == "vision"
    assert got["GrpTRES"][0] == "gres/gpu:a100=2"
    assert got["Reservation"] == (f"portal-alloc-{allocation.pk}", node.hostname)
    assert {(r["scheduler"], r["state"]) for r in rows} == {("slurm", "written")}
    panel = scheduler_panel(allocation)  # the page's rows, in its order
    assert [(r["object"], r["name"], r["holds"]) for r in rows] == [
        (o.kind, o.name, o.detail) for o in panel.objects
    ]


def test_the_drifts_not_repaired(fake_slurm, placed):
    client, allocation, _ = placed
    rows = _csv(get(client, f"/requests/{allocation.request_id}/?export=drifts"))
    assert rows == [
        {
            "detected_at": "2026-12-09T08:30:00+00:00",
            "object": f"reservation portal-alloc-{allocation.pk}",
            "expected": "present",
            "found": "still there",
            "scheduler_answered": "Reservation is in use",
        }
    ]


def test_before_approval_the_tables_it_lacks_are_their_header_alone(setup):
    pool, a100, team, bob, _ = setup
    request = CapacityRequestFactory(team=team, requested_by=bob, pool=pool, gpu_model=a100,
                                     card_count=2)  # fmt: skip
    client = Client()
    client.force_login(bob)
    page = client.get(f"/requests/{request.pk}/").content.decode()
    assert 'href="?export=request"' in page and 'href="?export=allocation"' not in page
    for name in ("allocation", "scheduler", "drifts"):
        assert _csv(client.get(f"/requests/{request.pk}/?export={name}")) == []
    [row] = _csv(client.get(f"/requests/{request.pk}/?export=request"))
    assert (row["status"], row["decided_by"], row["decided_at"]) == ("submitted", "", "")


def test_another_teams_request_is_a_404(setup, django_user_model):
    pool, a100, team, bob, _ = setup
    request = CapacityRequestFactory(team=team, requested_by=bob, pool=pool, gpu_model=a100)
    client = Client()
    client.force_login(django_user_model.objects.create_user("eve", password="x"))
    for name in ("request", "allocation", "scheduler", "drifts"):
        assert client.get(f"/requests/{request.pk}/?export={name}").status_code == 404


def test_an_export_of_no_table_is_a_400_naming_the_tables(fake_slurm, placed):
    """``?export=alocation`` (a typo) answered the page's HTML with 200, which a script saved as
    its CSV; it is a 400 in plain text naming the five tables, and ``?export=`` is the page."""
    client, allocation, _node = placed
    url = f"/requests/{allocation.request_id}/"
    response = client.get(f"{url}?export=alocation")
    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == (
        "No export 'alocation' here; export is one of: "
        "audit, request, allocation, scheduler, drifts.\n"
    )
    page = client.get(f"{url}?export=")
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
