from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "GPU pools"

    def ready(self) -> None:
        """Register the sub-domains' Celery tasks in every process (web too), so services can
        queue them by name (:func:`pools.jobs.enqueue_on_commit`), and the catalogue as the
        scheduler adapters' GPU product -> card class source (card-class taints)."""
        from pools import tasks  # noqa: F401
        from pools.access import signals  # noqa: F401  (rights changed outside the services)
        from pools.classes.selectors import catalogue_card_classes
        from pools.clusters import adapters

        adapters.set_card_class_source(catalogue_card_classes)
