"""Filters of the billing API's statements: ``?month=YYYY-MM``, ``team`` (slug), ``status``."""

from __future__ import annotations

import re
from datetime import date

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from billing.models import Statement
from pools.common.validators import date_range_validator
from pools.web.team_picker import VisibleTeamFilter


class MonthField(forms.CharField):
    """A calendar month written ``YYYY-MM``; anything else is a field error (400 in the API)."""

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        match = re.fullmatch(r"(\d{4})-(\d{2})", value)
        if not match or not 1 <= int(match[2]) <= 12 or int(match[1]) < 1:
            raise forms.ValidationError("A month as YYYY-MM, e.g. 2026-10.", code="invalid")
        month = date(int(match[1]), int(match[2]), 1)
        date_range_validator(month)
        return month


# Documented as checked: YYYY-MM, a year from 2000 to 2100
# (pools.common.validators.date_range_validator).
@extend_schema_field(
    {"type": "string", "pattern": r"^(20[0-9]{2}|2100)-(0[1-9]|1[0-2])$", "example": "2026-10"}
)
class MonthFilter(django_filters.Filter):
    field_class = MonthField

    def filter(self, qs, value):
        if value is None:
            return qs
        return qs.filter(month__year=value.year, month__month=value.month)


class StatementFilterSet(django_filters.FilterSet):
    month = MonthFilter(help_text="YYYY-MM")
    team = VisibleTeamFilter()
    status = django_filters.CharFilter()

    class Meta:
        model = Statement
        fields = ["month", "team", "status"]
