"""Issue 38: requests for MIG slices (``mig_profile`` × ``card_count`` slices of a GPU model in
a pool) — the per-profile capacity invariant, its validation and API, and that no reader of
allocations per pool × model counts a slice as a whole card.

The fleet is ``tests/mig_nodes.py``'s, imported from real GFD node objects through the
Kubernetes importer. By hand, in pool ``infer``:
* A100 SXM4 80GB: 6 whole cards (GPUs 0–5) and, on GPUs 6–7, ``1g.10gb`` × 9 and
  ``2g.20gb`` × 2 (the node's ``nvidia.com/mig-*`` allocatable);
* H100 NVL: 0 whole cards, ``1g.12gb`` × 14 (2 cards × 7).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from factories import MembershipFactory, UserFactory, next_week_9am
from mig_nodes import mig_fleet

from pools.audit.models import AuditEvent
from pools.capacity.availability import (
    pool_free_cards,
    pool_free_slices,
    pool_slices,
    team_usage,
)
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.capacity.services.scheduler_binding import team_cards_applied
from pools.common.choices import AllocationStatus, RequestStatus, Scheduler, WorkloadKind
from pools.common.errors import InsufficientCapacity, InvalidInput
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    pool = mig_fleet()
    membership = MembershipFactory(team__slug="nlp", user__username="alice")
    return {
        "pool": pool,
        "a100": GpuModel.objects.get(slug="a100_80g_sxm"),
        "nvl": GpuModel.objects.get(slug="h100_nvl"),
        "team": membership.team,
        "alice": membership.user,
        "admin": UserFactory(username="root", is_staff=True),
        "start": next_week_9am(),
    }


def ask(fleet, count, profile="", model="a100", days=7, start=None, **extra):
    start = start or fleet["start"]
    fields = RequestFields(
        team=fleet["team"],
        workload_kind=WorkloadKind.INFERENCE,
        card_count=count,
        starts_at=start,
        ends_at=start + timedelta(days=days),
        justification="slices",
        pool=extra.pop("pool", fleet["pool"]),
        gpu_model=fleet[model],
        mig_profile=profile,
        **extra,
    )
    return capacity_request_create(actor=fleet["alice"], fields=fields)


def approve(fleet, request):
    return capacity_request_approve(request=request, actor=fleet["admin"])


def test_the_pool_has_its_slices_per_profile(fleet):
    assert pool_slices(pool=fleet["pool"], gpu_model=fleet["a100"]) == {"1g.10gb": 9, "2g.20gb": 2}
    assert pool_slices(pool=fleet["pool"], gpu_model=fleet["nvl"]) == {"1g.12gb": 14}


def test_slices_are_granted_up_to_the_profile_and_never_as_whole_cards(fleet):
    """9 × 1g.10gb granted; a 10th refused (0 free, 1 asked) and nothing written; the 6 whole
    A100 are all still free, and 2 × 2g.20gb too: three kinds of capacity, counted apart."""
    allocation = approve(fleet, ask(fleet, 9, "1g.10gb"))
    assert (allocation.card_count, allocation.mig_profile, allocation.placement) == (
        9,
        "1g.10gb",
        [],
    )
    one_more = ask(fleet, 1, "1g.10gb")
    before = (Allocation.objects.count(), AuditEvent.objects.count())
    with pytest.raises(InsufficientCapacity) as refused:
        approve(fleet, one_more)
    assert (refused.value.data["free"], refused.value.data["requested"]) == (0, 1)
    assert refused.value.data["mig_profile"] == "1g.10gb"
    one_more.refresh_from_db()
    assert one_more.status == RequestStatus.SUBMITTED
    assert (Allocation.objects.count(), AuditEvent.objects.count()) == before
    end = fleet["start"] + timedelta(days=7)
    args = {"pool": fleet["pool"], "gpu_model": fleet["a100"], "start": fleet["start"], "end": end}
    assert pool_free_cards(**args) == 6
    assert pool_free_slices(**args, profile="2g.20gb") == 2
    assert approve(fleet, ask(fleet, 6)).card_count == 6
    assert approve(fleet, ask(fleet, 2, "2g.20gb")).card_count == 2
    assert pool_free_slices(**args, profile="1g.10gb") == 0


def test_slices_free_again_after_the_window(fleet):
    """Half-open windows: 14 × 1g.12gb for days 0–3 leave none in days 2–4, all 14 in 3–6."""
    approve(fleet, ask(fleet, 14, "1g.12gb", model="nvl", days=3))
    with pytest.raises(InsufficientCapacity):
        approve(
            fleet, ask(fleet, 1, "1g.12gb", model="nvl", start=fleet["start"] + timedelta(days=2))
        )
    later = approve(
        fleet, ask(fleet, 14, "1g.12gb", model="nvl", start=fleet["start"] + timedelta(days=3))
    )
    assert later.card_count == 14


def test_the_h100_nvl_over_grant_stays_refused_but_its_slices_are_offered(fleet):
    """Issue 38's second over-grant: 2 whole H100 NVL where none is whole. Whole cards are
    refused at the request; the same cards as 14 × 1g.12gb are granted."""
    with pytest.raises(InvalidInput) as refused:
        ask(fleet, 2, model="nvl")
    assert "in MIG mode" in refused.value.data["errors"]["gpu_model"]
    assert approve(fleet, ask(fleet, 14, "1g.12gb", model="nvl")).mig_profile == "1g.12gb"


@pytest.mark.parametrize(
    ("profile", "count", "extra", "field", "message"),
    [
        ("5g.40gb", 1, {}, "mig_profile", "Give a MIG profile such as 1g.10gb"),
        ("1g.10gb ", 1, {}, "mig_profile", "Give a MIG profile such as 1g.10gb"),
        (
            "3g.40gb",
            1,
            {},
            "mig_profile",
            "Inference has no A100 SXM4 80GB MIG 3g.40gb slices (it has: 1g.10gb (9), "
            "2g.20gb (2)).",
        ),
        (
            "1g.10gb",
            10,
            {},
            "card_count",
            "Inference has 9 A100 SXM4 80GB MIG 1g.10gb slices, fewer than 10.",
        ),
        (
            "1g.10gb",
            1,
            {"pool": None},
            "mig_profile",
            "Name the pool and the GPU model whose MIG slices you ask for.",
        ),
        (
            "1g.10gb",
            2,
            {"cards_per_node": 2, "node_count": 1},
            "cards_per_node",
            "MIG slices are asked for without a shape.",
        ),
    ],
)
def test_a_bad_slice_request_is_refused_with_its_field(
    fleet, profile, count, extra, field, message
):
    before = CapacityRequest.objects.count()
    with pytest.raises(InvalidInput) as refused:
        ask(fleet, count, profile, **extra)
    assert refused.value.data["errors"][field].startswith(message)
    assert CapacityRequest.objects.count() == before


def test_readers_per_pool_and_model_do_not_count_slices_as_cards(fleet):
    """A team holding 9 × 1g.10gb and 2 whole A100 holds 2 cards (team usage, the Kubernetes
    quota's count) — not 11."""
    now = fleet["start"] + timedelta(hours=1)
    approve(fleet, ask(fleet, 9, "1g.10gb"))
    whole = approve(fleet, ask(fleet, 2))
    Allocation.objects.update(status=AllocationStatus.ACTIVE)
    assert team_usage(team_ids=[fleet["team"].pk], at=now) == {fleet["team"].pk: 2}
    applied = team_cards_applied(
        team=fleet["team"],
        gpu_model=fleet["a100"],
        scheduler=Scheduler.KUBERNETES,
        cluster=None,
        now=now,
    )
    assert applied == whole.card_count == 2
    assert list(Allocation.objects.whole_cards().values_list("card_count", flat=True)) == [2]
    assert list(Allocation.objects.slices("1g.10gb").values_list("card_count", flat=True)) == [9]
    assert Allocation.objects.slices().count() == 1


def test_an_extension_asks_for_the_same_slices(fleet):
    allocation = approve(fleet, ask(fleet, 4, "1g.10gb", days=2))
    from pools.capacity.services.allocations import allocation_extend

    extension = allocation_extend(
        allocation=allocation,
        actor=fleet["alice"],
        ends_at=allocation.ends_at + timedelta(days=1),
        justification="longer",
    )
    assert (extension.mig_profile, extension.card_count) == ("1g.10gb", 4)


def test_the_audit_trail_names_the_profile(fleet):
    allocation = approve(fleet, ask(fleet, 3, "1g.10gb"))
    event = AuditEvent.objects.get(action="allocation.approved", object_id=str(allocation.pk))
    assert (event.after["card_count"], event.after["mig_profile"]) == (3, "1g.10gb")


def test_budget_sees_a_slice_as_its_share_of_a_card(fleet):
    """7 × 1g.10gb is 7/7 = 1 card; 3 × 2g.20gb would be 6/7."""
    from pools.capacity.services.requests import card_equivalents

    assert card_equivalents(7, "1g.10gb", fleet["a100"]) == 1
    assert card_equivalents(3, "2g.20gb", fleet["a100"]) == Decimal(6) / 7
    assert card_equivalents(5, "", fleet["a100"]) == 5


# --------------------------------------------------------------------------- API


def post(api, fleet, **fields):
    body = {
        "team": "nlp",
        "workload_kind": "inference",
        "pool": "infer",
        "gpu_model": "a100_80g_sxm",
        "card_count": 2,
        "starts_at": fleet["start"].isoformat(),
        "ends_at": (fleet["start"] + timedelta(days=2)).isoformat(),
        "justification": "slices",
        "submit": False,
        **fields,
    }
    return api.post("/api/v1/requests/", body, format="json")


def test_api_creates_a_slice_request(api_as, fleet):
    answer = post(api_as(fleet["alice"]), fleet, mig_profile="2g.20gb")
    assert answer.status_code == 201, answer.json()
    assert (answer.json()["mig_profile"], answer.json()["card_count"]) == ("2g.20gb", 2)


def test_api_refuses_an_unknown_profile_naming_the_ones_there_are(api_as, fleet):
    answer = post(api_as(fleet["alice"]), fleet, mig_profile="9g.1gb")
    assert answer.status_code == 400
    assert answer.json()["errors"]["mig_profile"] == [
        "Unknown MIG profile '9g.1gb'; the pools have slices of: 1g.10gb, 1g.12gb, 2g.20gb."
    ]
    assert not CapacityRequest.objects.exists()


def test_api_refuses_a_profile_the_model_does_not_have(api_as, fleet):
    """1g.12gb exists (on the H100 NVL) but not on the A100: the service's 400."""
    answer = post(api_as(fleet["alice"]), fleet, mig_profile="1g.12gb")
    assert answer.status_code == 400
    assert "has no A100 SXM4 80GB MIG 1g.12gb slices" in str(answer.json())
    assert not CapacityRequest.objects.exists()


# --------------------------------------------------------------------------- page


def test_the_request_page_offers_the_profiles_and_shows_the_slices_free(client, fleet):
    """The form lists the inventory's profiles; the panel (htmx) shows 9 1g.10gb slices of
    which 9 − 4 held = 5 free; posting creates the request for slices."""
    approve(fleet, ask(fleet, 4, "1g.10gb"))
    client.force_login(fleet["alice"])
    page = client.get("/requests/new/").content.decode()
    for profile in ("1g.10gb", "1g.12gb", "2g.20gb"):
        assert f'<option value="{profile}">MIG {profile} slices</option>' in page
    window = {
        "team": "nlp",
        "kind": "cards",
        "workload_kind": "inference",
        "pool": "infer",
        "gpu_model": "a100_80g_sxm",
        "mig_profile": "1g.10gb",
        "card_count": 6,
        "starts_at": fleet["start"].strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (fleet["start"] + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
        "justification": "slices",
    }
    panel = client.get("/requests/new/", window, headers={"HX-Request": "true"}).content.decode()
    assert 'id="slice-options"' in panel
    assert '<td class="num">5 of 9</td>' in panel
    assert "5 of 9 1g.10gb slices free for the window, 6 asked" in panel
    answer = client.post("/requests/new/", {**window, "card_count": 5, "submit_request": "1"})
    assert answer.status_code == 302
    created = CapacityRequest.objects.latest("pk")
    assert (created.mig_profile, created.card_count) == ("1g.10gb", 5)


def test_a_mig_layout_change_under_slices_is_reported_as_capacity_loss(fleet):
    """9 × 1g.10gb granted, then the node is re-cut: 5 × 1g.10gb (and the same 2 × 2g.20gb).
    The import reports the window over-committed by slices: 9 held, 5 there."""
    import json

    from mig_nodes import mixed_a100_node

    from pools.capacity.overcommit import overcommitted_windows
    from pools.inventory.services.import_files import inventory_import_file

    held = approve(fleet, ask(fleet, 9, "1g.10gb"))
    node = mixed_a100_node()
    node["metadata"]["labels"]["nvidia.com/mig-1g.10gb.count"] = "5"
    node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "5"
    data = json.dumps({"kind": "NodeList", "items": [node]}).encode()
    report = inventory_import_file(data=data, source="kubernetes", pool=fleet["pool"])
    [over] = report.overcommitted
    assert (over["mig_profile"], over["peak"], over["usable"], over["allocations"]) == (
        "1g.10gb",
        9,
        5,
        [held.pk],
    )
    assert "up to 9 MIG 1g.10gb slices held" in over["text"]
    [again] = overcommitted_windows(now=fleet["start"])
    assert (again.gpu_model, again.mig_profile) == ("a100_80g_sxm", "1g.10gb")


def test_the_queue_shows_free_slices_beside_a_slice_request(client, fleet):
    """4 × 1g.10gb held; a request for 6 more is shown against 9 − 4 = 5 free slices (not the
    6 whole cards), marked short; the allocation list names the profile."""
    approve(fleet, ask(fleet, 4, "1g.10gb"))
    ask(fleet, 6, "1g.10gb")
    client.force_login(fleet["admin"])
    queue = client.get("/requests/queue/").content.decode()
    assert '<span class="badge down">5</span>' in queue
    assert "MIG 1g.10gb slices</small>" in queue
    listing = client.get("/allocations/").content.decode()
    assert "MIG 1g.10gb slices</small>" in listing


def test_the_request_page_shows_an_admin_the_slices_free(client, fleet):
    """9 × 1g.10gb, 4 held: a request for 6 shows 5 / 9 and says why it does not fit."""
    approve(fleet, ask(fleet, 4, "1g.10gb"))
    request = ask(fleet, 6, "1g.10gb")
    client.force_login(fleet["admin"])
    page = client.get(f"/requests/{request.pk}/").content.decode()
    assert '<td class="num">5 / 9</td>' in page
    assert "only 5 of 9 1g.10gb slices free in that window" in page
    assert "6 MIG 1g.10gb slices" in page
