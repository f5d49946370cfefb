"""QA (h-qa): the pools page's driver-group table after the MIG column was added (issue #38).

At 1366 × 900 with the demo's data the driver-group table (Branch, Drivers seen, Max CUDA,
Nodes, GPUs, In MIG mode) is wider than its card: it is not inside a ``.table-wrap`` that
scrolls, so its last column runs under the next card ("Which pools can run CUDA…?"). Measured
on the demo: the "In MIG mode" header spans x = 590–704 px, the card ends at 677 px, and the
point at the header's right edge is the next card's CUDA input. Every column a person is meant
to read must be on screen (or reachable by scrolling its own card).
"""

from __future__ import annotations

import pytest
from browser_support import log_in
from django.core.management import call_command

pytestmark = pytest.mark.browser


def test_every_driver_group_column_is_readable_on_a_laptop(browser, live_server):
    call_command("load_demo", verbosity=0)
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    log_in(page, live_server.url, "admin")

    page.goto(f"{live_server.url}/pools/")
    hidden = page.evaluate(
        """() => [...document.querySelectorAll('table th')].filter(th => {
            const r = th.getBoundingClientRect();
            const hit = document.elementFromPoint(r.right - 2, r.top + r.height / 2);
            return !(hit && (hit === th || th.contains(hit)));
        }).map(th => th.textContent.trim())"""
    )
    context.close()

    assert hidden == []
