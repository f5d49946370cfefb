"""``manage.py load_demo``: demo users, teams, pools and fleet, all through the real importers.

Imports every nvidia-smi capture in ``tests/fixtures/nvidia-smi/`` (one node per capture),
then the generated fleet of :mod:`pools.demo` as nvidia-smi CSV, slurmrestd JSON and a
Kubernetes NodeList. Safe to run twice (the second run reports nodes unchanged). Demo users
(``admin``, ``alice``, ``bob``, password ``demo``) are for the demo only.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from pools.choices import TeamRole
from pools.demo import POOLS, demo_fleet
from pools.models import Membership, Pool, Team
from pools.services.inventory_import import inventory_import_file, inventory_import_files
from scheduler_adapters.types import InventorySource

CAPTURES = Path(settings.BASE_DIR) / "tests" / "fixtures" / "nvidia-smi"
TEAMS = [
    ("nlp", "NLP", "CC-4100"),
    ("vision", "Vision", "CC-4200"),
    ("platform", "Platform", "CC-1000"),
]


class Command(BaseCommand):
    help = "Load demo users, teams, pools and a GPU fleet (demo only: password 'demo')."

    def handle(self, *args, **options):
        with transaction.atomic():
            self._users_and_teams()
            self._pools()
        for path in sorted(CAPTURES.glob("*.txt")):
            # linux-x86_64__nvidia-h100-mig__590.48.01.txt -> lab-h100-mig
            host = "lab-" + path.stem.split("__")[1].removeprefix("nvidia-").removeprefix(
                "geforce-"
            )
            report = inventory_import_file(
                data=path.read_bytes(),
                source=InventorySource.NVIDIA_SMI,
                node=host,
                filename=path.name,
            )
            self._say(path.name, report)
        captures, slurm_json, k8s_json = demo_fleet()
        self._say(
            "nvidia-smi CSV of the generated nodes",
            inventory_import_files(
                files=[(f"{c.hostname}.csv", c.csv.encode(), c.hostname) for c in captures],
                source=InventorySource.NVIDIA_SMI,
            ),
        )
        self._say(
            "slurmrestd nodes",
            inventory_import_file(
                data=slurm_json.encode(), source=InventorySource.SLURM, filename="slurm-nodes.json"
            ),
        )
        self._say(
            "kubernetes nodes",
            inventory_import_file(
                data=k8s_json.encode(), source=InventorySource.KUBERNETES, filename="k8s-nodes.json"
            ),
        )

    def _say(self, name, report):
        self.stdout.write(
            f"{name}: {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.rejected)} rejected"
        )

    def _users_and_teams(self):
        users = get_user_model().objects
        admin, _ = users.get_or_create(
            username="admin",
            defaults={"is_staff": True, "is_superuser": True, "email": "admin@example.com"},
        )
        alice, _ = users.get_or_create(username="alice", defaults={"email": "alice@example.com"})
        bob, _ = users.get_or_create(username="bob", defaults={"email": "bob@example.com"})
        for user in (admin, alice, bob):
            user.set_password("demo")
            user.save()
        teams = {}
        for slug, name, cost_centre in TEAMS:
            teams[slug], _ = Team.objects.get_or_create(
                slug=slug, defaults={"name": name, "cost_centre": cost_centre}
            )
        Membership.objects.get_or_create(
            team=teams["nlp"], user=alice, defaults={"role": TeamRole.MEMBER}
        )
        Membership.objects.get_or_create(
            team=teams["vision"], user=bob, defaults={"role": TeamRole.MANAGER}
        )

    def _pools(self) -> None:
        for spec in POOLS:
            spec = dict(spec)
            slug = spec.pop("slug")
            Pool.objects.get_or_create(slug=slug, defaults=spec)
