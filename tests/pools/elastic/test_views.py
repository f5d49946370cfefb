"""Elastic pages: the list with live state, the editor (managers and admins), the what-if
with its totals, the scaling history and the chart's data."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, MembershipFactory, PoolFactory, TeamFactory, node_with_gpus

from pools.common.choices import AllocationStatus, Scheduler, TeamRole
from pools.elastic.models import ElasticPolicy, ElasticWhatIf, SignalReading
from pools.elastic.services import elastic_apply, elastic_scan
from scheduler_adapters.prometheus import InferenceSignals, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(second=0, microsecond=0)


def _signals(minutes=40):
    stamps = [NOW.timestamp() - 60 * m for m in range(minutes, -1, -1)]
    return InferenceSignals("team-chat", util_pct=tuple(Sample(t, 90.0) for t in stamps),
                            cards_reporting=tuple(Sample(t, 8.0) for t in stamps),
                            latency_s=tuple(Sample(t, 1.5) for t in stamps))  # fmt: skip


@pytest.fixture
def policy():
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node_with_gpus(8, gpu_model="l40s", hostname="inf-0", pool=pool,
                   scheduler=Scheduler.KUBERNETES)  # fmt: skip
    allocation = AllocationFactory(pool=pool, team=TeamFactory(slug="chat", name="Chat"),
                                   card_count=2, status=AllocationStatus.ACTIVE,
                                   starts_at=NOW - timedelta(hours=1),
                                   ends_at=NOW + timedelta(days=3))  # fmt: skip
    return ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2,
                                        step_cards=2)  # fmt: skip


def test_list_and_live_state_after_a_scale_up(admin_page, policy):
    elastic_scan(now=NOW, metrics=FakePrometheus(inference=[_signals()]))
    page = admin_page.get("/elastic/")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"#{policy.allocation_id}" in text and ">load high</span>" in text
    detail = admin_page.get(f"/elastic/{policy.pk}/")
    body = detail.content.decode()
    assert "<strong>4</strong>" in body  # cards held now
    assert "floor 2 guaranteed, 2 borrowed, ceiling 6" in body
    assert "scale_up" not in body  # the reason in words, the time without ISO's "T"
    assert f"Last decision ({NOW:%Y-%m-%d %H:%M} UTC)" in body
    chart = detail.context["chart"]
    assert [p["y"] for p in chart["cards"]] == [4]
    assert [p["y"] for p in chart["util"]] == [90.0]
    assert json.loads(body.split('id="elastic-chart-data" type="application/json">')[1]
                      .split("</script>")[0])["latency"][0]["y"] == 1500.0  # fmt: skip


def test_manager_saves_and_member_cannot(client, django_user_model, policy):
    manager = django_user_model.objects.create_user("mgr", password="pw")
    MembershipFactory(team=policy.allocation.team, user=manager, role=TeamRole.MANAGER)
    client.force_login(manager)
    form = {"ceiling_cards": 8, "step_cards": 2, "cards_per_replica": 1, "min_replicas": 1,
            "up_util_pct": "75", "up_latency_ms": 800, "up_window_minutes": 5,
            "down_util_pct": "30", "down_window_minutes": 30, "cooldown_minutes": 15,
            "prescale_lead_minutes": 30, "per_card_tok_s": "", "deployment": "vllm",
            "enabled": "on"}  # fmt: skip
    saved = client.post(f"/elastic/{policy.pk}/", form)
    assert saved.status_code == 302
    policy.refresh_from_db()
    assert (policy.ceiling_cards, policy.deployment) == (8, "vllm")
    refused = client.post(f"/elastic/{policy.pk}/", {**form, "cooldown_minutes": 5})
    assert refused.status_code == 200 and "cooldown" in refused.content.decode().lower()
    policy.refresh_from_db()
    assert policy.cooldown_minutes == 15

    member = django_user_model.objects.create_user("mem", password="pw")
    MembershipFactory(team=policy.allocation.team, user=member, role=TeamRole.MEMBER)
    client.force_login(member)
    assert client.get(f"/elastic/{policy.pk}/").status_code == 200
    assert client.post(f"/elastic/{policy.pk}/", form).status_code == 403


def test_other_teams_get_404(member_page, policy):
    assert member_page.get(f"/elastic/{policy.pk}/").status_code == 404


FIELDS = {"ceiling_cards": 6, "step_cards": 2, "cards_per_replica": 1, "min_replicas": 1,
          "up_util_pct": "75", "up_latency_ms": 800, "up_window_minutes": 5,
          "down_util_pct": "30", "down_window_minutes": 30, "cooldown_minutes": 15,
          "prescale_lead_minutes": 30, "enabled": "on"}  # fmt: skip


def run_what_if(page_client, policy, data, capture, *, execute=True):
    """POST the what-if form (its task runs eagerly on commit unless ``execute`` is off) and
    follow the redirect to ``?whatif=<id>``: the what-if and the page."""
    with capture(execute=execute):
        queued = page_client.post(f"/elastic/{policy.pk}/", {"whatif": 1, **data})
    whatif = ElasticWhatIf.objects.get()
    assert queued.status_code == 302
    assert queued["Location"] == f"/elastic/{policy.pk}/?whatif={whatif.pk}#whatif"
    return whatif, page_client.get(f"/elastic/{policy.pk}/", {"whatif": whatif.pk})


def test_what_if_totals_on_the_page(
    admin_page, policy, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(
        "pools.elastic.services.metrics_adapter",
        lambda **_: FakePrometheus(inference=[_signals(minutes=10)]),
    )
    # a trial latency target of 1,000 ms (saved: 800): the breach counts against the trial's
    data = {**FIELDS, "up_latency_ms": 1000, "days": 1}
    whatif, page = run_what_if(admin_page, policy, data, django_capture_on_commit_callbacks)
    assert whatif.params == {"days": 1, "source": "", "fields": {
        **{k: v for k, v in FIELDS.items() if k != "enabled"}, "up_latency_ms": 1000,
        "up_util_pct": "75", "down_util_pct": "30", "per_card_tok_s": None}}  # fmt: skip
    text = " ".join(page.content.decode().split())
    # 10 minutes at 90 % / 1.5 s: up at minute 5 (2 -> 4), then cooldown
    assert "scaled up 1 time and down 0 times, held between 2 and 4 cards" in text
    # over what the samples cover (ten 1-minute steps), not "the last 1 day"
    assert "Over the 10 minutes the readings cover (of the 1 day asked: there are no" in text
    assert "was above 1000 ms for 10 minutes" in text
    # card-hours to 3 places: 5 min × 2 cards + 5 min × 4 = 30 card-minutes = 0.500; a fixed
    # 4 cards × 10 min = 40 card-minutes = 0.667 (0.6666… half-up), 0.667 − 0.500 = 0.167 saved
    # (stored to 2 places it read 0.170)
    assert "spent 0.500 card-hours (0.167 fewer than a fixed allocation of 4 cards" in text
    assert (whatif.result["card_hours"], whatif.result["fixed_card_hours"]) == ("0.500", "0.667")
    assert whatif.result["saved_card_hours"] == "0.167"
    assert 'name="up_latency_ms" value="1000"' in text  # the form keeps the trial's values
    policy.refresh_from_db()
    assert policy.up_latency_ms == 800  # a what-if changes nothing


def test_what_if_without_prometheus_says_so(admin_page, policy, django_capture_on_commit_callbacks):
    whatif, page = run_what_if(admin_page, policy, {**FIELDS, "days": 7},
                               django_capture_on_commit_callbacks)  # fmt: skip
    assert (whatif.status, whatif.error_code) == ("failed", "unavailable")
    text = page.content.decode()
    assert "What-if unavailable: PROMETHEUS_URL is not set and the loop has recorded" in text
    assert 'data-error-code="unavailable"' in text


def test_what_if_days_not_from_1_to_30_are_a_form_error(
    admin_page, policy, django_capture_on_commit_callbacks
):
    """``days=²`` passes ``str.isdigit()`` but not ``int()`` (was a 500); ``٣`` is no ASCII
    number either; 31 is past the readings kept. Each: the form again, with the error, and
    nothing queued."""
    for days in ("²", "٣", "31", "0", ""):
        with django_capture_on_commit_callbacks(execute=True):
            page = admin_page.post(f"/elastic/{policy.pk}/", {"whatif": 1, **FIELDS,
                                                              "days": days})  # fmt: skip
        assert page.status_code == 200, days
        assert "Days: A whole number of days from 1 to 30." in page.content.decode(), days
    assert not ElasticWhatIf.objects.exists()


def test_a_trial_the_policy_would_refuse_is_a_field_error(admin_page, policy):
    data = {"whatif": 1, **FIELDS, "down_util_pct": "80", "days": 1}
    page = admin_page.post(f"/elastic/{policy.pk}/", data)
    assert page.status_code == 200
    errors = page.context["whatif_form"].errors
    assert errors == {"__all__": ["The scale-down threshold must be below the scale-up one."]}
    assert not ElasticWhatIf.objects.exists()


def test_the_page_polls_a_queued_what_if_then_reloads_once_done(
    admin_page, policy, django_capture_on_commit_callbacks
):
    """Queued (no worker yet): the page says so and polls ``?whatif=<id>`` over htmx; the poll
    answers the progress fragment while it runs, then 204 with ``HX-Refresh`` once done (the
    whole page again, so the chart draws the what-if's cards)."""
    from pools.elastic.services import elastic_whatif_run

    SignalReading.objects.create(policy=policy, read_at=NOW - timedelta(minutes=1),
                                 util_pct=20.0, cards_held=2)  # fmt: skip
    SignalReading.objects.create(policy=policy, read_at=NOW, util_pct=20.0, cards_held=2)
    whatif, page = run_what_if(admin_page, policy, {**FIELDS, "days": 1},
                               django_capture_on_commit_callbacks, execute=False)  # fmt: skip
    text = page.content.decode()
    assert 'data-whatif-status="pending"' in text
    assert f'hx-get="/elastic/{policy.pk}/?whatif={whatif.pk}"' in text
    url = f"/elastic/{policy.pk}/?whatif={whatif.pk}"
    poll = admin_page.get(url, headers={"HX-Request": "true"})
    assert poll.status_code == 200 and poll["Vary"].count("HX-Request") == 1
    assert poll.content.decode().lstrip().startswith('<div id="whatif-result"')
    assert "<nav" not in poll.content.decode()  # the fragment, not the page
    type(whatif).objects.filter(pk=whatif.pk).update(status="running", progress=60)
    poll = admin_page.get(url, headers={"HX-Request": "true"})
    assert "Reading the history and replaying it: 60 %." in poll.content.decode()
    assert elastic_whatif_run(whatif_id=whatif.pk).status == "done"
    poll = admin_page.get(url, headers={"HX-Request": "true"})
    assert (poll.status_code, poll["HX-Refresh"]) == (204, "true")


def test_another_policys_what_if_is_not_shown(
    admin_page, policy, django_capture_on_commit_callbacks
):
    whatif, _ = run_what_if(admin_page, policy, {**FIELDS, "days": 1},
                            django_capture_on_commit_callbacks)  # fmt: skip
    other = ElasticPolicy.objects.create(
        allocation=AllocationFactory(pool=policy.allocation.pool, card_count=1,
                                     status=AllocationStatus.ACTIVE,
                                     starts_at=NOW - timedelta(hours=1),
                                     ends_at=NOW + timedelta(days=1)),
        ceiling_cards=2, cards_held=1,
    )  # fmt: skip
    page = admin_page.get(f"/elastic/{other.pk}/", {"whatif": whatif.pk})
    assert page.status_code == 200 and page.context["whatif"] is None
    assert "data-whatif-status" not in page.content.decode()


def test_the_hpa_for_the_deployment_is_shown(admin_page, policy):
    assert (
        "Name the serving Deployment" in admin_page.get(f"/elastic/{policy.pk}/").content.decode()
    )
    policy.deployment = "vllm-chat"
    policy.cards_per_replica = 2
    policy.save()
    text = admin_page.get(f"/elastic/{policy.pk}/").content.decode()
    hpa = text.split("<pre data-hpa>")[1].split("</pre>")[0]
    assert "kind: HorizontalPodAutoscaler" in hpa and "name: vllm-chat" in hpa
    assert "minReplicas: 1" in hpa and "maxReplicas: 3" in hpa  # 2 / 2 and 6 / 2


def test_admin_dashboard_shows_borrowed_cards_per_pool(admin_page, policy):
    policy.cards_held = 5
    policy.save()
    text = " ".join(admin_page.get("/dashboard/").content.decode().split())
    borrowed = text.split("<article data-borrowed>")[1].split("</article>")[0]
    assert '<div class="value">3</div>' in borrowed and "Infer 3" in borrowed


def test_a_what_if_stored_with_card_hours_as_numbers_still_reads(
    admin_page, policy, monkeypatch, django_capture_on_commit_callbacks
):
    """What-ifs stored before card-hours were decimal strings kept them as numbers to 2 places
    (0.5 and 0.17): the page still reads them, to 3 places (0.500, 0.170)."""
    monkeypatch.setattr(
        "pools.elastic.services.metrics_adapter",
        lambda **_: FakePrometheus(inference=[_signals(minutes=10)]),
    )
    whatif, _ = run_what_if(admin_page, policy, {**FIELDS, "days": 1},
                            django_capture_on_commit_callbacks)  # fmt: skip
    whatif.result |= {"card_hours": 0.5, "fixed_card_hours": 0.67, "saved_card_hours": 0.17}
    whatif.save()
    page = admin_page.get(f"/elastic/{policy.pk}/", {"whatif": whatif.pk})
    assert page.status_code == 200
    text = " ".join(page.content.decode().split())
    assert "spent 0.500 card-hours (0.170 fewer than a fixed allocation of 4 cards" in text


def test_next_pre_scale_is_shown(admin_page, policy):
    start = NOW.timestamp() + 3600 - NOW.timestamp() % 900  # a slot start 45-60 min ahead
    policy.per_card_tok_s = 250
    policy.prescale_plan = [[start - 900, 100.0], [start, 1000.0]]
    policy.save()
    text = " ".join(admin_page.get(f"/elastic/{policy.pk}/").content.decode().split())
    assert "Next pre-scale: 4 cards from" in text and "expected 1000 tok/s" in text


def test_what_if_over_recorded_readings_says_so_and_the_chart_draws_them(
    admin_page, policy, django_capture_on_commit_callbacks
):
    """No Prometheus: the what-if replays the loop's readings (10 minutes at 90 % / 1.5 s: up
    at minute 5, 2 -> 4) and says so; the chart draws the readings, not the decisions."""
    SignalReading.objects.bulk_create(
        SignalReading(policy=policy, read_at=NOW - timedelta(minutes=9 - m), util_pct=90.0,
                      latency_ms=1500.0, request_s=9.0, cards_held=2 if m < 5 else 4)
        for m in range(10)
    )  # fmt: skip
    _, page = run_what_if(admin_page, policy, {**FIELDS, "days": 1},
                          django_capture_on_commit_callbacks)  # fmt: skip
    text = " ".join(page.content.decode().split())
    assert "History: the 10 readings the portal's loop recorded for this allocation" in text
    assert "Over the 9 minutes the readings cover (of the 1 day asked" in text
    assert "scaled up 1 time and down 0 times, held between 2 and 4 cards" in text
    chart = page.context["chart"]
    assert chart["recorded"] is True
    assert [p["y"] for p in chart["cards"]] == [2] * 5 + [4] * 5
    assert [p["y"] for p in chart["latency"]] == [1500] * 10
    # the what-if's line: its start, then the scale-up at minute 5
    assert [p["y"] for p in chart["whatif"]] == [2, 4]


def test_an_event_held_in_the_portal_only_says_so(admin_page, policy):
    elastic_scan(now=NOW, metrics=FakePrometheus(inference=[_signals()]))
    elastic_apply(policy_id=policy.pk, now=NOW)  # no Kubernetes connection in the tests
    text = admin_page.get(f"/elastic/{policy.pk}/").content.decode()
    assert "Portal only: no Kubernetes connection is configured." in text
    assert ">pending<" not in text


def _what_if_form(text: str) -> str:
    return text.split('<article id="whatif">')[1].split("</form>")[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ceiling_cards", 1, "must be at least the floor (2 cards)"),
        ("up_latency_ms", "x", "Enter a whole number."),
    ],
)
def test_what_if_values_that_do_not_fit_are_errors_on_their_field(
    admin_page, policy, field, value, message
):
    """Refused on the field it concerns, nothing queued (was: a floor above the ceiling
    reported as "Prometheus could not be read")."""
    page = admin_page.post(f"/elastic/{policy.pk}/", {"whatif": 1, **FIELDS, "days": 7,
                                                      field: value})  # fmt: skip
    assert page.status_code == 200
    text = " ".join(page.content.decode().split())
    assert "Prometheus could not be read" not in text
    label = _what_if_form(text).split(f'name="{field}"')[1].split("</label>")[0]
    assert message in label
    assert not ElasticWhatIf.objects.exists()


def test_the_list_exports_csv_with_the_seven_day_burst_money(admin_page, policy, monkeypatch):
    """Up 2 -> 4 cards at NOW, read two hours later: 2 cards x 2 h = 4 card-hours above the
    floor at the reserved 8.00 EUR (the card has no burst price) = 32.00 EUR."""
    import csv
    import io
    from datetime import date
    from decimal import Decimal

    from billing.choices import RateKind
    from billing.services.rates import rate_card_create
    from pools.elastic.models import ScaleEvent

    rate_card_create(name="c", currency="EUR", effective_from=date(2020, 1, 1),
                     gpu_prices={(policy.allocation.gpu_model_id, RateKind.GPU_RESERVED):
                                 Decimal("8.00")})  # fmt: skip
    ScaleEvent.objects.create(policy=policy, decided_at=NOW, effective_at=NOW, action="up",
                              reason="load_high", cards_from=2, cards_to=4)  # fmt: skip
    policy.cards_held = 4
    policy.last_decision = {"reason": "load_high", "message": "up", "at": NOW.isoformat()}
    policy.save()
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW + timedelta(hours=2))

    page = admin_page.get("/elastic/")
    assert 'href="?export=csv"' in page.content.decode()
    answer = admin_page.get("/elastic/", {"export": "csv"})
    assert answer["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    allocation = policy.allocation
    assert rows == [
        {
            "allocation": str(allocation.pk),
            "team": "chat",
            "pool": "infer",
            "gpu_model": allocation.gpu_model.slug,
            "enabled": "True",
            "floor_cards": "2",
            "cards_now": "4",
            "ceiling_cards": "6",
            "burst_card_hours_7d": "4.000",
            "burst_amount_7d": "32.00",
            "currency": "EUR",
            "last_decision": "load_high",
        }
    ]


def test_my_teams_counts_the_cards_an_elastic_allocation_borrowed(admin_page, policy):
    """Floor 2, holding 5: the team holds 5 cards now, 3 of them above the floor (My teams
    said 2, the floor, while the elastic page said 5)."""
    policy.cards_held = 5
    policy.save()
    page = admin_page.get("/teams/mine/")
    assert page.context["held"][policy.allocation.team_id] == 5
    text = " ".join(page.content.decode().split())
    assert (
        '<div class="value">5</div><div class="label">cards held now (3 borrowed above an '
        "elastic floor)</div>" in text
    )


def test_the_scaling_history_exports_csv_with_each_decisions_money(admin_page, policy, monkeypatch):
    """The history's table as CSV: up 2 -> 4 at NOW, read two hours later, added 2 cards x
    2 h = 4 card-hours at the reserved 8.00 EUR (no burst price) = 32.00 EUR."""
    import csv
    import io
    from datetime import date
    from decimal import Decimal

    from billing.choices import RateKind
    from billing.services.rates import rate_card_create
    from pools.elastic.models import ScaleEvent

    rate_card_create(name="c", currency="EUR", effective_from=date(2020, 1, 1),
                     gpu_prices={(policy.allocation.gpu_model_id, RateKind.GPU_RESERVED):
                                 Decimal("8.00")})  # fmt: skip
    ScaleEvent.objects.create(policy=policy, decided_at=NOW, effective_at=NOW, action="up",
                              reason="load_high", cards_from=2, cards_to=4,
                              numbers={"util_pct": 91.5, "latency_ms": 1200})  # fmt: skip
    policy.cards_held = 4
    policy.save()
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW + timedelta(hours=2))

    assert 'href="?export=csv"' in admin_page.get(f"/elastic/{policy.pk}/").content.decode()
    answer = admin_page.get(f"/elastic/{policy.pk}/", {"export": "csv"})
    assert answer["Content-Type"].startswith("text/csv")
    (row,) = csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode()))
    assert {k: row[k] for k in ("action", "reason", "cards_from", "cards_to", "cards_changed",
                                "card_hours", "amount", "currency", "util_pct",
                                "latency_ms")} == {
        "action": "up", "reason": "load_high", "cards_from": "2", "cards_to": "4",
        "cards_changed": "2", "card_hours": "4.000", "amount": "32.00", "currency": "EUR",
        "util_pct": "91.5", "latency_ms": "1200",
    }  # fmt: skip
    assert row["decided_at"].startswith(f"{NOW:%Y-%m-%d %H:%M}")


def test_the_admin_dashboards_top_teams_count_borrowed_cards(policy):
    """Floor 2, holding 5: "Top teams by cards held now" says 5 (it said the floor, 2)."""
    from pools.dashboards import capacity as dashboard

    policy.cards_held = 5
    policy.save()
    assert dashboard.top_teams_by_cards(filters=dashboard.DashboardFilters(), now=NOW) == [
        {"team": "Chat", "slug": "chat", "cards": 5}
    ]
