"""Pieces every server-rendered page shares: the pool-admin guard, table columns, CSV export,
filtered and paginated lists, a service's refusal shown on its form, the chart palette."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import wraps
from urllib.parse import urlencode, urlsplit, urlunsplit

import django_filters as filters
from django import forms
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.paginator import EmptyPage, Page, Paginator
from django.forms.models import ModelChoiceIterator
from django.forms.utils import flatatt
from django.http import Http404, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.dates import MONTHS_3
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django_filters import fields as filter_fields

from pools.common.errors import DomainError
from pools.tenancy.permissions import may_administer_pools
from pools.web.csv_cells import SafeCsvWriter
from pools.web.csv_numbers import plain_number

PAGE_SIZES = (25, 50, 100, 200)
PAGE_DIGITS_MAX = 18
"""Digits a page number may have before it is past the end of any list (10^18 rows)."""


def whole_number(raw: str | None) -> int | None:
    """``raw`` (a query or form value) as a whole number when it is one ASCII digits long
    and at most :data:`PAGE_DIGITS_MAX` digits (below a bigint's limit, so it can be a row's id
    and be compared with one); ``None`` otherwise. ``str.isdigit()`` alone lets through "²",
    which ``int()`` refuses, and 5,000 digits, which ``int()`` refuses past 4,300."""
    if raw and raw.isascii() and raw.isdigit() and len(raw) <= PAGE_DIGITS_MAX:
        return int(raw)
    return None


def pool_admin_required(view):
    """Pool admins only: others get the portal's 403 page (not the Django admin login)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not may_administer_pools(request.user):
            raise PermissionDenied("This page is for pool admins.")
        return view(request, *args, **kwargs)

    return wrapper


def form_add_errors(
    form: forms.BaseForm, errors: dict[str, object], *, name_other_fields: bool = False
) -> None:
    """Show ``errors`` (``{field: message or [messages]}``) on ``form``: each on its field, a
    field the form does not have form-wide (named first, ``"Days: …"``, with
    ``name_other_fields``: the what-if forms keep ``days`` outside their fields)."""
    for field, message in errors.items():
        if field in form.fields:
            form.add_error(field, message)
        elif name_other_fields and field:
            form.add_error(None, f"{field.capitalize()}: {message}")
        else:
            form.add_error(None, message)


def form_add_domain_errors(
    form: forms.BaseForm, exc: DomainError, *, name_other_fields: bool = False
) -> None:
    """Show a service's refusal ``exc`` on ``form``: the messages of ``exc.data["errors"]``
    through :func:`form_add_errors`; without ``errors``, ``exc.message`` on the one field
    ``exc.data["field"]`` names when the form has it, else form-wide."""
    errors = exc.data.get("errors")
    if errors:
        form_add_errors(form, errors, name_other_fields=name_other_fields)
        return
    field = exc.data.get("field")
    form.add_error(field if field in form.fields else None, exc.message)


def redirect_back(request, fallback: str, *args, **kwargs) -> HttpResponseRedirect:
    """A redirect to the form's ``next`` field when it is a path of this site (``/``-rooted,
    same host, https if the request was), else to the URL named ``fallback`` (reversed with
    ``args`` / ``kwargs``): a ``next`` of another site would make a portal link an open
    redirect, and any other text (``-1``) is no page; it is never read as a view name."""
    target = request.POST.get("next", "")
    if target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return HttpResponseRedirect(target)
    return redirect(fallback, *args, **kwargs)


def _site_path(request, url: str) -> str:
    """``url`` as a path of this site (``/teams/nlp/dashboard/?tab=2``) when it is a
    ``/``-rooted path or an absolute URL of this host (``http://portal/teams/nlp/``, as
    htmx's ``HX-Current-URL`` says it), else ``""``."""
    if not url or not url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return ""
    parts = urlsplit(url)
    path = urlunsplit(("", "", parts.path, parts.query, ""))
    return path if path.startswith("/") and not path.startswith("//") else ""


def back_path(request) -> str:
    """Where a form on this page or fragment should come back to, for its ``next`` field
    (:func:`redirect_back`): the ``next`` query parameter when it is a path of this site, else
    for an htmx fragment the page it is on (``HX-Current-URL``), else this page; ``""`` when
    none is known (the form's view then redirects to its fallback)."""
    asked = _site_path(request, request.GET.get("next", ""))
    if asked:
        return asked
    if request.htmx:
        return _site_path(request, request.headers.get("HX-Current-URL", ""))
    return request.get_full_path()


@dataclass(frozen=True)
class Column:
    """A CSV column: header and how to read it from a row."""

    header: str
    value: Callable[[object], object]


class _Echo:
    def write(self, value):
        return value


def csv_response(rows: Iterable, columns: Sequence[Column], filename: str) -> StreamingHttpResponse:
    """Stream ``rows`` as CSV with ``columns``; values ``None`` become empty cells, numbers plain
    decimals (:func:`pools.web.csv_numbers.plain_number`: ``2880``, never ``2.88E+3``), and text
    that would start a spreadsheet formula is escaped (:mod:`pools.web.csv_cells`)."""
    writer = SafeCsvWriter(_Echo())

    def lines():
        yield writer.writerow([c.header for c in columns])
        for row in rows:
            yield writer.writerow(
                [None if (v := c.value(row)) is None else plain_number(v) for c in columns]
            )

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class ParameterInvalid(BadRequest):
    """A page's query parameter it cannot read (``page=abc``, ``page_size=7``, ``week=junk``):
    one 400 page, ``templates/bad_parameter.html``, naming ``parameter``, the value sent and
    what it may be (``allowed``, a phrase without a full stop), with a link to the same page
    without it (``portal.handlers.bad_request``) -- as the API answers 400 for a ``page_size``
    out of its bounds, rather than quietly showing something else.

    A parameter of the path (``/costs/nlp/2026-13/``'s month) passes the ``path_value`` sent,
    and ``back`` and ``back_text``, the address and words of a page to offer instead (the path
    has no "without it")."""

    def __init__(
        self,
        parameter: str,
        allowed: str,
        *,
        path_value: str | None = None,
        back: str = "",
        back_text: str = "",
    ):
        self.parameter, self.allowed = parameter, allowed
        self.path_value, self.back, self.back_text = path_value, back, back_text
        super().__init__(f"{parameter}: {allowed}")

    def plain(self, request) -> HttpResponse:
        """The 400 for a script that asked ``request`` for a download (``?export=``): the
        page's words in one line of plain text, ``?month=2026-13 is not a month YYYY-MM
        (2026-11); nothing was exported.`` (a script would save the HTML page as its CSV)."""
        if self.path_value is not None:
            said = f"The {self.parameter} in the address, {self.path_value[:40]!r},"
        else:
            said = f"?{self.parameter}={request.GET.get(self.parameter, '')[:40]}"
        return _plain_400(f"{said} is not {self.allowed}; nothing was exported.")


class ExportInvalid(ParameterInvalid):
    """``?export=<name>`` of a page that has no such download (``?export=xyz``): a 400 naming
    the ones it has (``exports``), never the page itself, which a script would save as its
    CSV. A browser (or htmx) gets the 400 page of :class:`ParameterInvalid`; anything else the
    same words in plain text (:meth:`plain`), as the refused filters of a download are
    (:class:`ExportFiltersInvalid`)."""

    def __init__(self, exports: Sequence[str]):
        self.exports = tuple(exports)
        super().__init__("export", "one of " + ", ".join(self.exports))

    def plain(self, request) -> HttpResponse:
        """The plain-text 400 for a script: ``No export 'xyz' here; export is one of: csv.``"""
        name, exports = request.GET.get("export", ""), ", ".join(self.exports)
        return _plain_400(f"No export {name[:40]!r} here; export is one of: {exports}.")


class ExportFiltersInvalid(ParameterInvalid):
    """A download (``?export=csv``) whose filters its page cannot use (``?gpu_model=nope``, a
    team the user may not see): never a header-only CSV (which says there are no rows) nor the
    unfiltered rows. Answered as every refused download is (``portal.handlers.bad_request``):
    a browser the 400 page naming the filters (``parameters``, the fields of ``form`` with
    errors) and :func:`filter_refusal`, with a link to the same download without them; a
    script that refusal in one line of plain text (:meth:`plain`). Raised by
    :func:`refuse_export`, which leaves htmx to the page's own fragment."""

    def __init__(self, form: forms.BaseForm):
        self.parameters = tuple(name for name in form.errors if name in form.fields)
        self.refusal = filter_refusal(form)
        super().__init__(", ".join(self.parameters) or "filters", self.refusal)

    def plain(self, request) -> HttpResponse:
        """``The filters are invalid: Team "vision": No team you can see has this slug.``"""
        return _plain_400(f"The filters are invalid: {self.refusal}")


def _plain_400(line: str) -> HttpResponse:
    return HttpResponse(f"{line}\n", status=400, content_type="text/plain; charset=utf-8")


def checked_export(request, exports: Sequence[str] = ("csv",)) -> str | None:
    """``?export=`` of a page: one of ``exports`` (its downloads, e.g. ``("csv",)``); absent
    or empty, ``None`` (the page). Raises :class:`ExportInvalid` for any other text: every
    page answers an export it has not with the same 400, not with itself (a 200 a script
    saves as the CSV) nor with a page chosen quietly. Read it before any other work."""
    name = request.GET.get("export", "")
    if name == "":
        return None
    if name not in exports:
        raise ExportInvalid(exports)
    return name


def checked_page_size(request, *, default: int = 50, sizes: Sequence[int] = PAGE_SIZES) -> int:
    """``?page_size=`` of a list page: one of ``sizes`` (the page's menu); absent or empty,
    ``default``. Raises :class:`ParameterInvalid` for any other text (a hand-written
    ``page_size=1000`` was shown 50 rows, saying nothing)."""
    raw = request.GET.get("page_size", "")
    if raw == "":
        return default
    if raw not in {str(size) for size in sizes}:  # compared as text: no int() of 5,000 digits
        raise ParameterInvalid("page_size", "one of " + ", ".join(map(str, sizes)))
    return int(raw)


def checked_page(
    request, paginator: Paginator, *, param: str = "page", refused: bool = False
) -> Page:
    """The page of ``paginator`` that ``?<param>=`` names, checked as the API checks it: absent
    or empty, page 1; a whole number from 1 past the last page is :class:`Http404` (as
    DRF's ``Invalid page.``); anything else (``-1``, ``0``, ``abc``) is
    :class:`ParameterInvalid`. Django's ``get_page`` showed the last page for all of them.
    ``refused``: the list's filters were refused (no rows), so its one empty page whatever
    ``?<param>=`` says, for the page's 400 to say why (``?team=vision&page=2`` was a 404,
    "nothing here"). The one page reader of every HTML list; counts the rows once
    (``paginator.count``)."""
    raw = request.GET.get(param, "")
    if raw == "" or refused:
        return paginator.page(1)
    if not (raw.isascii() and raw.isdigit() and raw.strip("0")):
        raise ParameterInvalid(param, "a whole number from 1")
    if len(raw) > PAGE_DIGITS_MAX:  # past any last page; int() refuses over 4,300 digits
        raise Http404(f"{param}: page {raw[:PAGE_DIGITS_MAX]}… is past the last page.")
    try:
        return paginator.page(int(raw))
    except EmptyPage:
        raise Http404(
            f"{param}: page {int(raw)} is past the last page ({paginator.num_pages})."
        ) from None


def filter_refusal(form: forms.BaseForm) -> str:
    """The errors of a bound, invalid filter ``form`` (a FilterSet's ``.form``) as one readable
    line, each field by its label and the value sent: ``Team "vision": No team you can see has
    this slug.`` (an ``ordering`` also lists the sort keys there are); errors of no field last,
    as they are. Fields follow one another as sentences (``…choices. Team "vision": …``), with
    ``; `` only after a message that ends no sentence."""
    parts = []
    for name, messages in form.errors.items():
        field = form.fields.get(name)
        if field is None:
            parts.append(" ".join(messages))
            continue
        label = form[name].label  # the field's label, else its name as a label ("Until")
        value = form.data.get(name, "")
        named = f'{label} "{value}"' if value else str(label)
        said = " ".join(messages)
        if name == "ordering":  # a sort key from a hand-written link: say which exist
            keys = ", ".join(str(key) for key, _ in field.choices if key)
            said = f"{said} Sort by one of: {keys}."
        parts.append(f"{named}: {said}")
    # a part that ends a sentence is followed by the next as a sentence, never by ".;"
    return "".join(
        part if i == len(parts) - 1 else part + (" " if part.endswith((".", "!", "?")) else "; ")
        for i, part in enumerate(parts)
    )


def refuse_export(request, form: forms.BaseForm) -> None:
    """A download's (``?export=``) answer to the filters of ``form`` it cannot use, as every
    page gives it: raises :class:`ExportFiltersInvalid` (the 400 page for a browser, one line
    of text for a script); returns for htmx, whose caller answers the fragment its page uses,
    with the refusal, as it does without ``export``."""
    if not request.htmx:
        raise ExportFiltersInvalid(form)


def filtered_list(
    request, *, queryset, filterset_class, template, columns, filename, default_ordering, extra=None
):
    """Render a filterable, sortable, paginated list page, its htmx fragment, or its CSV.

    Filters it cannot use (a team the user may not see, an ``ordering`` it does not sort by)
    answer 400, as the API does: the page (or fragment) with the errors on the form and in
    ``refusal``, no rows; the CSV :func:`refuse_export`. ``?export=`` other than ``csv``
    is :func:`checked_export`'s 400.
    ``page`` and ``page_size`` are read by :func:`checked_page` / :func:`checked_page_size`."""
    export = checked_export(request)
    params = request.GET
    filterset = filterset_class(params or None, queryset=queryset, request=request)
    refused = filterset.is_bound and not filterset.is_valid()
    if not filterset.is_bound:
        rows = queryset
    else:
        # An invalid filter shows its error over no rows, never the unfiltered list (or CSV).
        rows = queryset.none() if refused else filterset.qs
    if not params.get("ordering"):
        rows = rows.order_by(*default_ordering)
    if refused and export:
        refuse_export(request, filterset.form)  # htmx: the table says why, as without export
    elif export == "csv":
        return csv_response(rows.iterator(chunk_size=2000), columns, filename)
    page = checked_page(request, Paginator(rows, checked_page_size(request)), refused=refused)
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "filterset": filterset,
        "refusal": filter_refusal(filterset.form) if refused else "",
        "page": page,
        "query": query.urlencode(),
        "ordering": params.get("ordering", ""),
        "page_sizes": PAGE_SIZES,
        **(extra or {}),
    }
    name = f"{template}#table" if request.htmx else template
    response = render(request, name, context, status=400 if refused else 200)
    patch_vary_headers(response, ["HX-Request"])
    return response


# Colour-blind-safe qualitative palette (Okabe–Ito).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442"]


class PlainSelect(forms.Select):
    """A ``<select>`` built in Python. Django renders each option through a template, about
    0.3 ms each: too slow for a list of every team of a fleet (1,600 teams, 0.5 s); and
    ``format_html`` per option still took 18 ms for them, so the options are escaped as
    ``conditional_escape`` does and joined once (3 ms). Used for the team pickers."""

    def render(self, name, value, attrs=None, renderer=None):
        selected = {str(v) for v in self.format_value(value)}

        def esc(text) -> str:
            return text.__html__() if hasattr(text, "__html__") else html.escape(str(text))

        options = mark_safe(
            "".join(
                f'<option value="{esc(key)}"'
                f"{' selected' if str(key) in selected else ''}>{esc(label)}</option>"
                for key, label in self.choices
            )
        )
        return format_html(
            '<select name="{}"{}>{}</select>',
            name,
            flatatt(self.build_attrs(self.attrs, attrs)),
            options,
        )


class SlugChoiceField(forms.ModelChoiceField):
    """The pickers of the pages' forms (team, pool, GPU model, workload class): a row of
    ``queryset`` sent and read back by its ``slug`` and listed in ``order`` (by ``name``
    unless told; ``None`` keeps the model's own ordering). A slug the queryset does not hold
    is "Select a valid choice." on the field."""

    def __init__(self, queryset, *, order: str | None = "name", **kwargs):
        if queryset is not None and order is not None:
            queryset = queryset.order_by(order)
        super().__init__(queryset=queryset, to_field_name="slug", **kwargs)


class _SlugNameChoices(ModelChoiceIterator):
    """The options of a :class:`SlugNameChoiceField`: the empty choice, then ``(key, name)``
    rows of one ``values_list`` query, no model instance per option (the team picker of a
    pool admin's request and allocation lists built 10,080 Teams at 100k GPUs)."""

    def __iter__(self):
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        yield from self.queryset.values_list(self.field.to_field_name, "name")


class SlugNameChoiceField(filter_fields.ModelChoiceField):
    """A model chosen by its ``to_field_name`` (a slug) from a :class:`PlainSelect` labelled
    by the model's ``name`` column; the chosen value is resolved by one ``get`` query and is
    "Select a valid choice." when the queryset does not hold it. No null choice."""

    iterator = _SlugNameChoices
    widget = PlainSelect


class SlugNameChoiceFilter(filters.ModelChoiceFilter):
    """:class:`django_filters.ModelChoiceFilter` through :class:`SlugNameChoiceField`: for the
    pickers of every team of a fleet."""

    field_class = SlugNameChoiceField


def minute_text(value: datetime) -> str:
    """``value`` as the template filter ``date:"d M Y H:i"`` writes it (``07 Dec 2026 13:05``,
    the month's abbreviation translated, in the current time zone), without the template
    machinery: 40 µs a call there, for the rows of lists that show many."""
    local = timezone.localtime(value)
    month = str(MONTHS_3[local.month]).title()
    return f"{local.day:02d} {month} {local.year:04d} {local.hour:02d}:{local.minute:02d}"


def node_url(hostname: str, cluster_slug: str | None) -> str:
    """The page of the node ``hostname`` of the cluster of slug ``cluster_slug`` (``None`` or
    empty: a node of no cluster, the environment's): ``/nodes/<hostname>/?cluster=<slug>``. Host
    names are unique per cluster only, so every link to a node page names its cluster."""
    url = reverse("pools:node-detail", args=[hostname])
    return f"{url}?{urlencode({'cluster': cluster_slug})}" if cluster_slug else url


class UrlOfId:
    """``reverse(name, args=[pk])`` for many ids with one ``reverse``: the URL is resolved once
    with a placeholder id, then the id substituted (``name``'s pattern takes one ``<int:…>``)."""

    _PLACEHOLDER = 9_876_543_210

    def __init__(self, name: str):
        self._head, self._tail = reverse(name, args=[self._PLACEHOLDER]).split(
            str(self._PLACEHOLDER)
        )

    def __call__(self, pk: int) -> str:
        return f"{self._head}{int(pk)}{self._tail}"

    @property
    def head(self) -> str:
        """The URL before the id (for a template that writes ``head`` + id + ``tail``)."""
        return self._head

    @property
    def tail(self) -> str:
        return self._tail


def mig_slices_text(slices: dict[str, int] | None) -> str:
    """MIG slices by profile as pages and CSV show them: ``{"1g.10gb": 9, "2g.20gb": 2}`` →
    "9 × 1g.10gb, 2 × 2g.20gb"; "" when there are none."""
    return ", ".join(f"{n} × {profile}" for profile, n in sorted((slices or {}).items()))
