from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "GPU pools"

    def ready(self) -> None:
        """Register the sub-domains' Celery tasks in every process (web too), so services can
        queue them by name (:func:`pools.jobs.enqueue_on_commit`)."""
        from pools import tasks  # noqa: F401
        from pools.access import signals  # noqa: F401  (rights changed outside the services)
