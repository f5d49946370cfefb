"""``manage.py close_month [--month 2026-10]``: build and finalize every team's statement."""

from __future__ import annotations

from datetime import date

from django.core.management.base import BaseCommand

from billing.services.statements import statements_close_month


class Command(BaseCommand):
    help = "Close a billing month (default: the previous one). Safe to run twice."

    def add_arguments(self, parser):
        parser.add_argument("--month", type=lambda s: date.fromisoformat(f"{s}-01"))

    def handle(self, *args, month, **options):
        for s in statements_close_month(month=month):
            self.stdout.write(f"{s.team.slug} {s.month:%Y-%m} {s.total_amount} {s.currency}")
