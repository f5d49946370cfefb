"""Issue #4's "Done when", literally: a pool admin clicks Approve in the browser and the limit
appears in the real Slurm (``sacctmgr show assoc``); releasing the allocation in the browser
sets it to 0 (no cards; no limit at all would be unlimited)."""

from __future__ import annotations

import pytest
from browser_support import log_in
from django.test import override_settings
from integration.slurm.slurm_cluster import eventually, sacctmgr
from playwright.sync_api import expect

from pools.capacity.models import Allocation
from pools.clusters import adapters
from pools.inventory.models import GpuModel, GpuModelAlias
from scheduler_adapters.registry import slurm_settings_from_env

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def catalogue():
    from pools.inventory.catalogue.sync import catalogue_sync

    catalogue_sync(GpuModel, GpuModelAlias)  # transactional: the database starts empty


def _grptres(account: str) -> str:
    return sacctmgr("show", "assoc", f"account={account}", "user=", "format=account,grptres")


def test_approve_and_release_in_the_browser_set_and_zero_the_slurm_limit(
    catalogue,
    slurm,
    slurm_settings,
    cleanup,
    portal_slurm_team,
    page,
    live_server,
):
    pool, a100, team, alice, admin, submit = portal_slurm_team
    for user in (alice, admin):
        user.set_password("pw-123456")
        user.save()
    request = submit(2)
    adapters.reset()
    with override_settings(SCHEDULERS={"slurm": slurm_settings_from_env(slurm_settings)}):
        log_in(page, live_server.url, "admin", "pw-123456")
        page.goto(f"{live_server.url}/requests/{request.pk}/")
        page.click("button:has-text('Approve')")
        expect(page.locator(".messages")).to_contain_text("Approved: allocation")
        assert "gres/gpu:a100=2" in eventually(
            lambda: _grptres(team.slug), lambda out: "gres/gpu:a100=2" in out
        )

        page.goto(f"{live_server.url}/requests/{request.pk}/")
        page.locator("summary:has-text('Release early')").click()
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("button:has-text('Release')")
        expect(page.locator(".messages")).to_contain_text("released")
        eventually(
            lambda: [(lim.gres_type, lim.cards) for lim in slurm.get_gpu_limits(team.slug)],
            lambda limits: limits == [("a100", 0)],
        )
        assert "gres/gpu:a100=0" in _grptres(team.slug)
    adapters.reset()
    assert Allocation.objects.get(request=request).status == "ended"
