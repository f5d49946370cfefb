"""``manage.py import_usage --source reservation|slurm|kubernetes|vllm-tokens --start 2026-10-01
--end 2026-11-01``.

kubernetes and vllm-tokens read ``settings.PROMETHEUS_URL`` (or ``--prometheus-url``).

``--sacct-file`` reads ``sacct -P`` text instead of calling slurmrestd. Exit status 0 when
nothing was reported, 1 when any issue was, 2 on unusable arguments.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from billing.conf import billing_zone
from billing.pricing import local_midnight
from billing.sacct import SacctFile
from billing.services.prometheus_import import usage_import_kubernetes, usage_import_vllm_tokens
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from scheduler_adapters.prometheus import PrometheusAdapter
from scheduler_adapters.registry import build_scheduler_adapter


class Command(BaseCommand):
    help = "Import usage for a window [start, end) (dates in the billing time zone)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--source", choices=["reservation", "slurm", "kubernetes", "vllm-tokens"], required=True
        )
        parser.add_argument("--start", type=date.fromisoformat, required=True)
        parser.add_argument("--end", type=date.fromisoformat, required=True)
        parser.add_argument("--sacct-file", type=Path)
        parser.add_argument("--prometheus-url")

    def handle(self, *args, source, start, end, sacct_file, prometheus_url=None, **options):
        zone = billing_zone()
        window = {"start": local_midnight(start, zone), "end": local_midnight(end, zone)}
        if source == "reservation":
            report = usage_import_reservations(**window)
        elif source in ("kubernetes", "vllm-tokens"):
            url = prometheus_url or getattr(settings, "PROMETHEUS_URL", "")
            if not url:
                raise CommandError("No PROMETHEUS_URL configured; pass --prometheus-url.")
            metrics = PrometheusAdapter(url)
            try:
                importer = (
                    usage_import_kubernetes if source == "kubernetes" else usage_import_vllm_tokens
                )
                report = importer(metrics=metrics, **window)
            finally:
                metrics.close()
        else:
            if sacct_file:
                adapter = SacctFile(sacct_file.read_text(encoding="utf-8"))
            else:
                config = getattr(settings, "SCHEDULERS", {}).get("slurm")
                if not config:
                    raise CommandError("No SCHEDULERS['slurm'] configured; pass --sacct-file.")
                adapter = build_scheduler_adapter(config)
            report = usage_import_slurm(scheduler=adapter, **window)
        self.stdout.write(
            f"{source}: {report.records_created} created, {report.records_updated} updated, "
            f"{report.records_unchanged} unchanged, {report.flagged} flagged"
        )
        for issue in report.issues:
            self.stdout.write(f"  {issue}")
        if report.issues:
            sys.exit(1)
