"""``manage.py import_inventory --source {nvidia-smi,slurm,kubernetes} [--node H] [--pool P] FILE...``

Prints the report. Exit status: 0 when everything imported, 1 when anything was rejected,
2 on unusable arguments (unknown pool, unreadable file, missing --node for nvidia-smi).
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from pools.errors import DomainError
from pools.models import Pool
from pools.services.inventory_import import inventory_import_file
from scheduler_adapters.types import InventorySource


class Command(BaseCommand):
    help = "Import GPU inventory from nvidia-smi output, slurmrestd nodes JSON or Kubernetes Nodes."

    def add_arguments(self, parser):
        parser.add_argument("--source", required=True, choices=[s.value for s in InventorySource])
        parser.add_argument("--node", help="host name the nvidia-smi output came from")
        parser.add_argument("--pool", help="slug of the pool to put the nodes in")
        parser.add_argument("files", nargs="+", metavar="FILE")

    def handle(self, *args, source, node, pool, files, **options):
        if source == InventorySource.NVIDIA_SMI and not node:
            self._usage("--node is required for --source nvidia-smi")
        target = None
        if pool:
            target = Pool.objects.filter(slug=pool).first()
            if target is None:
                self._usage(f"no pool with slug {pool!r}")
        failed = False
        for name in files:
            path = Path(name)
            try:
                data = path.read_bytes()
            except OSError as exc:
                self._usage(f"cannot read {name}: {exc.strerror}")
            try:
                report = inventory_import_file(data=data, source=source, node=node, pool=target,
                                               filename=path.name)
            except DomainError as exc:
                self.stderr.write(f"{name}: {exc.message}")
                failed = True
                continue
            self._print(name, report)
            failed |= not report.ok
        if failed:
            sys.exit(1)

    def _usage(self, message: str):
        self.stderr.write(f"import_inventory: {message}")
        sys.exit(2)

    def _print(self, name, report):
        self.stdout.write(
            f"{name}: {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.rejected)} rejected, "
            f"{report.gpus_seen} GPUs"
        )
        for issue in report.issues:
            self.stdout.write(f"  error: {issue}")
        for warning in report.warnings:
            self.stdout.write(f"  warning: {warning}")
