from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        """Register billing's Celery tasks in every process (web too), so budget services can
        queue the Slurm GrpTRESMins sync by name (:func:`pools.jobs.enqueue_on_commit`), and a
        new generation of the finance month's cached sums on every statement saved or deleted,
        statement line saved, or team saved (:mod:`billing.generation` says why not more)."""
        from django.db.models.signals import post_delete, post_save

        from billing import tasks  # noqa: F401
        from billing.generation import statements_changed
        from billing.models import Statement, StatementLine
        from pools.tenancy.models import Team

        for signal in (post_save, post_delete):
            signal.connect(statements_changed, sender=Statement, dispatch_uid="statements-sums")
        post_save.connect(statements_changed, sender=StatementLine, dispatch_uid="line-sums")
        post_save.connect(statements_changed, sender=Team, dispatch_uid="team-statement-sums")
