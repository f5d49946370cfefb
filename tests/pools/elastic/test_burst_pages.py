"""The burst pools page (issue 35): a team's managers and pool admins opt a team into a burst
pool, with the pool's card-hour price on the rate card shown with its currency, and opt out
after a confirmation page; members see their teams' opt-ins; CSV; empty states. And the
elastic page's what-if with and without burst, priced by hand."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import AllocationFactory, PoolFactory

from billing.choices import RateKind
from billing.services.rates import rate_card_create
from pools.audit.models import AuditEvent
from pools.common.choices import AllocationStatus, Scheduler
from pools.elastic.models import BurstOptIn, ElasticPolicy

pytestmark = pytest.mark.django_db

URL = "/elastic/burst/"


@pytest.fixture
def rented(db):
    return PoolFactory(slug="rented", name="Rented", scheduler=Scheduler.KUBERNETES,
                       slurm_partition="", burst=True)  # fmt: skip


@pytest.fixture
def card(l40s, rented):
    """EUR: L40S reserved 8.00 / card-hour; 2.90 / card-hour in burst pool Rented."""
    return rate_card_create(
        name="c", currency="EUR", effective_from=date(2020, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip


def _page(client, user):
    client.force_login(user)
    return client


def _text(response) -> str:
    return " ".join(response.content.decode().split())


def test_a_manager_opts_in_seeing_the_price_and_opts_out_after_confirming(
    client, team, team_manager, rented, card
):
    page = _page(client, team_manager)
    form = _text(page.get(URL))
    assert "None of your teams has opted into a burst pool" in form
    assert "Rented: L40S 2.90\u00a0EUR / card-hour" in page.get(URL).content.decode()

    answer = page.post(URL, {"team": team.pk, "pool": rented.pk})

    assert answer.status_code == 302
    opt_in = BurstOptIn.objects.get(team=team, pool=rented)
    event = AuditEvent.objects.get(action="elastic.burst_opt_in")
    assert (event.actor, event.after) == (team_manager, {"burst_pool": "rented", "opted": True})
    listed = _text(page.get(URL))
    assert "<td>NLP</td><td>Rented</td>" in listed
    rows = list(csv.DictReader(io.StringIO(b"".join(page.get(URL, {"export": "csv"})
                                                    .streaming_content).decode())))  # fmt: skip
    # money as a plain number beside its currency, one row per GPU model priced there
    assert [(r["team"], r["burst_pool"], r["gpu_model"], r["price_per_card_hour"],
             r["currency"]) for r in rows] == [
        ("nlp", "rented", "L40S", "2.90", "EUR")
    ]  # fmt: skip

    confirm = _text(page.get(f"/elastic/burst/{opt_in.pk}/opt-out/"))
    assert "Opt NLP out of Rented?" in confirm
    assert "None of their cards is in Rented now." in confirm
    assert BurstOptIn.objects.filter(pk=opt_in.pk).exists()  # a GET changes nothing

    assert page.post(f"/elastic/burst/{opt_in.pk}/opt-out/").status_code == 302
    assert not BurstOptIn.objects.exists()
    assert AuditEvent.objects.filter(action="elastic.burst_opt_out").count() == 1


def test_the_confirmation_says_the_cards_held_there_stay(
    client, team, team_manager, rented, infer_pool, l40s
):
    opt_in = BurstOptIn.objects.create(team=team, pool=rented)
    now = timezone.now()
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                   status=AllocationStatus.ACTIVE, starts_at=now,
                                   ends_at=now + timedelta(days=1))  # fmt: skip
    ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=8, cards_held=7,
                                 burst_pool=rented, burst_cards=3)  # fmt: skip
    body = _text(_page(client, team_manager).get(f"/elastic/burst/{opt_in.pk}/opt-out/"))
    assert "3 cards of theirs are in Rented now: they stay" in body


def test_a_member_sees_the_opt_in_but_cannot_change_it(client, team, team_member, rented):
    opt_in = BurstOptIn.objects.create(team=team, pool=rented)
    page = _page(client, team_member)
    body = _text(page.get(URL))
    assert "<td>NLP</td><td>Rented</td>" in body and "Opt out…" not in body
    assert "Opt a team in" not in body
    assert "A team's managers (and pool admins) opt it into a burst pool here." in body
    assert "no price on the rate card" in body  # no rate card
    rows = list(csv.DictReader(io.StringIO(b"".join(page.get(URL, {"export": "csv"})
                                                    .streaming_content).decode())))  # fmt: skip
    assert [(r["team"], r["gpu_model"], r["price_per_card_hour"], r["currency"]) for r in rows] == [
        ("nlp", "", "", "")
    ]  # unknown, never 0
    assert page.post(URL, {"team": team.pk, "pool": rented.pk}).status_code == 403
    assert page.get(f"/elastic/burst/{opt_in.pk}/opt-out/").status_code == 403
    assert page.post(f"/elastic/burst/{opt_in.pk}/opt-out/").status_code == 403
    assert BurstOptIn.objects.count() == 1 and not AuditEvent.objects.exists()


def test_another_teams_opt_in_answers_like_a_missing_one(client, team, other_member, rented):
    opt_in = BurstOptIn.objects.create(team=team, pool=rented)
    page = _page(client, other_member)
    body = _text(page.get(URL))
    assert "Rented</td>" not in body
    # the list is theirs: it does not say no team at all has opted in
    assert "No team has opted into a burst pool" not in body
    assert "None of your teams has opted into a burst pool" in body
    assert page.get(f"/elastic/burst/{opt_in.pk}/opt-out/").status_code == 404
    assert page.get("/elastic/burst/999999/opt-out/").status_code == 404


def test_a_pool_not_marked_burst_or_another_team_is_a_field_error(
    client, team, team_manager, rented, infer_pool, other_member
):
    page = _page(client, team_manager)
    vision = other_member.memberships.get().team
    home = page.post(URL, {"team": team.pk, "pool": infer_pool.pk})
    stranger = page.post(URL, {"team": vision.pk, "pool": rented.pk})
    assert (home.status_code, stranger.status_code) == (200, 200)
    assert "Select a valid choice" in home.content.decode()
    assert "Select a valid choice" in stranger.content.decode()
    assert not BurstOptIn.objects.exists() and not AuditEvent.objects.exists()


def test_without_burst_pools_the_page_says_how_to_get_one(admin_page):
    body = _text(admin_page.get(URL))
    assert "No pool is marked burst yet" in body and "Opt a team in" not in body
    assert "No team has opted into a burst pool" in body  # a pool admin's list is every team's


# ------------------------------------------------------------------------- burst what-if


@pytest.fixture
def whatif_policy(team, infer_pool, l40s):
    """Home pool ``infer``: 8 L40S; another team holds 4, our floor is 2 -> the home pool
    holds 4 of ours (the billing test's numbers)."""
    now = timezone.now()
    window = {"status": AllocationStatus.ACTIVE, "starts_at": now - timedelta(days=1),
              "ends_at": now + timedelta(days=1), "pool": infer_pool,
              "gpu_model": l40s}  # fmt: skip
    AllocationFactory(card_count=4, **window)
    return ElasticPolicy.objects.create(
        allocation=AllocationFactory(team=team, card_count=2, **window),
        ceiling_cards=6, cards_held=2,
    )  # fmt: skip


@pytest.fixture
def replayed(monkeypatch):
    """The replay's load: 2 cards, 6 for 2 h, then 2 (4 h in all)."""
    from pools.elastic.services import WhatIfRun, WhatIfSource
    from pools.elastic.whatif import WhatIf

    end = timezone.now() - timedelta(hours=1)
    t0 = (end - timedelta(hours=4)).timestamp()
    timeline = ((t0, 2), (t0 + 3600, 6), (t0 + 3 * 3600, 2))
    result = WhatIf(1, 1, 2, 6, 16.0, 6, 24.0, 8.0, 0.0, 0.0, 4.0, (), timeline)
    run = WhatIfRun(result, WhatIfSource.RECORDED, end - timedelta(hours=4), end, 240)
    monkeypatch.setattr("pools.elastic.services.elastic_whatif", lambda **kwargs: run)
    return run


def _whatif(page, policy, capture):
    """Queue the what-if (the worker runs it on commit), then open ``?whatif=<id>``."""
    from pools.elastic.models import ElasticWhatIf

    params = {"whatif": 1, "ceiling_cards": 6, "step_cards": 1, "cards_per_replica": 1,
              "min_replicas": 1, "up_util_pct": 75, "up_latency_ms": 800,
              "up_window_minutes": 5, "down_util_pct": 30, "down_window_minutes": 30,
              "cooldown_minutes": 15, "prescale_lead_minutes": 30, "enabled": "on",
              "days": 1}  # fmt: skip
    with capture(execute=True):
        queued = page.post(f"/elastic/{policy.pk}/", params)
    assert queued.status_code == 302, _text(queued)
    whatif = ElasticWhatIf.objects.filter(policy=policy).latest("pk")
    assert whatif.status == "done", (whatif.status, whatif.error)
    return _text(page.get(f"/elastic/{policy.pk}/", {"whatif": whatif.pk}))


def test_the_whatif_prices_the_same_load_with_and_without_burst(
    admin_page, team, whatif_policy, rented, card, replayed, django_capture_on_commit_callbacks
):
    """With burst: home 4 - 2 = 2 cards x 2 h = 4 card-hours x 8.00 = 32.00, Rented 6 - 4 =
    2 x 2 h = 4 card-hours x 2.90 = 11.60: 43.60 EUR. Without: 32.00 EUR, 4 card-hours not
    served."""
    assert "No burst pool: team NLP has opted into none" in _whatif(
        admin_page, whatif_policy, django_capture_on_commit_callbacks
    )
    BurstOptIn.objects.create(team=team, pool=rented)

    body = _whatif(admin_page, whatif_policy, django_capture_on_commit_callbacks)

    assert "Inference can hold 4 of these cards now" in body
    assert (
        '<tr data-burst-with><th scope="row">With burst</th><td class="num">4.000 card-h<br>'
        '<small class="muted" data-home-price>at 8.00 EUR / card-hour (burst price)</small></td>'
        '<td class="num">4.000 card-h'
        '<br><small class="muted">at 2.90 EUR / card-hour</small></td><td class="num"><strong>'
        "43.60 EUR</strong>" in body
    )
    assert '4.000 card-h not served</small></td><td class="num"><strong>32.00 EUR' in body


@pytest.mark.parametrize(
    ("method", "home", "with_", "without", "why"),
    [
        ("used", "at 3.50 EUR / card-hour (on-use price)", "25.60", "14.00",
         "priced on use, the cards at home at the on-use price"),
        ("tokens", "paid by its tokens", "11.60", "0.00",
         "priced by tokens, the cards at home cost nothing here (its tokens pay for them)"),
    ],
)  # fmt: skip
def test_the_whatif_prices_the_home_cards_by_the_allocations_method(
    admin_page, team, whatif_policy, rented, l40s, replayed, django_capture_on_commit_callbacks,
    method, home, with_, without, why,
):  # fmt: skip
    """Reserved 8.00, on use 3.50, Rented 2.90 per card-hour; 4 card-hours at home, 4 in
    Rented. On use: 4 x 3.50 = 14.00 + 4 x 2.90 = 11.60 -> 25.60 EUR, without 14.00. By
    tokens: 0 + 11.60 = 11.60 EUR, without 0.00 (its tokens pay; the statement's home burst
    line is 0)."""
    rate_card_create(
        name="m", currency="EUR", effective_from=date(2020, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00"),
                    (l40s.pk, RateKind.GPU_USED): Decimal("3.50")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip
    whatif_policy.allocation.pricing_method = method
    whatif_policy.allocation.save(update_fields=["pricing_method"])
    BurstOptIn.objects.create(team=team, pool=rented)

    body = _whatif(admin_page, whatif_policy, django_capture_on_commit_callbacks)

    assert why in body
    assert f'<small class="muted" data-home-price>{home}</small>' in body
    # on use, the scaling money block says 0 for cards at home: the note says why they cost
    # here (by tokens both say 0: no note)
    note = "Why the cards at home cost something here and 0 in the scaling money at the top"
    assert (note in body) == (method == "used")
    assert ("data-on-use-note" in body) == (method == "used")
    assert f'<td class="num"><strong>{with_} EUR</strong></td></tr>' in body
    assert f'card-h not served</small></td><td class="num"><strong>{without} EUR' in body


def test_a_whatif_stored_before_the_method_was_named_still_shows(
    admin_page, team, whatif_policy, rented, card, replayed, django_capture_on_commit_callbacks
):
    """A result kept without ``home_price_basis`` / ``home_price_label`` (the burst price, as
    every what-if was priced then) shows its price and amounts as before."""
    from pools.elastic.models import ElasticWhatIf

    BurstOptIn.objects.create(team=team, pool=rented)
    _whatif(admin_page, whatif_policy, django_capture_on_commit_callbacks)
    stored = ElasticWhatIf.objects.latest("pk")
    burst = stored.result["burst"]
    for key in ("home_price_basis", "home_price_label"):
        del burst[key]
    del burst["texts"]["home_price_label"]
    stored.save(update_fields=["result"])

    body = _text(admin_page.get(f"/elastic/{whatif_policy.pk}/", {"whatif": stored.pk}))

    assert '<small class="muted" data-home-price>at 8.00 EUR / card-hour</small>' in body
    assert "as the statement's burst lines charge them." in body
    assert "<strong>43.60 EUR</strong>" in body


def test_the_burst_whatif_without_a_rate_card_says_the_cost_is_unknown(
    admin_page, team, whatif_policy, rented, replayed, django_capture_on_commit_callbacks
):
    BurstOptIn.objects.create(team=team, pool=rented)
    body = _whatif(admin_page, whatif_policy, django_capture_on_commit_callbacks)
    assert "<strong>unknown</strong>" in body
    assert "Cost unknown: the rate card has no price for one of them." in body


def test_the_page_reads_the_same_number_of_queries_for_more_opt_ins(
    client, team, team_manager, rented, card
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from factories import MembershipFactory, TeamFactory

    from pools.common.choices import TeamRole

    page = _page(client, team_manager)
    BurstOptIn.objects.create(team=team, pool=rented)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert page.get(URL).status_code == 200
        return len(queries)

    one = count()
    for slug in ("a", "b", "c"):
        other = TeamFactory(slug=slug)
        MembershipFactory(team=other, user=team_manager, role=TeamRole.MANAGER)
        BurstOptIn.objects.create(team=other, pool=rented)
    assert count() == one
