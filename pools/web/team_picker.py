"""Choosing one team of a fleet of 10,000 by typing, not from a ``<select>`` of every team.

The pool admins' team filters (capacity dashboard, advisor) and the reclamation exemption form
listed every team as an ``<option>``: 10,080 at 100,800 GPUs, ~57 ms of the dashboard's page to
read and render (issue #29 item 7). :class:`TeamPicker` is a text input for the team's slug with a
``<datalist>`` that htmx fills, as one types, from :func:`team_suggestions` (at most
:data:`SUGGESTIONS` teams whose slug or name starts with the text, among the teams the user may
see). Without JavaScript it is a plain text field: type the slug. :class:`TeamChoiceField`
resolves the slug with one query; a slug of no team (or of a team outside its queryset) is the
field error every team filter gives, :data:`pools.tenancy.selectors.UNSEEN_TEAM`.
"""

from __future__ import annotations

import django_filters as filters
from django import forms
from django.db.models import Q
from django.http import HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from pools.tenancy.models import Team
from pools.tenancy.selectors import UNSEEN_TEAM, team_list

SUGGESTIONS = 20
"""Teams suggested at most per keystroke: a datalist longer than a screen helps nobody."""


class TeamPicker(forms.TextInput):
    """``<input type="text">`` for a team slug, followed by its ``<datalist>``; htmx fetches the
    suggestions on focus and 200 ms after the last keystroke (``hx-sync`` drops an answer that a
    newer keystroke overtook). The ``hx-*`` attributes it sets are all it needs, so an enclosing
    form's ``hx-target`` or ``hx-push-url`` is not inherited."""

    def render(self, name, value, attrs=None, renderer=None):
        attrs = dict(attrs or {})
        list_id = f"{attrs.get('id') or f'id_{name}'}-suggestions"
        query = urlencode({"field": name})
        attrs.update(
            {
                "list": list_id,
                "autocomplete": "off",
                "spellcheck": "false",
                "hx-get": f"{reverse('pools:team-suggest')}?{query}",
                "hx-trigger": "focus once, input changed delay:200ms",
                "hx-target": f"#{list_id}",
                "hx-swap": "innerHTML",
                "hx-sync": "this:replace",
                "hx-include": "this",
                "hx-push-url": "false",
                "hx-indicator": "this",
            }
        )
        return format_html(
            '{}<datalist id="{}"></datalist>', super().render(name, value, attrs, renderer), list_id
        )


class TeamChoiceField(forms.ModelChoiceField):
    """A team by its slug (:class:`TeamPicker`); ``cleaned_data`` holds the :class:`Team`.
    ``queryset`` (default: every team) says which slugs are valid; the widget never lists it.
    Another slug is :data:`~pools.tenancy.selectors.UNSEEN_TEAM` on the field."""

    widget = TeamPicker
    default_error_messages = {"invalid_choice": UNSEEN_TEAM}

    def __init__(self, queryset=None, **kwargs):
        kwargs.setdefault("to_field_name", "slug")
        super().__init__(queryset=Team.objects.all() if queryset is None else queryset, **kwargs)


class TeamChoiceFilter(filters.ModelChoiceFilter):
    """:class:`django_filters.ModelChoiceFilter` on a team by its slug through
    :class:`TeamPicker` (django-filter's field, which keeps its null handling); a slug outside
    ``queryset`` is :data:`~pools.tenancy.selectors.UNSEEN_TEAM` on the field."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("queryset", Team.objects.all())
        kwargs.setdefault("to_field_name", "slug")
        kwargs.setdefault("error_messages", {"invalid_choice": UNSEEN_TEAM})
        kwargs.setdefault("widget", TeamPicker)
        super().__init__(*args, **kwargs)


def _visible_teams(request):
    """The teams a filter may name: those ``request``'s user may see (none without a request)."""
    if request is None:
        return Team.objects.none()
    return team_list(user=request.user).order_by("name")


class VisibleTeamFilter(TeamChoiceFilter):
    """The ``team`` filter of every list: a slug among the teams the user may see, typed in a
    :class:`TeamPicker`. An unknown slug, or one of a team the user may not see, is a field
    error (:data:`~pools.tenancy.selectors.UNSEEN_TEAM`; 400 in the API, no rows on a page),
    never an empty list that would say the team has none. The FilterSet must be given the
    request. ``field_name`` the path to the row's team (``"allocation__team"``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("queryset", _visible_teams)
        kwargs.setdefault("label", "Team")
        kwargs.setdefault("widget", TeamPicker(attrs={"placeholder": "Any"}))
        super().__init__(*args, **kwargs)


def team_matches(*, user, text: str, limit: int = SUGGESTIONS) -> list[tuple[str, str]]:
    """``(slug, name)`` of at most ``limit`` teams ``user`` may see
    (:func:`pools.tenancy.selectors.team_list`) whose slug or name starts with ``text`` (case
    ignored; surrounding spaces dropped), by name then slug. One query."""
    text = text.strip()
    teams = team_list(user=user)
    if text:
        teams = teams.filter(Q(slug__istartswith=text) | Q(name__istartswith=text))
    return list(teams.order_by("name", "slug").values_list("slug", "name")[:limit])


@require_GET
def team_suggestions(request):
    """``GET /teams/suggest/?field=<param>&<param>=<text>``: the ``<option>``s of
    :func:`team_matches` for the text in the query parameter ``field`` names (default ``q``;
    the picker sends its input under its own name), value the slug, label the name. Signed-in
    users only (the login middleware); a member is offered only their own teams."""
    text = request.GET.get(request.GET.get("field") or "q", "")
    options = format_html_join(
        "", '<option value="{}">{}</option>', team_matches(user=request.user, text=text)
    )
    return HttpResponse(options, content_type="text/html; charset=utf-8")
