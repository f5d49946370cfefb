"""API plumbing shared by every app: pagination and the one exception handler."""

from __future__ import annotations

import json

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from django_filters import BooleanFilter
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from pools.common.errors import DomainError
from pools.web.api import CheckedPageSize
from portal.handlers import RETRY_AFTER_S, unavailable_body
from portal.middleware import api_body_limit_bytes, request_too_large_response


class Pagination(CheckedPageSize, PageNumberPagination):
    """Page-number pagination; ``page_size`` may be raised by the client up to 500, checked
    (:class:`pools.web.api.CheckedPageSize`)."""

    def get_schema_operation_parameters(self, view):
        """``page`` from 1 and ``page_size`` from 1 to ``max_page_size``, as they are checked
        (a page past the last is a 404; a size outside the bounds a 400)."""
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"]["minimum"] = 1
        return self.checked_size_parameters(parameters)


# What a boolean query parameter may say (django-filter's own reading); "" is "any".
BOOLEAN_WORDS = frozenset({"", "true", "false", "True", "False", "1", "0"})


class StrictFilterBackend(DjangoFilterBackend):
    """django-filter's backend, refusing a boolean filter it cannot read: ``?nvlink=banana``
    is a 400 naming ``nvlink`` (django-filter reads it as "any" and answers every row, so a
    typo looked like an empty filter)."""

    def filter_queryset(self, request, queryset, view):
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            errors = {
                name: ["true or false."]
                for name, declared in filterset_class.base_filters.items()
                if isinstance(declared, BooleanFilter)
                and any(v not in BOOLEAN_WORDS for v in request.query_params.getlist(name))
            }
            if errors:
                raise exceptions.ValidationError(errors)
        return super().filter_queryset(request, queryset, view)


def exception_handler(exc, context):
    """Map domain errors to 400/403/404/409 with ``{"code", "detail", "data"}``, and a database
    that does not answer or a request past its deadline to 503 (``portal.handlers``).

    Field errors (a domain error's ``errors`` or DRF validation) are under ``errors`` as
    ``{field: [message, ...]}`` in both cases. DRF's other errors gain a ``code`` field.
    """
    if isinstance(exc, DomainError):
        data = dict(exc.data)
        body = {"code": exc.code, "detail": exc.message}
        if isinstance(data.get("errors"), dict):
            body["errors"] = {
                k: v if isinstance(v, list) else [v] for k, v in data.pop("errors").items()
            }
        body["data"] = data
        return Response(body, status=exc.status)
    unavailable = unavailable_body(exc)
    if unavailable is not None:
        # The database not answering, or the request's deadline: 503, the caller may retry.
        body, status_code = unavailable
        return Response(body, status=status_code, headers={"Retry-After": str(RETRY_AFTER_S)})
    if isinstance(exc, RequestDataTooBig):
        # Read past DATA_UPLOAD_MAX_MEMORY_SIZE without a Content-Length the middleware could see.
        limit = api_body_limit_bytes(context["request"].META.get("CONTENT_TYPE", ""))
        response = request_too_large_response(limit)
        return Response(json.loads(response.content), status=response.status_code)
    # Django's own 404 and 403 become DRF's, so they get DRF's codes ("not_found" ...).
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "code" not in response.data:
        codes = exc.get_codes() if hasattr(exc, "get_codes") else None
        # one code per kind of error: field validation is "invalid_input" whether DRF's
        # serializer or a service found it (pools.common.errors.InvalidInput)
        code = codes if isinstance(codes, str) else "invalid_input"
        if response.status_code == status.HTTP_400_BAD_REQUEST and not isinstance(codes, str):
            response.data = {
                "code": "invalid_input",
                "detail": "Invalid input.",
                "errors": response.data,
            }
        else:
            response.data["code"] = code
    return response
