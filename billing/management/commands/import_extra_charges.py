"""``manage.py import_extra_charges charges.csv``: shared storage (GB-month) and network egress
(GB) per team and pool, for the statements (:mod:`billing.services.extra_charges` describes the
columns). ``manage.py import_extra_charges --prometheus [--month 2026-10]``: the same charges of
one billing month (default: this one, up to now) per team from Prometheus
(:mod:`billing.services.extra_charges_prometheus`: ``EXTRA_CHARGES_*_PROMQL``,
``PROMETHEUS_URL``), as the hourly beat task imports them. Prints what was written and every
rejected line or reported issue. Exit status 0 when everything was imported, 1 when anything was
rejected or reported (the rest is kept), 2 on an unreadable file or header, unusable arguments,
or a Prometheus that is not configured or cannot be reached."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from billing.conf import billing_zone
from billing.pricing import month_bounds, month_of
from billing.services.extra_charges import extra_charges_import
from billing.services.extra_charges_prometheus import (
    configured_charges,
    extra_charges_import_prometheus,
)
from pools.clusters.adapters import metrics_adapter
from scheduler_adapters.errors import SchedulerError


class Command(BaseCommand):
    help = (
        "Import storage / egress usage from a CSV (team,pool,charge,quantity,start,end), or "
        "with --prometheus one month's from Prometheus."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, nargs="?")
        parser.add_argument(
            "--prometheus", action="store_true", help="read the charges from Prometheus"
        )
        parser.add_argument("--month", help="with --prometheus: YYYY-MM (default: this month)")

    def handle(self, *args, **options):
        if options["prometheus"] == bool(options["file"]) or (
            options["month"] and not options["prometheus"]
        ):
            self.stderr.write("import_extra_charges: give a CSV file, or --prometheus [--month]")
            sys.exit(2)
        if options["prometheus"]:
            self._from_prometheus(options["month"])
            return
        try:
            text = options["file"].read_text(encoding="utf-8")
            report = extra_charges_import(text=text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            self.stderr.write(f"import_extra_charges: {exc}")
            sys.exit(2)
        self.stdout.write(
            f"{report.lines} line(s): {report.created} record(s) created, {report.updated} "
            f"updated, {report.unchanged} unchanged, {len(report.rejected)} line(s) rejected"
        )
        for bad in report.rejected:
            self.stdout.write(f"  line {bad['line']}: {bad['error']}")
        if report.rejected:
            sys.exit(1)

    def _from_prometheus(self, month_text: str | None) -> None:
        zone = billing_zone()
        now = timezone.now()
        try:
            month = date.fromisoformat(f"{month_text}-01") if month_text else month_of(now, zone)
            start, end = month_bounds(month, zone)
            if start >= now:
                raise CommandError(f"{month:%Y-%m} has not started")
            charges = configured_charges()
            if not charges:
                raise CommandError("no EXTRA_CHARGES_STORAGE_PROMQL / _EGRESS_PROMQL is set")
            metrics = metrics_adapter()
            if metrics is None:
                raise CommandError("PROMETHEUS_URL is not set")
        except (ValueError, CommandError) as exc:
            self.stderr.write(f"import_extra_charges: {exc}")
            sys.exit(2)
        try:
            imported = extra_charges_import_prometheus(
                metrics=metrics, start=start, end=end, now=now, charges=charges
            )
        except SchedulerError as exc:
            self.stderr.write(f"import_extra_charges: {exc}")
            sys.exit(2)
        finally:
            metrics.close()
        self.stdout.write(
            f"{month:%Y-%m} from Prometheus ({', '.join(c.name for c in charges)}): "
            f"{imported.records_created} record(s) created, {imported.records_updated} updated, "
            f"{imported.records_unchanged} unchanged, {len(imported.issues)} issue(s)"
        )
        for issue in imported.issues:
            where = issue.get("namespace") or "-"
            self.stdout.write(f"  {issue['charge']} {where}: {issue['code']}: {issue['detail']}")
        if imported.issues:
            sys.exit(1)
