from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        """Register billing's Celery tasks in every process (web too), so budget services can
        queue the Slurm GrpTRESMins sync by name (:func:`pools.jobs.enqueue_on_commit`)."""
        from billing import tasks  # noqa: F401
