"""``manage.py load_demo``: demo users, teams, pools and fleet, all through the real importers.

Imports every nvidia-smi capture in ``tests/fixtures/nvidia-smi/`` (one node per capture),
then the generated fleet of :mod:`pools.demo` as nvidia-smi CSV, slurmrestd JSON and a
Kubernetes NodeList. Safe to run twice (the second run reports nodes unchanged). Demo users
(``admin``, ``alice``, ``bob``, password ``demo``) are for the demo only.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from pools.choices import TeamRole
from pools.demo import POOLS, demo_fleet
from pools.models import CapacityRequest, GpuModel, Membership, Pool, Team
from pools.services.allocations import allocation_lifecycle_sweep
from pools.services.inventory_import import inventory_import_file, inventory_import_files
from pools.services.requests import (
    capacity_request_approve,
    capacity_request_create,
    capacity_request_reject,
)
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
        self._requests()

    def _requests(self):
        """A few requests in every state, made through the services as people would."""
        if CapacityRequest.objects.exists():
            return
        users = {u.username: u for u in get_user_model().objects.all()}
        teams = {t.slug: t for t in Team.objects.all()}
        pools = {p.slug: p for p in Pool.objects.all()}
        models = {m.slug: m for m in GpuModel.objects.all()}
        now = timezone.now().replace(second=0, microsecond=0)
        day = timedelta(days=1)

        def ask(user, team, kind, pool, model, cards, start, days, why, **extra):
            return capacity_request_create(
                actor=users[user],
                team=teams[team],
                workload_kind=kind,
                card_count=cards,
                starts_at=start,
                ends_at=start + days * day,
                justification=why,
                pool=pools[pool],
                gpu_model=models[model],
                **extra,
            )

        admin = users["admin"]
        soon = now + timedelta(minutes=1)
        training = ask(
            "bob",
            "vision",
            "training",
            "train-slurm",
            "a100_80g_sxm",
            16,
            soon,
            14,
            "Detector pre-training, 2 nodes.",
        )
        capacity_request_approve(request=training, actor=admin, reason="fits the quarter plan")
        serving = ask(
            "alice",
            "nlp",
            "inference",
            "infer-k8s",
            "l40s",
            8,
            soon,
            2,
            "Chat assistant serving (Qwen2.5-14B).",
        )
        capacity_request_approve(request=serving, actor=admin)
        later = ask(
            "bob",
            "vision",
            "training",
            "train-slurm",
            "h800_sxm",
            16,
            now + 10 * day,
            21,
            "Video model fine-tune after the data freeze.",
        )
        capacity_request_approve(
            request=later,
            actor=admin,
            card_count=8,
            reason="8 of 16 now; ask again when the H800 queue clears",
        )
        ask(
            "alice",
            "nlp",
            "inference",
            "infer-k8s",
            "l40s",
            2,
            now + 7 * day,
            7,
            "Evaluation endpoint for the new retriever.",
        )
        ask(
            "alice",
            "nlp",
            "training",
            "train-slurm",
            "h800_sxm",
            32,
            now + 3 * day,
            10,
            "Continued pre-training run.",
        )
        rejected = ask(
            "bob",
            "vision",
            "training",
            "dev-4090",
            "rtx4090",
            4,
            now + 2 * day,
            30,
            "Hyper-parameter sweep.",
        )
        capacity_request_reject(
            request=rejected, actor=admin, reason="30 days of the dev pool is too long; split it up"
        )
        ask(
            "alice",
            "nlp",
            "training",
            "dev-4090",
            "rtx4090d",
            2,
            now + day,
            3,
            "Tokenizer experiments.",
            submit=False,
        )
        allocation_lifecycle_sweep(now=now + timedelta(minutes=2))
        self.stdout.write(f"requests: {CapacityRequest.objects.count()} demo requests")

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
