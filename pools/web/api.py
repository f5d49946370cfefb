"""Pieces the sub-domains' APIs share: timezone-aware datetime fields, the pool-admin
permissions, the team field that only offers the caller's teams, the checked page size and
cursor pagination of lists that grow without bound, the pool admins' create and cancel actions,
and what a queued run (a what-if) asks and answers."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import Model, QuerySet
from rest_framework import exceptions, mixins, pagination, permissions, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.common.validators import DATE_RANGE_MESSAGE, date_in_range
from pools.tenancy import selectors
from pools.tenancy.models import Team
from pools.tenancy.permissions import may_administer_pools, require_pool_admin
from pools.tenancy.selectors import UNSEEN_TEAM


class IsPoolAdminOrReadOnly(permissions.BasePermission):
    """Any signed-in user reads; only pool admins (staff) write."""

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or may_administer_pools(request.user)


class IsPoolAdmin(permissions.BasePermission):
    def has_permission(self, request, view):
        return may_administer_pools(request.user)


class PoolAdminCreateMixin(mixins.CreateModelMixin):
    """``POST`` on a list whose rows only pool admins make (overrides, recurring reservations,
    maintenance windows), in one order: the caller's right first, a 403 whose words are
    :attr:`create_refusal` (before the body: a member's 400 would tell which team and pool
    slugs exist); then the body, a 400 by field; then :attr:`create_service` (keyword-only:
    ``actor`` and the serializer's validated fields; its domain errors answer 400 / 403 / 409
    through :func:`portal.api.exception_handler`); then ``201`` with the new row read again
    through ``get_queryset`` (the list's annotations and related rows) and serialized.

    A subclass sets ``create_refusal`` and ``create_service = staticmethod(service)``. The
    ``create`` below has no docstring on purpose: the schema describes the operation by the
    viewset's docstring, as it did before the action was shared."""

    create_refusal: str = ""
    create_service: Callable[..., Model]

    def create(self, request, *args, **kwargs):
        require_pool_admin(request.user, self.create_refusal)
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        made = self.create_service(actor=request.user, **form.validated_data)
        fresh = self.get_queryset().get(pk=made.pk)
        return Response(self.get_serializer(fresh).data, status=status.HTTP_201_CREATED)


class CancelActionMixin:
    """``POST .../<id>/cancel/`` on the same lists, in one order: the row through
    ``get_object`` (404 for a row the caller may not see); the body, read by
    :attr:`cancel_serializer_class` (a ``reason``; 400 by field); then :attr:`cancel_service`,
    called with the row under the keyword :attr:`cancel_keyword`, ``actor`` and ``reason`` (its
    403 for a member, 409 for a row already ended); then ``200`` with the row read again
    through ``get_queryset`` and serialized. The schema's request, response and words are the
    subclass's (``extend_schema_view(cancel=...)``); ``cancel`` has no docstring, as
    :class:`PoolAdminCreateMixin`'s ``create``."""

    cancel_serializer_class: type[serializers.Serializer]
    cancel_service: Callable[..., Model]
    cancel_keyword: str = ""

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        row = self.get_object()
        form = self.cancel_serializer_class(data=request.data)
        form.is_valid(raise_exception=True)
        reason = form.validated_data["reason"]
        row = self.cancel_service(**{self.cancel_keyword: row}, actor=request.user, reason=reason)
        return Response(self.get_serializer(self.get_queryset().get(pk=row.pk)).data)


class AwareDateTimeField(serializers.DateTimeField):
    """ISO 8601 with an offset (``2026-12-07T09:00:00+01:00`` or ``…Z``); naive is refused, and
    so is a date outside 2000–2100 (:data:`pools.common.validators.EARLIEST_DATE`)."""

    default_error_messages = {"date_range": DATE_RANGE_MESSAGE}

    def to_internal_value(self, value):
        parsed = super().to_internal_value(value)
        text = str(value)
        if not (text.endswith(("Z", "z")) or "+" in text[10:] or "-" in text[10:]):
            self.fail("invalid", format="ISO 8601 with a UTC offset, e.g. 2026-12-07T09:00:00Z")
        if not date_in_range(parsed):
            self.fail("date_range")
        return parsed


class SlugLookupField(serializers.SlugRelatedField):
    """A slug lookup that answers "does not exist" for a value PostgreSQL could not even compare
    (a NUL byte: text columns cannot hold one, and the query would fail with a 500)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data)
        return super().to_internal_value(data)


class VisibleTeamField(SlugLookupField):
    """A team by slug, among the teams the caller may act for (all for pool admins): another
    team's slug gets the same :data:`~pools.tenancy.selectors.UNSEEN_TEAM` as a missing one, so
    existence does not leak."""

    default_error_messages = {"does_not_exist": UNSEEN_TEAM}

    def __init__(self, **kwargs):
        super().__init__(slug_field="slug", queryset=Team.objects.all(), **kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        return visible_teams(request)


def visible_teams(request) -> QuerySet[Team]:
    """The teams a filter may name: the caller's (all for pool admins)."""
    if request is None:
        return Team.objects.none()
    return selectors.team_list(user=request.user).order_by("name")


class CheckedPageSize:
    """``page_size`` may be raised by the client up to :attr:`max_page_size` (500); one that is
    not a whole number from 1 to 500 is a 400 naming the field (DRF would quietly clamp or
    ignore it, so a script asking for 1,000 rows would think it had them all)."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= self.max_page_size:
            raise exceptions.ValidationError(
                {"page_size": [f"A whole number from 1 to {self.max_page_size}."]}
            )
        return size

    def checked_size_parameters(self, parameters: list[dict]) -> list[dict]:
        """The schema's ``page_size`` with its bounds, as they are checked."""
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
        return parameters


class NewestFirstCursorPagination(CheckedPageSize, pagination.CursorPagination):
    """Newest first (``created_at``, then ``id``) by an opaque ``cursor``: ``next`` and
    ``previous`` links and no ``count``. For lists that only grow (the audit trail: a million
    events at 100,000 GPUs), where page numbers cost a ``COUNT(*)`` over every row the caller
    may see and an ``OFFSET`` that reads every row before the page; a cursor page reads its
    rows from the ``(created_at, id)`` order alone. Rows added meanwhile neither repeat nor
    vanish between pages (DRF's cursor: the position of the last row, and an offset among rows
    with the same ``created_at``)."""

    ordering = ("-created_at", "-id")

    def decode_cursor(self, request):
        """The position ``?cursor=`` names; one this list did not give is a 400 naming the
        field (DRF answers 404, which reads as "no such list")."""
        try:
            return super().decode_cursor(request)
        except exceptions.NotFound:
            raise exceptions.ValidationError(
                {self.cursor_query_param: ["Not a cursor this list gave: follow `next`."]}
            ) from None

    def get_schema_operation_parameters(self, view):
        return self.checked_size_parameters(super().get_schema_operation_parameters(view))


class WhatIfDaysField(serializers.IntegerField):
    """The days of history a what-if replays, a whole number from 1 to ``max_value`` written in
    ASCII digits: ``int()`` reads "٣" as 3, which is refused here with the range's message."""

    default_error_messages = {"digits": "A whole number from 1 to {max_value}."}

    def __init__(self, *, max_value: int, **kwargs):
        super().__init__(min_value=1, max_value=max_value, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and not (data.isascii() and data.strip().isdigit()):
            self.fail("digits", max_value=self.max_value)
        return super().to_internal_value(data)


class QueuedRunSerializer(serializers.ModelSerializer):
    """A queued run (:class:`pools.jobs.models.QueuedRun`) as the API answers it: ``status``
    (``pending``, ``running``, ``done``, ``failed``), ``progress`` (per cent), ``result`` once
    done, ``error`` and ``error_code`` once failed, and ``status_url`` (``status_path`` + id),
    where it is polled. Subclasses name the model and list :data:`RUN_FIELDS` after their own."""

    RUN_FIELDS = (
        "status", "progress", "result", "error", "error_code", "created_at", "finished_at",
        "status_url",
    )  # fmt: skip
    status_path = ""

    result = serializers.JSONField(read_only=True, allow_null=True)
    status_url = serializers.SerializerMethodField()

    def get_status_url(self, run) -> str:
        return f"{self.status_path}{run.pk}/"
