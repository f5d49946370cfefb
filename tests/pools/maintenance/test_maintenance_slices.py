"""Maintenance windows over MIG slices (issue 32, h-maintslices): the collision preview lists
the approved slice allocations a window takes slices from (team, allocation, profile, slices
lost) and the window is saved only once they are acknowledged, as for whole cards; the
upgrade-wave planner keeps a node whose slices an approved allocation needs out of every wave
during that allocation.

Slice allocations are never placed (constraint ``allocation_slices_unplaced``): they hold "any
N slices of the profile" of the pool × model, so a window takes them when the slices left,
``slices of the profile − those on the window's nodes`` (no over-commit: a slice is a hardware
partition), are fewer than the most held at once in the window.

``tests/mig_nodes.py``'s pool ``infer``: a100-mixed (6 whole A100 + 9 × 1g.10gb and 2 × 2g.20gb
on its two cards in MIG mode) and h100nvl-single (14 × 1g.12gb, no whole card), both on driver
550. ``t`` is next week's Monday 09:00 UTC; windows are half-open.
"""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from factories import AllocationFactory, TeamFactory, next_week_9am
from mig_nodes import import_nodes, mig_fleet, mixed_a100_node

from pools.inventory.models import DriverGroup, GpuModel
from pools.maintenance.models import MaintenanceWindow
from pools.maintenance.selectors import (
    WaveAsk,
    maintenance_collisions,
    maintenance_wave_plan,
    scope_nodes,
    team_losses,
)
from pools.maintenance.services.windows import MaintenanceCollides, maintenance_window_create

pytestmark = pytest.mark.django_db
H = timedelta(hours=1)
URL = "/api/v1/maintenance-windows/"


@pytest.fixture
def mig(db):
    pool = mig_fleet()
    return {"pool": pool, "t": next_week_9am(), "team": TeamFactory(slug="nlp", name="NLP"),
            "a100": GpuModel.objects.get(slug="a100_80g_sxm"),
            "nvl": GpuModel.objects.get(slug="h100_nvl")}  # fmt: skip


def holds(mig, team, count, start_h, end_h, profile="1g.10gb", model="a100"):
    t = mig["t"]
    return AllocationFactory(team=team, pool=mig["pool"], gpu_model=mig[model],
                             mig_profile=profile, card_count=count, starts_at=t + start_h * H,
                             ends_at=t + end_h * H)  # fmt: skip


def collisions(mig, hosts, start_h, end_h):
    nodes, errors = scope_nodes(scope="nodes", hostnames=hosts)
    assert errors == {}
    t = mig["t"]
    return maintenance_collisions(nodes=nodes, start=t + start_h * H, end=t + end_h * H)


def test_a_window_over_the_only_mig_node_takes_every_slice_held(mig):
    """a100-mixed away 12:00-14:00 holds all 9 1g.10gb and both 2g.20gb of the pool: none is
    left. nlp holds 3 × 1g.10gb 09:00-17:00 → loses 3, exact (9 − 9 = 0 left, 3 held: 3
    short); vision 2 × 2g.20gb 11:00-13:00 → loses 2, exact; ml 1 × 2g.20gb 14:00-15:00 (after
    the window, half-open) and h100 NVL's 4 × 1g.12gb (h100nvl-single stays) lose nothing.
    Whole cards apart: vision's 4 whole A100 09:00-17:00 (a100-mixed's 6 are all the pool
    has, 0 left) lose 4, exact neither (unplaced): up to min(4, 4 − 0)."""
    vision = TeamFactory(slug="vision", name="Vision")
    nlp = holds(mig, mig["team"], 3, 0, 8)
    vision_slices = holds(mig, vision, 2, 2, 4, profile="2g.20gb")
    holds(mig, TeamFactory(slug="ml", name="ML"), 1, 5, 6, profile="2g.20gb")
    holds(mig, mig["team"], 4, 0, 8, profile="1g.12gb", model="nvl")
    vision_cards = AllocationFactory(team=vision, pool=mig["pool"], gpu_model=mig["a100"],
                                     card_count=4, starts_at=mig["t"],
                                     ends_at=mig["t"] + 8 * H)  # fmt: skip
    found = collisions(mig, ["a100-mixed"], 3, 5)
    assert [(c.allocation_id, c.team_slug, c.profile, c.held, c.lost, c.exact) for c in found] == [
        (nlp.pk, "nlp", "1g.10gb", 3, 3, True),
        (vision_slices.pk, "vision", "2g.20gb", 2, 2, True),
        (vision_cards.pk, "vision", "", 4, 4, False),
    ]  # fmt: skip
    said = {c.allocation_id: c.how for c in found}
    assert said[nlp.pk] == "a100-mixed holds all 9 1g.10gb slices of Inference", said
    assert found[0].as_dict() | {"how": ""} == {
        "allocation": nlp.pk, "team": "nlp", "team_name": "NLP", "pool": "infer",
        "gpu_model": "a100_80g_sxm", "profile": "1g.10gb", "cards": 0, "cards_lost": 0,
        "slices": 3, "slices_lost": 3, "exact": True, "how": "",
    }  # fmt: skip
    assert found[2].as_dict()["slices_lost"] == 0 and found[2].as_dict()["cards_lost"] == 4
    assert team_losses(found) == [
        {"team": "vision", "team_name": "Vision", "cards_lost": 4,
         "slices_lost": [{"profile": "2g.20gb", "slices_lost": 2}]},
        {"team": "nlp", "team_name": "NLP", "cards_lost": 0,
         "slices_lost": [{"profile": "1g.10gb", "slices_lost": 3}]},
    ]  # fmt: skip


def test_slices_left_on_other_nodes_bound_the_loss(mig):
    """A second node like a100-mixed (a100-mixed-2): 18 × 1g.10gb. nlp holds 6 and vision 4,
    10:00-16:00. a100-mixed away 12:00-13:00 leaves 18 − 9 = 9 while 6 + 4 = 10 are held:
    1 short → each may lose up to min(its slices, 1) = 1, not exact. Only nlp's 6 held (vision
    ending at 12:00): 9 ≥ 6 → no collision."""
    second = copy.deepcopy(mixed_a100_node())
    second["metadata"]["name"] = "a100-mixed-2"
    import_nodes(mig["pool"], second)
    nlp = holds(mig, mig["team"], 6, 1, 7)
    vision = holds(mig, TeamFactory(slug="vision", name="Vision"), 4, 1, 7)
    found = collisions(mig, ["a100-mixed"], 3, 4)
    assert [(c.allocation_id, c.held, c.lost, c.exact) for c in found] == [
        (nlp.pk, 6, 1, False), (vision.pk, 4, 1, False),
    ]  # fmt: skip
    assert found[0].how == "Inference would be 1 1g.10gb slice(s) short at the peak"
    vision.ends_at = mig["t"] + 3 * H
    vision.save()
    assert collisions(mig, ["a100-mixed"], 3, 4) == []


def test_a_window_taking_slices_is_saved_only_once_acknowledged(mig, pool_admin, table_counts):
    """nlp's 3 × 1g.10gb 09:00-17:00, a100-mixed away 12:00-14:00: without acknowledging
    nlp's allocation nothing is written (409 maintenance_collisions listing it); with its id
    the window is saved and its audit event lists the slices lost."""
    nlp = holds(mig, mig["team"], 3, 0, 8)
    t = mig["t"]
    fields = {"actor": pool_admin, "title": "R570", "scope": "nodes", "hostnames": ["a100-mixed"],
              "starts_at": t + 3 * H, "ends_at": t + 5 * H}  # fmt: skip
    before = table_counts()
    with pytest.raises(MaintenanceCollides) as refused:
        maintenance_window_create(**fields)
    assert refused.value.code == "maintenance_collisions"
    assert [(c["allocation"], c["profile"], c["slices_lost"]) for c in
            refused.value.data["collisions"]] == [(nlp.pk, "1g.10gb", 3)]  # fmt: skip
    assert "cards or MIG slices" in refused.value.message
    assert table_counts() == before
    window = maintenance_window_create(acknowledged=[nlp.pk], **fields)
    from pools.audit.models import AuditEvent

    event = AuditEvent.objects.get(action="maintenance_window.created", object_id=str(window.pk))
    assert [(c["allocation"], c["slices_lost"]) for c in event.after["collisions"]] == [(nlp.pk, 3)]


def test_the_api_preview_names_the_profile_and_create_is_409_until_acknowledged(mig, admin_api):
    nlp = holds(mig, mig["team"], 3, 0, 8)
    t = mig["t"]
    body = {"title": "R570", "scope": "nodes", "hostnames": ["a100-mixed"],
            "starts_at": (t + 3 * H).isoformat(), "ends_at": (t + 5 * H).isoformat()}  # fmt: skip
    preview = admin_api.post(URL + "preview/", body, format="json")
    assert preview.status_code == 200, preview.content
    (collision,) = preview.json()["collisions"]
    said = [collision[k] for k in ("allocation", "profile", "slices", "slices_lost", "cards_lost")]
    assert said == [nlp.pk, "1g.10gb", 3, 3, 0]
    assert preview.json()["teams"] == [{"team": "nlp", "team_name": "NLP", "cards_lost": 0,
                                        "slices_lost": [{"profile": "1g.10gb",
                                                         "slices_lost": 3}]}]  # fmt: skip
    refused = admin_api.post(URL, body, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "maintenance_collisions"
    assert not MaintenanceWindow.objects.exists()
    made = admin_api.post(URL, body | {"acknowledged": [nlp.pk]}, format="json")
    assert made.status_code == 201, made.content


def test_the_page_lists_the_slices_each_team_loses(mig, admin_page):
    from django.utils import timezone

    nlp = holds(mig, mig["team"], 3, 0, 8)
    t = mig["t"]

    def local(moment):
        return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")

    form = {"title": "R570", "scope": "nodes", "hostnames": "a100-mixed",
            "starts_at": local(t + 3 * H), "ends_at": local(t + 5 * H)}  # fmt: skip
    page = admin_page.post("/maintenance/new/", form | {"step": "preview"})
    body = page.content.decode()
    assert page.status_code == 200
    assert f'name="acknowledged" value="{nlp.pk}"' in body
    assert "3 × 1g.10gb" in body, body  # the team's row and the allocation's
    assert "3 slices" in body
    assert not MaintenanceWindow.objects.exists()
    confirm = form | {"step": "confirm", "acknowledged": [nlp.pk]}
    done = admin_page.post("/maintenance/new/", confirm)
    assert done.status_code == 302 and MaintenanceWindow.objects.count() == 1


# -- upgrade waves -----------------------------------------------------------------------------


def test_a_wave_waits_for_the_slice_allocation_on_the_only_mig_node(mig):
    """nlp holds 3 × 1g.10gb 08:00-19:00; all 9 are on a100-mixed. Waves of 4 h every 6 h, one
    node each: slot 1 (09-13) and slot 2 (15-19) overlap nlp's slices, so a100-mixed cannot go
    (9 − 9 = 0 < 3); h100nvl-single can (nothing held) → wave 1 h100nvl-single at 0 h, wave 2
    a100-mixed at 12 h (slot 3, 21-01, after nlp's end). Were slices ignored, a100-mixed (whole
    cards: 6, none held) would be wave 1."""
    holds(mig, mig["team"], 3, -1, 10)
    group = DriverGroup.objects.get(branch=550)
    plan, _ = maintenance_wave_plan(WaveAsk(group, mig["pool"], mig["t"], 4 * H, 2 * H, 1, 10))
    assert [(w.number, w.starts_at - mig["t"], w.hostnames) for w in plan.waves] == [
        (1, 0 * H, ("h100nvl-single",)), (2, 12 * H, ("a100-mixed",)),
    ]  # fmt: skip


def test_two_mig_nodes_never_go_in_one_wave_while_their_slices_are_needed(mig):
    """a100-mixed-2 like a100-mixed: 18 × 1g.10gb; nlp holds 3 all week. Two nodes a wave:
    a100-mixed alone leaves 9 ≥ 3, with a100-mixed-2 too 0 < 3 → wave 1 a100-mixed +
    h100nvl-single, wave 2 a100-mixed-2. Then nlp also holds 8 of h100nvl-single's 14 ×
    1g.12gb all week: it can never go (14 − 14 = 0 < 8) → unplanned, the reason saying why."""
    second = copy.deepcopy(mixed_a100_node())
    second["metadata"]["name"] = "a100-mixed-2"
    import_nodes(mig["pool"], second)
    holds(mig, mig["team"], 3, -24, 7 * 24)
    group = DriverGroup.objects.get(branch=550)
    ask = WaveAsk(group, mig["pool"], mig["t"], 4 * H, 2 * H, 2, 10)
    plan, _ = maintenance_wave_plan(ask)
    assert [w.hostnames for w in plan.waves] == [
        ("a100-mixed", "h100nvl-single"), ("a100-mixed-2",),
    ]  # fmt: skip
    holds(mig, mig["team"], 8, -24, 7 * 24, profile="1g.12gb", model="nvl")
    plan, _ = maintenance_wave_plan(ask)
    assert [w.hostnames for w in plan.waves] == [("a100-mixed",), ("a100-mixed-2",)]
    assert plan.unplanned == ("h100nvl-single",)
    assert "fewer cards or MIG slices than are held" in plan.reason


def test_the_windows_page_shows_the_slices_away(mig, pool_admin, admin_page):
    """A window over both nodes, nothing held: away are a100-mixed's 6 whole A100 and its 9 ×
    1g.10gb + 2 × 2g.20gb, and h100nvl-single's 14 × 1g.12gb (no whole H100 NVL: 0 cards)."""
    from pools.maintenance.selectors import window_away_cards

    t = mig["t"]
    window = maintenance_window_create(actor=pool_admin, title="R570", scope="pool",
                                       pool=mig["pool"], starts_at=t, ends_at=t + H)  # fmt: skip
    rows = [(r["pool"].slug, r["gpu_model"].slug, r["cards"],
             [(s["profile"], s["slices"]) for s in r["slices"]])
            for r in window_away_cards(window)]  # fmt: skip
    assert rows == [
        ("infer", "a100_80g_sxm", 6, [("1g.10gb", 9), ("2g.20gb", 2)]),
        ("infer", "h100_nvl", 0, [("1g.12gb", 14)]),
    ]
    body = admin_page.get(f"/maintenance/{window.pk}/").content.decode()
    assert "9 × 1g.10gb, 2 × 2g.20gb" in body and "14 × 1g.12gb" in body
