"""``manage.py load_demo``: users, teams, pools and a fleet through the real importers; twice."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from pools.inventory import selectors
from pools.inventory.models import Node, Pool
from pools.tenancy.models import Membership, Team

pytestmark = pytest.mark.django_db


def load_demo(capsys) -> str:
    call_command("load_demo")
    return capsys.readouterr().out


def created_counts(out: str) -> list[int]:
    return [int(n) for n in re.findall(r": (\d+) created,", out)]


def test_load_demo_twice_creates_nothing_the_second_time(capsys):
    first = load_demo(capsys)
    nodes = Node.objects.count()

    second = load_demo(capsys)

    assert sum(created_counts(first)) > 0
    counts = created_counts(second)
    assert counts and set(counts) == {0}
    assert " 0 rejected" in second and re.search(r"[1-9]\d* rejected", second) is None
    assert Node.objects.count() == nodes


def test_the_demo_data(capsys):
    load_demo(capsys)

    assert set(Pool.objects.values_list("slug", flat=True)) == {
        "train-slurm",
        "infer-k8s",
        "dev-4090",
    }
    users = get_user_model().objects
    assert set(users.values_list("username", flat=True)) == {"admin", "alice", "bob"}
    for name in ("admin", "alice", "bob"):
        assert users.get(username=name).check_password("demo")
    admin = users.get(username="admin")
    assert admin.is_staff and admin.is_superuser
    assert set(Team.objects.values_list("slug", flat=True)) == {"nlp", "vision", "platform"}
    assert list(
        Membership.objects.order_by("team__slug").values_list(
            "team__slug", "user__username", "role"
        )
    ) == [("nlp", "alice", "member"), ("vision", "bob", "manager")]
    # pools.demo: 2 legacy Slurm nodes with 4 cards of GRES type "v100" each.
    assert selectors.unrecognised_model_list() == [
        {"raw_model_name": "v100", "model_candidates": [], "gpu_count": 8, "node_count": 2}
    ]
    # 6 lab captures + 14 training + 10 dev + 2 legacy + 14 inference nodes.
    assert Node.objects.count() == 46
    assert Node.objects.filter(pool__slug="infer-k8s").count() == 14
    assert (
        Node.objects.filter(hostname__startswith="dev-4090d", gpus__gpu_model__slug="rtx4090d")
        .distinct()
        .count()
        == 2
    )
