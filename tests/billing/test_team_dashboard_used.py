"""The team dashboard's used / held card-hours compare like with like: Slurm accounting's
card-hours of jobs inside the team's allocations over the card-hours those allocations held;
jobs run outside any allocation are shown apart. A Slurm allocation without a metered job used
0 card-hours once accounting was imported past its start; a Kubernetes one is unknown."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from unittest import mock

import pytest
from factories import AllocationFactory, PoolFactory, UsageImportFactory, UsageRecordFactory

from billing.dashboards.costs import team_used_card_hours, used_share
from pools.common.choices import AllocationStatus, Scheduler

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
HOUR = 3600


@pytest.fixture
def month(team):
    """Team nlp in December 2026, seen at 10 Dec 12:00 UTC:

    - #A Slurm, 2 cards, 1 Dec 00:00 -> 21 Dec: held 2 x 228 h = 456 card-h; jobs inside it
      metered 114 card-h.
    - #B Slurm, 1 card, 8 Dec 12:00 -> 20 Dec: held 48 card-h, no job metered; accounting
      imported up to 10 Dec 11:00 (after its start): it used 0.
    - #K Kubernetes, 1 card, 9 Dec 12:00 -> 20 Dec: held 24 card-h, not metered per job.
    - 50 card-h of jobs in no allocation this month, 10 card-h of them in November.

    Known usage: #A and #B, held 456 + 48 = 504; used inside 114, so 114 / 504 = 22.6 % ->
    23 %. #K's 24 card-h are left out (counted as idle it read 114 / 528 = 22 %; counting the
    50 outside as the card once did: 164 / 528 = 31 %)."""
    slurm = PoolFactory(scheduler=Scheduler.SLURM, slurm_partition="train")
    ends = datetime(2026, 12, 20, tzinfo=UTC)
    a = AllocationFactory(team=team, pool=slurm, card_count=2, status=AllocationStatus.ACTIVE,
                          starts_at=datetime(2026, 12, 1, tzinfo=UTC),
                          ends_at=datetime(2026, 12, 21, tzinfo=UTC))  # fmt: skip
    b = AllocationFactory(team=team, pool=slurm, card_count=1, status=AllocationStatus.ACTIVE,
                          starts_at=datetime(2026, 12, 8, 12, tzinfo=UTC),
                          ends_at=ends)  # fmt: skip
    k = AllocationFactory(team=team, card_count=1, status=AllocationStatus.ACTIVE,
                          starts_at=datetime(2026, 12, 9, 12, tzinfo=UTC),
                          ends_at=ends)  # fmt: skip
    accounting = {"source": "slurm-accounting", "unit": "card-seconds"}
    UsageRecordFactory(team=team, allocation=a, basis="included", quantity=Decimal(114 * HOUR),
                       period_start=datetime(2026, 12, 2, tzinfo=UTC), **accounting)  # fmt: skip
    UsageRecordFactory(team=team, basis="used", quantity=Decimal(50 * HOUR),
                       period_start=datetime(2026, 12, 3, tzinfo=UTC), **accounting)  # fmt: skip
    UsageRecordFactory(team=team, basis="used", quantity=Decimal(10 * HOUR),
                       period_start=datetime(2026, 11, 20, tzinfo=UTC), **accounting)  # fmt: skip
    UsageImportFactory(source="slurm-accounting", window_start=datetime(2026, 12, 1, tzinfo=UTC),
                       window_end=datetime(2026, 12, 10, 11, tzinfo=UTC))  # fmt: skip
    return a, b, k


def _plain(html: bytes) -> str:
    text = html.decode().replace("\u00a0", " ").replace("\u202f", " ").replace("&nbsp;", " ")
    return re.sub(r"\s+", " ", text)


def test_used_splits_inside_from_outside(team, month):
    a, b, k = month
    inside, outside = team_used_card_hours(
        team_id=team.pk, month=datetime(2026, 12, 1).date(), allocation_ids=[a.pk, b.pk, k.pk]
    )
    assert (inside, outside) == (Decimal(114), Decimal(50))


def test_the_card_compares_used_inside_with_held(client, team, team_member, month):
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = _plain(client.get(f"/teams/{team.slug}/dashboard/").content)
    used_held = re.search(r'id="used-held"><div class="value">([^<]*)<', page).group(1)
    share = re.search(r'id="used-share"><div class="value">([^<]*)<', page).group(1)
    outside = re.search(r'id="used-outside"><div class="value">([^<]*)<', page).group(1)
    assert (used_held, share, outside) == ("114.000 / 504.000", "23 %", "50.000")
    assert "usage not imported for 1 allocation (24.000 card-h held), left out" in page


def test_unknown_usage_is_left_out_not_counted_as_idle(client, team, team_member, month):
    """Only #K (unknown) and a Slurm allocation with known usage #B: 0 of 48 held = 0 %, #K's
    24 card-h apart. With #B gone too nothing is known: the card says unknown, not 0 %."""
    a, b, k = month
    a.delete()
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = _plain(client.get(f"/teams/{team.slug}/dashboard/").content)
    assert (
        re.search(r'id="used-held"><div class="value">([^<]*)<', page).group(1) == "0.000 / 48.000"
    )
    assert re.search(r'id="used-share"><div class="value">([^<]*)<', page).group(1) == "0 %"
    assert "usage not imported for 1 allocation (24.000 card-h held), left out" in page

    b.delete()
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = _plain(client.get(f"/teams/{team.slug}/dashboard/").content)
    values = re.findall(r'id="used-(?:held|share)"><div class="value">(.*?)</div>', page)
    assert [re.sub(r"<[^>]+>", "", v) for v in values] == ["unknown", "unknown"]
    assert "usage not imported for 1 allocation (24.000 card-h held), left out" in page


def test_used_share_sums_known_and_unknown_apart():
    """Held 100 known + 30 known + 24 unknown + 0 unknown (ended before the month): 20 used of
    130 known = 15.4 % -> 15 %; one allocation unknown with 24 card-h (the idle one is none)."""
    share = used_share(
        used=Decimal(20),
        held=[(Decimal(100), True), (Decimal(30), True), (Decimal(24), False), (Decimal(0), False)],
    )
    assert (share.used, share.held, share.unknown, share.unknown_held, share.percent) == (
        Decimal(20), Decimal(130), 1, Decimal(24), 15,
    )  # fmt: skip
    assert used_share(used=Decimal(0), held=[(Decimal(24), False)]).percent is None


def test_the_used_column_fills_slurm_allocations(client, team, team_member, month):
    """#A 114.0 of 456.0 = 25 %; #B 0.0 of 48.0 = 0 %; #K on Kubernetes unknown."""
    a, b, k = month
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = _plain(client.get(f"/teams/{team.slug}/dashboard/").content)
    cells = {}
    for allocation in month:
        row = re.search(rf">{allocation.pk}</a></td>(.*?)</tr>", page).group(1)
        cells[allocation.pk] = re.findall(r'<td class="num">(.*?)</td>', row)[1:]
    assert cells[a.pk] == ["456.000", "114.000", "25 %"]
    assert cells[b.pk] == ["48.000", "0.000", "0 %"]
    assert [re.sub(r"<[^>]+>", "", c) for c in cells[k.pk]] == ["24.000", "—", "—"]


def test_before_accounting_reached_it_a_slurm_allocation_is_unknown(
    client, team, team_member, month
):
    """Accounting imported only up to 8 Dec 00:00, before #B started: its use is unknown."""
    from billing.models import UsageImport

    UsageImport.objects.update(window_end=datetime(2026, 12, 8, tzinfo=UTC))
    a, b, k = month
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = _plain(client.get(f"/teams/{team.slug}/dashboard/").content)
    row = re.search(rf">{b.pk}</a></td>(.*?)</tr>", page).group(1)
    used = re.findall(r'<td class="num">(.*?)</td>', row)[2]
    assert re.sub(r"<[^>]+>", "", used) == "—"
