"""reclamation_what_if: the policy replayed over past (fake) metrics, writing nothing.

A Kubernetes pool ``infer`` with 4 L40S on ``k8s-n1``; ``NOW`` is on the hour, the replay runs
over the last 3 days every 60 min (steps on the hour). Default policy: idle < 30 % mean over
30 min, certainly idle < 5 % peak and at most 64 MiB, grace 24 h.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import (
    AllocationFactory,
    GpuFactory,
    IdleFindingFactory,
    NodeFactory,
    PoolFactory,
    TeamFactory,
)

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus, GpuHealth, IdleFindingState, Scheduler
from pools.common.errors import InvalidInput
from pools.inventory.models import GpuModel
from pools.reclamation.models import IdleFinding, ReclamationPolicy, ReclamationWhatIf
from pools.reclamation.services import whatif as reclamation_whatif
from pools.reclamation.services.whatif import (
    reclamation_what_if,
    reclamation_whatif_queue,
    reclamation_whatif_run,
)
from scheduler_adapters.prometheus import DeviceUsage, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(minute=0, second=0, microsecond=0)
IDLE_FROM = NOW - timedelta(hours=30, minutes=30)  # first fully idle 30-min window ends NOW-30h


def usage(uuid, namespace, util, *, every_s=60, fb=0.0):
    """Samples every ``every_s`` from NOW - 4 d to NOW; ``util(t)`` gives the % at time t."""
    start = (NOW - timedelta(days=4)).timestamp()
    stamps = [start + every_s * i for i in range(int((NOW.timestamp() - start) // every_s) + 1)]
    return DeviceUsage(
        hostname="k8s-n1",
        uuid=uuid,
        gpu="0",
        model_name="NVIDIA L40S",
        gpu_instance_id=None,
        mig_profile=None,
        namespace=namespace,
        pods=("p",),
        hpc_jobs=(),
        util_source="prof",
        util_pct=tuple(Sample(t, util(t)) for t in stamps),
        fb_used_mib=tuple(Sample(t, fb) for t in stamps),
    )


def idle_for_30h(t):
    return 1.0 if t >= IDLE_FROM.timestamp() else 80.0


@pytest.fixture
def world():
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S",
                   health=GpuHealth.OK)  # fmt: skip
    ReclamationPolicy.objects.create(pool=pool, dry_run=False)
    allocations = {}
    for slug in ("idle", "busy", "gappy"):
        allocations[slug] = AllocationFactory(
            team=TeamFactory(slug=slug),
            pool=pool,
            gpu_model=l40s,
            card_count=2 if slug == "idle" else 1,
            status=AllocationStatus.ACTIVE,
            starts_at=NOW - timedelta(days=5),
            ends_at=NOW + timedelta(days=5),
        )
    devices = [
        usage("GPU-1", "team-idle", idle_for_30h),
        usage("GPU-2", "team-idle", idle_for_30h),
        usage("GPU-3", "team-busy", lambda t: 85.0),
        # idle readings, but one sample every 10 min: coverage < 90 %, always unknown
        usage("GPU-4", "team-gappy", lambda t: 0.0, every_s=600),
    ]
    return {"pool": pool, "allocations": allocations, "metrics": FakePrometheus(devices)}


def run(world, **overrides):
    report = reclamation_what_if(
        pool=world["pool"],
        policy_overrides=overrides or None,
        days=3,
        now=NOW,
        metrics=world["metrics"],
    )
    return report, {row.team: row for row in report.rows}


def test_idle_allocation_would_be_reclaimed_at_first_idle_plus_grace(world):
    report, rows = run(world)
    assert report.error is None
    idle = rows["idle"]
    assert idle.first_idle == NOW - timedelta(hours=30)
    assert idle.would_reclaim_at == NOW - timedelta(hours=6)  # first idle + 24 h grace
    assert idle.cards_reclaimed == 2
    assert idle.card_hours_freed == 12.0  # 2 cards x 6 h until NOW
    assert (report.findings, report.reclaimed, report.cards_reclaimed) == (1, 1, 2)
    assert report.card_hours_freed == 12.0


def test_busy_and_gappy_allocations_would_not_be_touched(world):
    _, rows = run(world)
    for team in ("busy", "gappy"):
        row = rows[team]
        assert (row.first_idle, row.would_reclaim_at, row.cards_reclaimed) == (None, None, 0)
        assert row.card_hours_freed == 0.0


def test_overrides_change_the_result(world):
    _, rows = run(world, grace_hours=36)  # idle for 30 h only
    assert rows["idle"].first_idle == NOW - timedelta(hours=30)
    assert rows["idle"].would_reclaim_at is None
    # stricter: 1 % is not idle below 0.5 %
    report, rows = run(world, idle_below_pct=0.5, certainly_idle_below_pct=0.5)
    assert rows["idle"].first_idle is None and report.card_hours_freed == 0.0
    # a shorter grace reclaims earlier and frees more
    _, rows = run(world, grace_hours=12)
    assert rows["idle"].would_reclaim_at == NOW - timedelta(hours=18)
    assert rows["idle"].card_hours_freed == 36.0


def test_the_database_is_unchanged(world):
    def snapshot():
        return (
            IdleFinding.objects.count(),
            AuditEvent.objects.count(),
            list(
                Allocation.objects.order_by("pk").values_list(
                    "pk", "status", "card_count", "ends_at", "updated_at"
                )
            ),
            list(ReclamationPolicy.objects.values()),
        )

    before = snapshot()
    run(world)
    run(world, grace_hours=1, idle_below_pct=50)
    assert snapshot() == before


@override_settings(PROMETHEUS_URL="")
def test_without_prometheus_the_report_says_so(world):
    report = reclamation_what_if(pool=world["pool"], now=NOW)
    assert (report.error, report.error_code) == (
        "no Prometheus configured (PROMETHEUS_URL)", "unavailable",
    )  # fmt: skip


def test_a_queued_what_if_stores_the_report_as_json_with_its_progress(
    world, django_capture_on_commit_callbacks
):
    """Queued with a 12 h grace over 3 days (the ``world`` of the module docstring): the task
    stores what :func:`run` reports — the idle allocation reclaimed at first idle (NOW - 30 h)
    + 12 h = NOW - 18 h, 2 cards x 18 h = 36 card-hours — and reports its progress on the way:
    40 % once Prometheus answered, then a step at least every 5 % up to 99, then 100."""
    seen = []
    with django_capture_on_commit_callbacks(execute=False) as queued:
        whatif = reclamation_whatif_queue(pool=world["pool"], actor=None, days=3,
                                          overrides={"grace_hours": 12})  # fmt: skip
    assert len(queued) == 1 and whatif.status == "pending"
    real_update = type(ReclamationWhatIf.objects.all()).update

    def update(qs, **values):
        seen.append(values.get("progress"))
        return real_update(qs, **values)

    with (
        mock.patch.object(type(ReclamationWhatIf.objects.all()), "update", update),
        mock.patch.object(reclamation_whatif, "timezone", mock.Mock(now=lambda: NOW)),
    ):
        done = reclamation_whatif_run(whatif_id=whatif.pk, metrics=world["metrics"])
    assert (done.status, done.progress, done.error, done.error_code) == ("done", 100, "", "")
    assert seen[0] == 40 and seen[-1] == 100 and seen[-2] <= 99
    assert all(b - a >= 5 for a, b in zip(seen[:-2], seen[1:-1], strict=True))
    rows = {row["team"]: row for row in done.result["rows"]}
    assert rows["idle"] == {
        "allocation": world["allocations"]["idle"].pk, "team": "idle", "card_count": 2,
        "first_idle": (NOW - timedelta(hours=30)).isoformat(),
        "would_reclaim_at": (NOW - timedelta(hours=18)).isoformat(),
        "cards_reclaimed": 2, "card_hours_freed": "36.000", "findings": 1, "note": "",
    }  # fmt: skip
    assert (rows["busy"]["would_reclaim_at"], rows["gappy"]["first_idle"]) == (None, None)
    assert (done.result["start"], done.result["end"]) == (
        (NOW - timedelta(days=3)).isoformat(), NOW.isoformat(),
    )  # fmt: skip
    assert done.result["policy"]["grace_hours"] == 12
    assert done.result["policy"]["idle_below_pct"] == "30.00"
    assert (done.result["cards_reclaimed"], done.result["card_hours_freed"]) == (2, "36.000")
    # a redelivered task leaves a finished what-if as it is
    assert reclamation_whatif_run(whatif_id=whatif.pk).result == done.result


@pytest.mark.parametrize(
    "overrides, days, field",
    [({"grace_hours": 12}, 31, "days"), ({"grace_hours": 12}, "3", "days"),
     ({"cooldown_minutes": 5}, 3, "cooldown_minutes"), ({"idle_below_pct": 150}, 3,
     "idle_below_pct")],
)  # fmt: skip
def test_a_what_if_that_cannot_run_is_refused_and_queues_nothing(world, overrides, days, field):
    with pytest.raises(InvalidInput) as refused:
        reclamation_whatif_queue(pool=world["pool"], actor=None, overrides=overrides, days=days)
    assert list(refused.value.data["errors"]) == [field]
    assert not ReclamationWhatIf.objects.exists()


def test_prometheus_unreachable_is_a_failed_what_if(world, settings):
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    whatif = reclamation_whatif_queue(pool=world["pool"], actor=None, days=1)
    done = reclamation_whatif_run(whatif_id=whatif.pk)
    assert (done.status, done.error_code, done.result) == (
        "failed", "prometheus_unavailable", None,
    )  # fmt: skip
    assert done.error == (
        "Prometheus unavailable: query_range: cannot reach Prometheus at http://127.0.0.1:9: "
        "[Errno 111] Connection refused"
    )


THRESHOLDS = {"idle_below_pct": "0.5", "certainly_idle_below_pct": "0.5",
              "process_memory_max_mib": 64, "window_minutes": 30, "min_coverage": "0.9",
              "grace_hours": 24}  # fmt: skip


def post_what_if(page_client, data, capture, *, execute=True):
    """POST the what-if form of pool ``infer`` (its task runs eagerly on commit unless
    ``execute`` is off); the what-if and the page the redirect leads to."""
    with capture(execute=execute):
        queued = page_client.post("/idle/policies/", {"kind": "whatif", "pool_slug": "infer",
                                                      **data})  # fmt: skip
    whatif = ReclamationWhatIf.objects.get()
    assert queued.status_code == 302, queued.content
    assert queued["Location"] == f"/idle/policies/?pool=infer&whatif={whatif.pk}#whatif"
    return whatif, page_client.get("/idle/policies/", {"pool": "infer", "whatif": whatif.pk})


def test_policy_page_shows_the_what_if(
    admin_page, world, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(reclamation_whatif, "metrics_adapter", lambda **_: world["metrics"])
    _, page = post_what_if(admin_page, {"days": 3}, django_capture_on_commit_callbacks)
    body = page.content.decode()
    assert "What if…" in body and "data-whatif-totals" in body
    assert f"#{world['allocations']['idle'].pk}<" in body
    ReclamationWhatIf.objects.all().delete()
    _, strict = post_what_if(admin_page, {"days": 3, **THRESHOLDS},
                             django_capture_on_commit_callbacks)  # fmt: skip
    assert "freeing 0.000 card-hours" in " ".join(strict.content.decode().split())


@override_settings(PROMETHEUS_URL="")
def test_policy_page_without_prometheus(admin_page, world, django_capture_on_commit_callbacks):
    whatif, page = post_what_if(admin_page, {"days": 7}, django_capture_on_commit_callbacks)
    assert (whatif.status, whatif.error_code) == ("failed", "unavailable")
    body = page.content.decode()
    assert 'data-error-code="unavailable"' in body
    assert "What-if unavailable: no Prometheus configured (PROMETHEUS_URL)." in body


@override_settings(PROMETHEUS_URL="")
def test_policy_page_says_before_a_run_that_without_prometheus_the_what_if_cannot_run(
    admin_page, world
):
    """The demo's case: no cluster URL and no PROMETHEUS_URL. The form says why and its button
    is off, instead of offering a run that would end "unavailable"."""
    body = admin_page.get("/idle/policies/", {"pool": "infer"}).content.decode()
    assert "data-whatif-unavailable" in body
    assert "no Prometheus is configured for this pool" in body
    assert "<button disabled>Run what-if</button>" in body
    assert not ReclamationWhatIf.objects.exists()


@override_settings(PROMETHEUS_URL="http://prometheus.test:9090")
def test_policy_page_offers_the_what_if_when_a_prometheus_is_configured(admin_page, world):
    body = admin_page.get("/idle/policies/", {"pool": "infer"}).content.decode()
    assert "data-whatif-unavailable" not in body
    assert "<button>Run what-if</button>" in body


def test_the_what_if_form_runs_and_keeps_the_saved_dry_run(
    admin_page, world, monkeypatch, django_capture_on_commit_callbacks
):
    # the what-if form sends only the numbers it replays: no cooldown, no dry-run box
    monkeypatch.setattr(reclamation_whatif, "metrics_adapter", lambda **_: world["metrics"])
    ReclamationPolicy.objects.update_or_create(pool=world["pool"], defaults={"dry_run": True})
    whatif, page = post_what_if(admin_page, {"days": 3, **THRESHOLDS},
                                django_capture_on_commit_callbacks)  # fmt: skip
    assert whatif.params == {"days": 3, "overrides": {
        "idle_below_pct": "0.5", "certainly_idle_below_pct": "0.5", "process_memory_max_mib": 64,
        "window_minutes": 30, "min_coverage": "0.9", "grace_hours": 24}}  # fmt: skip
    body = page.content.decode()
    assert "Fix the values above" not in body
    assert "freeing 0.000 card-hours" in " ".join(body.split())
    assert 'name="dry_run" id="id_dry_run" checked' in body  # saving keeps the dry run
    assert 'name="idle_below_pct" value="0.5"' in body  # the form keeps the trial's values


def test_bad_what_if_values_are_form_errors_and_queue_nothing(admin_page, world):
    page = admin_page.post("/idle/policies/", {"kind": "whatif", "pool_slug": "infer",
                                               **THRESHOLDS, "idle_below_pct": "-1",
                                               "days": "3"})  # fmt: skip
    assert page.status_code == 200
    assert "Fix the values above to run the what-if." in page.content.decode()
    assert list(page.context["form"].errors) == ["idle_below_pct"]
    page = admin_page.post("/idle/policies/", {"kind": "whatif", "pool_slug": "infer",
                                               "days": "٣"})  # fmt: skip
    assert page.context["form"].errors == {
        "__all__": ["Days: A whole number of days from 1 to 30."]
    }
    assert not ReclamationWhatIf.objects.exists()


def test_the_page_polls_a_queued_what_if(
    admin_page, world, monkeypatch, django_capture_on_commit_callbacks
):
    """Queued (no worker yet): the page polls ``?pool=infer&whatif=<id>`` over htmx; the poll
    answers the fragment (progress, then the totals) and stops polling once finished."""
    monkeypatch.setattr(reclamation_whatif, "metrics_adapter", lambda **_: world["metrics"])
    whatif, page = post_what_if(admin_page, {"days": 3}, django_capture_on_commit_callbacks,
                                execute=False)  # fmt: skip
    url = f"/idle/policies/?pool=infer&whatif={whatif.pk}"
    assert f'hx-get="{url}"' in page.content.decode()
    poll = admin_page.get(url, headers={"HX-Request": "true"}).content.decode()
    assert poll.lstrip().startswith('<div id="whatif-result" data-whatif-status="pending"')
    reclamation_whatif_run(whatif_id=whatif.pk)
    poll = admin_page.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'data-whatif-status="done"' in poll and "hx-get" not in poll
    assert "data-whatif-totals" in poll and "<nav" not in poll


def test_the_api_queues_a_what_if_and_answers_its_report(
    admin_api, world, monkeypatch, django_capture_on_commit_callbacks
):
    """``POST /api/v1/reclamation-policies/infer/what-if/`` with a 12 h grace over 3 days: 202
    and the status URL, which answers the report of
    :func:`test_a_queued_what_if_stores_the_report_as_json_with_its_progress`: the idle
    allocation first idle at NOW - 30 h, reclaimed 12 h later at NOW - 18 h. The what-if's
    clock is NOW, where the fake samples end (with the real clock the replay's steps would
    fall wherever the minute it runs puts them)."""
    monkeypatch.setattr(reclamation_whatif, "metrics_adapter", lambda **_: world["metrics"])
    monkeypatch.setattr(reclamation_whatif, "timezone", mock.Mock(now=lambda: NOW))
    with django_capture_on_commit_callbacks(execute=True):
        queued = admin_api.post("/api/v1/reclamation-policies/infer/what-if/",
                                {"days": 3, "grace_hours": 12}, format="json")  # fmt: skip
    assert queued.status_code == 202, queued.content
    body = queued.json()
    assert (body["pool"], body["days"], body["overrides"], body["status"]) == (
        "infer", 3, {"grace_hours": 12}, "pending",
    )  # fmt: skip
    assert queued["Location"] == body["status_url"] == f"/api/v1/reclamation-whatifs/{body['id']}/"
    done = admin_api.get(body["status_url"]).json()
    assert (done["status"], done["progress"], done["error_code"]) == ("done", 100, "")
    [idle] = [row for row in done["result"]["rows"] if row["team"] == "idle"]
    assert (idle["first_idle"], idle["would_reclaim_at"], idle["cards_reclaimed"]) == (
        (NOW - timedelta(hours=30)).isoformat(), (NOW - timedelta(hours=18)).isoformat(), 2,
    )  # fmt: skip


def test_the_api_refuses_bad_what_ifs_and_members(
    admin_api, member_api, world, django_capture_on_commit_callbacks
):
    url = "/api/v1/reclamation-policies/infer/what-if/"
    for body, field in (({"days": 31}, "days"), ({"days": "٣"}, "days"),
                        ({"idle_below_pct": "-1"}, "idle_below_pct")):  # fmt: skip
        bad = admin_api.post(url, body, format="json")
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid_input"), body
        assert list(bad.json()["errors"]) == [field], body
    assert admin_api.post("/api/v1/reclamation-policies/nope/what-if/", {}).status_code == 404
    assert member_api.post(url, {}, format="json").status_code == 403
    with django_capture_on_commit_callbacks(execute=False):
        queued = admin_api.post(url, {}, format="json").json()
    assert member_api.get(queued["status_url"]).status_code == 403
    assert ReclamationWhatIf.objects.count() == 1


@override_settings(PROMETHEUS_URL="", TASK_TIME_LIMIT_S=900)
def test_the_sweep_queues_lost_what_ifs_again_and_deletes_old_ones(
    world, django_capture_on_commit_callbacks
):
    """TASK_TIME_LIMIT_S = 900: pending since 20 minutes ago is lost (queued again: it runs,
    and without Prometheus fails as unavailable), since 5 minutes ago is left; done 31 days ago
    (> 30 kept) is deleted, 29 days ago kept."""
    from pools.reclamation.services.whatif import reclamation_whatifs_sweep

    def whatif(status, *, age_min, finished_days=None):
        result = {} if status == "done" else None
        made = ReclamationWhatIf.objects.create(
            pool=world["pool"], status=status, params={"days": 1}, result=result
        )
        ReclamationWhatIf.objects.filter(pk=made.pk).update(
            created_at=NOW - timedelta(minutes=age_min),
            finished_at=None if finished_days is None else NOW - timedelta(days=finished_days),
        )
        return made.pk

    lost = whatif("pending", age_min=20)
    fresh = whatif("pending", age_min=5)
    whatif("done", age_min=31 * 1440, finished_days=31)
    kept = whatif("done", age_min=29 * 1440, finished_days=29)
    with django_capture_on_commit_callbacks(execute=True) as queued:
        assert reclamation_whatifs_sweep(now=NOW) == {"requeued": 1, "deleted": 1}
    assert len(queued) == 1
    status = dict(ReclamationWhatIf.objects.values_list("pk", "status"))
    assert status == {lost: "failed", fresh: "pending", kept: "done"}


def test_the_what_ifs_rows_export_as_csv(admin_page, world, django_capture_on_commit_callbacks):
    """The stored report's rows, one line each (the idle one as worked out in
    :func:`test_a_queued_what_if_stores_the_report_as_json_with_its_progress`, 24 h grace)."""
    whatif = reclamation_whatif_queue(pool=world["pool"], actor=None, days=3)
    with mock.patch.object(reclamation_whatif, "timezone", mock.Mock(now=lambda: NOW)):
        reclamation_whatif_run(whatif_id=whatif.pk, metrics=world["metrics"])
    answer = admin_page.get("/idle/policies/", {"pool": "infer", "whatif": whatif.pk,
                                                "export": "csv"})  # fmt: skip
    assert answer["Content-Type"].startswith("text/csv")
    lines = b"".join(answer.streaming_content).decode().splitlines()
    assert lines[0] == (
        "allocation,team,card_count,first_idle,would_reclaim_at,cards_reclaimed,"
        "card_hours_freed,findings,note"
    )
    idle = world["allocations"]["idle"].pk
    assert (
        f"{idle},idle,2,{(NOW - timedelta(hours=30)).isoformat()},"
        f"{(NOW - timedelta(hours=6)).isoformat()},2,12.000,1,"
    ) in lines
    assert len(lines) == 4  # the header and the three allocations


def test_card_hours_freed_read_to_3_places(admin_page, world, django_capture_on_commit_callbacks):
    """The idle allocation ends 5 minutes after the 24 h grace reclaims it (NOW - 6 h): 2 cards
    × 5 min = 10 card-minutes = 0.1666… card-hours, stored "0.167" (to 2 places it read 0.170),
    the total too; the page and the CSV say 0.167. A what-if stored before, with 0.17 as a
    number, still reads: 0.170."""
    idle = world["allocations"]["idle"]
    idle.ends_at = NOW - timedelta(hours=6) + timedelta(minutes=5)
    idle.save()
    whatif = reclamation_whatif_queue(pool=world["pool"], actor=None, days=3)
    with mock.patch.object(reclamation_whatif, "timezone", mock.Mock(now=lambda: NOW)):
        reclamation_whatif_run(whatif_id=whatif.pk, metrics=world["metrics"])
    whatif.refresh_from_db()
    [row] = [r for r in whatif.result["rows"] if r["team"] == "idle"]
    assert (row["card_hours_freed"], whatif.result["card_hours_freed"]) == ("0.167", "0.167")
    query = {"pool": "infer", "whatif": whatif.pk}
    page = " ".join(admin_page.get("/idle/policies/", query).content.decode().split())
    assert "freeing 0.167 card-hours" in page
    lines = b"".join(admin_page.get("/idle/policies/", {**query, "export": "csv"})
                     .streaming_content).decode().splitlines()  # fmt: skip
    assert [line.split(",")[6] for line in lines[1:] if ",idle," in line] == ["0.167"]

    row["card_hours_freed"] = whatif.result["card_hours_freed"] = 0.17
    whatif.save()
    page = " ".join(admin_page.get("/idle/policies/", query).content.decode().split())
    assert "freeing 0.170 card-hours" in page
    lines = b"".join(admin_page.get("/idle/policies/", {**query, "export": "csv"})
                     .streaming_content).decode().splitlines()  # fmt: skip
    assert [line.split(",")[6] for line in lines[1:] if ",idle," in line] == ["0.170"]


@pytest.fixture
def shrunk():
    """``infer`` with team ``nlp``'s allocation from NOW - 5 d to NOW + 5 d that held 4 cards
    until a reclamation shrank it to 1 at NOW - 12 h (its ``card_count`` now 1). Its namespace
    reports 4 cards: GPU-1 busy (85 %) throughout, GPU-2..4 busy until :data:`IDLE_FROM` and
    certainly idle (1 %, no memory) after."""
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S",
                   health=GpuHealth.OK)  # fmt: skip
    ReclamationPolicy.objects.create(pool=pool, dry_run=False)
    allocation = AllocationFactory(team=TeamFactory(slug="nlp"), pool=pool, gpu_model=l40s,
                                   card_count=1, status=AllocationStatus.ACTIVE,
                                   starts_at=NOW - timedelta(days=5),
                                   ends_at=NOW + timedelta(days=5))  # fmt: skip
    IdleFindingFactory(allocation=allocation, first_seen_at=NOW - timedelta(hours=13),
                       reclaimed_at=NOW - timedelta(hours=12), card_count=4, cards_in_use=1,
                       state=IdleFindingState.RECLAIMED)  # fmt: skip
    devices = [usage("GPU-1", "team-nlp", lambda t: 85.0)]
    devices += [usage(f"GPU-{i}", "team-nlp", idle_for_30h) for i in (2, 3, 4)]
    return {"pool": pool, "allocation": allocation, "metrics": FakePrometheus(devices)}


def test_the_replay_counts_the_cards_held_before_a_shrink(shrunk):
    """Grace 12 h. Before NOW - 12 h the allocation held 4 cards, 1 of them busy: from the
    first idle window (ending NOW - 30 h) 3 of 4 idle, so a finding opens at NOW - 30 h and
    reclaims 4 − 1 = 3 cards at NOW - 18 h, freeing 3 cards × 6 h (to the real shrink, after
    which it held 1, the busy one kept: 0 more) = 18 card-hours. Replayed with today's
    ``card_count`` (1) it held one card, the busy one: never reclaimed, nothing freed. Its
    cards shown: 4, the most it held in the period (its ``card_count`` 1 read "1 card, 3
    reclaimed")."""
    report = reclamation_what_if(pool=shrunk["pool"], policy_overrides={"grace_hours": 12},
                                 days=3, now=NOW, metrics=shrunk["metrics"])  # fmt: skip
    (row,) = report.rows
    assert row.first_idle == NOW - timedelta(hours=30)
    assert row.would_reclaim_at == NOW - timedelta(hours=18)
    assert (row.card_count, row.cards_reclaimed, row.card_hours_freed) == (4, 3, Decimal(18))
    assert (report.cards_reclaimed, report.card_hours_freed) == (3, Decimal(18))


def test_the_stored_report_and_page_show_the_cards_held_in_the_period(shrunk, admin_page):
    """The queued run stores 4 cards for the row (held until NOW - 12 h), and the page's
    "Most cards held" cell reads 4 beside 3 reclaimed, 18.000 card-hours freed."""
    whatif = reclamation_whatif_queue(pool=shrunk["pool"], actor=None, days=3,
                                      overrides={"grace_hours": 12})  # fmt: skip
    with mock.patch.object(reclamation_whatif, "timezone", mock.Mock(now=lambda: NOW)):
        done = reclamation_whatif_run(whatif_id=whatif.pk, metrics=shrunk["metrics"])
    (row,) = done.result["rows"]
    assert (row["card_count"], row["cards_reclaimed"], row["card_hours_freed"]) == (4, 3, "18.000")
    page = admin_page.get("/idle/policies/", {"pool": "infer", "whatif": whatif.pk})
    html = " ".join(page.content.decode().split())
    assert '<th class="num" title="The most cards it held at any time of the period">' in html
    cells = f'<td>#{shrunk["allocation"].pk}</td><td>nlp</td><td class="num">4</td>'
    assert cells in html


def test_a_shrink_before_the_period_shows_the_cards_held_since(shrunk):
    """The shrink moved to NOW - 4 d (before the 3 days replayed and their first 30-min
    window): the period held 1 card throughout, so the row shows 1, not the 4 held before."""
    shrunk["allocation"].idle_findings.update(
        reclaimed_at=NOW - timedelta(days=4), first_seen_at=NOW - timedelta(days=4, hours=1)
    )
    report = reclamation_what_if(pool=shrunk["pool"], policy_overrides={"grace_hours": 12},
                                 days=3, now=NOW, metrics=shrunk["metrics"])  # fmt: skip
    (row,) = report.rows
    assert row.card_count == 1


def test_the_card_hours_freed_follow_the_cards_held_after_the_reclaim(shrunk):
    """GPU-1 idle too (all 4 certainly idle from NOW - 30 h), grace 12 h: at NOW - 18 h it held
    4 and keeps none: 4 reclaimed; freed 4 × 6 h until the shrink + 1 × 12 h after = 36
    card-hours (4 × 18 h = 72 would count the 3 cards the real shrink took back; today's
    ``card_count`` said 1 × 18 h = 18)."""
    devices = [usage(f"GPU-{i}", "team-nlp", idle_for_30h) for i in (1, 2, 3, 4)]
    report = reclamation_what_if(pool=shrunk["pool"], policy_overrides={"grace_hours": 12},
                                 days=3, now=NOW, metrics=FakePrometheus(devices))  # fmt: skip
    (row,) = report.rows
    assert row.would_reclaim_at == NOW - timedelta(hours=18)
    assert (row.cards_reclaimed, row.card_hours_freed) == (4, Decimal(36))


def test_an_allocation_holding_no_cards_then_is_not_replayed(shrunk):
    """Ended by a reclamation at NOW - 40 h and undone at NOW - 2 h (an end undone: 0 cards in
    between), all 4 cards idle from NOW - 30 h, grace 12 h: it held nothing to reclaim until
    NOW - 2 h, and from then the first idle step has 2 h of grace to go: no finding reclaims;
    the finding opens at NOW - 2 h. Replayed with its 1 card throughout it was reclaimed at
    NOW - 18 h."""
    allocation = shrunk["allocation"]
    allocation.idle_findings.all().delete()
    IdleFindingFactory(allocation=allocation, first_seen_at=NOW - timedelta(hours=41),
                       reclaimed_at=NOW - timedelta(hours=40), closed_at=NOW - timedelta(hours=2),
                       card_count=1, cards_in_use=0, state=IdleFindingState.UNDONE)  # fmt: skip
    devices = [usage(f"GPU-{i}", "team-nlp", idle_for_30h) for i in (1, 2, 3, 4)]
    report = reclamation_what_if(pool=shrunk["pool"], policy_overrides={"grace_hours": 12},
                                 days=3, now=NOW, metrics=FakePrometheus(devices))  # fmt: skip
    (row,) = report.rows
    assert (row.first_idle, row.would_reclaim_at, row.cards_reclaimed) == (
        NOW - timedelta(hours=2), None, 0,
    )  # fmt: skip


@pytest.mark.parametrize("days", ["9" * 5000, "9" * 19])
def test_days_with_more_digits_than_a_number_has_is_a_form_error(admin_page, world, days):
    """``int()`` refuses a 5,000-digit text (over 4,300 digits): it was a 500. Any number of
    digits past 18 is far past 30 days: the range's message, nothing queued."""
    page = admin_page.post("/idle/policies/", {"kind": "whatif", "pool_slug": "infer",
                                               "days": days})  # fmt: skip
    assert page.status_code == 200
    assert page.context["form"].errors == {
        "__all__": ["Days: A whole number of days from 1 to 30."]
    }
    assert not ReclamationWhatIf.objects.exists()


@pytest.mark.parametrize("whatif", ["9" * 5000, "9" * 19, "²", "-1", "abc"])
def test_a_what_if_id_that_is_no_row_id_shows_the_page_without_one(admin_page, world, whatif):
    """``?whatif=`` of 5,000 digits (``int()`` refuses it) or "²" (a digit to ``isdigit()``)
    was a 500; now, like an unknown id, the page without a what-if."""
    page = admin_page.get("/idle/policies/", {"pool": "infer", "whatif": whatif})
    assert page.status_code == 200
    assert "data-whatif-totals" not in page.content.decode()
