"""Django's error handlers (``handler400`` / ``handler404`` / ``handler500`` in
``portal.urls``): JSON with a machine-readable ``code`` under ``/api/``, the portal's pages
elsewhere.

DRF answers the errors of the API's own views (``portal.api.exception_handler``); these cover
what never reaches a view — a path no route matches, and an exception raised by middleware
(the database refusing the session or token lookup) or past DRF. A request cut short by its
deadline (:class:`RequestTimeout`) or a database that does not answer is a 503 with
``Retry-After``, not a 500: the caller may try again.
"""

from __future__ import annotations

import sys

from django.db.utils import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

from pools.web.pages import ExportFiltersInvalid, ParameterInvalid

RETRY_AFTER_S = 30


class RequestTimeout(Exception):
    """The request ran past ``REQUEST_TIMEOUT_S`` (portal.middleware.RequestDeadlineMiddleware)."""


def unavailable_body(exc: BaseException | None) -> tuple[dict, int] | None:
    """``(body, status)`` for an error the caller may retry, else ``None``: a request past its
    deadline (``timeout``) or a database that does not answer (``database_unavailable``)."""
    if isinstance(exc, RequestTimeout):
        return {
            "code": "timeout",
            "detail": "The request took too long and was stopped; nothing it started was "
            "committed unless its answer said so. Try again, or use a smaller request.",
        }, 503
    if isinstance(exc, OperationalError | InterfaceError):
        return {
            "code": "database_unavailable",
            "detail": "The database is not answering; try again shortly.",
        }, 503
    return None


def _json(body: dict, status: int) -> JsonResponse:
    response = JsonResponse(body, status=status)
    if status == 503:
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def page_not_found(request, exception):
    if request.path.startswith("/api/"):
        return _json({"code": "not_found", "detail": "No API operation at this path."}, 404)
    return defaults.page_not_found(request, exception)


def bad_request(request, exception):
    """Django's 400 for a request it would not read (a ``SuspiciousOperation``, e.g. more
    fields than ``DATA_UPLOAD_MAX_NUMBER_FIELDS``), raised before any view or inside one."""
    if request.path.startswith("/api/"):
        return _json(
            {
                "code": "bad_request",
                "detail": "The request has more fields or files than the portal reads, or is "
                "otherwise malformed; nothing was changed.",
            },
            400,
        )
    if isinstance(exception, ParameterInvalid):
        if request.GET.get("export") and not _from_browser(request):
            return exception.plain(request)  # a script's download: one line, never a page
        return _parameter_page(request, exception)
    return defaults.bad_request(request, exception)


def _from_browser(request) -> bool:
    """Whether the request asked for a page: htmx's, or one that names ``text/html`` in
    ``Accept`` (browsers do; ``curl`` and scripts send ``*/*``, ``text/csv`` or nothing).
    A download (``?export=``) refused for any parameter (the export's name, its filters,
    the month of its page) answers a browser the 400 page, a script one line of text."""
    return _htmx(request) or "text/html" in request.headers.get("Accept", "")


def _htmx(request) -> bool:
    """``request.htmx`` (``portal.middleware.PageHtmxDetails``: false for a history restore,
    which wants the whole page); false for a request refused before that middleware."""
    return bool(getattr(request, "htmx", False))


def _parameter_page(request, exception: ParameterInvalid) -> HttpResponse:
    """The 400 page of a query parameter a page cannot read: which one, the value sent, what
    it may be, and a link to the same page without it (its other parameters kept); of a part
    of the path, a link to the page the view offers instead. Raised
    inside a view, so the request has its user: the portal's layout, or for htmx only the
    message (``bad_parameter.html#message``)."""
    query = request.GET.copy()
    query.pop(exception.parameter, None)
    context = {
        "parameter": exception.parameter,
        "value": request.GET.get(exception.parameter, ""),
        "allowed": exception.allowed,
        "back": f"{request.path}?{query.urlencode()}" if query else request.path,
        "in_path": exception.path_value is not None,
    }
    if exception.path_value is not None:  # a part of the path: no page "without it"
        context.update(
            value=exception.path_value, back=exception.back, back_text=exception.back_text
        )
    if isinstance(exception, ExportFiltersInvalid):
        context.update(_filters_context(request, exception))
    template = "bad_parameter.html#message" if _htmx(request) else "bad_parameter.html"
    return render(request, template, context, status=400)


def _filters_context(request, exception: ExportFiltersInvalid) -> dict:
    """What the 400 page says of a download's filters it could not use: their names, the
    refusal, and two ways on: the same download without them, and the page with them (its
    form shows each error on its field)."""
    without = request.GET.copy()
    for name in exception.parameters:
        without.pop(name, None)
    page = request.GET.copy()
    page.pop("export", None)
    return {
        "refusal": exception.refusal,
        "filters": exception.parameters,
        "back": f"{request.path}?{without.urlencode()}",
        "page": f"{request.path}?{page.urlencode()}" if page else request.path,
    }


def server_error(request):
    unavailable = unavailable_body(sys.exc_info()[1])
    if request.path.startswith("/api/"):
        if unavailable is not None:
            return _json(*unavailable)
        return _json({"code": "server_error", "detail": "An internal error; it is logged."}, 500)
    if unavailable is None:
        return defaults.server_error(request)
    # templates/503.html: rendered with no request context, so it needs no database.
    response = defaults.server_error(request, template_name="503.html")
    response.status_code = 503
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
