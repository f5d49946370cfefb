"""An inventory import that takes cards from under granted windows says so (issue 27 item 4):
in its report (service, API, command) and as a dashboard alert, listing the allocations.

Pool ``train`` (over-commit ratio 1.0): nodes trn-01 and trn-02 with 4 A100 each, 8 usable.
Team ``vision`` holds A: 4 cards from a day ago to in 5 days; B: 3 cards from in 1 day to in
3 days; C: 1 card from in 6 days to in 8 days. Held at once: 4 now, 7 from day 1 to day 3, 4 to
day 5, then 1 — at most 7 of 8. The import then finds trn-02 with one card: 4 + 1 = 5 usable.
7 > 5 from day 1 to day 3, so the pool is over-committed; A and B hold cards then, C (1 card
while 1 is held) does not.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone
from factories import AllocationFactory, PoolFactory, TeamFactory, nvidia_smi_csv

from pools.capacity.overcommit import overcommitted_windows
from pools.common.choices import AllocationStatus, NodeState
from pools.dashboards.capacity import dashboard_alerts
from pools.inventory.models import Gpu, GpuModel, Node
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db
DAY = timedelta(days=1)


@pytest.fixture
def world():
    pool = PoolFactory(slug="train")
    for host, name in ((1, "trn-01"), (2, "trn-02")):
        report = inventory_import_file(
            data=nvidia_smi_csv(4, host=host), source="nvidia-smi", node=name, pool=pool
        )
        assert report.created == [name] and report.overcommitted == []
    # nvidia-smi says nothing of a node's state; the scheduler says they are up
    Node.objects.filter(pool=pool).update(state=NodeState.UP)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    assert Gpu.objects.filter(node__pool=pool, gpu_model=a100).count() == 8
    team = TeamFactory(slug="vision")
    now = timezone.now()

    def hold(cards, start, end):
        return AllocationFactory(
            team=team,
            pool=pool,
            gpu_model=a100,
            card_count=cards,
            status=AllocationStatus.ACTIVE if start <= 0 else AllocationStatus.APPROVED,
            starts_at=now + start * DAY,
            ends_at=now + end * DAY,
        )

    return {"pool": pool, "a": hold(4, -1, 5), "b": hold(3, 1, 3), "c": hold(1, 6, 8)}


def one_card_left() -> bytes:
    return nvidia_smi_csv(1, host=2)  # trn-02's GPU 0 (same UUID), its 3 others gone


def test_nothing_over_committed_before_the_import(world):
    assert overcommitted_windows(now=timezone.now()) == []


def test_the_import_report_lists_the_over_committed_window(world):
    report = inventory_import_file(
        data=one_card_left(), source="nvidia-smi", node="trn-02", pool=world["pool"]
    )
    assert report.updated == ["trn-02"]
    [over] = report.overcommitted
    a, b = world["a"].pk, world["b"].pk
    assert (over["pool"], over["gpu_model"], over["usable"], over["peak"]) == (
        "train",
        "a100_80g_sxm",
        5,
        7,
    )
    assert over["allocations"] == [a, b]
    assert over["end"] == world["c"].ends_at.isoformat()  # the last window checked
    assert (
        f"up to 7 cards held until {world['c'].ends_at:%Y-%m-%d %H:%M}, 5 usable" in (over["text"])
    )
    assert report.as_dict()["overcommitted"] == report.overcommitted


def test_the_api_and_the_command_say_so_too(world, admin_api, tmp_path, capsys):
    answer = admin_api.post(
        "/api/v1/inventory/imports/",
        {
            "source": "nvidia-smi",
            "node": "trn-02",
            "pool": "train",
            "file": SimpleUploadedFile("trn-02.csv", one_card_left()),
        },
        format="multipart",
    )
    assert answer.status_code == 201, answer.content  # everything in the file was imported
    [over] = answer.json()["overcommitted"]
    assert (over["usable"], over["peak"]) == (5, 7)

    path = tmp_path / "trn-02.csv"
    path.write_bytes(one_card_left())
    call_command("import_inventory", "--source", "nvidia-smi", "--node", "trn-02", str(path))
    assert "over-committed: train a100_80g_sxm: up to 7 cards held" in capsys.readouterr().out


def test_the_dashboard_alert_lists_the_allocations_until_resolved(world, admin_client):
    inventory_import_file(
        data=one_card_left(), source="nvidia-smi", node="trn-02", pool=world["pool"]
    )
    alerts = dashboard_alerts(now=timezone.now())
    assert [(o.pool, o.allocations) for o in alerts.overcommitted] == [
        ("train", (world["a"].pk, world["b"].pk))
    ]
    page = admin_client.get("/dashboard/")
    assert page.status_code == 200
    assert b"data-overcommitted" in page.content
    assert f"#{world['a'].pk}, #{world['b'].pk}".encode() in page.content
    # B released (5 of 5 held at most): nothing to say any more
    type(world["b"]).objects.filter(pk=world["b"].pk).update(status=AllocationStatus.CANCELLED)
    assert dashboard_alerts(now=timezone.now()).overcommitted == []


def test_a_maintenance_window_is_swept_though_the_holds_add_up_to_the_usable_cards(world):
    """A, B and C hold 4 + 3 + 1 = 8 cards in all, the 8 usable: no instant can hold more, so
    without anything else the pool is not swept. trn-01 (4 cards) planned out from day 2 to
    day 2.5 takes 4 of them then, while A and B hold 7: 11 > 8, over-committed."""
    from factories import MaintenanceWindowFactory

    from pools.maintenance.models import MaintenanceScope

    now = timezone.now()
    window = MaintenanceWindowFactory(
        pool=world["pool"],
        scope=MaintenanceScope.NODES,
        starts_at=now + 2 * DAY,
        ends_at=now + 2.5 * DAY,
    )
    window.nodes.set(Node.objects.filter(hostname="trn-01"))

    [over] = overcommitted_windows(now=now)

    assert (over.pool, over.usable, over.peak) == ("train", 8, 11)


def test_the_pairs_sums_are_kept_and_a_committed_allocation_shows_at_once(
    world, django_capture_on_commit_callbacks, outside_a_transaction
):
    """Read as the dashboard reads, outside a transaction. After the import 5 cards are
    usable. B cancelled: A (4) and C (1) hold 5 in all, so the pair is no candidate and its
    sums are kept; a second read sums nothing. Then D, 2 cards from day 1 to day 3, is
    committed: 4 + 2 = 6 > 5 from day 1 to day 3 (C, 1 card from day 6, alone then): over,
    with A and D."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    inventory_import_file(data=one_card_left(), source="nvidia-smi", node="trn-02",
                          pool=world["pool"])  # fmt: skip
    cache.clear()  # the fixture's reads kept the sums from before its allocations
    with django_capture_on_commit_callbacks(execute=True):
        world["b"].status = AllocationStatus.CANCELLED
        world["b"].save(update_fields=["status"])
    assert overcommitted_windows(now=timezone.now()) == []
    with CaptureQueriesContext(connection) as ctx:
        assert overcommitted_windows(now=timezone.now()) == []
    assert not [q for q in ctx.captured_queries if 'AS "held"' in q["sql"]]  # kept

    a = world["a"]
    with django_capture_on_commit_callbacks(execute=True):
        d = AllocationFactory(team=a.team, pool=a.pool, gpu_model=a.gpu_model, card_count=2,
                              status=AllocationStatus.APPROVED, starts_at=a.starts_at + 2 * DAY,
                              ends_at=a.starts_at + 4 * DAY)  # fmt: skip
    [over] = overcommitted_windows(now=timezone.now())
    assert (over.usable, over.peak, over.allocations) == (5, 6, (a.pk, d.pk))


def test_kept_sums_read_later_leave_out_what_ended_since(world, outside_a_transaction):
    """The sums kept at one instant, read 3.5 days later: B (3 cards, ends on day 3) has
    ended, A (4) and C (1) never overlap -- at most 4 of 5 usable, nothing over; read at the
    first instant it is over (7 of 5)."""
    inventory_import_file(data=one_card_left(), source="nvidia-smi", node="trn-02",
                          pool=world["pool"])  # fmt: skip
    cache.clear()  # the fixture's reads kept the sums from before its allocations
    now = timezone.now()
    [over] = overcommitted_windows(now=now)
    assert (over.usable, over.peak) == (5, 7)
    assert overcommitted_windows(now=now + 3 * DAY + DAY / 2) == []


def test_the_alerts_read_one_or_five_over_committed_pairs_in_as_many_queries(
    django_assert_num_queries,
):
    """Pool ``oc-<i>``: one node of 4 A100 (ratio 1.0: 4 usable); A holds 3 cards from a day
    ago to in 2 days, B 3 cards from in 1 day to in 3 days. From day 1 to day 2 both hold:
    3 + 3 = 6 > 4, so each pool is over-committed with peak 6, usable 4, until B's end, and
    both A and B hold cards then. Read warm (the census kept, as the dashboard reads it), the
    over-committed windows cost the same queries for one such pool as for five: 8 (pairs,
    slice triples, pools, models, inventory generation, recurring reservations, maintenance
    windows, the candidates' holds)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from factories import node_with_gpus

    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    team = TeamFactory(slug="vision")
    now = timezone.now()
    expected = []

    def over_committed_pool(i):
        pool = PoolFactory(slug=f"oc-{i}")
        node_with_gpus(4, hostname=f"oc-{i}-01", pool=pool, state=NodeState.UP)
        a, b = (
            AllocationFactory(team=team, pool=pool, gpu_model=a100, card_count=3, status=status,
                              starts_at=now + start * DAY, ends_at=now + end * DAY)
            for status, start, end in ((AllocationStatus.ACTIVE, -1, 2),
                                       (AllocationStatus.APPROVED, 1, 3))
        )  # fmt: skip
        expected.append((f"oc-{i}", "a100_80g_sxm", 4, 6, now + 3 * DAY, (a.pk, b.pk)))

    def read():
        alerts = overcommitted_windows(now=now)
        return [(o.pool, o.gpu_model, o.usable, o.peak, o.end, o.allocations) for o in alerts]

    counts = []
    for pools in ((0,), (1, 2, 3, 4)):
        for i in pools:
            over_committed_pool(i)
        read()  # warm: the census is read once per inventory generation
        with CaptureQueriesContext(connection) as ctx:
            assert read() == expected
        counts.append(len(ctx.captured_queries))
    assert counts == [8, 8]
    with django_assert_num_queries(8 + 2):  # and the unrecognised models, the drifts
        assert [o.pool for o in dashboard_alerts(now=now).overcommitted] == [
            f"oc-{i}" for i in range(5)
        ]
