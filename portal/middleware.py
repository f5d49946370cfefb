"""The portal's own middleware: sign-in required on pages, API body size, control characters,
deferred jobs, the request deadline, and htmx's history restore answered with whole pages.

Login is required everywhere except the login page, health probes, the API, the OIDC callback and
``/metrics`` (Prometheus scrapes it without a session; it holds counts and timings, no data).

The API authenticates on its own (token or session, in DRF) and answers 401/403 as JSON instead of
redirecting to the login page.
"""

import json
import re
import signal
import threading

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.middleware import LoginRequiredMiddleware as _DjangoLoginRequired
from django.core.exceptions import BadRequest, RequestDataTooBig
from django.http import Http404, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.utils.cache import has_vary_header, patch_vary_headers
from django_htmx.middleware import HtmxDetails

from pools.common.validators import CONTROL_CHARACTERS
from pools.jobs.outbox import deferred_unwatch, deferred_watch
from portal.handlers import RequestTimeout

QUEUED_DEFERRED = "Saved. Its background work is queued and will run when the broker is back."


class LoginRequiredMiddleware(_DjangoLoginRequired):
    """Django's LoginRequiredMiddleware, exempting ``/api/`` (DRF enforces its own auth) and
    ``/metrics``."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path.startswith(("/api/", "/oidc/")) or request.path == "/metrics":
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


def api_body_limit_bytes(content_type: str) -> int:
    """Largest API request body accepted, in bytes: ``DATA_UPLOAD_MAX_MEMORY_SIZE`` for JSON
    and form bodies; multipart ones may also carry an inventory file
    (``INVENTORY_UPLOAD_MAX_BYTES``).
    """
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if content_type.startswith("multipart/"):
        limit += settings.INVENTORY_UPLOAD_MAX_BYTES
    return limit


def request_too_large_response(limit: int) -> JsonResponse:
    return JsonResponse(
        {
            "code": "request_too_large",
            "detail": f"The request body is larger than {limit} bytes.",
            "data": {"limit_bytes": limit},
        },
        status=413,
    )


class ApiBodyLimitMiddleware:
    """Refuse an API request whose declared body is over the limit with a JSON 413, before any
    middleware or view reads it (Django's own check would answer an HTML 400 page).

    Bodies without a ``Content-Length`` are still cut off by Django's limit while being read;
    the API's exception handler turns that ``RequestDataTooBig`` into the same 413.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            limit = api_body_limit_bytes(request.META.get("CONTENT_TYPE", ""))
            if length > limit:
                return request_too_large_response(limit)
        return self.get_response(request)


class DeferredJobsMiddleware:
    """Tell the caller when a write committed but the broker could not take its job (it waits
    in the outbox, :mod:`pools.jobs.outbox`), instead of failing a request that succeeded.

    The answer keeps its status; it gains ``X-Queue-Status: deferred`` and, under ``/api/``
    for a JSON object body, ``"queue": {"status": "deferred", "detail": …, "jobs": n}``; a page
    shows the same words as a warning message. Sits inside MessageMiddleware, so the message
    is stored with this response.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = deferred_watch()
        try:
            response = self.get_response(request)
        finally:
            deferred = deferred_unwatch(token)
        if not deferred:
            return response
        response["X-Queue-Status"] = "deferred"
        if not request.path.startswith("/api/"):
            messages.warning(request, QUEUED_DEFERRED)
        elif response.get("Content-Type", "").startswith("application/json"):
            body = json.loads(response.content or b"null")
            if isinstance(body, dict):
                body["queue"] = {
                    "status": "deferred",
                    "detail": QUEUED_DEFERRED,
                    "jobs": len(deferred),
                }
                response.content = json.dumps(body)
        return response


def _request_timed_out(signum, frame):
    raise RequestTimeout


class RequestDeadlineMiddleware:
    """Stop a request that runs past ``REQUEST_TIMEOUT_S`` seconds with :class:`RequestTimeout`
    (a 503 with code ``timeout``: JSON under /api/, the error page elsewhere), a few seconds
    before gunicorn's worker timeout would kill the process and leave the client a dropped
    connection (the proxy's HTML 502).

    A ``SIGALRM`` timer, so only where a request runs in the main thread (gunicorn's sync
    workers, the default); elsewhere (threads: runserver, the test server) it does nothing.
    The exception unwinds the request like any other: open transactions roll back.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        budget = settings.REQUEST_TIMEOUT_S
        if not budget or threading.current_thread() is not threading.main_thread():
            return self.get_response(request)
        previous = signal.signal(signal.SIGALRM, _request_timed_out)
        signal.setitimer(signal.ITIMER_REAL, budget)
        try:
            return self.get_response(request)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


# A JSON string escape for NUL ("\u0000"), not preceded by an escaped backslash ("\\u0000" is the
# six characters \u0000, harmless text).
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000", re.IGNORECASE)
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _bad_input_response(request, status: int, detail: str):
    """The answer to a refused request: JSON under ``/api/``, the portal's 400/404 page else."""
    if request.path.startswith("/api/"):
        code = "not_found" if status == 404 else "invalid_input"
        return JsonResponse({"code": code, "detail": detail}, status=status)
    if status == 404:
        raise Http404(detail)
    raise BadRequest(detail)


class InputCharactersMiddleware:
    """Refuse control characters at the edge, before any view or database lookup sees them.

    - a URL path with a C0 control character or DEL (``/api/v1/nodes/a%00b/``) is no resource:
      404 (PostgreSQL refuses NUL in a text parameter, so the lookup answered 500);
    - NUL in a query parameter (name or value), a form field, or a JSON string: 400. Other control
      characters in text (a description's line breaks) are each field's business
      (:func:`pools.common.validators.single_line_text_validator` for names).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if CONTROL_CHARACTERS.search(request.path):
            return _bad_input_response(
                request, 404, "No such page: its path has control characters."
            )
        if any("\x00" in k or any("\x00" in v for v in vs) for k, vs in request.GET.lists()):
            return _bad_input_response(request, 400, "A query parameter contains a NUL character.")
        if request.method in ("POST", "PUT", "PATCH") and self._body_has_nul(request):
            return _bad_input_response(request, 400, "The request body contains a NUL character.")
        return self.get_response(request)

    @staticmethod
    def _body_has_nul(request) -> bool:
        content_type = request.META.get("CONTENT_TYPE", "")
        if content_type.startswith(_FORM_TYPES):
            # Uploaded files are data, not text: only the form's own fields are looked at.
            try:
                fields = request.POST.lists()
            except MultiPartParserError:
                return False  # unreadable: the view's parser answers 400
            return any("\x00" in k or any("\x00" in v for v in vs) for k, vs in fields)
        if "json" in content_type:
            try:
                return bool(_JSON_NUL.search(request.body))
            except RequestDataTooBig:
                return False  # the view reads it again and answers 413 (portal.api)
        return False


class MethodNotAllowedPageMiddleware:
    """A page answering 405 with no body (``require_POST`` and friends: a form's address opened
    in the browser or reloaded) gets the portal's 405 page, saying which methods it takes and
    linking back to the nearest address above it that is a page (``/teams/nlp/calendar/reset/``
    → ``/teams/nlp/calendar/``; ``/overrides/7/cancel/`` → ``/overrides/``, as ``/overrides/7/``
    is no address). The API's 405s are DRF's JSON and left as they are."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            response.status_code != 405
            or response.content
            or request.path.startswith("/api/")
            or request.method == "HEAD"
        ):
            return response
        prefix = request.path[: len(request.path) - len(request.path_info)]
        parent = _nearest_page_above(request.path_info)
        page = render(
            request,
            "405.html",
            {"allowed": response.get("Allow", ""), "parent": prefix + parent},
            status=405,
        )
        page["Allow"] = response.get("Allow", "")
        return page


def _nearest_page_above(path: str) -> str:
    """The nearest ancestor of ``path`` (``/a/b/c/`` → ``/a/b/``, ``/a/``, ``/``) that a route
    answers; ``/`` at worst."""
    parts = [part for part in path.split("/") if part]
    while parts:
        parts.pop()
        candidate = "/" + "".join(f"{part}/" for part in parts)
        try:
            resolve(candidate)
        except Resolver404:
            continue
        return candidate
    return "/"


class PageHtmxDetails(HtmxDetails):
    """``request.htmx`` (django-htmx's), false for htmx's history restore: Back or Forward to
    an address htmx pushed whose page is not in its history cache sends
    ``HX-History-Restore-Request: true`` (with ``HX-Request: true``) and puts the answer in
    place of the whole ``<body>``, so the answer must be the whole page, never the fragment
    the view gives htmx (a dashboard body, a list's table: a page without its layout)."""

    def __bool__(self) -> bool:
        return super().__bool__() and not self.history_restore_request


class HtmxMiddleware:
    """django-htmx's middleware with :class:`PageHtmxDetails`: every view that answers htmx
    with a fragment (``f"{template}#table" if request.htmx else template``) answers a history
    restore with its page, in this one place. A response that varies on ``HX-Request`` varies
    on ``HX-History-Restore-Request`` too (both come with ``HX-Request: true``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.htmx = PageHtmxDetails(request)
        response = self.get_response(request)
        if has_vary_header(response, "HX-Request"):
            patch_vary_headers(response, ["HX-History-Restore-Request"])
        return response
