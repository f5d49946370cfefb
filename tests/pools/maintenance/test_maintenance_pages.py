"""Maintenance pages: the list (CSV too) for everyone signed in, the new-window form's preview
listing what each team loses before anything is saved, confirm, the window's page, and cancel
with a confirmation; members may not plan."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, next_week_9am

from pools.maintenance.models import MaintenanceStatus, MaintenanceWindow
from pools.maintenance.services.windows import maintenance_window_create

pytestmark = pytest.mark.django_db
H = timedelta(hours=1)


def local(moment):
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def form(t, **fields):
    return {"title": "R570 upgrade", "scope": "nodes", "hostnames": "inf-01",
            "starts_at": local(t + 3 * H), "ends_at": local(t + 4 * H)} | fields  # fmt: skip


def test_preview_lists_the_team_and_cards_then_confirm_saves(admin_page, team, infer_pool, l40s):
    """nlp holds 6 of 8 (no placement) 10-14; inf-01 (4) away 12-13 leaves 4: nlp loses up
    to 6 − 4 = 2. The preview writes nothing; confirm saves and shows the window's page."""
    t = next_week_9am()
    nlp = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=6,
                            starts_at=t + H, ends_at=t + 5 * H)  # fmt: skip
    page = admin_page.post("/maintenance/new/", form(t, step="preview"))
    assert page.status_code == 200
    body = page.content.decode()
    assert f"#{nlp.pk}" in body and "NLP" in body and "up to 2" in body
    assert f'name="acknowledged" value="{nlp.pk}"' in body
    assert not MaintenanceWindow.objects.exists()
    done = admin_page.post("/maintenance/new/", form(t, step="confirm", acknowledged=[nlp.pk]))
    window = MaintenanceWindow.objects.get()
    assert done.status_code == 302 and done["Location"] == f"/maintenance/{window.pk}/"
    detail = admin_page.get(done["Location"]).content.decode()
    assert "inf-01" in detail and "Kubernetes" in detail and "Cancel this window" in detail


def test_confirm_without_the_collisions_seen_shows_them_again(admin_page, team, infer_pool, l40s):
    t = next_week_9am()
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=6,
                      starts_at=t + H, ends_at=t + 5 * H)  # fmt: skip
    page = admin_page.post("/maintenance/new/", form(t, step="confirm"))
    assert page.status_code == 200 and "changed since the check" in page.content.decode()
    assert not MaintenanceWindow.objects.exists()


@pytest.mark.parametrize("garbage", ["²", "9" * 5000])
def test_acknowledged_ids_that_are_no_numbers_are_not_acknowledgements(
    admin_page, team, infer_pool, l40s, garbage
):
    """A "²" is a digit to ``str.isdigit()`` and 5,000 digits are more than ``int()`` reads:
    both were a 500 on confirm. Not ids, so nothing acknowledged: the collision is shown again
    and nothing saved."""
    t = next_week_9am()
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=6,
                      starts_at=t + H, ends_at=t + 5 * H)  # fmt: skip
    page = admin_page.post("/maintenance/new/", form(t, step="confirm", acknowledged=[garbage]))
    assert page.status_code == 200 and "changed since the check" in page.content.decode()
    assert not MaintenanceWindow.objects.exists()


def test_bad_input_is_shown_by_field(admin_page, infer_pool):
    t = next_week_9am()
    page = admin_page.post("/maintenance/new/", form(t, hostnames="nope-1", step="preview"))
    assert "No such node: nope-1." in page.content.decode()
    assert not MaintenanceWindow.objects.exists()


def test_list_csv_and_cancel_with_confirmation(admin_page, member_page, pool_admin, infer_pool):
    t = next_week_9am()
    window = maintenance_window_create(actor=pool_admin, title="Firmware", scope="pool",
                                       pool=infer_pool, starts_at=t, ends_at=t + H)  # fmt: skip
    listed = member_page.get("/maintenance/")
    assert listed.status_code == 200 and "Firmware" in listed.content.decode()
    assert "Plan a window" not in listed.content.decode()
    rows = list(csv.DictReader(io.StringIO(
        b"".join(member_page.get("/maintenance/?export=csv").streaming_content).decode()
    )))  # fmt: skip
    assert [(r["window"], r["title"], r["nodes"], r["status"]) for r in rows] == [
        (str(window.pk), "Firmware", "2", "planned")
    ]
    assert member_page.get("/maintenance/new/").status_code == 403
    assert member_page.post(f"/maintenance/{window.pk}/cancel/").status_code == 403
    confirm = admin_page.get(f"/maintenance/{window.pk}/cancel/")
    assert "Cancel the window" in confirm.content.decode()
    assert MaintenanceWindow.objects.get().status == MaintenanceStatus.PLANNED
    admin_page.post(f"/maintenance/{window.pk}/cancel/", {"reason": "vendor late"})
    assert MaintenanceWindow.objects.get().status == MaintenanceStatus.CANCELLED
    empty = member_page.get("/maintenance/?status=planned").content.decode()
    assert "No maintenance windows match" in empty


def test_waves_page_plans_then_saves(
    admin_page, member_page, infer_pool, django_assert_max_num_queries
):
    """Driver 550 in infer (inf-01, inf-02), nothing held, one node per 2-hour wave every 3 h:
    wave 1 inf-01 at t, wave 2 inf-02 at t + 3 h; plan writes nothing, save writes both and
    the list filtered by the wave shows them."""
    t = next_week_9am()
    fields = {"title": "R570", "driver_group": "550", "pool": "infer",
              "first_start": local(t), "window_hours": 2, "gap_hours": 1, "nodes_per_wave": 1,
              "max_waves": 4}  # fmt: skip
    assert member_page.get("/maintenance/waves/").status_code == 403
    plan = admin_page.post("/maintenance/waves/", fields | {"step": "plan"}).content.decode()
    assert "Save 2 waves" in plan and "inf-01" in plan and "inf-02" in plan
    assert not MaintenanceWindow.objects.exists()
    saved = admin_page.post("/maintenance/waves/", fields | {"step": "save"})
    windows = list(MaintenanceWindow.objects.order_by("wave_number"))
    assert [(w.wave_number, w.starts_at - t) for w in windows] == [(1, 0 * H), (2, 3 * H)]
    assert saved.status_code == 302 and saved["Location"].endswith(f"?wave={windows[0].wave}")
    with django_assert_max_num_queries(12):  # not one query per window
        listed = admin_page.get(saved["Location"]).content.decode()
    assert "R570 · wave 1 of 2" in listed and "R570 · wave 2 of 2" in listed
