"""An allocation released (or deleted) while its first apply is in flight in Slurm, with the
in-memory fake, on real PostgreSQL: the release commits in its own thread and connection while
the provision task waits on the scheduler, and its unbind task runs there and then.

That unbind reads no reservation in the allocation's binding (none is stored before the apply
returns) and lowers the cap before the apply raises it again with the cards it counted before
the release; the apply then creates the reservation. So the apply, finding the allocation no
longer holding cards, stores what it applied and queues the unbind again, which takes both
back (``allocation_provision``); the rebind after a reclamation does the same
(``allocation_rebind``). Numbers: 4 A100 on one node ``fake-gpu-a100``, all placed, so
the whole node is reserved as ``portal-alloc-<id>``; the team's cap is 4 while the allocation
holds and 0 once it does not (its only allocation)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from celery import current_app
from django.db import connections
from django.utils import timezone
from factories import AllocationFactory

from pools import jobs
from pools.capacity.models import Allocation
from pools.capacity.services.allocations import allocation_release
from pools.common.choices import AllocationStatus
from pools.inventory.catalogue.sync import catalogue_sync
from pools.inventory.models import GpuModel, GpuModelAlias

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgresql]


@pytest.fixture(autouse=True)
def _catalogue(transactional_db):
    """The GPU models the migrations ship (a transactional test before this one flushed them)."""
    catalogue_sync(GpuModel, GpuModelAlias)


def _placed(pool, a100, team) -> Allocation:
    """An approved allocation of the whole node's 4 A100, its window open a minute ago."""
    pool.nodes.update(hostname="fake-gpu-a100")
    start = timezone.now() - timedelta(minutes=1)
    return AllocationFactory(
        team=team, pool=pool, gpu_model=a100, card_count=4, starts_at=start,
        ends_at=start + timedelta(days=3),
        placement=[{"node": "fake-gpu-a100", "gpus": [0, 1, 2, 3]}],
    )  # fmt: skip


def _in_another_connection(action) -> None:
    """Run ``action()`` in a thread of its own (its own database connection, committing for
    real, its queued tasks run eagerly once it commits) and wait for it."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # the test fails with it below
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive() and not failures, failures


def _when_the_apply_is_in_flight(fake_slurm, action) -> None:
    """Run ``action`` (in another connection) on the apply's first ``ensure_account``: after it
    counted the team's cards, before it sets the cap and creates the reservation."""
    ensure_account = fake_slurm.ensure_account
    fired = []

    def hooked(*args, **kwargs):
        if not fired:
            fired.append(True)
            _in_another_connection(action)
        return ensure_account(*args, **kwargs)

    fake_slurm.ensure_account = hooked


def test_a_release_during_the_first_apply_takes_back_its_cap_and_reservation(fake_slurm, setup):
    pool, a100, team, bob, _admin = setup
    allocation = _placed(pool, a100, team)
    name = f"portal-alloc-{allocation.pk}"
    _when_the_apply_is_in_flight(
        fake_slurm, lambda: allocation_release(allocation=allocation, actor=bob, reason="done")
    )

    status = current_app.tasks[jobs.ALLOCATION_PROVISION].apply(args=[allocation.pk]).get()

    allocation.refresh_from_db()
    assert (status, allocation.status) == ("ended", AllocationStatus.ENDED)
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 0
    assert fake_slurm.get_reservation(name) is None
    # the first unbind found no reservation to delete; the second deleted it
    assert fake_slurm.calls.count("delete_reservation") == 1
    assert allocation.scheduler_binding["reservation"] == name
    assert "reservation_removed_at" in allocation.scheduler_binding


def test_a_delete_during_the_first_apply_takes_back_its_cap_and_reservation(fake_slurm, setup):
    pool, a100, team, _bob, _admin = setup
    allocation = _placed(pool, a100, team)
    name = f"portal-alloc-{allocation.pk}"
    _when_the_apply_is_in_flight(
        fake_slurm, lambda: Allocation.objects.filter(pk=allocation.pk).delete()
    )

    status = current_app.tasks[jobs.ALLOCATION_PROVISION].apply(args=[allocation.pk]).get()

    assert status == "missing"
    assert not Allocation.objects.filter(pk=allocation.pk).exists()
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 0
    assert fake_slurm.get_reservation(name) is None


def test_a_release_during_a_rebind_takes_back_what_the_rebind_put_back(fake_slurm, setup):
    """After a reclamation shrink (or its undo) the rebind applies the allocation again; a
    release landing meanwhile has its unbind delete the reservation and lower the cap to 0,
    then the rebind creates the one and raises the other to the 4 cards it counted."""
    pool, a100, team, bob, _admin = setup
    allocation = _placed(pool, a100, team)
    name = f"portal-alloc-{allocation.pk}"
    assert current_app.tasks[jobs.ALLOCATION_PROVISION].apply(args=[allocation.pk]).get() == (
        "active"
    )
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 4
    _when_the_apply_is_in_flight(
        fake_slurm, lambda: allocation_release(allocation=allocation, actor=bob, reason="done")
    )

    current_app.tasks[jobs.ALLOCATION_REBIND].apply(args=[allocation.pk]).get()

    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.ENDED
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 0
    assert fake_slurm.get_reservation(name) is None
    assert "reservation_removed_at" in allocation.scheduler_binding
