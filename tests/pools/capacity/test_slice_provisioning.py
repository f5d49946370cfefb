"""Issue 38, item 2: slice allocations provisioned apart from cards.

Slurm: a MIG slice allocation caps ``GrpTRES=gres/gpu:<type>`` of its profile's GRES type
(the type the inventory recorded, else the profile), with the team's open-window slices of
that profile; the cards' cap is untouched. Written to the in-memory fake here (it keeps an
account's GrpTRES and refuses a type no partition offers, as the real adapter does); the
write on the wire is tested on recorded slurmrestd answers in
``tests/scheduler_adapters/test_slurm_modern.py::test_a_limit_on_mig_slices_is_written_and_read_back``.

By hand: team ``nlp`` holds 2 whole A100 and 3 + 4 = 7 × 1g.10gb in pool ``train`` (open
now): ``gres/gpu:a100_80g_sxm=2`` (the catalogue slug as GRES type) and
``gres/gpu:1g.10gb=7``; once the 4-slice allocation ends, ``1g.10gb=3``.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, MigDeviceFactory, NodeFactory

from pools.capacity.services.reconcile import reconcile_slurm
from pools.capacity.services.scheduler_binding import slurm_limit_sync, slurm_mig_gres_type
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel
from scheduler_adapters.fake import FakeScheduler

pytestmark = pytest.mark.django_db


@pytest.fixture
def a100():
    return GpuModel.objects.get(slug="a100_80g_sxm")


@pytest.fixture
def sliced(train_pool, a100):
    node = NodeFactory(pool=train_pool, hostname="mig-01")
    card = GpuFactory(node=node, index=0, gpu_model=a100, mig_mode=True)
    for index in range(7):
        MigDeviceFactory(gpu=card, index=index, profile="1g.10gb")
    return card


def hold(team, pool, model, count, profile=""):
    now = timezone.now()
    return AllocationFactory(
        team=team, pool=pool, gpu_model=model, card_count=count, mig_profile=profile,
        starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1),
        status=AllocationStatus.ACTIVE,
    )  # fmt: skip


def test_slices_and_cards_get_their_own_caps(team, train_pool, a100, sliced):
    fake = FakeScheduler({"train": {"a100_80g_sxm": 4, "1g.10gb": 7}})
    hold(team, train_pool, a100, 2)
    hold(team, train_pool, a100, 3, "1g.10gb")
    four = hold(team, train_pool, a100, 4, "1g.10gb")
    cards = slurm_limit_sync(adapter=fake, team=team, pool=train_pool, gpu_model=a100)
    slices = slurm_limit_sync(
        adapter=fake, team=team, pool=train_pool, gpu_model=a100, mig_profile="1g.10gb"
    )
    assert (cards["grp_tres"], slices["grp_tres"]) == (
        "gres/gpu:a100_80g_sxm=2",
        "gres/gpu:1g.10gb=7",
    )
    assert {(lim.gres_type, lim.cards) for lim in fake.get_gpu_limits("nlp")} == {
        ("a100_80g_sxm", 2),
        ("1g.10gb", 7),
    }
    four.status = AllocationStatus.ENDED
    four.save()
    slurm_limit_sync(
        adapter=fake, team=team, pool=train_pool, gpu_model=a100, mig_profile="1g.10gb"
    )
    assert {(lim.gres_type, lim.cards) for lim in fake.get_gpu_limits("nlp")} == {
        ("a100_80g_sxm", 2),
        ("1g.10gb", 3),
    }


def test_the_gres_type_the_cluster_reported_is_capped(team, train_pool, a100, sliced):
    """AutoDetect names the slices ``nvidia_a100_80gb_pcie_1g.10gb``: that type is capped."""
    sliced.mig_devices.update(gres_type="nvidia_a100_80gb_pcie_1g.10gb")
    assert (
        slurm_mig_gres_type(pool=train_pool, gpu_model=a100, profile="1g.10gb")
        == "nvidia_a100_80gb_pcie_1g.10gb"
    )
    fake = FakeScheduler({"train": {"a100_80g_sxm": 4, "nvidia_a100_80gb_pcie_1g.10gb": 7}})
    hold(team, train_pool, a100, 5, "1g.10gb")
    binding = slurm_limit_sync(
        adapter=fake, team=team, pool=train_pool, gpu_model=a100, mig_profile="1g.10gb"
    )
    assert binding["grp_tres"] == "gres/gpu:nvidia_a100_80gb_pcie_1g.10gb=5"


def test_reconcile_repairs_a_slice_cap_changed_by_hand(team, train_pool, a100, sliced, monkeypatch):
    from scheduler_adapters.records import GpuLimit

    fake = FakeScheduler({"train": {"a100_80g_sxm": 4, "1g.10gb": 7}})
    monkeypatch.setattr("pools.capacity.services.reconcile.scheduler_adapter", lambda _s: fake)
    monkeypatch.setattr(  # the node refresh is not what this tests
        "pools.capacity.services.reconcile.inventory_import",
        lambda **_kw: SimpleNamespace(created=[], updated=[], unchanged=[], rejected=[], issues=[]),
    )
    hold(team, train_pool, a100, 3, "1g.10gb")
    slurm_limit_sync(
        adapter=fake, team=team, pool=train_pool, gpu_model=a100, mig_profile="1g.10gb"
    )
    fake.set_gpu_limit(GpuLimit("nlp", None, "1g.10gb", 6))  # an admin's sacctmgr
    report = reconcile_slurm()
    [drift] = report.drifts
    assert (drift.subject, drift.expected, drift.found, drift.repaired) == (
        "account nlp GrpTRES gres/gpu:1g.10gb",
        "3",
        "6",
        True,
    )
    assert {(lim.gres_type, lim.cards) for lim in fake.get_gpu_limits("nlp")} == {("1g.10gb", 3)}
