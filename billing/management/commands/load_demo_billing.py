"""``manage.py load_demo_billing``: demo rate card, six months of usage, draft statements of the
closed months, and this month's usage so far (previewed, not drafted)."""

from django.core.management.base import BaseCommand
from django.utils import timezone

from billing.conf import billing_zone
from billing.demo import demo_billing_load
from billing.pricing import month_of
from billing.services.statements import statement_preview
from pools.tenancy.models import Team


class Command(BaseCommand):
    help = "Load demo billing data (after load_demo). Demo prices only; safe to run twice."

    def add_arguments(self, parser):
        parser.add_argument("--months", type=int, default=6)

    def handle(self, *args, months, **options):
        now = timezone.now()
        statements = demo_billing_load(months=months, now=now)
        for s in statements[-3:]:
            self.stdout.write(f"{s.team.slug} {s.month:%Y-%m}: {s.total_amount} {s.currency}")
        self.stdout.write(f"billing: {len(statements)} draft statements")
        month = month_of(now, billing_zone())
        for team in Team.objects.order_by("slug"):
            preview, _lines = statement_preview(team=team, month=month, now=now)
            self.stdout.write(
                f"{team.slug} {month:%Y-%m} so far: {preview.total_amount} {preview.currency} "
                "(not drafted yet: previewed live)"
            )
