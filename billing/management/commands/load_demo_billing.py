"""``manage.py load_demo_billing``: demo rate card, six months of usage, draft statements."""

from django.core.management.base import BaseCommand

from billing.demo import demo_billing_load


class Command(BaseCommand):
    help = "Load demo billing data (after load_demo). Demo prices only; safe to run twice."

    def add_arguments(self, parser):
        parser.add_argument("--months", type=int, default=6)

    def handle(self, *args, months, **options):
        statements = demo_billing_load(months=months)
        for s in statements[-3:]:
            self.stdout.write(f"{s.team.slug} {s.month:%Y-%m}: {s.total_amount} {s.currency}")
        self.stdout.write(f"billing: {len(statements)} draft statements")
