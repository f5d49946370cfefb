"""The request form offers the GPU models some pool has (issue #37): a model no pool holds a
card of is shown disabled, labelled "no pool has this card", while the request asks for cards a
pool has, and enabled for capacity no pool has yet; a POST naming it for cards is refused on
the form with what to do instead.

Pools (tests/conftest.py): ``infer`` holds 8 L40S, ``train`` 8 A100; no pool has an H100. A
model whose only cards sit on a drained node is still the pool's (offered).
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from factories import next_week_9am, node_with_gpus

from pools.capacity.models import CapacityRequest

pytestmark = pytest.mark.django_db


def _options(html: str) -> dict[str, str]:
    """The GPU model select's options: slug -> the option's attributes and label."""
    select = re.search(r'<select name="gpu_model".*?</select>', html, re.S).group(0)
    return dict(re.findall(r'<option value="([^"]+)"([^>]*>[^<]*)</option>', select))


@pytest.fixture
def pools(infer_pool, train_pool):
    node_with_gpus(2, gpu_model="h200_sxm", hostname="drained-01", pool=train_pool,
                   state="drain")  # fmt: skip


def test_models_no_pool_has_are_disabled_for_cards_and_open_for_growth(client, team_member, pools):
    client.force_login(team_member)
    options = _options(client.get("/requests/new/").content.decode())
    for held in ("l40s", "a100_80g_sxm", "h200_sxm"):
        assert "disabled" not in options[held] and "no pool has" not in options[held], held
    assert "data-no-pool disabled" in options["h100_sxm"]
    assert options["h100_sxm"].endswith("— no pool has this card")
    growth = _options(client.get("/requests/new/", {"kind": "growth"}).content.decode())
    assert "data-no-pool" in growth["h100_sxm"] and "disabled" not in growth["h100_sxm"]


def test_a_post_for_cards_of_a_model_no_pool_has_is_refused_on_the_form(
    client, team_member, team, pools
):
    client.force_login(team_member)
    start = next_week_9am()
    fields = {
        "team": team.slug, "kind": "cards", "workload_kind": "inference",
        "gpu_model": "h100_sxm", "card_count": 2,
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (start + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"),
        "justification": "serving", "submit_request": "1",
    }  # fmt: skip
    page = client.post("/requests/new/", fields)
    assert page.status_code == 200 and not CapacityRequest.objects.exists()
    assert "No pool has H100 SXM5 80GB cards: ask for capacity no pool has yet" in " ".join(
        page.content.decode().split()
    )
    grown = client.post("/requests/new/", {**fields, "kind": "growth"})
    assert grown.status_code == 302 and CapacityRequest.objects.get().kind == "growth"
