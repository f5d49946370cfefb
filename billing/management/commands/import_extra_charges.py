"""``manage.py import_extra_charges charges.csv``: shared storage (GB-month) and network egress
(GB) per team and pool, for the statements (:mod:`billing.services.extra_charges` describes the
columns). Prints what was written and every rejected line. Exit status 0 when every line was
imported, 1 when any was rejected (the rest is kept), 2 on an unreadable file or header."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand

from billing.services.extra_charges import extra_charges_import


class Command(BaseCommand):
    help = "Import storage / egress usage from a CSV (team,pool,charge,quantity,start,end)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, **options):
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
