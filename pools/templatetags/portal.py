"""Template helpers for list pages: sortable headers and query-string building."""

import re

from django import template
from django.http import QueryDict
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from pools.serving.precision import SHOWN_PLACES, signal_shown
from pools.web.numbers import card_hours_text
from pools.web.numbers import grouped as grouped_number
from pools.web.pages import mig_slices_text, node_url

register = template.Library()


@register.simple_tag(takes_context=True)
def sort_header(context, field: str, label: str, numeric: bool = False, essential: bool = False):
    """A ``<th>`` whose link sorts by ``field``, toggling ascending/descending, via htmx;
    ``essential`` marks a column a phone keeps (``data-essential``, static/js/portal.js)."""
    request = context["request"]
    current = request.GET.get("ordering", "")
    query = request.GET.copy()
    query.pop("page", None)
    query["ordering"] = f"-{field}" if current == field else field
    arrow = " ▲" if current == field else (" ▼" if current == f"-{field}" else "")
    url = f"?{query.urlencode()}"
    return format_html(
        '<th class="{}"{}><a href="{}" hx-get="{}" hx-target="#table" hx-push-url="true">'
        "{}{}</a></th>",
        "num" if numeric else "",
        " data-essential" if essential else "",
        url,
        url,
        label,
        arrow,
    )


@register.simple_tag(name="node_url")
def node_url_tag(hostname: str, cluster_slug: str | None = None) -> str:
    """``{% node_url hostname cluster_slug %}``: :func:`pools.web.node_url`."""
    return node_url(hostname, cluster_slug)


@register.simple_tag(takes_context=True)
def with_query(context, **changes):
    """The current query string with ``changes`` applied (a value of None removes the key)."""
    query: QueryDict = context["request"].GET.copy()
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    return f"?{query.urlencode()}"


@register.filter
def grouped(value, places: int = 0):
    """``{{ value|grouped:1 }}`` -> ``184 552 847.0``: :func:`pools.web.numbers.grouped` (the
    house grouping, a narrow no-break space; never the locale's comma); ``None`` -> ``—``."""
    if value is None or value == "":
        return "—"
    return grouped_number(value, int(places))


@register.filter
def break_at_dots(code) -> SafeString:
    """``{{ e.action|break_at_dots }}`` -> ``request<wbr>.submitted``: a dotted code, escaped,
    free to wrap before each dot and nowhere else (with ``code.dotted``'s CSS, which stops
    ``code``'s break-anywhere), so a narrow cell never splits ``submit`` / ``ted``."""
    return format_html_join(mark_safe("<wbr>."), "{}", ((part,) for part in str(code).split(".")))


_MARKS = re.compile(r"(?=\.)|(?<=[-/_:=,])")
"""Where an identifier may wrap: before a dot, after a hyphen, slash, underscore, colon, equals
sign or comma (``nvidia.com/gpu.product``, ``GPU-3f1a2b4c-…``, ``vllm:num_requests_waiting``,
``GrpTRESMins=gres/gpu=600``)."""


@register.filter
def break_at_marks(code) -> SafeString:
    """``{{ gpu.uuid|break_at_marks }}`` -> ``GPU-<wbr>3f1a…``: an identifier (a slug, a UUID,
    a label, a node or scheduler object's name), escaped, free to wrap only where
    :data:`_MARKS` says (with ``code.ident``'s CSS, which stops ``code``'s break-anywhere), so
    a phone's narrow cell never splits ``nvidia.com/gpu.prod`` / ``uct``. Text without such
    marks is one unbroken run (the table scrolls rather than cut it)."""
    parts = [part for part in _MARKS.split(str(code)) if part]
    return format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts))


@register.filter
def card_hours(value):
    """``{{ value|card_hours }}`` -> ``2 976.000``: card-hours as every page shows them, to the
    statements' 3 places (:func:`pools.web.numbers.card_hours_text`); ``None`` -> ``—``."""
    return card_hours_text(value)


@register.filter
def signal(value, name: str):
    """``{{ n.requests_waiting|signal:"requests_waiting" }}`` -> ``0.7``: a serving signal as
    pages show it and their CSVs export it (:func:`pools.serving.precision.signal_shown`),
    grouped; ``None`` (unknown) -> ``—``, and so is ``""``: a row without the newest bucket
    (``n`` an empty dict) gives the template's empty string for the signal."""
    if value == "":
        return "—"
    shown = signal_shown(name, value)
    return "—" if shown is None else grouped_number(shown, SHOWN_PLACES[name])


@register.filter
def mib_to_gib(value):
    """MiB -> GiB with two decimals, or an em dash for unknown."""
    if value is None:
        return "—"
    return f"{value / 1024:.2f}"


@register.filter
def spec(value, suffix: str = ""):
    """A catalogue number without trailing zeros (``600.0`` -> ``600``), or ``—`` if unknown."""
    if value is None or value == "":
        return "—"
    if isinstance(value, int):
        return f"{value}{suffix}"
    text = format(value.normalize() if hasattr(value, "normalize") else value, "f")
    return f"{text}{suffix}"


@register.filter
def get_item(mapping, key):
    """``mapping[key]`` in a template, ``None`` when missing."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def mig_slices(slices: dict[str, int] | None) -> str:
    """:func:`pools.web.pages.mig_slices_text` in a template."""
    return mig_slices_text(slices)
