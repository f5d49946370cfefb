"""``manage.py demo_clock``: the allocation lifecycle on a clock, for ``make demo``.

The demo runs no Celery beat, so nothing would open or close allocation windows: approved
allocations would stay "not yet applied" and ended ones would keep holding cards. This command
runs what beat's ``allocation-lifecycle`` task runs (:func:`allocation_lifecycle_sweep`:
provision the allocations whose window opens, warn before the end, end the finished ones)
every ``--every`` seconds (default ``settings.DEMO_CLOCK_S``, else 30) until stopped, and with
it what beat's ``override-expire`` task runs (:func:`override_expire_due`: temporary overrides
past their ``until`` expire and the scheduler objects are put back) and what beat's hourly
usage import runs for the month in progress (``settings.DEMO_CLOCK_USAGE``, billing's: this
month's reserved card-hours to now, so the cost so far moves), and prints one line for each
sweep that moved a window or an override. ``--once`` sweeps once and stops."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import import_string

from pools.capacity.services.allocations import allocation_lifecycle_sweep
from pools.overrides.services import override_expire_due


class Command(BaseCommand):
    help = (
        "Run the allocation lifecycle and override expiry every N seconds "
        "(make demo's stand-in for Celery beat)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--every", type=int, default=settings.DEMO_CLOCK_S or 30)
        parser.add_argument("--once", action="store_true")

    def handle(self, *args, every: int, once: bool, **options):
        if every < 1:
            raise CommandError("--every must be at least 1 second")
        accrue = import_string(settings.DEMO_CLOCK_USAGE) if settings.DEMO_CLOCK_USAGE else None
        while True:
            counts = allocation_lifecycle_sweep()
            overrides = override_expire_due()
            if accrue is not None:
                accrue()
            if any(counts.values()) or any(overrides.values()) or once:
                moved = ", ".join(f"{n} {what}" for what, n in counts.items())
                if any(overrides.values()):
                    moved += "; overrides: " + ", ".join(
                        f"{n} {what}" for what, n in overrides.items()
                    )
                self.stdout.write(f"demo clock: {moved}")
            if once:
                return
            time.sleep(every)
