"""The request page names the class a request resolved to, in the request form's words (its
empty choice is "The team's default class"). Teams as in ``conftest.py``: ``svc`` defaults to
production, ``etl`` to batch, ``lab`` to none."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from factories import next_week_9am

from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_create
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def class_cell(fleet, member, teams, client):
    """``class_cell(team_slug, **fields)``: the text of the page's *Workload class* cell for a
    draft request of 4 GeForce RTX 4090 next week (a model every class here may use)."""
    client.force_login(member)

    def make(team_slug, **fields):
        start = next_week_9am()
        values = {"team": teams[team_slug], "workload_kind": "inference", "card_count": 4,
                  "starts_at": start, "ends_at": start + timedelta(days=7),
                  "justification": "serve", "gpu_model": GpuModel.objects.get(slug="rtx4090"),
                  **fields}  # fmt: skip
        req = capacity_request_create(actor=member, fields=RequestFields(**values), submit=False)
        html = client.get(f"/requests/{req.pk}/").content.decode()
        cell = re.search(r"<th>Workload class</th><td>(.*?)</td>", html).group(1)
        return re.sub(r"<[^>]+>", "", cell)

    return make


def test_no_class_stated_and_no_team_default_reads_none(class_cell):
    assert class_cell("lab") == "None (the team had no default class; no class rule applies)"


def test_the_team_default_is_named_and_said_to_be_the_default(class_cell):
    assert class_cell("etl") == "Batch (the team's default class)"


def test_a_class_stated_is_named_alone(class_cell, classes):
    assert class_cell("etl", workload_class=classes["internal"]) == "Internal"
