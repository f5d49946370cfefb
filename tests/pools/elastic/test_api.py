"""/api/v1/ elastic-policies and scale-events: who sees and changes what, and the bodies."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, MembershipFactory, PoolFactory, TeamFactory, node_with_gpus

from pools.common.choices import AllocationStatus, Scheduler, TeamRole
from pools.elastic.models import ElasticPolicy, ElasticWhatIf, SignalReading
from pools.elastic.services import elastic_scan
from scheduler_adapters.prometheus import InferenceSignals, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(second=0, microsecond=0)


@pytest.fixture
def allocation():
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node_with_gpus(8, gpu_model="l40s", hostname="inf-0", pool=pool,
                   scheduler=Scheduler.KUBERNETES)  # fmt: skip
    return AllocationFactory(pool=pool, team=TeamFactory(slug="chat"), card_count=2,
                             status=AllocationStatus.ACTIVE, starts_at=NOW - timedelta(hours=1),
                             ends_at=NOW + timedelta(days=3))  # fmt: skip


def test_admin_creates_and_reads_a_policy(admin_api, allocation):
    answer = admin_api.post(
        "/api/v1/elastic-policies/",
        {"allocation": allocation.pk, "ceiling_cards": 6, "step_cards": 2},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert (body["floor_cards"], body["ceiling_cards"], body["cards_held"]) == (2, 6, 2)
    assert (body["team"], body["pool"], body["quota_backend"]) == ("chat", "infer",
                                                                   "resourcequota")  # fmt: skip
    assert (body["up_util_pct"], body["up_latency_ms"], body["cooldown_minutes"]) == (
        "75.00", 800, 15,
    )  # fmt: skip
    changed = admin_api.patch(f"/api/v1/elastic-policies/{body['id']}/", {"ceiling_cards": 8},
                              format="json")  # fmt: skip
    assert changed.status_code == 200 and changed.json()["ceiling_cards"] == 8


@pytest.mark.parametrize(
    "fields, field",
    [({"ceiling_cards": 6, "cooldown_minutes": 5}, "cooldown_minutes"),
     ({"ceiling_cards": 1}, "ceiling_cards"),
     ({"ceiling_cards": 6, "down_util_pct": "90"}, "down_util_pct")],
)  # fmt: skip
def test_bad_policies_are_400_and_change_nothing(admin_api, allocation, fields, field):
    answer = admin_api.post("/api/v1/elastic-policies/", {"allocation": allocation.pk, **fields},
                            format="json")  # fmt: skip
    assert answer.status_code == 400
    body = answer.json()
    assert body["code"] == "invalid_input"
    assert field in str(body)
    assert not ElasticPolicy.objects.exists()


def test_other_teams_see_nothing_and_members_cannot_write(member_api, member, allocation):
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=4, cards_held=2)
    assert member_api.get("/api/v1/elastic-policies/").json()["count"] == 0
    assert member_api.get(f"/api/v1/elastic-policies/{policy.pk}/").status_code == 404
    MembershipFactory(team=allocation.team, user=member, role=TeamRole.MEMBER)
    assert member_api.get(f"/api/v1/elastic-policies/{policy.pk}/").status_code == 200
    answer = member_api.patch(f"/api/v1/elastic-policies/{policy.pk}/", {"ceiling_cards": 8},
                              format="json")  # fmt: skip
    assert answer.status_code == 403
    policy.refresh_from_db()
    assert policy.ceiling_cards == 4


def what_if(client, policy, body, capture) -> tuple:
    """POST a what-if (the task runs eagerly on commit); its 202 and then its status."""
    with capture(execute=True):
        queued = client.post(f"/api/v1/elastic-policies/{policy.pk}/what-if/", body,
                             format="json")  # fmt: skip
    assert queued.status_code == 202, queued.content
    assert queued["Location"] == queued.json()["status_url"]
    return queued.json(), client.get(queued.json()["status_url"]).json()


def test_what_if_without_prometheus_and_bad_days(
    admin_api, allocation, django_capture_on_commit_callbacks
):
    """No Prometheus and no readings: the what-if fails with ``unavailable``; bad ``days`` or
    ``source`` are 400 with that field and queue nothing."""
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=4, cards_held=2)
    queued, done = what_if(admin_api, policy, {}, django_capture_on_commit_callbacks)
    assert (queued["status"], queued["progress"], queued["days"]) == ("pending", 0, 30)
    assert (done["status"], done["progress"], done["result"]) == ("failed", 100, None)
    assert done["error_code"] == "unavailable"
    assert done["error"] == (
        "PROMETHEUS_URL is not set and the loop has recorded no readings for this allocation "
        "in that time."
    )
    url = f"/api/v1/elastic-policies/{policy.pk}/what-if/"
    for body, field in (({"days": 99}, "days"), ({"days": 0}, "days"),
                        ({"source": "guess"}, "source"), ({"days": "²"}, "days"),
                        ({"days": "٣"}, "days")):  # fmt: skip
        bad = admin_api.post(url, body, format="json")
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid_input"), body
        assert list(bad.json()["errors"]) == [field], body
    assert ElasticWhatIf.objects.count() == 1  # the refused ones queued nothing


def test_what_if_over_the_recorded_readings(
    admin_api, allocation, django_capture_on_commit_callbacks
):
    """Six readings of 20 % a minute apart at the floor of 2: nothing moves; 5 counted
    minutes x 2 cards = 10 card-minutes, the same as a fixed allocation of 2."""
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=4, cards_held=2)
    SignalReading.objects.bulk_create(
        SignalReading(policy=policy, read_at=NOW - timedelta(minutes=5 - m), util_pct=20.0,
                      latency_ms=300.0, request_s=4.0, cards_held=2)
        for m in range(6)
    )  # fmt: skip
    _, done = what_if(admin_api, policy, {"days": 1}, django_capture_on_commit_callbacks)
    assert (done["status"], done["progress"], done["error_code"]) == ("done", 100, "")
    body = done["result"]
    assert (body["source"], body["samples"], body["days"], body["short"]) == (
        "recorded", 6, 1, True,
    )  # fmt: skip
    assert (body["scale_ups"], body["scale_downs"], body["min_cards"], body["max_cards"]) == (
        0, 0, 2, 2,
    )  # fmt: skip
    # 10 card-minutes = 0.1666… card-hours → "0.167" (3 places, half-up; stored to 2: 0.17)
    assert (body["card_hours"], body["fixed_card_hours"]) == ("0.167", "0.167")
    assert body["saved_card_hours"] == "0.000"
    assert body["covered_hours"] == round(5 / 60, 2)
    assert body["timeline"] == [[(NOW - timedelta(minutes=5)).timestamp(), 2]]
    _, prometheus = what_if(admin_api, policy, {"source": "prometheus"},
                            django_capture_on_commit_callbacks)  # fmt: skip
    assert (prometheus["status"], prometheus["error_code"], prometheus["error"]) == (
        "failed", "unavailable", "PROMETHEUS_URL is not set.",
    )  # fmt: skip


def test_a_what_if_is_seen_by_whoever_sees_the_policy(
    admin_api, member_api, member, allocation, django_capture_on_commit_callbacks
):
    """Another team's member: the policy's what-if is a 404 to ask and to read (as a missing
    one); once a member of the team, both work."""
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=4, cards_held=2)
    queued, _ = what_if(admin_api, policy, {}, django_capture_on_commit_callbacks)
    assert member_api.get(queued["status_url"]).status_code == 404
    asked = member_api.post(f"/api/v1/elastic-policies/{policy.pk}/what-if/", {}, format="json")
    assert asked.status_code == 404
    MembershipFactory(team=allocation.team, user=member, role=TeamRole.MEMBER)
    assert member_api.get(queued["status_url"]).json()["error_code"] == "unavailable"
    what_if(member_api, policy, {"days": 2}, django_capture_on_commit_callbacks)


def test_prometheus_unreachable_is_a_failed_what_if_not_a_500(
    admin_api, allocation, django_capture_on_commit_callbacks, settings
):
    """PROMETHEUS_URL names a port nothing listens on: the task records the failure with
    ``prometheus_unavailable``; the status URL answers 200 with it."""
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=4, cards_held=2)
    _, done = what_if(admin_api, policy, {"days": 1, "source": "prometheus"},
                      django_capture_on_commit_callbacks)  # fmt: skip
    assert (done["status"], done["error_code"]) == ("failed", "prometheus_unavailable")
    assert done["error"] == (
        "Prometheus could not be read: query_range: cannot reach Prometheus at "
        "http://127.0.0.1:9: [Errno 111] Connection refused"
    )


def test_scale_events_list_and_filter(admin_api, allocation):
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2,
                                          step_cards=2)  # fmt: skip
    stamps = [NOW.timestamp() - 60 * m for m in range(40, -1, -1)]
    signals = InferenceSignals("team-chat", util_pct=tuple(Sample(t, 95.0) for t in stamps),
                               cards_reporting=tuple(Sample(t, 6.0) for t in stamps),
                               latency_s=tuple(Sample(t, 2.0) for t in stamps))  # fmt: skip
    elastic_scan(now=NOW, metrics=FakePrometheus(inference=[signals]))
    answer = admin_api.get(f"/api/v1/scale-events/?allocation={allocation.pk}&action=up")
    assert answer.status_code == 200
    [event] = answer.json()["results"]
    assert (event["policy"], event["cards_from"], event["cards_to"], event["reason"]) == (
        policy.pk, 2, 4, "scale_up",
    )  # fmt: skip
    assert event["numbers"]["latency_ms"] == 2000.0
    assert (event["applied"], event["apply_note"]) == (False, "")  # not applied yet
    assert admin_api.get("/api/v1/scale-events/?action=down").json()["count"] == 0


@pytest.mark.parametrize("value", ["99999999999999999999", "9223372036854775808", "1.5", "0", "-1"])
def test_an_allocation_filter_that_is_no_id_is_a_400_naming_it(admin_api, value):
    """Ids run from 1 to 2**63 - 1 (9223372036854775807): past it SQLite could not bind the
    number (a 500 on the demo), and ``1.5`` was read as id 1."""
    answer = admin_api.get(f"/api/v1/scale-events/?allocation={value}")

    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_input"
    assert list(answer.json()["errors"]) == ["allocation"]


def test_the_largest_id_is_a_filter_that_matches_nothing_and_the_schema_says_the_range(
    admin_api,
):
    answer = admin_api.get("/api/v1/scale-events/?allocation=9223372036854775807")

    assert (answer.status_code, answer.json()["count"]) == (200, 0)
    schema = admin_api.get("/api/schema/", {"format": "json"}).json()
    [allocation] = [p for p in schema["paths"]["/api/v1/scale-events/"]["get"]["parameters"]
                    if p["name"] == "allocation"]  # fmt: skip
    assert allocation["schema"] == {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}


def test_another_teams_allocation_answers_as_a_missing_one(member_api, member, allocation):
    """A manager of another team learns nothing from the answer: the same 400 "does not exist"
    for a taken id as for a free one, and no policy written (issue 27, item 10)."""
    MembershipFactory(team=TeamFactory(slug="mine"), user=member, role=TeamRole.MANAGER)
    taken = member_api.post("/api/v1/elastic-policies/", {"allocation": allocation.pk,
                            "ceiling_cards": 6}, format="json")  # fmt: skip
    free = member_api.post("/api/v1/elastic-policies/", {"allocation": allocation.pk + 1000,
                           "ceiling_cards": 6}, format="json")  # fmt: skip
    assert taken.status_code == free.status_code == 400
    assert taken.json()["errors"]["allocation"] == [
        free.json()["errors"]["allocation"][0].replace(
            str(allocation.pk + 1000), str(allocation.pk)
        )  # fmt: skip
    ]
    assert not ElasticPolicy.objects.exists()


@pytest.mark.parametrize("name", ["Serve_Qwen", "serve-", "a" * 254, "serve\nqwen", "-serve"])
def test_a_deployment_that_is_not_a_dns_1123_name_is_a_field_error(admin_api, allocation, name):
    answer = admin_api.post("/api/v1/elastic-policies/", {"allocation": allocation.pk,
                            "ceiling_cards": 6, "deployment": name}, format="json")  # fmt: skip
    assert answer.status_code == 400
    assert "deployment" in answer.json()["errors"]
    assert not ElasticPolicy.objects.exists()


def test_a_dns_1123_subdomain_deployment_is_kept(admin_api, allocation):
    body = {"allocation": allocation.pk, "ceiling_cards": 6, "deployment": "qwen-7b.serve"}
    answer = admin_api.post("/api/v1/elastic-policies/", body, format="json")
    assert answer.status_code == 201, answer.json()
    assert ElasticPolicy.objects.get().deployment == "qwen-7b.serve"


def test_what_if_says_the_burst_both_ways_once_the_team_opted_in(
    admin_api, allocation, django_capture_on_commit_callbacks
):
    """Readings at the floor of 2 in a pool of 8 (6 free): the home pool holds all 8, the
    replay never leaves the floor -> 0 card-hours at home and in the burst pool. No rate card:
    the amounts are unknown (null) with the reason, never 0. Without an opt-in: no block."""
    from pools.elastic.models import BurstOptIn

    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=4, cards_held=2)
    SignalReading.objects.bulk_create(
        SignalReading(policy=policy, read_at=NOW - timedelta(minutes=5 - m), util_pct=20.0,
                      latency_ms=300.0, request_s=4.0, cards_held=2)
        for m in range(6)
    )  # fmt: skip
    capture = django_capture_on_commit_callbacks
    assert what_if(admin_api, policy, {"days": 1}, capture)[1]["result"]["burst"] is None
    rented = PoolFactory(slug="rented", scheduler=Scheduler.KUBERNETES, slurm_partition="",
                         burst=True)  # fmt: skip
    BurstOptIn.objects.create(team=allocation.team, pool=rented)
    burst = what_if(admin_api, policy, {"days": 1}, capture)[1]["result"]["burst"]
    assert (burst["burst_pool"], burst["home_cards"], burst["currency"]) == ("rented", 8, None)
    assert burst["with_burst"] == {"home_card_hours": "0.000",
                                   "burst_pool_card_hours": "0.000", "amount": None}  # fmt: skip
    assert burst["without_burst"]["amount"] is None
    assert burst["reason"] == "the rate card has no price for one of them"
    # priced by reserved card-hours (the factory's): its home card-hours at the burst price
    assert (burst["home_price_basis"], burst["home_price_label"]) == ("gpu-burst", "burst price")


def test_burst_opt_ins_through_the_api(admin_api, member_api, member, allocation):
    """A pool admin opts team chat into burst pool ``rented`` (201, audited; again: 200) and
    lists it; a plain member of chat sees it but cannot opt out (403); a non-burst pool is a
    400; a team the caller cannot see answers like a missing one (400); the admin opts out
    (204)."""
    from pools.audit.models import AuditEvent
    from pools.elastic.models import BurstOptIn

    PoolFactory(slug="rented", scheduler=Scheduler.KUBERNETES, slurm_partition="", burst=True)
    made = admin_api.post("/api/v1/burst-opt-ins/", {"team": "chat", "pool": "rented"},
                          format="json")  # fmt: skip
    assert made.status_code == 201, made.content
    assert (made.json()["team"], made.json()["pool"]) == ("chat", "rented")
    assert AuditEvent.objects.filter(action="elastic.burst_opt_in").count() == 1
    # again: already opted in, as the page says (was 400 "must make a unique set")
    again = admin_api.post("/api/v1/burst-opt-ins/", {"team": "chat", "pool": "rented"},
                           format="json")  # fmt: skip
    assert again.status_code == 200, again.content
    assert again.json()["id"] == made.json()["id"]
    assert AuditEvent.objects.filter(action="elastic.burst_opt_in").count() == 1
    home = admin_api.post("/api/v1/burst-opt-ins/", {"team": "chat", "pool": "infer"},
                          format="json")  # fmt: skip
    assert home.status_code == 400 and list(home.json()["errors"]) == ["pool"]
    stranger = member_api.post("/api/v1/burst-opt-ins/", {"team": "chat", "pool": "rented"},
                               format="json")  # fmt: skip
    assert stranger.status_code == 400 and list(stranger.json()["errors"]) == ["team"]
    MembershipFactory(team=allocation.team, user=member, role=TeamRole.MEMBER)
    listed = member_api.get("/api/v1/burst-opt-ins/").json()
    assert [(o["team"], o["pool"]) for o in listed["results"]] == [("chat", "rented")]
    opt_in = BurstOptIn.objects.get()
    assert member_api.delete(f"/api/v1/burst-opt-ins/{opt_in.pk}/").status_code == 403
    assert admin_api.delete(f"/api/v1/burst-opt-ins/{opt_in.pk}/").status_code == 204
    assert not BurstOptIn.objects.exists()


def test_the_sweep_queues_lost_what_ifs_again_and_deletes_old_ones(
    allocation, django_capture_on_commit_callbacks, settings
):
    """TASK_TIME_LIMIT_S = 900: a what-if pending since 20 minutes ago, and one running since
    then, lost their task (no worker runs one longer) and are queued again; one pending since 5
    minutes ago may still run, and one whose job waits in the outbox will be sent: left. Done
    40 days ago (> 31 days kept): deleted; done yesterday: kept."""
    from pools.elastic.services import elastic_whatifs_sweep
    from pools.jobs.models import QueuedJob

    settings.TASK_TIME_LIMIT_S = 900
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=4, cards_held=2)

    def whatif(status, *, age_min, finished_days=None):
        made = ElasticWhatIf.objects.create(policy=policy, status=status, params={"days": 1},
                                            result={} if status == "done" else None)  # fmt: skip
        ElasticWhatIf.objects.filter(pk=made.pk).update(
            created_at=NOW - timedelta(minutes=age_min),
            finished_at=None if finished_days is None else NOW - timedelta(days=finished_days),
        )
        return made.pk

    lost = [whatif("pending", age_min=20), whatif("running", age_min=20)]
    fresh = whatif("pending", age_min=5)
    waiting = whatif("pending", age_min=20)
    QueuedJob.objects.create(task_name="pools.elastic.tasks.elastic_whatif_task", args=[waiting])
    whatif("done", age_min=40 * 1440, finished_days=40)
    kept = whatif("done", age_min=1440, finished_days=1)
    with django_capture_on_commit_callbacks(execute=True) as queued:
        assert elastic_whatifs_sweep(now=NOW) == {"requeued": 2, "deleted": 1}
    assert len(queued) == 2
    # the two lost ones ran (no Prometheus, no readings: unavailable); the others did not
    status = dict(ElasticWhatIf.objects.values_list("pk", "status"))
    assert status == {lost[0]: "failed", lost[1]: "failed", fresh: "pending",
                      waiting: "pending", kept: "done"}  # fmt: skip


@pytest.mark.parametrize(
    "ceiling, message",
    [(9, "At most 8: the L40S cards of Infer and the burst pools."),
     (10**6, "At most 8: the L40S cards of Infer and the burst pools."),
     (10**12, "Ensure this value is less than or equal to 2147483647."),
     (2**63 + 1, "Ensure this value is less than or equal to 2147483647.")],
)  # fmt: skip
def test_a_ceiling_above_the_cards_there_are_is_a_400_on_its_field(
    admin_api, allocation, ceiling, message
):
    """The pool has 8 L40S and no burst pool: a ceiling of 9 is refused on ``ceiling_cards``,
    naming the 8; a number past a 32-bit integer (SQLite stored it, PostgreSQL refused it) by
    the model's range on every database; 8 is accepted, and an edit to 9 refused alike."""
    answer = admin_api.post("/api/v1/elastic-policies/", {"allocation": allocation.pk,
                            "ceiling_cards": ceiling}, format="json")  # fmt: skip
    assert answer.status_code == 400
    body = answer.json()
    assert body["code"] == "invalid_input"
    assert body["errors"]["ceiling_cards"] == [message]
    assert not ElasticPolicy.objects.exists()
    made = admin_api.post("/api/v1/elastic-policies/", {"allocation": allocation.pk,
                          "ceiling_cards": 8}, format="json")  # fmt: skip
    assert made.status_code == 201
    policy = ElasticPolicy.objects.get()
    edit = admin_api.patch(f"/api/v1/elastic-policies/{policy.pk}/", {"ceiling_cards": 9},
                           format="json")  # fmt: skip
    assert edit.status_code == 400 and "ceiling_cards" in edit.json()["errors"]
    policy.refresh_from_db()
    assert policy.ceiling_cards == 8
