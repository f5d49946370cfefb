"""One number format on every page: thousands grouped with a narrow no-break space
(``pools.web.numbers.grouped``, ISO 31-0), never the locale's comma ("184,552,847"); a number
and its unit kept together; codes shown in words."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from django.template import Context, Template

from pools.serving.views import _current_rows
from pools.templatetags.elastic import scale_reason

TEMPLATES = Path(__file__).resolve().parents[3] / "templates"
NNBSP = "\u202f"


def test_no_template_groups_with_the_locales_separator():
    """``floatformat:"0g"`` and ``intcomma`` group with the active locale's separator (en-gb:
    a comma); pages use ``|grouped`` (or the money filters) instead."""
    found = [
        f"{path.relative_to(TEMPLATES)}: {match.group(0)}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for match in re.finditer(r'floatformat:"-?\d*g"|intcomma', path.read_text())
    ]
    assert found == []


def test_the_grouped_filter():
    template = Template("{% load portal %}{{ a|grouped }}|{{ b|grouped:1 }}|{{ c|grouped:1 }}")
    text = template.render(Context({"a": 184552847, "b": Decimal("1343.26"), "c": None}))
    assert text == f"184{NNBSP}552{NNBSP}847|1{NNBSP}343.3|—"


def test_serving_now_groups_nvlink_as_the_other_numbers():
    """1.355e9 B/s shown in MB/s (÷ 10^6) is 1 355, not "1,355"."""
    rows = {r["label"]: r["value"] for r in _current_rows({"nvlink_bytes_s": 1.355e9})}
    assert rows["NVLink"] == f"1{NNBSP}355"


def test_scale_reasons_in_words():
    assert scale_reason("hand_back") == "handed back"
    assert scale_reason("no_free_cards") == "no free cards to lend"
    assert scale_reason("budget_exceeded") == "over the budget"
    assert scale_reason("scale_up") == "load high"
    assert scale_reason("a_newer_code") == "a newer code"  # wraps between words
