"""API scoping, query counts, token ingest; pages, CSV and PDF."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from kit import Accounting, job, utc

from billing.models import UsageRecord
from billing.reports import CSV_COLUMNS
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_slurm

pytestmark = pytest.mark.django_db
OCT = date(2026, 10, 1)


@pytest.fixture
def two_statements(team, other_member, rates, train_pool):
    from pools.tenancy.models import Team

    vision = Team.objects.get(slug="vision")
    jobs = Accounting([
        job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1), {"a100": 1}),
        job(2, utc(2026, 10, 2), utc(2026, 10, 2, 2), {"a100": 1}, account="vision"),
    ])  # fmt: skip
    usage_import_slurm(scheduler=jobs, start=utc(2026, 10, 1), end=utc(2026, 11, 1),
                       now=utc(2026, 11, 2))  # fmt: skip
    return statement_build(team=team, month=OCT), statement_build(team=vision, month=OCT)


def test_member_sees_only_their_teams_statements(api_as, team_member, two_statements):
    nlp, vision = two_statements
    body = api_as(team_member).get("/api/v1/statements/?month=2026-10").json()
    assert [(s["team"], s["month"], s["total_amount"]) for s in body["results"]] == [
        ("nlp", "2026-10", "3.00")]  # fmt: skip
    assert api_as(team_member).get(f"/api/v1/statements/{vision.pk}/").status_code == 404
    assert api_as(team_member).get(f"/api/v1/statements/{vision.pk}/lines/").status_code == 404
    lines = api_as(team_member).get(f"/api/v1/statements/{nlp.pk}/lines/").json()["results"]
    # the amount to the currency's minor unit (stored with 4 places), with its currency
    assert [(x["gpu_model"], x["quantity"], x["amount"], x["currency"]) for x in lines] == [
        ("a100_80g_sxm", "1.000000", "3.00", "EUR")]  # fmt: skip


def test_staff_see_all_and_filter_by_team(admin_api, two_statements):
    body = admin_api.get("/api/v1/statements/?month=2026-10&team=vision").json()
    assert [(s["team"], s["total_amount"]) for s in body["results"]] == [("vision", "6.00")]
    assert admin_api.get("/api/v1/statements/?month=2026-09").json()["count"] == 0
    assert admin_api.get("/api/v1/statements/", HTTP_ACCEPT="application/json").json()["count"] == 2


def test_statement_list_query_count_does_not_grow(admin_api, two_statements, rates):
    from factories import TeamFactory

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert admin_api.get("/api/v1/statements/?page_size=100").status_code == 200
        return len(ctx.captured_queries)

    before = count()
    for n in range(15):
        statement_build(team=TeamFactory(slug=f"t{n}"), month=OCT)
    assert count() == before <= 4


def test_token_ingest_is_idempotent_and_needs_permission(admin_api, member_api, team, rates):
    record = {"idempotency_key": "k1", "team": "nlp", "served_model": "qwen",
              "prompt_tokens": 120000, "completion_tokens": 8000, "cached_tokens": 100000,
              "timestamp": "2026-10-05T10:00:00Z"}  # fmt: skip
    assert member_api.post("/api/v1/usage/tokens/", {"records": [record]},
                           format="json").status_code == 403  # fmt: skip
    first = admin_api.post("/api/v1/usage/tokens/", {"records": [record]}, format="json")
    again = admin_api.post("/api/v1/usage/tokens/", {"records": [record, record]}, format="json")
    assert first.json() == {"accepted": 1, "duplicates": 0, "rejected": []}
    assert again.json() == {"accepted": 0, "duplicates": 2, "rejected": []}
    assert sorted(UsageRecord.objects.values_list("unit", "quantity")) == [  # fmt: skip
        ("cached-input-tokens", 100000),
        ("input-tokens", 20000),
        ("output-tokens", 8000),
    ]
    bad = admin_api.post("/api/v1/usage/tokens/", {"records": [{**record, "idempotency_key": "k2",
                         "timestamp": "2026-10-05T10:00:00"}]}, format="json")  # fmt: skip
    assert bad.status_code == 400
    assert bad.json()["code"] == "usage_rejected"
    assert "timestamp" in bad.json()["rejected"][0]["error"]


def test_team_page_csv_pdf_and_scoping(team_member, two_statements, client):
    client.force_login(team_member)
    page = client.get("/costs/nlp/2026-10/")
    assert page.status_code == 200
    assert "3.00\u00a0EUR" in page.content.decode()  # money to the minor unit
    assert client.get("/costs/vision/2026-10/").status_code == 404
    assert client.get("/costs/finance/2026-10/").status_code == 403  # pool admins only
    csv_text = client.get("/costs/nlp/2026-10/?export=csv").content.decode()
    header, row = csv_text.splitlines()[:2]
    assert header.split(",") == list(CSV_COLUMNS)
    assert row.split(",")[1:4] == ["nlp", two_statements[0].cost_centre, "2026-10"]
    pdf = client.get("/costs/nlp/2026-10/?export=pdf")
    assert pdf["Content-Type"] == "application/pdf" and pdf.content[:4] == b"%PDF"


def test_finance_page_shows_every_team_and_idle_cost(admin_page, two_statements):
    page = admin_page.get("/costs/finance/2026-10/")
    assert page.status_code == 200
    assert b"Vision" in page.content and b"NLP" in page.content
    # train pool: 8 A100 × 744 h × 2.00 reserved = 11,904.00 capacity, nothing allocated
    assert "11\u202f904.00" in page.content.decode()


def test_finance_statements_table_has_its_csv(admin_page, two_statements):
    # nlp: 1 A100 card-hour used × 3.00 EUR; vision: 2 × 3.00 (the two jobs above), in the
    # table's order (team name); linked from the table's heading
    page = admin_page.get("/costs/finance/2026-10/").content.decode()
    assert 'href="?export=statements"' in page
    csv = admin_page.get("/costs/finance/2026-10/?export=statements")
    assert csv["Content-Disposition"] == 'attachment; filename="statements-2026-10.csv"'
    rows = [line.split(",") for line in b"".join(csv.streaming_content).decode().splitlines()]
    assert rows[0] == ["team", "team_name", "cost_centre", "status", "currency",
                       "usage_amount", "adjustment_amount", "total_amount"]  # fmt: skip
    assert [(r[0], r[4], r[7]) for r in rows[1:]] == [
        ("nlp", "EUR", "3.00"), ("vision", "EUR", "6.00")]  # fmt: skip


def test_costs_index_takes_the_export_along_and_unknown_exports_are_refused(
    team_member, admin_page, two_statements, client
):
    # /costs/?export=csv answered the team's HTML month page (the redirect dropped the query):
    # now the redirect keeps it, and following it gives the statement CSV of that month.
    client.force_login(team_member)
    hop = client.get("/costs/?month=2026-10&export=csv")
    assert (hop.status_code, hop["Location"]) == (302, "/costs/nlp/2026-10/?export=csv")
    csv = client.get("/costs/?month=2026-10&export=csv", follow=True)
    assert csv["Content-Type"] == "text/csv; charset=utf-8"
    assert csv.content.decode().splitlines()[0].split(",") == list(CSV_COLUMNS)
    hop = admin_page.get("/costs/?month=2026-10&export=idle")
    assert hop["Location"] == "/costs/finance/2026-10/?export=idle"
    # An export a cost page has not is a plain-text 400 naming those it has, not the page.
    bad = client.get("/costs/nlp/2026-10/?export=xlsx")
    assert (bad.status_code, bad["Content-Type"]) == (400, "text/plain; charset=utf-8")
    assert bad.content.decode() == (
        "No export 'xlsx' here; export is one of: csv, focus, showback, pdf, top.\n"
    )
    bad = admin_page.get("/costs/finance/2026-10/?export=xlsx")
    assert (bad.status_code, bad["Content-Type"]) == (400, "text/plain; charset=utf-8")
    assert bad.content.decode() == (
        "No export 'xlsx' here; export is one of: csv, focus, statements, idle, top, shared.\n"
    )


def test_costs_export_for_a_user_in_no_team_is_a_plain_refusal(client, db):
    from factories import UserFactory

    client.force_login(UserFactory())
    assert client.get("/costs/").status_code == 200  # the "you are in no team" page
    bad = client.get("/costs/?export=csv")
    assert (bad.status_code, bad["Content-Type"]) == (400, "text/plain; charset=utf-8")
    assert bad.content.decode() == "You are in no team, so there is no cost table to export.\n"
