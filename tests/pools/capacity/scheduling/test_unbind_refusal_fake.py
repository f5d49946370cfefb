"""A released allocation whose reservation Slurm refuses to remove (fake Slurm): the team's cap is
lowered anyway, the refusal is an unrepaired drift on the dashboard with Slurm's words, and
reconcile ends the reservation left behind once Slurm lets it.

The refusal is what the real adapter raises when ``scontrol delete ReservationName=N`` runs
without root or SlurmUser rights (https://slurm.schedmd.com/reservations.html): scontrol's
``slurm_perror`` line ``delete_reservation ReservationName=N: Access/permission denied``
(ESLURM_ACCESS_DENIED), read by :mod:`scheduler_adapters.slurm.reservations` as
:class:`SchedulerAuthError` — not transient, so the unbind task does not retry it.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from pools.capacity.models import Allocation, SchedulerDrift
from pools.capacity.services.allocations import allocation_release
from pools.capacity.services.reconcile import UNBIND_GRACE, reconcile_slurm
from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import AllocationStatus
from pools.dashboards.capacity import dashboard_alerts
from scheduler_adapters.errors import SchedulerAuthError, SchedulerUnavailable

pytestmark = pytest.mark.django_db


@pytest.fixture
def reserved(fake_slurm, setup, submitted, django_capture_on_commit_callbacks):
    """An active allocation of the whole fake node (4 cards), reserved in Slurm until its end
    in 3 days; the team's cap is 4."""
    pool, a100, team, bob, admin = setup
    pool.nodes.update(hostname="fake-gpu-a100", nvlink_domains=[[0, 1, 2, 3]])
    request = submitted(pool, a100, team, bob, 4, timezone.now() - timedelta(minutes=1))
    request.cards_per_node, request.node_count, request.one_nvlink_domain = 4, 1, True
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()
    name = f"portal-alloc-{allocation.pk}"
    assert allocation.scheduler_binding["reservation"] == name
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 4
    return fake_slurm, allocation, bob, name


def _refused(name: str) -> SchedulerAuthError:
    return SchedulerAuthError(
        f"scontrol: delete_reservation ReservationName={name}: Access/permission denied",
        operation="delete_reservation",
    )


def _release_refused(fake, allocation, bob, name, capture) -> None:
    fake.fail_next(_refused(name))  # the next Slurm call, the unbind's delete, is refused
    with capture(execute=True):
        allocation_release(allocation=allocation, actor=bob, reason="done")


def test_a_refused_reservation_removal_still_lowers_the_cap(
    reserved, django_capture_on_commit_callbacks
):
    fake, allocation, bob, name = reserved
    _release_refused(fake, allocation, bob, name, django_capture_on_commit_callbacks)

    assert Allocation.objects.get(pk=allocation.pk).status == AllocationStatus.ENDED
    assert fake.get_gpu_limits("vision")[0].cards == 0  # no other allocation: 4 - 4
    assert fake.get_reservation(name) is not None  # the refusal left it


def test_the_refusal_is_on_the_dashboard_with_slurms_message(
    reserved, django_capture_on_commit_callbacks
):
    fake, allocation, bob, name = reserved
    _release_refused(fake, allocation, bob, name, django_capture_on_commit_callbacks)

    alerts = dashboard_alerts(now=timezone.now())
    assert alerts.drift_count == 1
    drift = alerts.drifts[0]
    assert (drift.subject, drift.expected, drift.repaired, drift.team.slug) == (
        f"reservation {name}",
        f"none: allocation #{allocation.pk} is ended",
        False,
        "vision",
    )
    assert drift.detail == (  # the adapter's operation, then scontrol's line
        "delete_reservation: "
        f"scontrol: delete_reservation ReservationName={name}: Access/permission denied"
    )


def test_the_admin_dashboard_shows_the_refusal(
    reserved, django_capture_on_commit_callbacks, client
):
    fake, allocation, bob, name = reserved
    _release_refused(fake, allocation, bob, name, django_capture_on_commit_callbacks)
    client.force_login(type(bob).objects.get(username="admin"))

    page = client.get(reverse("dashboard")).content.decode()

    assert f"reservation {name} — expected none: allocation #{allocation.pk} is ended" in page
    assert f"ReservationName={name}: Access/permission denied" in page


def test_the_alert_csv_carries_slurms_message_last(
    reserved, django_capture_on_commit_callbacks, client
):
    fake, allocation, bob, name = reserved
    _release_refused(fake, allocation, bob, name, django_capture_on_commit_callbacks)
    client.force_login(type(bob).objects.get(username="admin"))

    response = client.get(reverse("dashboard"), {"export": "alerts"})

    body = b"".join(response.streaming_content).decode()
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0] == ["kind", "subject", "detail", "scheduler_message"]
    assert [row for row in rows[1:] if row[0] == "scheduler_drift"] == [
        [
            "scheduler_drift",
            f"reservation {name}",
            f"expected none: allocation #{allocation.pk} is ended, "
            "found kept: Slurm refused its removal",
            "delete_reservation: "
            f"scontrol: delete_reservation ReservationName={name}: Access/permission denied",
        ]
    ]


def test_the_allocations_own_panel_shows_the_refusal_until_reconcile_repairs_it(
    reserved, django_capture_on_commit_callbacks, client, api_as
):
    """The panel's drift used to be the cap's alone: the reservation's refusal, on the
    dashboard, was missing from the allocation's page and API."""
    fake, allocation, bob, name = reserved
    _release_refused(fake, allocation, bob, name, django_capture_on_commit_callbacks)
    client.force_login(bob)
    message = f"scontrol: delete_reservation ReservationName={name}: Access/permission denied"

    page = client.get(reverse("pools:request-detail", args=[allocation.request_id]))
    listed = page.content.decode().split('data-testid="unrepaired-drifts"')[1].split("</table>")[0]
    assert (
        '<td data-label="Object"><code class="ident">'
        f"reservation portal-<wbr>alloc-<wbr>{allocation.pk}</code></td>"
        f'<td data-label="Expected">none: allocation #{allocation.pk} is ended</td>'
    ) in listed
    assert f"<code>delete_reservation: {message}</code>" in listed
    body = api_as(bob).get(f"/api/v1/allocations/{allocation.pk}/").json()["scheduler"]
    assert [(d["subject"], d["detail"]) for d in body["unrepaired_drifts"]] == [
        (f"reservation {name}", f"delete_reservation: {message}")
    ]

    Allocation.objects.filter(pk=allocation.pk).update(
        updated_at=timezone.now() - UNBIND_GRACE - timedelta(seconds=1)
    )
    reconcile_slurm()  # Slurm lets it now: a newer, repaired drift of the reservation

    page = client.get(reverse("pools:request-detail", args=[allocation.request_id]))
    assert 'data-testid="unrepaired-drifts"' not in page.content.decode()
    body = api_as(bob).get(f"/api/v1/allocations/{allocation.pk}/").json()["scheduler"]
    assert body["unrepaired_drifts"] == []


def test_a_transient_failure_is_left_to_the_retries_not_recorded(
    reserved, django_capture_on_commit_callbacks
):
    fake, allocation, bob, name = reserved
    fake.fail_next(SchedulerUnavailable("timed out (fake)", operation="delete_reservation"))
    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=allocation, actor=bob, reason="done")

    assert SchedulerDrift.objects.count() == 0
    assert fake.get_gpu_limits("vision")[0].cards == 0


def test_reconcile_ends_a_reservation_left_behind(reserved, django_capture_on_commit_callbacks):
    fake, allocation, bob, name = reserved
    _release_refused(fake, allocation, bob, name, django_capture_on_commit_callbacks)
    planned_end = fake.get_reservation(name).ends_at

    # within the grace the unbind task may still be retrying: not reconcile's yet
    assert reconcile_slurm().drifts == []
    assert fake.get_reservation(name) is not None

    Allocation.objects.filter(pk=allocation.pk).update(
        updated_at=timezone.now() - UNBIND_GRACE - timedelta(seconds=1)
    )
    report = reconcile_slurm()

    assert fake.get_reservation(name) is None
    drift = SchedulerDrift.objects.get(repaired=True)
    assert report.drifts == [drift]
    assert (drift.subject, drift.expected) == (
        f"reservation {name}",
        f"none: allocation #{allocation.pk} is ended",
    )
    assert drift.found == f"ACTIVE on fake-gpu-a100 until {planned_end.isoformat()}"
    binding = Allocation.objects.get(pk=allocation.pk).scheduler_binding
    assert "reservation_removed_at" in binding

    fake.calls.clear()
    assert reconcile_slurm().drifts == []  # gone and marked: not asked again
    assert "get_reservation" not in fake.calls


def test_reconcile_keeps_asking_while_slurm_refuses(reserved, django_capture_on_commit_callbacks):
    fake, allocation, bob, name = reserved
    _release_refused(fake, allocation, bob, name, django_capture_on_commit_callbacks)
    Allocation.objects.filter(pk=allocation.pk).update(
        updated_at=timezone.now() - UNBIND_GRACE - timedelta(seconds=1)
    )
    real_delete = fake.delete_reservation

    def refuse(reservation: str) -> bool:
        raise _refused(reservation)

    fake.delete_reservation = refuse
    report = reconcile_slurm()
    drift = report.drifts[0]
    assert drift.repaired is False
    assert drift.detail.endswith(f"ReservationName={name}: Access/permission denied")
    assert fake.get_reservation(name) is not None

    fake.delete_reservation = real_delete  # permissions fixed
    assert [d.repaired for d in reconcile_slurm().drifts] == [True]
    assert fake.get_reservation(name) is None


def test_a_release_slurm_accepts_marks_the_reservation_removed(
    reserved, django_capture_on_commit_callbacks
):
    fake, allocation, bob, name = reserved
    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=allocation, actor=bob, reason="done")

    assert fake.get_reservation(name) is None
    assert "reservation_removed_at" in Allocation.objects.get(pk=allocation.pk).scheduler_binding
    assert SchedulerDrift.objects.count() == 0
