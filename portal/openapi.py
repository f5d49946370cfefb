"""The OpenAPI document's error answers: every operation documents the 4xx/5xx statuses the
portal really gives, each with the one error body (``portal.api.exception_handler``).

drf-spectacular documents only the success status of a view. What the portal answers besides,
and where (``DEFAULT_SCHEMA_CLASS`` is :class:`PortalAutoSchema`):

- ``400 invalid_input`` (and domain codes): an operation that takes a body or query parameters
  (field errors, ``page_size`` outside 1-500, NUL characters: ``portal.middleware``);
- ``401``: every operation — a missing, expired or revoked token is refused before the view,
  even on an operation anyone may call (``POST /auth/token/`` with a stale ``Authorization``);
- ``403``: every operation (a member calling a pool admin's operation; a session without CSRF);
- ``404``: an operation with a path parameter (no such object, or one of another team) or a
  paginated list (``page`` past the last);
- ``409``: a write (``Conflict``: a state transition not allowed, capacity taken, a pool in use);
- ``422 idempotency_key_reused``: an operation that takes an ``Idempotency-Key`` header (the
  key reused with another body);
- ``413``: an operation with a body (``portal.middleware`` body limits);
- ``429``: an operation with a throttle (``TOKEN_THROTTLE_RATE``, sign-in lockout);
- ``503 database_unavailable`` / ``timeout``, with ``Retry-After`` (``portal.handlers``): every
  operation.

A status an operation documents itself (an ``extend_schema`` answer) is kept as it is.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from portal.handlers import RETRY_AFTER_S

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
BODY_METHODS = ("POST", "PUT", "PATCH")


class ErrorSerializer(serializers.Serializer):
    """The body of every error answer under ``/api/`` (``portal.api.exception_handler``)."""

    code = serializers.CharField(help_text="Machine-readable: invalid_input, not_found, …")
    detail = serializers.CharField(help_text="For a person.")
    errors = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text="Field errors: {field: [message, …]}; a nested field's errors nest the same "
        "way ({aliases: {1: [message]}}).",
    )
    data = serializers.DictField(required=False, help_text="The error's particulars.")


DESCRIPTIONS = {
    "400": "Invalid input: the body or a query parameter (field errors under `errors`).",
    "401": "No valid credentials (missing, expired or revoked token).",
    "403": "Not allowed for this user.",
    "404": "No such object visible to this user, or a page past the last.",
    "409": "Conflicts with the object's state (transition not allowed, capacity taken, in use).",
    "413": "The request body is larger than the portal accepts.",
    "422": "The Idempotency-Key was used for a request that asked for something else.",
    "429": "Too many requests: wait as `Retry-After` says.",
    "503": "The database is not answering, or the request ran past its deadline: retry.",
}


class PortalAutoSchema(AutoSchema):
    """drf-spectacular's schema with the error answers above added to each operation."""

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        responses = operation.setdefault("responses", {})
        for status in self._error_statuses(operation):
            if status not in responses:
                responses[status] = self._error_response(status)
        return operation

    def _error_statuses(self, operation: dict) -> list[str]:
        parameters = operation.get("parameters", [])
        has_body = "requestBody" in operation or self.method in BODY_METHODS
        has_query = any(p.get("in") == "query" for p in parameters)
        statuses = []
        if has_body or has_query:
            statuses.append("400")
        statuses += ["401", "403"]
        if "{" in self.path or any(p.get("name") == "page" for p in parameters):
            statuses.append("404")
        if self.method in WRITE_METHODS:
            statuses.append("409")
        if has_body:
            statuses.append("413")
        if any(p.get("in") == "header" and p.get("name") == "Idempotency-Key" for p in parameters):
            statuses.append("422")
        if self.view.get_throttles():
            statuses.append("429")
        statuses.append("503")
        return statuses

    def _error_response(self, status: str) -> dict:
        response = self._get_response_for_code(ErrorSerializer, status)
        response["description"] = DESCRIPTIONS[status]
        if status == "503":
            response["headers"] = {
                "Retry-After": {
                    "schema": {"type": "integer", "enum": [RETRY_AFTER_S]},
                    "description": "Seconds to wait before trying again.",
                    "required": True,
                }
            }
        return response
