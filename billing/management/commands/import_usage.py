"""``manage.py import_usage --source reservation|slurm|kubernetes|vllm-tokens --start 2026-10-01
--end 2026-11-01``.

kubernetes and vllm-tokens read every cluster's Prometheus, each distinct URL once
(:mod:`billing.services.prometheus_meters`: ``Cluster.prometheus_url``, blank =
``settings.PROMETHEUS_URL``); ``--cluster SLUG`` only the one that Kubernetes cluster reads (and
so every cluster sharing it); ``--prometheus-url`` reads that one (default: the environment's)
at the URL given instead. A Prometheus that cannot be reached is printed and the others are
imported (exit 1).

``--sacct-file`` reads ``sacct -P`` text instead of calling slurmrestd (rules in
:mod:`billing.sacct`): ``--time-zone`` is the zone of the machine that ran sacct (default the Slurm
connection's ``TIME_ZONE``, else UTC), ``--delimiter`` the one given to ``sacct --delimiter``,
``--time-format`` its ``SLURM_TIME_FORMAT``. Exit status 0 when nothing was reported, 1 when any
issue was (a rejected line, an unknown account, …), 2 on unusable arguments (an unknown time
zone, an unreadable file).
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

from django.core.management.base import BaseCommand
from django.utils import timezone

from billing.conf import billing_zone, slurm_time_zone_name
from billing.pricing import local_midnight
from billing.sacct import DEFAULT_DELIMITER, SacctFile, SacctUnusable
from billing.services.prometheus_import import usage_import_kubernetes, usage_import_vllm_tokens
from billing.services.prometheus_meters import usage_import_meters
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from pools.clusters.adapters import metrics_adapter, scheduler_config
from pools.clusters.models import Cluster
from pools.common.choices import Scheduler
from scheduler_adapters.registry import build_scheduler_adapter

# strptime directives that carry the year; SLURM_TIME_FORMAT may omit it ("%m/%d-%H:%M")
_YEAR_DIRECTIVES = ("%Y", "%y", "%F", "%D", "%c", "%x")


class Command(BaseCommand):
    help = "Import usage for a window [start, end) (dates in the billing time zone)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--source", choices=["reservation", "slurm", "kubernetes", "vllm-tokens"], required=True
        )
        parser.add_argument("--start", type=date.fromisoformat, required=True)
        parser.add_argument("--end", type=date.fromisoformat, required=True)
        parser.add_argument("--sacct-file", type=Path, help="sacct -P output to read")
        parser.add_argument(
            "--time-zone",
            help="IANA zone the sacct times are wall-clock times of (default: the Slurm "
            "connection's TIME_ZONE, else UTC)",
        )
        parser.add_argument(
            "--delimiter", help=f"field delimiter of the sacct file (default {DEFAULT_DELIMITER!r})"
        )
        parser.add_argument(
            "--time-format",
            help="SLURM_TIME_FORMAT the file was written with (strptime; default ISO 8601)",
        )
        parser.add_argument(
            "--prometheus-url",
            help="read the Prometheus of --cluster (default: the "
            "environment's, PROMETHEUS_URL) at this URL instead",
        )
        parser.add_argument(
            "--cluster",
            help="kubernetes / vllm-tokens: only the Prometheus this Kubernetes "
            "cluster (slug) reads",
        )

    def handle(
        self,
        *args,
        source,
        start,
        end,
        sacct_file,
        time_zone=None,
        delimiter=None,
        time_format=None,
        prometheus_url=None,
        cluster=None,
        **options,
    ):
        if not (source == "slurm" and sacct_file) and (time_zone or delimiter or time_format):
            self._usage("--time-zone, --delimiter and --time-format go with --sacct-file")
        if (cluster or prometheus_url) and source not in ("kubernetes", "vllm-tokens"):
            self._usage("--cluster and --prometheus-url go with kubernetes / vllm-tokens")
        zone = billing_zone()
        window = {"start": local_midnight(start, zone), "end": local_midnight(end, zone)}
        read_issues: list[dict] = []
        if source == "reservation":
            report = usage_import_reservations(**window)
        elif source in ("kubernetes", "vllm-tokens"):
            report = self._from_prometheus(source, window, cluster, prometheus_url)
        else:
            if sacct_file:
                adapter = self._sacct_file(sacct_file, time_zone, delimiter, time_format)
                read_issues = [issue.as_issue() for issue in adapter.issues]
            else:
                config = scheduler_config("slurm")
                if not config:
                    self._usage("no SCHEDULERS['slurm'] configured; pass --sacct-file")
                adapter = build_scheduler_adapter(config)
            report = usage_import_slurm(scheduler=adapter, read_issues=read_issues, **window)
        summary = (
            f"{source}: {report.records_created} created, {report.records_updated} updated, "
            f"{report.records_unchanged} unchanged, {report.flagged} flagged"
        )
        if sacct_file:
            summary += f", {adapter.rejected} line(s) rejected"
        self.stdout.write(summary)
        for issue in report.issues:
            self.stdout.write(f"  {_describe(issue)}")
        if report.issues:
            sys.exit(1)

    def _from_prometheus(self, source, window, slug, prometheus_url) -> _Summed:
        chosen = None
        if slug:
            chosen = Cluster.objects.filter(slug=slug).first()
            if chosen is None or chosen.kind != Scheduler.KUBERNETES:
                self._usage(f"--cluster {slug!r} is no Kubernetes cluster")
        importer = usage_import_kubernetes if source == "kubernetes" else usage_import_vllm_tokens
        imported = usage_import_meters(
            importers={source: importer},
            now=timezone.now(),
            cluster=chosen,
            read_url=prometheus_url,
            adapter_for=lambda url: metrics_adapter(url=url),
            **window,
        )
        if not imported.imports and not imported.failed:
            self._usage("no PROMETHEUS_URL configured; pass --prometheus-url")
        summed = _Summed(imported.imports)
        for failed in imported.failed:
            summed.issues.append({"prometheus": failed["url"], "code": "unreachable",
                                  "detail": failed["error"]})  # fmt: skip
        return summed

    def _sacct_file(
        self, path: Path, time_zone: str | None, delimiter: str | None, time_format: str | None
    ) -> SacctFile:
        name = time_zone or slurm_time_zone_name()
        try:
            zone = ZoneInfo(name)
        except (ValueError, KeyError):  # ZoneInfoNotFoundError is a KeyError
            where = "--time-zone" if time_zone else "SCHEDULERS['slurm']['TIME_ZONE']"
            self._usage(f"{where} {name!r} is not an IANA time zone (e.g. America/New_York)")
        if delimiter is not None and (not delimiter or "\n" in delimiter):
            self._usage("--delimiter must be one or more characters other than a newline")
        if time_format == "standard":  # SLURM_TIME_FORMAT's name for the default
            time_format = None
        if time_format is not None and not any(d in time_format for d in _YEAR_DIRECTIVES):
            self._usage(f"--time-format {time_format!r} has no year (%Y): times cannot be placed")
        try:
            text = path.read_text(encoding="utf-8-sig")  # a BOM would hide the header
        except (OSError, UnicodeDecodeError) as exc:
            self._usage(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
        try:
            return SacctFile(
                text,
                zone=zone,
                delimiter=delimiter or DEFAULT_DELIMITER,
                time_format=time_format,
            )
        except SacctUnusable as problem:
            self._usage(f"{path}: {problem}")

    def _usage(self, message: str):
        self.stderr.write(f"import_usage: {message}")
        sys.exit(2)


class _Summed:
    """The counts and issues of the imports of several Prometheus servers, added up."""

    def __init__(self, imports) -> None:
        self.records_created = sum(i.records_created for i in imports)
        self.records_updated = sum(i.records_updated for i in imports)
        self.records_unchanged = sum(i.records_unchanged for i in imports)
        self.flagged = sum(i.flagged for i in imports)
        self.issues = [issue for i in imports for issue in i.issues]


def _describe(issue: dict) -> str:
    """``line 7: too_many_fields: …`` / ``job 1001: unknown_account: …``."""
    if "line" in issue:
        where = f"line {issue['line']}"
    elif "job_id" in issue:
        where = f"job {issue['job_id']}"
    else:
        where = ", ".join(f"{k} {v}" for k, v in issue.items() if k not in ("code", "detail"))
    return f"{where}: {issue.get('code')}: {issue.get('detail')}"
