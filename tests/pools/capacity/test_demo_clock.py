"""The demo's stand-in for Celery beat (issue #37): ``manage.py demo_clock`` moves allocations
with the clock, and an allocation's page says who will apply it when its window opens."""

from __future__ import annotations

import html
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from factories import AllocationFactory

from pools.capacity.models import Allocation

pytestmark = pytest.mark.django_db


def test_one_tick_opens_a_started_window_and_ends_a_finished_one(team, infer_pool, l40s):
    """Against the real clock: a window that opened an hour ago becomes active, one that ended
    6 minutes ago ends, one that opens tomorrow (beyond the 15-minute provisioning lead) waits."""
    now = timezone.now()

    def alloc(status, start_h, end_h):
        return AllocationFactory(
            team=team, pool=infer_pool, gpu_model=l40s, status=status,
            starts_at=now + timedelta(hours=start_h), ends_at=now + timedelta(hours=end_h),
        )  # fmt: skip

    opened, over, later = (
        alloc("approved", -1, 240),
        alloc("active", -100, -0.1),
        alloc("approved", 24, 240),
    )
    out = io.StringIO()

    call_command("demo_clock", "--once", stdout=out)

    assert out.getvalue() == "demo clock: 1 provisioned, 0 expiring, 1 ended\n"
    status = dict(Allocation.objects.values_list("pk", "status"))
    assert [status[a.pk] for a in (opened, over, later)] == ["active", "ended", "approved"]


def test_a_clock_of_no_seconds_is_refused():
    with pytest.raises(CommandError, match="at least 1 second"):
        call_command("demo_clock", "--every", "0")


@pytest.mark.parametrize(
    ("clock_s", "words"),
    [
        (0, "the allocation-lifecycle task (Celery beat), every 5 min"),
        (30, "the demo's clock, every 30 s"),
    ],
)
def test_the_allocation_page_says_who_applies_it_when_its_window_opens(
    settings, team, team_member, infer_pool, l40s, clock_s, words
):
    settings.DEMO_CLOCK_S = clock_s
    start = (timezone.now() + timedelta(days=2)).replace(second=0, microsecond=0)
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, starts_at=start)
    client = Client()
    client.force_login(team_member)

    page = html.unescape(client.get(f"/requests/{allocation.request_id}/").content.decode())

    when = timezone.localtime(start).strftime("%Y-%m-%d %H:%M")
    assert f"applied when its window opens ({when} " in page
    assert f") by {words}</span>" in page


def test_one_tick_expires_an_override_past_its_until(team, infer_pool, l40s):
    """Beat's ``override-expire`` runs on the demo's clock too: an L40S ceiling raised to 8
    until 10 minutes ago expires (and its scheduler objects are put back: restored); one
    until tomorrow stays active."""
    from factories import TemporaryOverrideFactory

    from pools.overrides.models import TemporaryOverride

    now = timezone.now()
    past = TemporaryOverrideFactory(team=team, pool=infer_pool, gpu_model=l40s,
                                    created_at=now - timedelta(days=2),
                                    until=now - timedelta(minutes=10))  # fmt: skip
    later = TemporaryOverrideFactory(team=team, pool=infer_pool, kind="borrowing_limit",
                                     gpu_model=l40s, created_at=now - timedelta(days=1),
                                     until=now + timedelta(days=1))  # fmt: skip
    out = io.StringIO()

    call_command("demo_clock", "--once", stdout=out)

    assert out.getvalue() == (
        "demo clock: 0 provisioned, 0 expiring, 0 ended; overrides: 1 expired, 1 restored, "
        "0 errors\n"
    )
    status = dict(TemporaryOverride.objects.values_list("pk", "status"))
    assert (status[past.pk], status[later.pk]) == ("expired", "active")


def test_an_override_names_its_team_pool_and_model():
    """``__str__`` (audit rows, the admin) uses names, not slugs."""
    from factories import TemporaryOverrideFactory

    override = TemporaryOverrideFactory(team__name="Vision", pool__name="Inference")

    # the kind's label (OverrideKind.CEILING) and the catalogue's name of a100_80g_sxm
    assert str(override) == "Ceiling (card cap) of Vision in Inference → 8 × A100 SXM4 80GB"
