"""Budget pages: the list with its burn-down, the CSV, and the banner on the team's pages."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from billing.budgets.models import Budget

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates")]
NOW = datetime(2026, 3, 11, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fixed_now(monkeypatch, settings):
    settings.BILLING_TIME_ZONE = "UTC"
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


@pytest.fixture
def near(team, a100):
    """85 A100 card-h on use by 11 March of a 100 card-h monthly budget: 85.0 %, alert 80.
    Burn: 85 card-h in 10 days = 8.5 a day, the 15 left last 15 / 8.5 = 1.7647 days =
    152,471 s (rounded): run-out 2026-03-12 18:21:11 UTC, inside March."""
    from factories import UsageRecordFactory

    start = datetime(2026, 3, 2, tzinfo=UTC)
    UsageRecordFactory(team=team, gpu_model=a100, quantity=Decimal(85 * 3600), basis="used",
                       source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=3), month=date(2026, 3, 1))  # fmt: skip
    return Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                                 card_hours_limit=Decimal(100), enforcement="refuse")  # fmt: skip


def test_list_shows_figures_and_burn_down(near, team_member, client):
    client.force_login(team_member)
    page = client.get("/costs/budgets/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "85.000 / 100.000" in html and "85.0 %" in html and "12 Mar 2026" in html
    chart = page.context["chart"]
    left = chart["datasets"][0]["data"]
    # from 100 at day 0 to 15 left now, 10 days in
    assert left == [{"x": 0, "y": 100.0}, {"x": 10.0, "y": 15.0}]
    forecast = chart["datasets"][2]["data"]
    assert forecast[1] == {"x": round(10 + 152471 / 86400, 2), "y": 0}


def test_csv_export(near, team_member, client):
    client.force_login(team_member)
    answer = client.get("/costs/budgets/?export=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    assert len(rows) == 1
    assert rows[0]["team"] == "nlp" and rows[0]["card_hours_used"] == "85.000"
    assert rows[0]["percent"] == "85.0" and rows[0]["alert"] == "80"
    assert rows[0]["run_out_at"] == "2026-03-12T18:21:11+00:00"


def test_csv_writes_money_to_the_cents_as_the_page_shows_it(near, team_member, client):
    """The budget also limits money, 1,234.5 EUR a month: the 85 A100 card-h used at 3.00 EUR
    are 255.00 EUR. The CSV writes the limit as the page shows it, 1234.50 (the column's 4
    decimals wrote 1234.5000), beside money used to 2 places and the currency."""
    Budget.objects.filter(pk=near.pk).update(money_limit=Decimal("1234.5"), currency="EUR")
    client.force_login(team_member)
    page = client.get("/costs/budgets/").content.decode()
    assert '<td class="num">255.00\xa0EUR / 1\u202f234.50\xa0EUR</td>' in page
    answer = client.get("/costs/budgets/?export=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    (money,) = [row for row in rows if row["money_limit"]]
    assert (money["money_limit"], money["money_used"], money["currency"]) == (
        "1234.50", "255.00", "EUR",
    )  # fmt: skip


def test_other_team_sees_nothing(near, other_member, client):
    client.force_login(other_member)
    assert "No budgets" in client.get("/costs/budgets/").content.decode()
    refused = client.get("/costs/budgets/?export=csv&team=nlp")
    assert refused.status_code == 400 and refused["Content-Type"].startswith("text/plain")


def test_bad_filter_shows_no_rows(near, team_member, client):
    client.force_login(team_member)
    page = client.get("/costs/budgets/?period=week")
    assert page.status_code == 400 and page.context["statuses"] == []


def test_banner_on_the_team_pages_from_80_percent(near, team_member, client):
    client.force_login(team_member)
    for url in ("/teams/nlp/dashboard/", "/costs/nlp/2026-03/"):
        html = client.get(url).content.decode()
        assert "Budget 85.0 % used" in html, url
        assert "requests are refused" in html


def test_no_banner_below_80_percent(near, team_member, client):
    near.card_hours_limit = Decimal(200)  # 85 of 200 = 42.5 %
    near.save()
    client.force_login(team_member)
    assert "Budget " not in client.get("/teams/nlp/dashboard/").content.decode()


def test_alerts_mailed_once_per_threshold_and_period(
    near, team_manager, a100, mailoutbox, django_capture_on_commit_callbacks
):
    """85 % reached: the 80 % alert goes to the manager once; a second run sends nothing;
    15 more card-h (100 of 100: 100 %) and the 100 % alert follows."""
    from factories import UsageRecordFactory

    from billing.budgets.alerts import budget_alerts_send

    team_manager.email = "mia@example.org"
    team_manager.save()
    with django_capture_on_commit_callbacks(execute=True):
        assert budget_alerts_send(now=NOW) == [near.pk]
        assert budget_alerts_send(now=NOW) == []
    assert [m.subject for m in mailoutbox] == ["GPU budget of NLP: 80 % reached (2026-03)"]
    assert mailoutbox[0].to == ["mia@example.org"]
    start = datetime(2026, 3, 5, tzinfo=UTC)
    UsageRecordFactory(team=near.team, gpu_model=a100, quantity=Decimal(15 * 3600),
                       basis="used", source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=6), month=date(2026, 3, 1))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        assert budget_alerts_send(now=NOW) == [near.pk]
    assert mailoutbox[1].subject == "GPU budget of NLP: 100 % reached (2026-03)"
    near.refresh_from_db()
    assert (near.last_alert_period, near.last_alert_percent) == (date(2026, 3, 1), 100)


def test_pool_and_gpu_model_filters_are_pickers_and_the_api_keeps_slugs(
    team, a100, team_member, client, api_as
):
    """The page offers pools and GPU models by name (blank: any), sending their slugs; the API
    reads the same slugs, and an unknown one still matches no budget rather than refusing."""
    from factories import PoolFactory

    zeta, alpha = PoolFactory(slug="zeta", name="Zeta"), PoolFactory(slug="alpha", name="Alpha")
    for pool in (zeta, alpha):
        Budget.objects.create(team=team, pool=pool, period="month", starts_on=date(2026, 1, 1),
                              card_hours_limit=Decimal(10))  # fmt: skip
    client.force_login(team_member)

    form = client.get("/costs/budgets/").context["filterset"].form
    html = str(form["pool"])
    assert html.startswith('<select name="pool"')
    assert (
        html.index('<option value="" selected>Any</option>')
        < html.index('<option value="alpha">Alpha</option>')
        < html.index('<option value="zeta">Zeta</option>')
    )
    assert f'<option value="{a100.slug}">{a100.name}</option>' in str(form["gpu_model"])
    picked = client.get("/costs/budgets/?pool=zeta").context["statuses"]
    assert [s.budget.pool.slug for s in picked] == ["zeta"]
    api = api_as(team_member)
    assert [b["pool"] for b in api.get("/api/v1/budgets/?pool=alpha").json()["results"]] == [
        "alpha"
    ]
    unknown = api.get("/api/v1/budgets/?pool=nowhere")
    assert (unknown.status_code, unknown.json()["count"]) == (200, 0)


def test_the_forms_blank_pickers_name_a_scope_and_the_lists_filters_match_any(
    team, a100, client, django_user_model
):
    """A budget with no pool counts every pool (its scope reads "all pools and models"): the
    new-budget form's blank options say "All pools" / "All GPU models" (they said "all"), and
    the required period's "Choose a period" (it said "---------"); the list's filters left
    blank match budgets of any scope, and keep "Any"."""
    admin = django_user_model.objects.create_user("ada", is_staff=True)
    client.force_login(admin)

    form = client.get("/costs/budgets/new/").context["form"]
    assert '<option value="" selected>All pools</option>' in str(form["pool"])
    assert '<option value="" selected>All GPU models</option>' in str(form["gpu_model"])
    assert '<option value="" selected>Choose a period</option>' in str(form["period"])
    filters = client.get("/costs/budgets/").context["filterset"].form
    assert '<option value="" selected>Any</option>' in str(filters["pool"])
    assert '<option value="" selected>Any</option>' in str(filters["gpu_model"])


def test_a_past_month_shows_its_own_budget_not_this_months(near, team_member, client):
    """The budget's months are March (85 of 100 card-h, 85.0 %: the banner) and February (no
    usage: 0 %, below 80). February's page shows no banner; it used to show March's."""
    client.force_login(team_member)
    assert "Budget 85.0 % used" in client.get("/costs/nlp/2026-03/").content.decode()
    assert "Budget " not in client.get("/costs/nlp/2026-02/").content.decode()


def test_a_month_before_the_budget_starts_shows_none(near, team, a100, team_member, client):
    """The budget starts on 1 March: February has no period of it, so no banner, though its
    first period (March) is 85.0 % used. 90 card-h used in February count for no budget."""
    from factories import UsageRecordFactory

    near.starts_on = date(2026, 3, 1)
    near.save()
    start = datetime(2026, 2, 2, tzinfo=UTC)
    UsageRecordFactory(team=team, gpu_model=a100, quantity=Decimal(90 * 3600), basis="used",
                       source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=3), month=date(2026, 2, 1))  # fmt: skip
    client.force_login(team_member)
    assert "Budget " not in client.get("/costs/nlp/2026-02/").content.decode()
    assert "Budget 85.0 % used" in client.get("/costs/nlp/2026-03/").content.decode()


def test_a_past_month_over_its_budget_shows_that_months_figure(near, team, a100, team_member,
                                                                client):  # fmt: skip
    """90 card-h used in February of the 100 card-h monthly budget: 90.0 %, February's
    period (2026-02) on February's page; March's 85.0 % on March's."""
    from factories import UsageRecordFactory

    start = datetime(2026, 2, 2, tzinfo=UTC)
    UsageRecordFactory(team=team, gpu_model=a100, quantity=Decimal(90 * 3600), basis="used",
                       source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=3), month=date(2026, 2, 1))  # fmt: skip
    client.force_login(team_member)
    february = client.get("/costs/nlp/2026-02/").content.decode()
    assert "Budget 90.0 % used" in february and "2026-02)" in february
    assert "85.0 %" not in february
