"""Recurring reservations in the schedulers (issue 32), by the beat loop with the clock moved:
the team's Kubernetes quota raised when an occurrence opens and lowered when it closes (on the
HTTP fake of kube-apiserver), and the Slurm reservation with the rule's flag created, kept, and
deleted on cancel and after the last occurrence (on the in-memory fake; the real clusters:
tests/integration/slurm/test_recurring_reservations.py).

Dates are in January of the year after next (Europe/Berlin is UTC+1 then), so an occurrence
09:00-18:00 Berlin is 08:00-17:00 UTC; the provisioning lead is 15 minutes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, TeamFactory
from kubernetes_support import portal_on_fake_apiserver

from pools.capacity.models import SchedulerDrift
from pools.capacity.services.scheduler_binding import k8s_product_label
from pools.common.choices import AllocationStatus
from pools.recurring.models import RecurringReservation
from pools.recurring.services.binding import recurring_sync
from pools.recurring.services.reservations import (
    recurring_reservation_cancel,
    recurring_reservation_create,
)
from scheduler_adapters.errors import SchedulerAuthError
from scheduler_adapters.kubernetes_manifests import flavor_name

pytestmark = pytest.mark.django_db
YEAR = timezone.now().year + 2
MONDAY = date(YEAR, 1, 4) + timedelta(days=(7 - date(YEAR, 1, 4).weekday()) % 7)
FRIDAY = MONDAY + timedelta(days=4)


def utc(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=UTC)


def course(actor, team, pool, model, **fields) -> RecurringReservation:
    rule = {
        "name": "course",
        "card_count": 4,
        "recurrence": "weekday",
        "time_zone": "Europe/Berlin",
        "first_date": MONDAY,
        "last_date": FRIDAY,
        "start_time": time(9),
        "end_time": time(18),
    } | fields
    return recurring_reservation_create(
        actor=actor, team=team, pool=pool, gpu_model=model, now=utc(MONDAY, 0) - timedelta(days=7),
        **rule,
    )  # fmt: skip


def test_the_quota_goes_up_around_each_occurrence_and_down_after_it(pool_admin, infer_pool, l40s):
    """2 L40S allocated all week plus 4 L40S weekdays 09:00-18:00 Berlin: the namespace quota
    is 2 until 07:45 UTC (the lead before 08:00), 6 from then until 17:00, 2 after; Saturday 2;
    a beat run twice writes the same; cancelled mid-occurrence, the next beat puts back 2."""
    team = TeamFactory(slug="nlp")
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                      status=AllocationStatus.ACTIVE, starts_at=utc(MONDAY, 0),
                      ends_at=utc(MONDAY, 0) + timedelta(days=7))  # fmt: skip
    reservation = course(pool_admin, team, infer_pool, l40s)

    def quota_at(moment: datetime) -> str:
        recurring_sync(now=moment)
        quota = server.get("", "resourcequotas", "team-nlp", "gpu-quota")
        return quota["spec"]["hard"]["requests.nvidia.com/gpu"]

    with portal_on_fake_apiserver() as server:
        assert quota_at(utc(MONDAY, 7, 44)) == "2"  # 16 min before: not yet
        assert quota_at(utc(MONDAY, 7, 45)) == "6"  # the lead: 2 + 4
        assert quota_at(utc(MONDAY, 12)) == "6"
        before = server.get("", "resourcequotas", "team-nlp", "gpu-quota")
        assert recurring_sync(now=utc(MONDAY, 12))["quotas"] == 1
        again = server.get("", "resourcequotas", "team-nlp", "gpu-quota")
        assert again["spec"] == before["spec"]  # idempotent
        assert quota_at(utc(MONDAY, 17)) == "2"  # half-open: closed at 18:00 Berlin
        assert quota_at(utc(FRIDAY, 16, 59)) == "6"
        assert quota_at(utc(FRIDAY + timedelta(days=1), 9)) == "2"  # Saturday

        assert quota_at(utc(MONDAY + timedelta(days=1), 9)) == "6"  # Tuesday
        recurring_reservation_cancel(reservation=reservation, actor=pool_admin)
        assert quota_at(utc(MONDAY + timedelta(days=1), 9, 5)) == "2"


def test_slurm_gets_a_weekday_reservation_deleted_on_cancel(fake_slurm, setup, pool_admin):
    """4 A100 = the whole node ``fake-gpu-a100``: the beat creates ``portal-recur-<id>`` over
    Monday 08:00-17:00 UTC with Flags=WEEKDAY for the account, raises GrpTRES to 4 during the
    occurrence and back to 0 after; cancel, and the next beat deletes it (read back gone)."""
    pool, a100, team, _bob, _admin = setup
    pool.nodes.update(hostname="fake-gpu-a100")
    reservation = course(pool_admin, team, pool, a100)
    name = f"portal-recur-{reservation.pk}"

    counts = recurring_sync(now=utc(MONDAY, 6))
    assert (counts["reserved"], counts["errors"]) == (1, 0)
    record = fake_slurm.get_reservation(name)
    assert (record.accounts, record.nodes, record.repeat) == (
        ("vision",),
        ("fake-gpu-a100",),
        "WEEKDAY",
    )
    assert (record.starts_at, record.ends_at) == (utc(MONDAY, 8), utc(MONDAY, 17))
    reservation.refresh_from_db()
    assert reservation.scheduler_binding["reservation"] == name
    assert recurring_sync(now=utc(MONDAY, 6))["reserved"] == 0  # bound already

    recurring_sync(now=utc(MONDAY, 9))
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 4
    recurring_sync(now=utc(MONDAY, 17, 1))
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 0

    recurring_reservation_cancel(reservation=reservation, actor=pool_admin)
    assert recurring_sync(now=utc(MONDAY, 18))["removed"] == 1
    assert fake_slurm.get_reservation(name) is None
    reservation.refresh_from_db()
    assert reservation.scheduler_binding == {}


def test_slurm_reservation_is_deleted_after_the_last_occurrence(fake_slurm, setup, pool_admin):
    pool, a100, team, _bob, _admin = setup
    pool.nodes.update(hostname="fake-gpu-a100")
    reservation = course(pool_admin, team, pool, a100, recurrence="daily", last_date=MONDAY)
    recurring_sync(now=utc(MONDAY, 6))
    name = f"portal-recur-{reservation.pk}"
    assert fake_slurm.get_reservation(name).repeat == "DAILY"
    assert recurring_sync(now=utc(MONDAY, 16, 59))["removed"] == 0  # still on
    assert recurring_sync(now=utc(MONDAY, 17))["removed"] == 1  # the last one has ended
    assert fake_slurm.get_reservation(name) is None


def test_a_refused_deletion_is_an_unrepaired_drift_once_and_the_beat_keeps_asking(
    fake_slurm, setup, pool_admin
):
    """Cancelled, and Slurm refuses the deletion (scontrol's ``Access/permission denied``
    without root or SlurmUser rights, https://slurm.schedmd.com/reservations.html): the
    beat records one unrepaired drift with Slurm's message however often it asks, keeps the
    binding, and deletes the reservation once Slurm lets it."""
    pool, a100, team, _bob, _admin = setup
    pool.nodes.update(hostname="fake-gpu-a100")
    reservation = course(pool_admin, team, pool, a100)
    name = f"portal-recur-{reservation.pk}"
    recurring_sync(now=utc(MONDAY, 6))
    recurring_reservation_cancel(reservation=reservation, actor=pool_admin)
    message = f"scontrol: delete_reservation ReservationName={name}: Access/permission denied"
    real_delete = fake_slurm.delete_reservation

    def refuse(reservation_name: str) -> bool:
        raise SchedulerAuthError(message, operation="delete_reservation")

    fake_slurm.delete_reservation = refuse
    for minute in (0, 5, 10):  # three beats
        assert recurring_sync(now=utc(MONDAY, 18, minute))["errors"] == 1
    drift = SchedulerDrift.objects.get()
    assert (drift.subject, drift.expected, drift.found, drift.repaired, drift.team) == (
        f"reservation {name}",
        f"none: recurring reservation #{reservation.pk} is cancelled",
        "kept: Slurm refused its removal",
        False,
        team,
    )
    assert drift.detail == f"delete_reservation: {message}"
    assert fake_slurm.get_reservation(name) is not None
    reservation.refresh_from_db()
    assert reservation.scheduler_binding["reservation"] == name

    fake_slurm.delete_reservation = real_delete  # permissions fixed
    assert recurring_sync(now=utc(MONDAY, 18, 15))["removed"] == 1
    assert fake_slurm.get_reservation(name) is None
    assert SchedulerDrift.objects.count() == 1


def test_a_rule_slurm_would_move_at_a_summer_time_change_is_not_reserved(
    fake_slurm, setup, pool_admin
):
    """Daily 09:00-18:00 Berlin over the last Sunday of March on a UTC slurmctld: Slurm keeps
    08:00 UTC, Berlin moves to 07:00 UTC on that Sunday (CEST); the binding names that date."""
    pool, a100, team, _bob, _admin = setup
    pool.nodes.update(hostname="fake-gpu-a100")
    march_31 = date(YEAR, 3, 31)
    sunday = march_31 - timedelta(days=(march_31.weekday() + 1) % 7)  # last Sunday of March
    thursday, wednesday = sunday - timedelta(days=3), sunday + timedelta(days=3)
    reservation = course(
        pool_admin, team, pool, a100, recurrence="daily", first_date=thursday, last_date=wednesday
    )
    counts = recurring_sync(now=utc(thursday, 6))
    assert counts["not_reserved"] == 1
    reservation.refresh_from_db()
    assert reservation.scheduler_binding["reservation"] is None
    assert f"occurrence of {sunday:%Y-%m-%d}" in reservation.scheduler_binding["note"]
    assert fake_slurm.reservations == {}


def test_cards_that_are_not_whole_nodes_are_not_reserved(fake_slurm, setup, pool_admin):
    pool, a100, team, _bob, _admin = setup
    pool.nodes.update(hostname="fake-gpu-a100")
    reservation = course(pool_admin, team, pool, a100, card_count=3)
    recurring_sync(now=utc(MONDAY, 6))
    reservation.refresh_from_db()
    assert reservation.scheduler_binding["note"].startswith(
        "Not reserved in Slurm: 3 cards are not whole nodes"
    )
    assert fake_slurm.reservations == {}


def test_create_and_cancel_reach_slurm_after_commit_without_waiting_for_beat(
    fake_slurm, setup, pool_admin, django_capture_on_commit_callbacks
):
    pool, a100, team, _bob, _admin = setup
    pool.nodes.update(hostname="fake-gpu-a100")
    with django_capture_on_commit_callbacks(execute=True):
        reservation = course(pool_admin, team, pool, a100)
    name = f"portal-recur-{reservation.pk}"
    assert fake_slurm.get_reservation(name).repeat == "WEEKDAY"
    with django_capture_on_commit_callbacks(execute=True):
        recurring_reservation_cancel(reservation=reservation, actor=pool_admin)
    assert fake_slurm.get_reservation(name) is None


def test_with_kueue_the_cluster_queue_quota_follows_the_occurrence(pool_admin, infer_pool, l40s):
    """The same course in a Kueue cluster: the team's ClusterQueue ``nominalQuota`` for the
    L40S flavour is 2 before the lead, 6 during the occurrence and 2 after it."""
    team = TeamFactory(slug="nlp")
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                      status=AllocationStatus.ACTIVE, starts_at=utc(MONDAY, 0),
                      ends_at=utc(MONDAY, 0) + timedelta(days=7))  # fmt: skip
    course(pool_admin, team, infer_pool, l40s)

    def nominal_at(moment: datetime) -> str:
        recurring_sync(now=moment)
        queue = server.get("kueue.x-k8s.io", "clusterqueues", None, "team-nlp")
        (flavour,) = queue["spec"]["resourceGroups"][0]["flavors"]
        assert flavour["name"] == flavor_name(k8s_product_label(l40s))
        (gpu,) = [r for r in flavour["resources"] if r["name"] == "nvidia.com/gpu"]
        return gpu["nominalQuota"]

    with portal_on_fake_apiserver(KUEUE=True) as server:
        assert nominal_at(utc(MONDAY, 7, 44)) == "2"
        assert nominal_at(utc(MONDAY, 12)) == "6"
        assert nominal_at(utc(MONDAY, 17)) == "2"
