"""Never a 500 from a page or a form, whatever the input, and never a half-written state: every
route of the web pages (read from the URL configuration, as ``tests/browser/test_layout.py``
reads them, the paths from the table both share, ``tests/pages_support.py``) opened with the
demo's data, as a pool admin and as a plain member, with hostile query strings and hostile form
bodies.

Which query parameters a page reads is not written out by hand: the page is opened once while
``QueryDict`` records each name it is asked for, and the names of its forms' fields are read
from its HTML. Each is then set to each of :data:`HOSTILE` (all at once, and a few of them one
by one), repeated, and ``page`` / ``sort`` / ``ordering`` / ``export`` are added. Every route
is also POSTed an empty body and its forms' fields filled with garbage, field by field on top of
the values the form is shown with.

Asserted: no answer is a 500; a GET writes nothing; a POST answered 4xx, or 200 with the form's
errors, writes nothing; a member never gets a 200 for another team's object."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from html.parser import HTMLParser
from io import StringIO
from urllib.parse import quote

import pytest
from django.core.management import call_command
from django.http import QueryDict
from django.test import Client
from django.urls import resolve
from pages_support import ACTIONS, PAGES
from pages_support import routes as all_routes

pytestmark = pytest.mark.django_db

LONG = "x" * 5000
DIGITS = "9" * 5000  # more digits than int() reads (4,300)
HOSTILE = [
    "",
    "-1",
    "0",
    "1e309",
    "99999999999999999999",
    "abc",
    "2026-13-45",
    "../../etc",
    "<script>alert(1)</script>",
    LONG,
    DIGITS,
    "²",  # a digit to str.isdigit(), not to int()
    "Grüße ✓ 数据 🚀",
    "0.123456789012",
    "nan",
]
# Tried one parameter at a time too: a form whose first field is refused may not read the rest.
ONE_BY_ONE = ["-1", "1e309", "99999999999999999999", "2026-13-45", "abc", DIGITS, "²"]
# Tried in each parameter and field alone by default (the rest in rotation): what int(), the
# ORM and a form's clean() have got wrong before.
FEW = [DIGITS, "abc"]
EXTRA = [
    {"page": "0", "sort": "no_such_field", "ordering": "no_such_field", "month": "2026-13"},
    {"page": "-1", "ordering": "-no_such_field", "month": "99999-01", "week": "2026-W99"},
    {"page": "999999", "page_size": "99999999999999999999", "month": "0000-00"},
]
EXTRA_DEEP = [
    {"page": "0"},
    {"page": "-1"},
    {"page": "999999"},
    {"sort": "no_such_field"},
    {"ordering": "no_such_field"},
    {"ordering": "-no_such_field"},
    {"page_size": "99999999999999999999"},
    {"month": "2026-13"},
    {"month": "99999-01"},
    {"month": "0000-00"},
]
DEEP = os.environ.get("PAGE_PROBING") == "deep"
"""``PAGE_PROBING=deep``: each value in each parameter alone too, each field of a form alone
with each garbage value (about 4,000 more requests, 7 minutes); the default sends each value
to each parameter and field once, in rotation."""


def _rotations(names: list[str], values: list[str]) -> list[dict[str, str]]:
    """``len(values)`` dicts in which each name takes each value once, the names shifted one
    value apart (name ``j`` of dict ``i``: ``values[(i + j) % len(values)]``), so that every
    name meets every value in a handful of requests; none when there are no names."""
    if not names:
        return []
    n = len(values)
    return [{name: values[(i + j) % n] for j, name in enumerate(names)} for i in range(n)]


# Route -> path opened ({name}: the ids below): every page and every form's target
# (tests/pages_support.py). Chosen here: a cluster without pools, whose delete form the sweep
# can post; the policies page of one pool, with its policy and what-if forms.
ROUTES = {
    **PAGES,
    **{route: path for route, (path, _why) in ACTIONS.items()},
    "clusters/<slug:slug>/delete/": "/clusters/k8s-rented/delete/",
    "idle/policies/": "/idle/policies/?pool=infer-k8s",
}
NOT_PROBED = {
    "healthz": "probe, plain text, no input",
    "readyz": "probe, plain text, no input",
    "healthz/deep": "JSON for monitoring, no input",
    "metrics": "Prometheus exposition",
    "login/": "the sign-in flow (throttled by django-axes)",
    "logout/": "signs the client out",
    "start/": "a redirect by role",
    "api/docs/": "Swagger UI's page, no input",
    "api/schema/": "the OpenAPI document (the API is fuzzed by schemathesis)",
}
SKIPPED_PREFIXES = ("admin/", "api/v1/", "oidc/")
# Routes whose objects belong to a team: a member of another team must not get a 200.
TEAM_OWNED = [
    "allocations/<int:pk>/findings/",
    "teams/<slug:slug>/findings/",
    "elastic/<int:pk>/",
    "elastic/burst/<int:pk>/opt-out/",
    "teams/<slug:slug>/calendar/",
    "teams/<slug:slug>/calendar.ics",
    "teams/<slug:slug>/waiting/",
    "requests/<int:pk>/",
    "requests/<int:pk>/explanation/",
    "allocations/<int:pk>/serving/",
    "allocations/<int:pk>/serving/estimate/",
    "costs/budgets/<int:pk>/edit/",
    "costs/<slug:team>/<str:month>/",
    "costs/token-flow/<slug:team>/",
    "teams/<slug:slug>/dashboard/",
    "sizing/estimates/<int:pk>/",
]


def _team_ids(slug: str, user) -> dict[str, int | str]:
    """One object of each kind that team ``slug`` owns (made when the demo has none)."""
    from billing.budgets.models import Budget
    from pools.advisor.models import AdvisorFinding
    from pools.capacity.models import Allocation
    from pools.elastic.models import BurstOptIn, ElasticPolicy
    from pools.reclamation.models import IdleFinding
    from pools.sizing.models import SizingEstimate
    from pools.tenancy.models import Team

    team = Team.objects.get(slug=slug)
    allocation = Allocation.objects.filter(team=team).order_by("pk").first()
    estimate = SizingEstimate.objects.filter(team=team).order_by("pk").first()
    if estimate is None:
        from factories import SizingEstimateFactory

        estimate = SizingEstimateFactory(team=team, created_by=user)
    budget = Budget.objects.filter(team=team).order_by("pk").first()
    if budget is None:
        from factories import BudgetFactory

        budget = BudgetFactory(team=team)
    burst = BurstOptIn.objects.filter(team=team).order_by("pk").first()
    if burst is None:
        from factories import BurstOptInFactory

        burst = BurstOptInFactory(team=team)
    elastic = ElasticPolicy.objects.filter(allocation__team=team).order_by("pk").first()
    if elastic is None:
        from factories import ElasticPolicyFactory

        elastic = ElasticPolicyFactory(allocation=allocation)
    idle = IdleFinding.objects.filter(allocation__team=team).order_by("pk").first()
    advisor = AdvisorFinding.objects.filter(allocation__team=team).order_by("pk").first()
    return {
        "team": slug,
        "allocation": allocation.pk,
        "request": allocation.request_id,
        "estimate": estimate.pk,
        "budget": budget.pk,
        "burst": burst.pk,
        "elastic": elastic.pk,
        "idle": idle.pk if idle else 987_654,
        "advisor": advisor.pk if advisor else 987_654,
    }


@pytest.fixture(scope="module")
def demo(django_db_blocker, django_db_setup):
    """The demo's data (``load_demo``), made once for the module inside a transaction rolled
    back at its end; the users and the ids the paths are filled with."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from pools.maintenance.models import MaintenanceWindow
    from pools.overrides.models import TemporaryOverride

    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        call_command("load_demo", stdout=StringIO())
        users = get_user_model().objects
        admin, alice = users.get(username="admin"), users.get(username="alice")
        from factories import TemporaryOverrideFactory

        override = TemporaryOverride.objects.order_by("pk").first() or TemporaryOverrideFactory()
        from factories import ExemptionFactory

        from pools.tenancy.models import Team

        ExemptionFactory(team=Team.objects.get(slug="nlp"))  # the policies page's revoke form
        from pools.inventory.models import InventoryUpload

        upload = InventoryUpload.objects.order_by("pk").first()
        shared = {
            "maintenance": MaintenanceWindow.objects.order_by("pk").first().pk,
            "override": override.pk,
            "upload": upload.pk if upload else 987_654,
        }
        yield {
            "admin": admin,
            "alice": alice,
            "own": {**shared, **_team_ids("nlp", admin)},
            "foreign": {**shared, **_team_ids("vision", admin)},
        }
        transaction.set_rollback(True)
        atomic.__exit__(None, None, None)


# Written by reading, by design: a budget check's priced month kept for the next read, and when
# a team's waiting work was last looked at (its refresh task runs while someone watches).
READ_SIDE = {"billing_budgetconsumption", "pools_waitingwatch"}


def _state() -> dict[str, int]:
    """Row counts of the tables a page or a form could write, and the audit trail (one query)."""
    from django.apps import apps
    from django.db import connection

    tables = sorted(
        model._meta.db_table
        for model in apps.get_models()
        if model._meta.app_label in {"pools", "billing", "audit"}
        and model._meta.managed
        and not model._meta.proxy
        and model._meta.db_table not in READ_SIDE
    )
    counts = ", ".join(f'(SELECT count(*) FROM "{table}")' for table in tables)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        return dict(zip(tables, cursor.fetchone(), strict=True))


@contextmanager
def _recording_reads(names: set[str]):
    """Record each name a view asks ``request.GET`` / ``request.POST`` for."""
    originals = {
        attr: getattr(QueryDict, attr) for attr in ("get", "getlist", "__getitem__", "__contains__")
    }

    def wrap(attr):
        original = originals[attr]

        def reader(self, key, *args, **kwargs):
            if isinstance(key, str):
                names.add(key)
            return original(self, key, *args, **kwargs)

        return reader

    for attr in originals:
        setattr(QueryDict, attr, wrap(attr))
    try:
        yield
    finally:
        for attr, original in originals.items():
            setattr(QueryDict, attr, original)


class _Forms(HTMLParser):
    """Each ``<form>`` of a page: its method, its action (``""``: the page) and its fields,
    name -> the value it is shown with."""

    def __init__(self):
        super().__init__()
        self.forms: list[tuple[str, str, dict[str, str]]] = []
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            method = (attrs.get("method") or "get").lower()
            self.forms.append((method, attrs.get("action") or "", {}))
            return
        if not self.forms or not attrs.get("name"):
            if tag == "option" and self._select and "selected" in attrs:
                self.forms[-1][2][self._select] = attrs.get("value") or ""
            return
        fields = self.forms[-1][2]
        name = attrs["name"]
        if tag == "input":
            kind = (attrs.get("type") or "text").lower()
            if kind in {"submit", "button", "file", "image", "reset"}:
                return
            if kind in {"checkbox", "radio"} and "checked" not in attrs:
                fields.setdefault(name, "")
                return
            fields[name] = attrs.get("value") or ""
        elif tag == "select":
            self._select = name
            fields.setdefault(name, "")
        elif tag == "textarea":
            fields.setdefault(name, "")

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None


def _forms(html: str) -> list[tuple[str, str, dict[str, str]]]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


def _client(user) -> Client:
    client = Client(raise_request_exception=False)  # every 500 is listed, not just the first
    client.force_login(user)
    return client


def _fail(failures: list[str], method: str, url: str, data, response) -> None:
    shown = {k: (v if len(str(v)) < 40 else f"{str(v)[:10]}…") for k, v in (data or {}).items()}
    error = getattr(response, "exc_info", None)
    cause = f" {error[0].__name__}: {str(error[1])[:80]}" if error else ""
    failures.append(f"{method} {url} {shown} -> {response.status_code}{cause}")


def _probe_gets(client, url: str, failures: list[str], *, alone: bool = True) -> int:
    """GET ``url`` with hostile query strings (``alone``: each parameter alone too, the others
    as in ``url``); returns how many were sent."""
    read: set[str] = set()
    with _recording_reads(read):
        first = client.get(url)
    if first.status_code >= 500:
        _fail(failures, "GET", url, {}, first)
    if first.status_code != 200:
        return 1
    names = set(read) - {"csrfmiddlewaretoken"}
    if first.get("Content-Type", "").startswith("text/html"):
        for method, _action, fields in _forms(first.content.decode()):
            if method == "get":
                names |= set(fields)
    names -= {"csrfmiddlewaretoken"}
    path, _, given = url.partition("?")
    base = QueryDict(given).dict()
    queries = _rotations(sorted(names), HOSTILE)
    # one parameter wrong, the others as the page was opened: what reaches past a refused one
    one = [(n, v) for n in sorted(names) for v in (ONE_BY_ONE if DEEP else FEW) if alone]
    queries += [{**base, name: value} for name, value in one]
    if DEEP:
        queries += [dict.fromkeys(names, value) for value in HOSTILE]
    queries += [{name: ["1", "2"] for name in names}]
    queries += EXTRA + (EXTRA_DEEP if DEEP else [])
    queries += [{**dict.fromkeys(names, value), "export": "csv"} for value in ("abc", LONG)]
    for query in queries:
        response = client.get(path, query)
        if response.status_code >= 500:
            _fail(failures, "GET", path, query, response)
    return 1 + len(queries)


GARBAGE = [
    "-1",
    "-5",
    "99999999999999999999",
    "1e309",
    "0.123456789012",
    "abc",
    "2026-13-45",
    "<script>",
    LONG,
    DIGITS,
    "²",
    "Grüße ✓ 数据",
]


def _form_errors(response) -> bool:
    return response.status_code == 200 and b"errorlist" in response.content


def _probe_posts(
    client, url: str, other_team: dict, failures: list[str], *, alone: bool = True
) -> int:
    """POST ``url`` an empty body, and each POST form of its page (to the form's action, on
    this site) garbage in its fields (``alone``: each field alone too, the others as shown);
    returns how many were sent."""
    page = client.get(url)
    forms = []
    if page.status_code == 200 and page.get("Content-Type", "").startswith("text/html"):
        forms = [
            (action.split("#")[0] or url, fields)
            for method, action, fields in _forms(page.content.decode())
            if method == "post" and (action.startswith("/") or not action)
        ]
    bodies: list[tuple[str, dict]] = [(url, {})]
    for target, fields in forms:
        fields = {k: v for k, v in fields.items() if k != "csrfmiddlewaretoken"}
        names = sorted(fields)
        bodies += [(target, body) for body in _rotations(names, GARBAGE)]
        # one field wrong, the others as the form shows them: what a form's clean() sees
        wrong = [(n, v) for n in names for v in (GARBAGE if DEEP else FEW) if alone]
        bodies += [(target, {**fields, name: value}) for name, value in wrong]
        starts = [n for n in fields if "start" in n or n.endswith("from")]
        ends = [n for n in fields if "end" in n or n.endswith("until") or n.endswith("to")]
        if starts and ends:  # ends before it starts
            bodies.append(
                (
                    target,
                    {
                        **fields,
                        **dict.fromkeys(starts, "2027-03-02T10:00"),
                        **dict.fromkeys(ends, "2027-03-01T10:00"),
                    },
                )
            )
        for name in fields:  # another team's objects
            for key in ("team", "allocation", "request", "budget", "estimate"):
                if key in name:
                    bodies.append((target, {**fields, name: str(other_team[key])}))
    for target, body in bodies:
        before = _state()
        response = client.post(target, body)
        if response.status_code >= 500:
            _fail(failures, "POST", target, body, response)
        elif (response.status_code >= 400 or _form_errors(response)) and _state() != before:
            _fail(failures, "POST (wrote on refusal)", target, body, response)
    return len(bodies)


PROBED = sorted(ROUTES)


def test_every_route_is_probed_or_named_as_not_probed(db):
    routes = {r for r in all_routes() if not r.startswith(SKIPPED_PREFIXES)}

    assert sorted(routes - set(ROUTES) - set(NOT_PROBED)) == []  # a new route: add it to ROUTES
    assert sorted((set(ROUTES) | set(NOT_PROBED)) - routes) == []  # a route that is gone


@pytest.mark.parametrize("who", ["admin", "alice"])
@pytest.mark.parametrize("route", PROBED)
def test_no_query_string_or_form_body_is_a_500(demo, db, route, who):
    client = _client(demo[who])
    url = ROUTES[route].format(**demo["own"])
    failures: list[str] = []
    before = _state()

    # the member's pages run the admin's code: each parameter alone is tried as the admin only
    alone = DEEP or who == "admin"
    _probe_gets(client, url, failures, alone=alone)
    assert _state() == before, "a GET wrote"
    _probe_posts(client, url, demo["foreign"], failures, alone=alone)

    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("method", ["get", "post"])
def test_an_elastic_what_if_id_or_days_of_5000_digits_is_refused_not_a_500(demo, db, method):
    """``?whatif=`` and the what-if form's ``days`` of 5,000 digits reached ``.filter(pk=...)``
    and ``int()`` (which refuses past 4,300 digits): a 500. Now an unknown what-if (the page
    without one) and the form's error."""
    client = _client(demo["admin"])
    url = f"/elastic/{demo['own']['elastic']}/"
    if method == "get":
        response = client.get(url, {"whatif": DIGITS})
        assert response.status_code == 200
    else:  # the what-if form as the page shows it, with days of 5,000 digits
        page = client.get(url).content.decode()
        fields = next(f for m, _, f in _forms(page) if m == "post" and "days" in f)
        response = client.post(url, {**fields, "days": DIGITS})
        assert response.status_code in (200, 400)
        assert "A whole number of days from 1 to" in response.content.decode()


@pytest.mark.parametrize("route", TEAM_OWNED)
def test_a_member_never_gets_another_teams_object(demo, db, route):
    client = _client(demo["alice"])
    url = ROUTES[route].format(**demo["foreign"])

    response = client.get(url)

    assert response.status_code in {302, 403, 404}, (url, response.status_code)
    assert re.search(r"\b5\d\d\b", str(response.status_code)) is None


PATH_VALUES = {
    "int": ["0", "99999999999999999999", DIGITS],
    "str": ["abc", "2026-13", "0000-00", "99999-12", "2026-1", "-1", "x" * 300, "²", "%00"],
    "slug": ["no-such-thing", "-", "x" * 300],
}


def _hostile_paths(route: str, opened: str) -> list[str]:
    """``route`` with each of its parameters in turn set to each of :data:`PATH_VALUES` for its
    converter, the others as in the path ``opened``."""
    kwargs = resolve(opened.split("?")[0]).kwargs
    params = re.findall(r"<(\w+):(\w+)>", route)
    paths = []
    for converter, name in params:
        for value in PATH_VALUES[converter]:
            path = route
            for other_converter, other in params:
                given = value if other == name else str(kwargs[other])
                path = path.replace(f"<{other_converter}:{other}>", quote(given), 1)
            paths.append("/" + path)
    return paths


@pytest.mark.parametrize("route", [r for r in PROBED if "<" in r])
def test_no_hostile_path_segment_is_a_500(demo, db, route):
    admin, member = _client(demo["admin"]), _client(demo["alice"])
    failures: list[str] = []
    before = _state()

    for path in _hostile_paths(route, ROUTES[route].format(**demo["own"])):
        for method in (admin.get, admin.post, member.get):
            response = method(path)
            if response.status_code >= 500:
                _fail(failures, method.__name__.upper(), path, {}, response)
            elif response.status_code >= 400 and _state() != before:
                _fail(failures, "wrote on refusal", path, {}, response)

    assert not failures, "\n".join(failures)
