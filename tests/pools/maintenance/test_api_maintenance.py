"""The maintenance-windows API: preview lists collisions and writes nothing; create without
acknowledging them is a 409 with the same list; plan-waves answers a plan and saves it with
confirm; members read but may not write; bad input is a 400 by field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from factories import AllocationFactory, next_week_9am

from pools.maintenance.models import MaintenanceStatus, MaintenanceWindow

pytestmark = pytest.mark.django_db
URL = "/api/v1/maintenance-windows/"
H = timedelta(hours=1)


def body(t, **fields):
    window = {"starts_at": (t + 3 * H).isoformat(), "ends_at": (t + 4 * H).isoformat()}
    return {"title": "R570 upgrade", "scope": "nodes", "hostnames": ["inf-01"], **window} | fields


def test_preview_then_confirm(admin_api, member_api, team, infer_pool, l40s):
    """nlp holds 6 of 8 L40S (no placement) 10:00-14:00; inf-01 away 12:00-13:00 leaves 4:
    2 short → nlp loses up to 2. Preview says so; create without acknowledging: 409, nothing
    written; with it: 201, and the member reads the window."""
    t = next_week_9am()
    nlp = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=6,
                            starts_at=t + H, ends_at=t + 5 * H)  # fmt: skip
    preview = admin_api.post(URL + "preview/", body(t), format="json")
    assert preview.status_code == 200, preview.content
    assert preview.json()["teams"] == [
        {"team": "nlp", "team_name": "NLP", "cards_lost": 2, "slices_lost": []}
    ]
    assert preview.json()["collisions"][0]["allocation"] == nlp.pk
    refused = admin_api.post(URL, body(t), format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "maintenance_collisions"
    assert not MaintenanceWindow.objects.exists()
    made = admin_api.post(URL, body(t, acknowledged=[nlp.pk]), format="json")
    assert made.status_code == 201, made.content
    assert made.json()["hostnames"] == ["inf-01"] and made.json()["status"] == "planned"
    listed = member_api.get(URL)
    assert listed.status_code == 200 and listed.json()["count"] == 1
    assert member_api.post(URL, body(t), format="json").status_code == 403
    assert member_api.post(URL + "preview/", body(t), format="json").status_code == 403
    pk = made.json()["id"]
    assert member_api.post(f"{URL}{pk}/cancel/", {}, format="json").status_code == 403
    cancelled = admin_api.post(f"{URL}{pk}/cancel/", {"reason": "late"}, format="json")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert MaintenanceWindow.objects.get().status == MaintenanceStatus.CANCELLED
    again = admin_api.post(f"{URL}{pk}/cancel/", {}, format="json")
    assert again.status_code == 409


def test_bad_input_is_a_400_by_field(admin_api, infer_pool):
    t = next_week_9am()
    answer = admin_api.post(URL, body(t, hostnames=["nope"], ends_at=t.isoformat()), format="json")
    assert answer.status_code == 400
    assert set(answer.json()["errors"]) >= {"hostnames", "ends_at"}
    answer = admin_api.post(URL, body(t, scope="galaxy"), format="json")
    assert answer.status_code == 400 and "scope" in answer.json()["errors"]


def test_plan_waves_answers_the_plan_and_confirm_saves_it(admin_api, infer_pool):
    """Driver 550 in pool infer: inf-01 and inf-02, nothing held: one node per wave of 2 h
    every 3 h → wave 1 inf-01 at t, wave 2 inf-02 at t + 3 h."""
    t = next_week_9am()
    ask = {"driver_group": 550, "pool": "infer", "title": "R570", "first_start": t.isoformat(),
           "window_hours": 2, "gap_hours": 1, "nodes_per_wave": 1}  # fmt: skip
    plan = admin_api.post(URL + "plan-waves/", ask, format="json")
    assert plan.status_code == 200, plan.content
    assert [(w["number"], w["hostnames"]) for w in plan.json()["waves"]] == [
        (1, ["inf-01"]), (2, ["inf-02"]),
    ]  # fmt: skip
    assert plan.json()["complete"] is True and not MaintenanceWindow.objects.exists()
    saved = admin_api.post(URL + "plan-waves/", ask | {"confirm": True}, format="json")
    assert saved.status_code == 201, saved.content
    windows = MaintenanceWindow.objects.order_by("starts_at")
    assert [(w.wave_number, w.starts_at - t) for w in windows] == [(1, 0 * H), (2, 3 * H)]
