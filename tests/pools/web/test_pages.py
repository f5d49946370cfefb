"""The page helpers of ``pools.web.pages`` that stand in for template machinery: they write what the
template tags and Django's widgets write, byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django import forms
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from pools.common.errors import InvalidInput
from pools.web.pages import (
    PlainSelect,
    UrlOfId,
    form_add_domain_errors,
    form_add_errors,
    minute_text,
    redirect_back,
    whole_number,
)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Asia/Shanghai", "America/New_York"])
def test_minute_text_is_the_date_filter(zone):
    template = Template('{{ t|date:"d M Y H:i" }}')
    start = datetime(2026, 1, 1, 0, 7, 59, 999999, tzinfo=UTC)
    with timezone.override(ZoneInfo(zone)):
        for hours in range(0, 24 * 366, 37):  # every month, both sides of each DST change
            t = start + timedelta(hours=hours)
            assert minute_text(t) == template.render(Context({"t": t}))


def test_url_of_id_is_reverse():
    url = UrlOfId("pools:request-detail")
    for pk in (1, 42, 9_876_543_210, 10**12):
        assert url(pk) == reverse("pools:request-detail", args=[pk])


def test_plain_select_writes_what_format_html_wrote():
    """The options escaped as ``conditional_escape`` does: text escaped, safe strings kept."""
    choices = [("", "All teams"), ("a&b\"'<x>", "O'Brien & <Co>"),
               (mark_safe("<b>"), mark_safe("<i>x</i>")), (3, 4)]  # fmt: skip
    widget = PlainSelect(choices=choices)
    html = widget.render("team", ["a&b\"'<x>", 3], {"id": "id_team"})
    assert html == (
        '<select name="team" id="id_team"><option value="">All teams</option>'
        '<option value="a&amp;b&quot;&#x27;&lt;x&gt;" selected>O&#x27;Brien &amp; &lt;Co&gt;'
        '</option><option value="<b>"><i>x</i></option><option value="3" selected>4</option>'
        "</select>"
    )


class _NameForm(forms.Form):
    name = forms.CharField()


@pytest.mark.parametrize(
    "name_other_fields, form_wide",
    [(False, ["A whole number."]), (True, ["Days: A whole number."])],
)
def test_a_refusal_lands_on_its_fields_and_the_rest_form_wide(name_other_fields, form_wide):
    form = _NameForm({"name": "x"})
    assert form.is_valid()
    refusal = InvalidInput("Refused.", errors={"name": "Taken.", "days": "A whole number."})
    form_add_domain_errors(form, refusal, name_other_fields=name_other_fields)
    assert form.errors["name"] == ["Taken."]
    assert form.non_field_errors() == form_wide


def test_a_refusal_without_field_errors_is_its_message_form_wide():
    form = _NameForm({"name": "x"})
    assert form.is_valid()
    form_add_domain_errors(form, InvalidInput("The cluster is down."))
    assert (dict(form.errors), form.non_field_errors()) == (
        {"__all__": ["The cluster is down."]},
        ["The cluster is down."],
    )


@pytest.mark.parametrize(
    ("field", "errors"),
    [
        ("name", {"name": ["Taken."]}),  # the form's field: there
        ("slurm_user", {"__all__": ["Taken."]}),  # a field the form lacks: form-wide
    ],
)
def test_a_refusal_naming_one_field_is_its_message_on_that_field(field, errors):
    form = _NameForm({"name": "x"})
    assert form.is_valid()
    form_add_domain_errors(form, InvalidInput("Taken.", field=field))
    assert dict(form.errors) == errors


def test_form_add_errors_puts_each_message_on_its_field():
    form = _NameForm({"name": "x"})
    assert form.is_valid()
    form_add_errors(form, {"name": "After the start.", "hostnames": "No such node: gpu9."})
    assert dict(form.errors) == {
        "name": ["After the start."],
        "__all__": ["No such node: gpu9."],
    }


@pytest.mark.parametrize(
    ("next_", "location"),
    [
        ("/teams/nlp/?tab=1", "/teams/nlp/?tab=1"),  # a page of this site: kept
        ("https://evil.example/", "/advisor/"),  # another site: the fallback
        ("//evil.example/", "/advisor/"),
        ("-1", "/advisor/"),  # no page: once read as a view name (NoReverseMatch, a 500)
        ("pools:advisor-findings", "/advisor/"),
        ("x.y", "/advisor/"),  # once a relative redirect, resolved under the form's URL
        ("", "/advisor/"),
    ],
)
def test_redirect_back_goes_to_a_path_of_this_site_or_the_fallback(rf, next_, location):
    request = rf.post("/advisor/2/acknowledge/", {"next": next_})
    response = redirect_back(request, "pools:advisor-findings")
    assert (response.status_code, response["Location"]) == (302, location)


@pytest.mark.parametrize(
    ("raw", "number"),
    [
        ("7", 7),
        ("007", 7),
        ("9" * 18, 999_999_999_999_999_999),  # 18 digits: below a bigint's 9.22 × 10^18
        ("9" * 19, None),
        ("9" * 5000, None),  # int() refuses over 4,300 digits
        ("²", None),  # str.isdigit() says yes, int() no
        ("٣", None),  # Arabic-Indic three: int() reads it, a form would not
        ("-1", None),
        ("1.0", None),
        (" 1", None),
        ("", None),
        (None, None),
    ],
)
def test_whole_number_reads_ascii_digits_a_row_id_can_hold(raw, number):
    assert whole_number(raw) == number
