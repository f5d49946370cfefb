from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "GPU pools"

    def ready(self) -> None:
        """Register the sub-domains' Celery tasks in every process (web too), so services can
        queue them by name (:func:`pools.jobs.enqueue_on_commit`), and the catalogue as the
        scheduler adapters' GPU product -> card class source (card-class taints), and a new
        generation of the demand forecast's cached sums on every request saved or deleted, and
        of the dashboard plan's on every allocation saved or deleted."""
        from django.db.models.signals import post_delete, post_save

        from pools import tasks  # noqa: F401
        from pools.access import signals  # noqa: F401  (rights changed outside the services)
        from pools.capacity.generation import allocations_changed
        from pools.capacity.models import Allocation, CapacityRequest
        from pools.classes.selectors import catalogue_card_classes
        from pools.clusters import adapters
        from pools.dashboards.demand_history import requests_changed

        adapters.set_card_class_source(catalogue_card_classes)
        for signal in (post_save, post_delete):
            signal.connect(requests_changed, sender=CapacityRequest, dispatch_uid="demand-hours")
            signal.connect(allocations_changed, sender=Allocation, dispatch_uid="plan-held")
