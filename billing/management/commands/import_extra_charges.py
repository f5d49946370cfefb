"""``manage.py import_extra_charges charges.csv``: shared storage (GB-month) and network egress
(GB) per team and pool, for the statements (:mod:`billing.services.extra_charges` describes the
columns). ``manage.py import_extra_charges --prometheus [--month 2026-10]``: the same charges of
one billing month (default: this one, up to now) per team from every cluster's Prometheus, each
distinct URL once (:mod:`billing.services.extra_charges_prometheus`: ``EXTRA_CHARGES_*_PROMQL``;
:mod:`billing.services.prometheus_meters`: ``Cluster.prometheus_url``, blank =
``PROMETHEUS_URL``), as the hourly beat task imports them; ``--cluster SLUG`` only the one that
Kubernetes cluster reads, ``--prometheus-url URL`` that one (default: the environment's) read at
``URL``. Prints what was written and every rejected line or reported issue. Exit status 0 when
everything was imported, 1 when anything was rejected or reported (the rest is kept), 2 on an
unreadable file or header, unusable arguments, or when no Prometheus is configured or none
could be reached (one of several that cannot: 1, the others imported)."""

from __future__ import annotations

import sys
from datetime import date
from functools import partial
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
from billing.services.prometheus_meters import usage_import_meters
from pools.clusters.adapters import metrics_adapter
from pools.clusters.models import Cluster
from pools.common.choices import Scheduler


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
        parser.add_argument(
            "--cluster",
            help="with --prometheus: only the Prometheus this Kubernetes cluster (slug) reads",
        )
        parser.add_argument(
            "--prometheus-url",
            help="with --prometheus: read the Prometheus of --cluster "
            "(default: the environment's) at this URL instead",
        )

    def handle(self, *args, **options):
        extras = options["month"] or options["cluster"] or options["prometheus_url"]
        if options["prometheus"] == bool(options["file"]) or (extras and not options["prometheus"]):
            self.stderr.write(
                "import_extra_charges: give a CSV file, or --prometheus [--month] [--cluster] "
                "[--prometheus-url]"
            )
            sys.exit(2)
        if options["prometheus"]:
            self._from_prometheus(options["month"], options["cluster"], options["prometheus_url"])
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

    def _from_prometheus(
        self, month_text: str | None, slug: str | None, prometheus_url: str | None
    ) -> None:
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
            cluster = None
            if slug:
                cluster = Cluster.objects.filter(slug=slug, kind=Scheduler.KUBERNETES).first()
                if cluster is None:
                    raise CommandError(f"--cluster {slug!r} is no Kubernetes cluster")
        except (ValueError, CommandError) as exc:
            self.stderr.write(f"import_extra_charges: {exc}")
            sys.exit(2)
        result = usage_import_meters(
            importers={"extra": partial(extra_charges_import_prometheus, charges=charges)},
            start=start,
            end=end,
            now=now,
            cluster=cluster,
            read_url=prometheus_url,
            adapter_for=lambda url: metrics_adapter(url=url),
        )
        for failed in result.failed:
            where = f"Prometheus {failed['url']}"
            self.stderr.write(f"import_extra_charges: {where}: {failed['error']}")
        if not result.imports:
            if not result.failed:
                self.stderr.write("import_extra_charges: PROMETHEUS_URL is not set")
            sys.exit(2)
        issues = [issue for imported in result.imports for issue in imported.issues]
        self.stdout.write(
            f"{month:%Y-%m} from Prometheus ({', '.join(c.name for c in charges)}): "
            f"{sum(i.records_created for i in result.imports)} record(s) created, "
            f"{sum(i.records_updated for i in result.imports)} updated, "
            f"{sum(i.records_unchanged for i in result.imports)} unchanged, "
            f"{len(issues)} issue(s)"
        )
        for issue in issues:
            where = issue.get("namespace") or "-"
            self.stdout.write(f"  {issue['charge']} {where}: {issue['code']}: {issue['detail']}")
        if issues or result.failed:
            sys.exit(1)
