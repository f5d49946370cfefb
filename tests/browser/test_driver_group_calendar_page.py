"""A driver group's week calendar on a phone: a group whose nodes sit in one pool × GPU model
has one column of free cards beside the days, and its figures must read whole."""

from __future__ import annotations

import pytest
from factories import PoolFactory, node_with_gpus
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_one_column_of_free_cards_reads_whole_at_390_px(signed_in, live_server):
    """The demo's R535: 48 A100 SXM4 80GB in "Training (Slurm)". At 390 px the column's
    heading ("Training (Slurm) · A100 SXM4 80GB", kept on one line) made the table 18 px wider
    than its card, and the right-aligned figures showed their first digit: 48 free read "4".
    The heading now wraps; the table fits and nothing scrolls sideways inside it."""
    train = PoolFactory(slug="train-slurm", name="Training (Slurm)", slurm_partition="train")
    for host in range(6):
        node_with_gpus(8, hostname=f"trn-a100-{host:02d}", pool=train, driver_version="535.129.03")
    page = signed_in
    page.set_viewport_size({"width": 390, "height": 844})

    page.goto(f"{live_server.url}/driver-groups/535/calendar/")

    table = page.locator("#group-days")
    expect(table).to_contain_text("R535 has 48")
    expect(table.locator("tbody td.num").first).to_have_text("48")
    assert table.evaluate("t => t.scrollWidth <= t.clientWidth")
