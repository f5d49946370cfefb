"""The issue's scenarios through ``POST /api/v1/requests/explain/`` on the database: bob's 40
A100, alice's 8 H100, a shape that fits only in 3 days, a budget-bound request, a drained node;
who may see what; bad input as a create answers it; nothing saved."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from factories import (
    AllocationFactory,
    BudgetFactory,
    MembershipFactory,
    PoolFactory,
    RecurringReservationFactory,
    TeamFactory,
    next_week_9am,
    node_with_gpus,
)

from pools.audit.models import AuditEvent
from pools.capacity.availability import pool_free_cards
from pools.capacity.models import CapacityRequest
from pools.common.choices import NodeState
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

URL = "/api/v1/requests/explain/"
OTHER_TEAMS = ("vision", "speech", "robotics")


@pytest.fixture
def bob(db):
    """bob, member of team nlp."""
    return MembershipFactory(team=TeamFactory(slug="nlp", name="NLP"), user__username="bob").user


@pytest.fixture
def fleet(db):
    """Pool ``train-slurm``: 6 up nodes × 8 A100 SXM4 80GB (48), one node down and one drained
    (16 more A100), 5 nodes × 8 H800 SXM5 (40). Holding A100 allocations from yesterday:
    vision 8 until start + 2 d, speech 8 until start + 3 d, robotics 4 until start + 5 d."""
    pool = PoolFactory(slug="train-slurm", name="Training", slurm_partition="train")
    for host in range(6):
        node_with_gpus(8, hostname=f"a100-{host}", pool=pool)
    node_with_gpus(8, hostname="a100-down", pool=pool, state=NodeState.DOWN)
    node_with_gpus(8, hostname="a100-drain", pool=pool, state=NodeState.DRAIN)
    for host in range(5):
        node_with_gpus(8, gpu_model="h800_sxm", hostname=f"h800-{host}", pool=pool)
    start = next_week_9am()
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    allocations = {}
    for team, cards, days in (("vision", 8, 2), ("speech", 8, 3), ("robotics", 4, 5)):
        allocations[team] = AllocationFactory(
            team=TeamFactory(slug=team, name=team.title()), pool=pool, gpu_model=a100,
            card_count=cards, starts_at=start - timedelta(days=8),
            ends_at=start + timedelta(days=days),
        )  # fmt: skip
    return {"pool": pool, "start": start, "allocations": allocations}


def body(start, **fields):
    return {
        "team": "nlp",
        "workload_kind": "training",
        "pool": "train-slurm",
        "gpu_model": "a100_80g_sxm",
        "card_count": 40,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(days=7)).isoformat(),
        **fields,
    }


def test_bob_40_a100_why_when_where_and_who(api_as, bob, fleet):
    """48 usable A100, 20 held at the peak (8 + 8 + 4) → 28 free; 16 down or drained not
    counted. 40 fit for 7 days once ≤ 8 are held over the whole window: from start + 3 d
    (only robotics' 4 left). 40 H800 are free now. Frees inside the window: +8 at start + 2 d
    (36), +8 at start + 3 d (44), +4 at start + 5 d (48)."""
    start = fleet["start"]
    answer = api_as(bob).post(URL, body(start), format="json")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["approvable_now"] is False
    (reason,) = data["why_not"]
    assert reason["code"] == "free_cards"
    assert {k: reason["data"][k] for k in ("free", "usable", "held_peak", "down_or_drained")} == {
        "free": 28, "usable": 48, "held_peak": 20, "down_or_drained": 16,
    }  # fmt: skip
    (when,) = data["when"]
    assert when["earliest_start"] == _z(start + timedelta(days=3))
    first = data["where_instead"][0]
    assert (first["kind"], first["gpu_model"], first["free"], first["fits_now"]) == (
        "other_model", "h800_sxm", 40, True,
    )  # fmt: skip
    assert first["prefill"]["gpu_model"] == "h800_sxm" and first["prefill"]["card_count"] == 40
    fewer = next(r for r in data["where_instead"] if r["kind"] == "fewer_cards")
    assert fewer["card_count"] == 28
    holders = data["holders"]
    assert holders["other_teams"] == 3
    assert [f["free"] for f in holders["frees"]] == [36, 44, 48]
    assert holders["text"].startswith("held by 3 other teams; 36 free from ")
    assert data["submit_errors"] == {}


def test_member_never_sees_other_teams_in_any_field(api_as, bob, fleet, pool_admin):
    """Every field of bob's answer: no other team's slug, name or allocation id (as a value
    under any key), no ``allocations``; the pool admin's answer names all three."""
    start = fleet["start"]
    secret_ids = {a.pk for a in fleet["allocations"].values()}
    data = api_as(bob).post(URL, body(start), format="json").json()
    for key, value in _walk(data):
        assert key not in ("allocations", "team", "team_name", "allocation", "cost"), key
        if isinstance(value, str):
            assert not any(t in value.lower() for t in OTHER_TEAMS), (key, value)
    assert "allocations" not in data["holders"]
    admin = api_as(pool_admin).post(URL, body(start), format="json").json()
    rows = admin["holders"]["allocations"]
    assert {r["team"] for r in rows} == set(OTHER_TEAMS)
    assert {r["allocation"] for r in rows} == secret_ids


def test_alice_8_h100_in_a_pool_without_any(api_as, fleet):
    """No Slurm pool has an H100 SXM5: reason ``model``; alternatives in the same pool of the
    same class with ≥ 79.65 GiB: H800 SXM5 (80 GiB, 40 free) and A100 SXM4 80GB (28 free),
    and capacity to add last. A create would refuse the model (``submit_errors``)."""
    alice = MembershipFactory(team=TeamFactory(slug="nlp"), user__username="alice").user
    start = fleet["start"]
    data = (
        api_as(alice)
        .post(URL, body(start, gpu_model="h100_sxm", card_count=8), format="json")
        .json()
    )
    assert [r["code"] for r in data["why_not"]] == ["model"]
    kinds = {(r["kind"], r["gpu_model"], r.get("free")) for r in data["where_instead"]}
    assert ("other_model", "h800_sxm", 40) in kinds
    assert ("other_model", "a100_80g_sxm", 28) in kinds
    assert data["where_instead"][-1]["kind"] == "growth"
    assert list(data["submit_errors"]) == ["gpu_model"]


def test_shape_that_fits_only_in_three_days(api_as, bob):
    """Pool ``shape``: 2 nodes × 8 A100 in one NVLink domain. Placed: n1 GPUs 0–3 until
    start + 3 d, n2 GPUs 0–3 until start + 5 d → 8 free in count, no node with 8. 1 node × 8
    (one domain) is refused now and fits from start + 3 d; 2 nodes × 4 fits now."""
    pool = PoolFactory(slug="shape", name="Shape", slurm_partition="shape")
    for name in ("n1", "n2"):
        node_with_gpus(8, hostname=name, pool=pool, nvlink_domains=[list(range(8))])
    start = next_week_9am()
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    for name, days in (("n1", 3), ("n2", 5)):
        AllocationFactory(pool=pool, gpu_model=a100, card_count=4,
                          starts_at=start - timedelta(days=1), ends_at=start + timedelta(days=days),
                          placement=[{"node": name, "gpus": [0, 1, 2, 3]}])  # fmt: skip
    data = api_as(bob).post(
        URL,
        body(start, pool="shape", card_count=8, cards_per_node=8, node_count=1,
             one_nvlink_domain=True),
        format="json",
    ).json()  # fmt: skip
    assert [r["code"] for r in data["why_not"]] == ["shape"]
    assert data["when"][0]["earliest_start"] == _z(start + timedelta(days=3))
    split = next(r for r in data["where_instead"] if r["kind"] == "split_shape")
    assert split["shape"] == "2 nodes × 4 cards each, one NVLink domain"
    assert split["fits_now"] is True


def test_budget_bound_request(api_as, bob, fleet):
    """8 A100 are free, but nlp's budget of 100 card-hours a month refuses: 8 × 168 h =
    1,344 card-hours in the window. Not approvable, reason ``budget`` (refuse)."""
    BudgetFactory(team=bob.teams.get(), enforcement="refuse", card_hours_limit=100)
    data = api_as(bob).post(URL, body(fleet["start"], card_count=8), format="json").json()
    assert [(r["code"], r["data"]["enforcement"]) for r in data["why_not"]] == [
        ("budget", "refuse")
    ]
    assert data["approvable_now"] is False


def test_drained_node_is_named(api_as, bob, fleet):
    """Pool ``small`` whose only A100 node is drained: no schedulable A100 there, 8 down or
    drained; the A100 of ``train-slurm`` is offered instead (28 free)."""
    small = PoolFactory(slug="small", name="Small", slurm_partition="small")
    node_with_gpus(8, hostname="small-1", pool=small, state=NodeState.DRAIN)
    data = api_as(bob).post(URL, body(fleet["start"], pool="small", card_count=4),
                            format="json").json()  # fmt: skip
    (reason,) = data["why_not"]
    assert reason["code"] == "pool_model"
    assert reason["data"]["down_or_drained"] == 8
    assert "8 down or drained" in reason["text"]
    other = data["where_instead"][0]
    assert (other["kind"], other["pool"], other["free"]) == ("other_pool", "train-slurm", 28)


def test_a_team_you_cannot_see_is_the_create_400_as_one_that_does_not_exist(
    api_as, bob, fleet, other_member
):
    """The body's team is a field like the others: bob naming vision (which exists: its
    allocations hold A100) gets, word for word, what he gets for a slug no
    team has, and what a create of the same body answers; victor (vision) naming nlp too. It
    was a 404 "No such team." here while the rest of the API answered 400 on ``team``."""
    before = (CapacityRequest.objects.count(), AuditEvent.objects.count())
    start = fleet["start"]

    def answer(user, team):
        explained = api_as(user).post(URL, body(start, team=team), format="json")
        created = api_as(user).post("/api/v1/requests/", body(start, team=team, justification="x"),
                                    format="json")  # fmt: skip
        assert explained.json() == created.json()
        return explained.status_code, explained.json()

    refused = 400, {"code": "invalid_input", "detail": "Invalid input.",
                    "errors": {"team": ["No team you can see has this slug."]}}  # fmt: skip

    assert answer(bob, "vision") == refused
    assert answer(bob, "no-such") == refused
    assert answer(other_member, "nlp") == refused
    assert api_as(bob).post(URL, body(start), format="json").status_code == 200
    assert (CapacityRequest.objects.count(), AuditEvent.objects.count()) == before


def test_invalid_fields_get_the_create_errors(api_as, bob, fleet):
    """An end before the start and a shape that does not multiply to the count: the same
    ``errors`` as a create of the same fields (which writes nothing either)."""
    start = fleet["start"]
    before = CapacityRequest.objects.count()
    bad = body(start, ends_at=(start - timedelta(hours=1)).isoformat(), cards_per_node=8,
               node_count=2, justification="x")  # fmt: skip
    explained = api_as(bob).post(URL, bad, format="json")
    created = api_as(bob).post("/api/v1/requests/", bad, format="json")
    assert explained.status_code == created.status_code == 400
    assert explained.json()["errors"] == created.json()["errors"]
    assert set(explained.json()["errors"]) == {"ends_at", "card_count"}
    assert CapacityRequest.objects.count() == before


def test_saved_request_explanation_and_its_404(api_as, bob, fleet, other_member):
    from factories import CapacityRequestFactory

    req = CapacityRequestFactory(
        team=bob.teams.get(), pool=fleet["pool"], workload_kind="training",
        gpu_model=GpuModel.objects.get(slug="a100_80g_sxm"), card_count=40,
        starts_at=fleet["start"], ends_at=fleet["start"] + timedelta(days=7),
    )  # fmt: skip
    url = f"/api/v1/requests/{req.pk}/explanation/"
    data = api_as(bob).get(url).json()
    assert data["why_not"][0]["data"]["free"] == 28
    assert api_as(other_member).get(url).status_code == 404


def _walk(value, key=None):
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)


def _z(at):
    """An instant as the API writes it (UTC, ``Z``)."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_inference_alternatives_ask_the_sizing_estimates_card_count(api_as, bob):
    """Kubernetes pool ``infer``: 2 × 4 L40S (all 8 held by vision next week) and 2 × 2 A100
    80GB PCIe (4 free). bob's estimate says 8 L40S or 4 A100 PCIe serve the load: asked for 8
    L40S with it, the A100 PCIe alternative asks for 4 and fits now; without it, it would ask
    for the same 8, more than the 4 there ever are: no alternative, left out. Someone else's
    estimate is a field error."""
    from factories import SizingEstimateFactory

    from pools.common.choices import Scheduler

    pool = PoolFactory(slug="infer", name="Inference", scheduler=Scheduler.KUBERNETES,
                       slurm_partition="")  # fmt: skip
    for host in range(2):
        node_with_gpus(4, gpu_model="l40s", hostname=f"l40s-{host}", pool=pool,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
        node_with_gpus(2, gpu_model="a100_80g_pcie", hostname=f"a100p-{host}", pool=pool,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
    start = next_week_9am()
    AllocationFactory(
        team=TeamFactory(slug="vision"), pool=pool, card_count=8,
        gpu_model=GpuModel.objects.get(slug="l40s"),
        starts_at=start - timedelta(days=1), ends_at=start + timedelta(days=30),
    )  # fmt: skip
    rows = [{"gpu_model": "l40s", "cards": 8, "meets_targets": True},
            {"gpu_model": "a100_80g_pcie", "cards": 4, "meets_targets": True}]  # fmt: skip
    estimate = SizingEstimateFactory(created_by=bob, status="done", results={"rows": rows})
    ask = body(start, workload_kind="inference", pool="infer", gpu_model="l40s", card_count=8)
    sized = api_as(bob).post(URL, {**ask, "sizing_estimate": estimate.pk}, format="json").json()
    other = next(r for r in sized["where_instead"] if r["gpu_model"] == "a100_80g_pcie")
    assert (other["card_count"], other["free"], other["fits_now"]) == (4, 4, True)
    plain = api_as(bob).post(URL, ask, format="json").json()
    assert [r["gpu_model"] for r in plain["where_instead"]] == []
    foreign = SizingEstimateFactory(status="done", results={"rows": rows})
    refused = api_as(bob).post(URL, {**ask, "sizing_estimate": foreign.pk}, format="json")
    assert refused.status_code == 400 and list(refused.json()["errors"]) == ["sizing_estimate"]


def test_recurring_occurrences_are_held_in_the_explanation(api_as, bob, fleet, pool_admin):
    """A course holds 16 A100 daily 09:00-18:00 UTC from the window's first day for three
    days: the peak is 20 + 16 = 36 → 12 free (the approval's count says the same); bob sees a
    fourth team and no name; the pool admin sees the occurrences as the reservation's rows."""
    start = fleet["start"]
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    course = RecurringReservationFactory(
        team=TeamFactory(slug="course", name="Course"), pool=fleet["pool"], gpu_model=a100,
        card_count=16, recurrence="daily", time_zone="UTC", first_date=start.date(),
        last_date=start.date() + timedelta(days=2), start_time=start.time().replace(hour=9),
        end_time=start.time().replace(hour=18),
    )  # fmt: skip
    data = api_as(bob).post(URL, body(start), format="json").json()
    (reason,) = data["why_not"]
    assert (reason["data"]["free"], reason["data"]["held_peak"]) == (12, 36)
    assert (
        pool_free_cards(
            pool=fleet["pool"], gpu_model=a100, start=start, end=start + timedelta(days=7)
        )
        == 12
    )
    assert data["holders"]["other_teams"] == 4
    assert "course" not in str(data).lower()
    admin = api_as(pool_admin).post(URL, body(start), format="json").json()
    rows = [r for r in admin["holders"]["allocations"] if r.get("recurring_reservation")]
    assert [(r["recurring_reservation"], r["allocation"], r["cards"]) for r in rows] == [
        (course.pk, None, 16)
    ] * 3


def test_a_maintenance_window_counts_as_cards_away_in_the_explanation(
    api_as, bob, fleet, pool_admin
):
    """A driver upgrade takes a100-0 and a100-1 (16 up A100) from start + 1 d to start + 2 d:
    then 20 held + 16 away = 36 at the peak → 48 − 36 = 12 free, as the approval counts;
    bob still sees 3 other teams, and 16 cards away for maintenance; the pool admin sees the
    window's row."""
    from pools.maintenance.services.windows import maintenance_window_create

    start = fleet["start"]
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    window = maintenance_window_create(
        actor=pool_admin, title="R570 upgrade", scope="nodes", hostnames=["a100-0", "a100-1"],
        starts_at=start + timedelta(days=1), ends_at=start + timedelta(days=2),
    )  # fmt: skip
    data = api_as(bob).post(URL, body(start), format="json").json()
    (reason,) = data["why_not"]
    assert (reason["data"]["free"], reason["data"]["held_peak"]) == (12, 36)
    assert reason["data"]["away_for_maintenance"] == 16
    assert "16 cards away for maintenance" in reason["text"]
    free = pool_free_cards(pool=fleet["pool"], gpu_model=a100, start=start,
                           end=start + timedelta(days=7))  # fmt: skip
    assert free == 12
    assert (data["holders"]["other_teams"], data["holders"]["away_for_maintenance"]) == (3, 16)
    admin = api_as(pool_admin).post(URL, body(start), format="json").json()
    rows = [r for r in admin["holders"]["allocations"] if r.get("maintenance_window")]
    assert [(r["maintenance_window"], r["allocation"], r["cards"]) for r in rows] == [
        (window.pk, None, 16)
    ]


def test_more_cards_than_the_pool_has_says_all_are_free_and_too_few(api_as, bob, fleet):
    """1,000 A100 a week after every allocation has ended: nothing is held, all 48 usable are
    free and still fewer than asked — said so, not "only 48 of 48 … held by 0 teams"; the 16
    down or drained are not counted, and no "0 under maintenance" is said. Instead: the 48
    A100 free now, and nothing else: 1,000 H800 never fit (the pool has 40), so they are no
    alternative (they were listed, "never (the pool has 40 usable)", with a price and a
    *Use this* link to a request that could never be approved)."""
    start = fleet["start"] + timedelta(days=6)
    data = api_as(bob).post(URL, body(start, card_count=1000), format="json").json()

    (reason,) = [r for r in data["why_not"] if r["code"] == "free_cards"]
    assert (reason["data"]["free"], reason["data"]["usable"], reason["data"]["held_peak"]) == (
        48, 48, 0,
    )  # fmt: skip
    assert reason["text"] == (
        "all 48 A100 SXM4 80GB cards in Training are free for the whole window, fewer than the "
        "1000 asked; not counted: 16 down or drained"
    )
    assert [(r["kind"], r["gpu_model"], r["card_count"]) for r in data["where_instead"]] == [
        ("fewer_cards", "a100_80g_sxm", 48),
    ]  # fmt: skip
