"""Idle findings and reclamation policy pages: scoping, CSV, policy edit, dismiss."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, TeamFactory

from pools.audit.models import AuditEvent
from pools.common.choices import IdleFindingState, TeamRole
from pools.reclamation.models import Exemption, IdleFinding, IdleGroupEvaluation, ReclamationPolicy
from pools.tenancy.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def findings(member):
    mine = TeamFactory(slug="nlp", name="NLP")
    Membership.objects.create(team=mine, user=member, role=TeamRole.MEMBER)
    other = TeamFactory(slug="vision", name="Vision")
    now = timezone.now()

    def finding(team, cards, in_use):
        allocation = AllocationFactory(
            team=team,
            card_count=cards,
            status="active",
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=6),
        )
        return IdleFinding.objects.create(
            allocation=allocation,
            state=IdleFindingState.OPEN,
            first_seen_at=now,
            last_seen_at=now,
            card_count=cards,
            cards_in_use=in_use,
            mean_util_pct=2,
            peak_util_pct=4,
        )

    return finding(mine, 4, 1), finding(other, 8, 0)


def test_a_member_sees_only_their_teams_findings(member_page, findings):
    mine, other = findings
    body = member_page.get("/idle/").content.decode()
    assert f"#{mine.allocation_id}<" in body
    assert f"#{other.allocation_id}<" not in body


def test_an_admin_sees_every_finding_and_exports_csv(admin_page, findings):
    response = admin_page.get("/idle/?export=csv")
    lines = b"".join(response.streaming_content).decode().strip().splitlines()
    assert response["Content-Type"].startswith("text/csv")
    assert lines[0].startswith("finding,allocation,team,pool,gpu_model,state")
    assert sorted(line.split(",")[2] for line in lines[1:]) == ["nlp", "vision"]


def test_dismiss_needs_a_reason_and_is_for_admins(admin_page, member_page, findings):
    mine, _ = findings
    assert member_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": "x"}).status_code == 403
    admin_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": ""})
    assert IdleFinding.objects.get(pk=mine.pk).state == IdleFindingState.OPEN
    admin_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": "waiting for a dataset"})
    assert IdleFinding.objects.get(pk=mine.pk).state == IdleFindingState.DISMISSED


def test_policy_edit_saves_with_an_audit_event_and_rejects_inconsistent_thresholds(
    admin_page, findings
):
    pool = findings[0].allocation.pool
    fields = {
        "kind": "policy",
        "pool_slug": pool.slug,
        "idle_below_pct": "25",
        "certainly_idle_below_pct": "5",
        "process_memory_max_mib": "64",
        "window_minutes": "45",
        "min_coverage": "0.9",
        "grace_hours": "12",
        "cooldown_minutes": "15",
    }
    bad = admin_page.post("/idle/policies/", {**fields, "certainly_idle_below_pct": "40"})
    assert bad.status_code == 200
    assert not ReclamationPolicy.objects.filter(pool=pool).exists()

    admin_page.post("/idle/policies/", fields)
    policy = ReclamationPolicy.objects.get(pool=pool)
    assert (policy.window_minutes, policy.grace_hours, policy.dry_run) == (45, 12, False)
    assert AuditEvent.objects.filter(action="reclamation_policy.saved").count() == 1


def test_policies_page_is_for_pool_admins(member_page):
    assert member_page.get("/idle/policies/").status_code == 403


def _policy(finding, **fields):
    return ReclamationPolicy.objects.create(pool=finding.allocation.pool, **fields)


def test_a_findings_sparkline_and_threshold_are_on_the_page(admin_page, findings):
    mine, _ = findings
    mine.evaluation = IdleGroupEvaluation.objects.create(
        evaluated_at=mine.last_seen_at,
        detail={"sparkline": [[1_800_000_000, 2.5], [1_800_000_060, 4.0]]},
    )
    mine.save()
    _policy(mine, idle_below_pct=25)
    response = admin_page.get("/idle/")
    body = response.content.decode()
    assert f'id="spark-{mine.pk}"' in body
    assert response.context["sparklines"] == [
        {"id": mine.pk, "points": [[1_800_000_000, 2.5], [1_800_000_060, 4.0]], "threshold": 25.0}
    ]
    assert 'id="sparkline-data"' in body  # json_script for Chart.js


def test_time_to_reclaim_counts_the_grace_from_the_warning(admin_page, findings):
    mine, other = findings
    now = timezone.now()
    _policy(mine, dry_run=False, grace_hours=24)
    IdleFinding.objects.filter(pk=mine.pk).update(
        warned_at=now - timedelta(hours=19), dry_run=False
    )
    # the other allocation's pool is a separate one with its own (dry-run, 12 h) policy
    _policy(other, dry_run=True, grace_hours=12)
    IdleFinding.objects.filter(pk=other.pk).update(first_seen_at=now - timedelta(hours=9))
    body = admin_page.get("/idle/").content.decode()
    assert "<span data-time-to-reclaim>reclaim in 5 h</span>" in body  # 19 h + 5 h = 24 h
    assert "<span data-time-to-reclaim>would reclaim in 3 h</span>" in body  # 9 h + 3 h = 12 h


def test_csv_and_api_give_the_instant_the_page_counts_down_to(admin_page, findings):
    """Warned 19 h 5 min ago under a 24 h grace (not dry run): the page says "reclaim in 4 h
    55 min" and the CSV's and the API's ``reclaim_due_at`` are warned + 24 h; the dry-run
    finding first seen 9 h ago under a 12 h grace: first seen + 12 h. ``would_reclaim_at``
    (what a dry run recorded once past its grace) stays empty for both."""
    import csv
    import io
    from datetime import datetime

    mine, other = findings
    warned = timezone.now().replace(microsecond=0) - timedelta(hours=19, minutes=5)
    _policy(mine, dry_run=False, grace_hours=24)
    IdleFinding.objects.filter(pk=mine.pk).update(warned_at=warned, dry_run=False)
    seen = warned + timedelta(hours=10, minutes=5)  # 9 h ago
    _policy(other, dry_run=True, grace_hours=12)
    IdleFinding.objects.filter(pk=other.pk).update(first_seen_at=seen)
    due = {mine.pk: warned + timedelta(hours=24), other.pk: seen + timedelta(hours=12)}
    body = admin_page.get("/idle/").content.decode()
    assert "<span data-time-to-reclaim>reclaim in 4 h 55 min</span>" in body
    assert "<span data-time-to-reclaim>would reclaim in 3 h</span>" in body
    rows = list(csv.DictReader(io.StringIO(_csv(admin_page))))
    got = {int(r["finding"]): datetime.fromisoformat(r["reclaim_due_at"]) for r in rows}
    assert got == due
    assert {r["would_reclaim_at"] for r in rows} == {""}
    for pk, when in due.items():
        answer = admin_page.get(f"/api/v1/idle-findings/{pk}/").json()
        assert datetime.fromisoformat(answer["reclaim_due_at"].replace("Z", "+00:00")) == when
        assert answer["would_reclaim_at"] is None


def _csv(client) -> str:
    return b"".join(client.get("/idle/?export=csv").streaming_content).decode()


def test_reclaim_due_at_is_empty_once_closed_or_without_a_policy(admin_page, findings):
    mine, other = findings
    IdleFinding.objects.filter(pk=mine.pk).update(
        warned_at=timezone.now(), state=IdleFindingState.RESOLVED
    )
    _policy(mine, dry_run=False, grace_hours=24)  # the other's pool has none
    rows = _csv(admin_page).splitlines()
    header = rows[0].split(",")
    assert {row.split(",")[header.index("reclaim_due_at")] for row in rows[1:]} == {""}
    for pk in (mine.pk, other.pk):
        assert admin_page.get(f"/api/v1/idle-findings/{pk}/").json()["reclaim_due_at"] is None


def test_time_to_reclaim_says_what_holds_a_finding_past_its_grace(admin_page, findings):
    mine, other = findings
    now = timezone.now()
    _policy(mine, dry_run=False, grace_hours=24)
    _policy(other, dry_run=False, grace_hours=24)
    IdleFinding.objects.filter(pk=mine.pk).update(
        warned_at=now - timedelta(hours=30),
        dry_run=False,
        note="changed within the 15 min cooldown",
    )
    IdleFinding.objects.filter(pk=other.pk).update(
        warned_at=now - timedelta(hours=30), dry_run=False
    )
    body = admin_page.get("/idle/").content.decode()
    assert "held: changed within the 15 min cooldown" in body
    assert "<span data-time-to-reclaim>due at the next scan</span>" in body


def test_exempt_from_the_findings_page(admin_page, member_page, findings):
    mine, _ = findings
    assert (
        member_page.post(f"/idle/{mine.pk}/exempt/", {"reason": "x", "days": 3}).status_code == 403
    )
    assert not Exemption.objects.exists()

    refused = admin_page.post(
        f"/idle/{mine.pk}/exempt/", {"reason": "bench", "days": 91}, follow=True
    )
    assert not Exemption.objects.exists()
    assert "Days: Ensure this value is less than or equal to 90." in refused.content.decode()

    before = timezone.now()
    admin_page.post(f"/idle/{mine.pk}/exempt/", {"reason": "benchmark next week", "days": 3})
    exemption = Exemption.objects.get()
    assert (exemption.allocation_id, exemption.team_id) == (mine.allocation_id, None)
    assert exemption.reason == "benchmark next week"
    assert before + timedelta(days=3) <= exemption.expires_at <= timezone.now() + timedelta(days=3)


def test_reclaim_now_shrinks_to_the_cards_in_use(admin_page, member_page, findings):
    mine, _ = findings  # 4 cards, 1 in use
    _policy(mine, dry_run=False)
    IdleFinding.objects.filter(pk=mine.pk).update(dry_run=False, warned_at=timezone.now())
    body = admin_page.get("/idle/").content.decode()
    assert f"Reclaim now: shrink allocation #{mine.allocation_id} from 4 to 1 card," in body

    assert member_page.post(f"/idle/{mine.pk}/reclaim/").status_code == 403
    assert IdleFinding.objects.get(pk=mine.pk).state == IdleFindingState.OPEN

    done = admin_page.post(f"/idle/{mine.pk}/reclaim/", follow=True)
    mine.refresh_from_db()
    mine.allocation.refresh_from_db()
    assert (mine.state, mine.cards_reclaimed, mine.allocation.card_count) == ("reclaimed", 3, 1)
    assert f"Allocation #{mine.allocation_id} reclaimed: 3 cards back" in done.content.decode()


def test_reclaim_now_under_a_dry_run_policy_is_refused_as_an_error(admin_page, findings):
    mine, _ = findings
    _policy(mine, dry_run=True)
    assert "Reclaim now" not in admin_page.get("/idle/").content.decode()
    response = admin_page.post(f"/idle/{mine.pk}/reclaim/", follow=True)
    body = response.content.decode()
    assert IdleFinding.objects.get(pk=mine.pk).state == IdleFindingState.OPEN
    message = body.split('<article class="error" role="alert">')[1].split("</article>")[0]
    assert "dry run" in message  # the service's refusal, styled as an error


def test_a_dismiss_reason_over_1000_characters_says_so(admin_page, findings):
    mine, _ = findings
    response = admin_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": "x" * 1001}, follow=True)
    assert IdleFinding.objects.get(pk=mine.pk).state == IdleFindingState.OPEN
    assert "at most 1000 characters (it has 1001)" in response.content.decode()


def test_dismiss_says_for_how_long_and_a_second_undo_is_worded(admin_page, findings):
    mine, other = findings
    done = admin_page.post(f"/idle/{mine.pk}/dismiss/", {"reason": "waiting"}, follow=True)
    assert "is not flagged again for 7 days" in done.content.decode()
    IdleFinding.objects.filter(pk=other.pk).update(state=IdleFindingState.UNDONE)
    again = admin_page.post(f"/idle/{other.pk}/undo/", follow=True)
    assert "This reclamation was undone already." in again.content.decode()


def test_revoke_an_exemption_from_the_policies_page(admin_page, member_page, findings):
    mine, _ = findings
    exemption = Exemption.objects.create(
        allocation=mine.allocation, reason="demo", expires_at=timezone.now() + timedelta(days=2)
    )
    body = admin_page.get("/idle/policies/").content.decode()
    assert f'name="exemption" value="{exemption.pk}"' in body

    assert (
        member_page.post(
            "/idle/policies/", {"kind": "revoke", "exemption": exemption.pk}
        ).status_code
        == 403
    )
    exemption.refresh_from_db()
    assert exemption.expires_at > timezone.now()

    admin_page.post("/idle/policies/", {"kind": "revoke", "exemption": exemption.pk})
    exemption.refresh_from_db()
    assert exemption.expires_at <= timezone.now()
    assert AuditEvent.objects.filter(action="exemption.revoked").count() == 1
    assert (
        f'name="exemption" value="{exemption.pk}"'
        not in admin_page.get("/idle/policies/").content.decode()
    )


@pytest.mark.parametrize("exemption", ["abc", "", "9" * 5000, "²", "-1"])
def test_revoking_an_exemption_id_that_is_no_number_is_a_404(admin_page, findings, exemption):
    """``?exemption=abc`` reached the ORM as the id ("Field 'id' expected a number"): a 500;
    now the 404 of an unknown exemption, nothing revoked."""
    mine, _ = findings
    kept = Exemption.objects.create(
        allocation=mine.allocation, reason="demo", expires_at=timezone.now() + timedelta(days=2)
    )
    response = admin_page.post("/idle/policies/", {"kind": "revoke", "exemption": exemption})
    assert response.status_code == 404
    kept.refresh_from_db()
    assert kept.expires_at > timezone.now()
    assert not AuditEvent.objects.filter(action="exemption.revoked").exists()


def test_exemption_form_errors_open_the_form(admin_page, findings):
    team = findings[0].allocation.team
    neither = admin_page.post(
        "/idle/policies/", {"kind": "exemption", "reason": "x", "expires_at": "2099-01-01T00:00"}
    ).content.decode()
    assert '<details open id="grant-exemption">' in neither
    assert "Exempt either a team or one allocation." in neither
    past = admin_page.post(
        "/idle/policies/",
        {"kind": "exemption", "team": team.slug, "reason": "x", "expires_at": "2020-01-01T00:00"},
    ).content.decode()
    assert '<details open id="grant-exemption">' in past
    assert "The exemption must end in the future." in past
    assert not Exemption.objects.exists()
    assert '<details id="grant-exemption">' in admin_page.get("/idle/policies/").content.decode()


def test_policies_show_pool_names_and_plain_numbers(admin_page, findings):
    pool = findings[0].allocation.pool
    ReclamationPolicy.objects.create(pool=pool, idle_below_pct="30.00", min_coverage="0.90")
    body = admin_page.get(f"/idle/policies/?pool={pool.slug}").content.decode()
    assert f"<strong>Policy of {pool.name}</strong>" in body
    assert '<td class="num">30 %</td>' in body
    assert 'name="idle_below_pct" value="30"' in body
    assert 'name="min_coverage" value="0.9"' in body


def test_the_idle_page_says_when_the_scan_last_ran_and_admins_can_scan_now(
    admin_page, member_page, settings
):
    from factories import PoolFactory

    from pools.common.choices import Scheduler
    from pools.reclamation.models import IdleScanRun

    PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    body = admin_page.get("/idle/").content.decode()
    assert "No scan has run yet." in body
    assert "1 pool without a saved policy is not scanned" in body

    assert member_page.post("/idle/scan/").status_code == 403
    assert not IdleScanRun.objects.exists()

    ReclamationPolicy.objects.create(pool=PoolFactory(slug="train"))
    settings.PROMETHEUS_URL = ""
    response = admin_page.post("/idle/scan/", follow=True)
    (message,) = [str(m) for m in response.context["messages"]]
    assert message == "Scan could not run: no Prometheus configured (PROMETHEUS_URL)"
    run = IdleScanRun.objects.get()
    assert run.error == "no Prometheus configured (PROMETHEUS_URL)"
    body = response.content.decode()
    assert "could not run" in body and "no Prometheus configured" in body


def test_the_idle_page_and_csv_filter_by_team_and_keep_it_in_their_links(
    admin_page, findings, member
):
    """``?team=vision``: only vision's finding on the page and in its CSV; the CSV link keeps
    the team (the page listed every team's findings whatever ``team`` said)."""
    mine, other = findings

    page = admin_page.get("/idle/", {"team": "vision"})
    body = page.content.decode()
    csv = admin_page.get("/idle/", {"team": "vision", "export": "csv"})
    lines = b"".join(csv.streaming_content).decode().strip().splitlines()

    assert page.status_code == 200
    assert [f.pk for f in page.context["page"]] == [other.pk]
    assert f"#{mine.allocation_id}<" not in body
    assert 'href="?team=vision&amp;export=csv"' in body
    assert [line.split(",")[:3] for line in lines[1:]] == [
        [str(other.pk), str(other.allocation_id), "vision"]
    ]


def test_the_idle_pager_keeps_the_team(admin_page, findings):
    """51 findings of vision (50 a page): page 1's "Older" link names the team and page 2;
    page 2 holds the 51st."""
    _, other = findings
    now = timezone.now()
    for n in range(50):
        IdleFinding.objects.create(
            allocation=AllocationFactory(team=other.allocation.team, status="active"),
            state=IdleFindingState.OPEN,
            first_seen_at=now,
            last_seen_at=now + timedelta(seconds=n + 1),
            card_count=1,
            cards_in_use=0,
        )

    first = admin_page.get("/idle/", {"team": "vision"}).content.decode()
    second = admin_page.get("/idle/", {"team": "vision", "page": "2"})

    assert 'href="?team=vision&amp;page=2">Older' in first
    assert [f.pk for f in second.context["page"]] == [other.pk]


def test_the_idle_page_refuses_a_team_the_member_may_not_see(member_page, findings):
    page = member_page.get("/idle/", {"team": "vision"})
    csv = member_page.get("/idle/", {"team": "vision", "export": "csv"})

    assert page.status_code == 400 and list(page.context["page"]) == []
    assert page.context["filterset"].form.errors["team"]
    assert csv.status_code == 400 and csv["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize(
    "query", ["?state=", "?state=&team=", "?state=&team=nlp", "?state=&state=open"]
)
def test_the_state_select_s_any_lists_the_findings(member_page, findings, query):
    """The page's own form sends ``state=`` for *Any* (its select submits on change, its Filter
    button with the defaults): that is every state, not a 400 "Select a valid choice."."""
    mine, _ = findings

    page = member_page.get(f"/idle/{query}")

    assert page.status_code == 200
    assert [f.pk for f in page.context["page"]] == [mine.pk]
    csv = member_page.get(f"/idle/{query}&export=csv")
    assert csv.status_code == 200


def test_a_state_that_is_none_is_still_refused(member_page, findings):
    page = member_page.get("/idle/", {"state": "bogus"})

    assert page.status_code == 400
    assert page.context["filterset"].form.errors["state"]
