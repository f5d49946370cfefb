"""Waiting work in Chromium (issue #33 item 2): a member of nlp sees the team's pending Slurm
jobs and Kueue workloads explained, the untranslated reason marked, filters through htmx, and
the page stays within the screen at 1366 and 390 px. Screenshots go to ``BROWSER_SHOTS`` (a
directory) when set, else the test's temporary directory."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from browser_support import log_in
from django.utils import timezone
from factories import MembershipFactory, PendingWorkFactory, TeamFactory

pytestmark = pytest.mark.browser


def _rows(team):
    now = timezone.now()
    PendingWorkFactory(
        team=team, ref="4125", name="train-4125", cards_requested=2,
        explanation="Your team's cap of 8 cards is full — 8 cards held by jobs 4123 and 4124; "
        "the first ends at 14:00 UTC",
    )  # fmt: skip
    PendingWorkFactory(
        team=team, ref="4126", name="train-4126", cards_requested=8, kind="resources",
        reason_code="Resources", expected_start_at=now + timedelta(hours=5),
        explanation="Waiting for 8 cards to be free in partition train: all that fit are in use",
    )  # fmt: skip
    PendingWorkFactory(
        team=team, ref="4128", name="stage-in", kind="other", translated=False,
        reason_code="BurstBufferStageIn", explanation="BurstBufferStageIn: staging /scratch/nlp",
    )  # fmt: skip
    PendingWorkFactory(
        team=team, scheduler="kubernetes", ref="team-nlp/job-nvl-8gpu-6e6e2",
        name="job-nvl-8gpu-6e6e2", cards_requested=8, kind="topology",
        reason_code="TopologyPlacementFailed", queue="default", gres_type="",
        explanation="Waiting for 8 cards in one NVLink domain: no domain has that many free",
    )  # fmt: skip


@pytest.mark.parametrize("width", [1366, 390])
def test_waiting_work_is_explained_and_fits(page, live_server, django_user_model, tmp_path, width):
    team = TeamFactory(slug="nlp", name="NLP")
    user = django_user_model.objects.create_user("alice", password="pw-alice-123")
    MembershipFactory(team=team, user=user)
    _rows(team)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server.url, "alice", "pw-alice-123")

    page.goto(f"{live_server.url}/teams/nlp/waiting/")
    assert page.get_by_text("held by jobs 4123 and 4124").is_visible()
    assert page.get_by_text("no domain has that many free").is_visible()
    assert page.locator(".badge.warn", has_text="untranslated").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shots = Path(os.environ.get("BROWSER_SHOTS") or tmp_path)
    page.screenshot(path=str(shots / f"waiting-{width}.png"), full_page=True)

    page.select_option("select[name=kind]", "topology")
    page.wait_for_url("**kind=topology**")
    # polled: wait_for_function eval()s its string, which the page's CSP refuses
    deadline = time.monotonic() + 10
    while page.evaluate("document.querySelectorAll('#table tbody tr').length") != 1:
        assert time.monotonic() < deadline, "the filtered table did not come"
        page.wait_for_timeout(100)
    assert page.get_by_text("job-nvl-8gpu-6e6e2").first.is_visible()
    assert not page.get_by_text("train-4125").is_visible()


def test_the_empty_state(page, live_server, django_user_model):
    team = TeamFactory(slug="nlp", name="NLP")
    user = django_user_model.objects.create_user("alice", password="pw-alice-123")
    MembershipFactory(team=team, user=user)
    log_in(page, live_server.url, "alice", "pw-alice-123")
    page.goto(f"{live_server.url}/teams/nlp/waiting/")
    assert page.get_by_text("Nothing of NLP is waiting").is_visible()
