"""pools.web.widgets: the date input writes what the browser's date input reads."""

from __future__ import annotations

from datetime import date

from billing.tokenflow.forms import TokenFlowFilterForm
from pools.web.widgets import IsoDateInput


def test_a_date_is_written_yyyy_mm_dd_whatever_the_sites_date_format(settings):
    # en-gb's first DATE_INPUT_FORMATS writes 06/12/2026, which <input type="date"> shows empty
    settings.LANGUAGE_CODE = "en-gb"
    html = IsoDateInput().render("since", date(2026, 12, 6))

    assert 'type="date"' in html and 'value="2026-12-06"' in html


def test_the_token_flow_filters_write_their_dates_for_the_date_input():
    form = TokenFlowFilterForm(
        initial={"since": date(2026, 11, 1), "until": date(2026, 11, 30)},
        models=[],
        today=date(2026, 12, 6),
    )

    assert 'value="2026-11-01"' in str(form["since"]) and 'value="2026-11-30"' in str(form["until"])
