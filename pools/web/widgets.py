"""Form widgets the pages share."""

from __future__ import annotations

from django import forms


class IsoDateInput(forms.DateInput):
    """``<input type="date">`` whose value is written ``yyyy-mm-dd``, the only form the browser's
    date input reads (HTML's "valid date string"); Django's default writes the site's first
    ``DATE_INPUT_FORMATS`` (en-gb: ``06/12/2026``), which the browser shows as an empty field."""

    input_type = "date"

    def __init__(self, attrs: dict | None = None) -> None:
        super().__init__(attrs=attrs, format="%Y-%m-%d")
