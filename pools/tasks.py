"""The app's task registry: Celery's autodiscovery imports ``pools.tasks``; each sub-domain
defines its own (``pools.capacity.tasks``, ``pools.sizing.tasks``, ``pools.reclamation.tasks``)."""

from pools.capacity import tasks as capacity_tasks
from pools.reclamation import tasks as reclamation_tasks
from pools.sizing import tasks as sizing_tasks

__all__ = ["capacity_tasks", "reclamation_tasks", "sizing_tasks"]
