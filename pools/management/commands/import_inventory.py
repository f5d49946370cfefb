"""``manage.py import_inventory --source SOURCE [--node H | --node-from-filename] [--pool P] FILE``

SOURCE is one of nvidia-smi, slurm, kubernetes.

All files are imported as one run and one report is printed. For nvidia-smi, ``--node`` names
the host the output came from, or ``--node-from-filename`` takes each host from its file name
(``gpu-07.txt`` -> ``gpu-07``), for a directory of per-host captures.

Exit status: 0 when everything imported, 1 when anything was rejected, 2 on unusable
arguments (unknown pool, unreadable file, no host name for nvidia-smi).
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand

from pools.common.errors import InvalidInput
from pools.inventory.models import Pool
from pools.inventory.services.import_files import inventory_import_files
from scheduler_adapters.types import InventorySource


class Command(BaseCommand):
    help = "Import GPU inventory from nvidia-smi output, slurmrestd nodes JSON or Kubernetes Nodes."

    def add_arguments(self, parser):
        parser.add_argument("--source", required=True, choices=[s.value for s in InventorySource])
        host = parser.add_mutually_exclusive_group()
        host.add_argument("--node", help="host name the nvidia-smi output came from")
        host.add_argument(
            "--node-from-filename",
            action="store_true",
            help="take each nvidia-smi file's host name from its file name",
        )
        parser.add_argument("--pool", help="slug of the pool to put the nodes in")
        parser.add_argument("files", nargs="+", metavar="FILE")

    def handle(self, *args, source, node, node_from_filename, pool, files, **options):
        if source == InventorySource.NVIDIA_SMI and not (node or node_from_filename):
            self._usage("--source nvidia-smi needs --node HOSTNAME or --node-from-filename")
        target = None
        if pool:
            target = Pool.objects.filter(slug=pool).first()
            if target is None:
                self._usage(f"no pool with slug {pool!r}")
        batch = []
        for name in files:
            path = Path(name)
            try:
                data = path.read_bytes()
            except OSError as exc:
                self._usage(f"cannot read {name}: {exc.strerror}")
            batch.append((path.name, data, path.stem if node_from_filename else node))
        try:
            report = inventory_import_files(files=batch, source=source, pool=target)
        except InvalidInput as exc:
            self._usage(exc.message)
        self.stdout.write(
            f"{len(files)} file(s): {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.rejected)} rejected, "
            f"{report.gpus_seen} GPUs"
        )
        for hostname, said in report.changes.items():
            self.stdout.write(f"  updated {hostname}: {'; '.join(said) or 'seen again'}")
        for issue in report.issues:
            self.stdout.write(f"  error: {issue}")
        for warning in report.warnings:
            self.stdout.write(f"  warning: {warning}")
        for over in report.overcommitted:
            self.stdout.write(f"  over-committed: {over['text']}")
        if not report.ok:
            sys.exit(1)

    def _usage(self, message: str):
        self.stderr.write(f"import_inventory: {message}")
        sys.exit(2)
