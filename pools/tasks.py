"""The app's task registry: Celery's autodiscovery imports ``pools.tasks``; each sub-domain
defines its own (``pools.capacity.tasks``, ``pools.sizing.tasks``, ``pools.reclamation.tasks``,
``pools.elastic.tasks``, ``pools.dashboards.tasks``, ``pools.serving.tasks``,
``pools.calibration.tasks``, ``pools.waiting.tasks``, ``pools.advisor.tasks``,
``pools.tokenflow.tasks``, ``pools.inventory.tasks``, ``pools.clusters.tasks``,
``pools.recurring.tasks``, ``pools.overrides.tasks``,
``pools.maintenance.tasks``), and the
outbox's drain (``pools.jobs.tasks``)."""

from pools.advisor import tasks as advisor_tasks
from pools.calibration import tasks as calibration_tasks
from pools.capacity import tasks as capacity_tasks
from pools.clusters import tasks as cluster_tasks
from pools.dashboards import tasks as dashboard_tasks
from pools.elastic import tasks as elastic_tasks
from pools.inventory import tasks as inventory_tasks
from pools.jobs import tasks as outbox_tasks
from pools.maintenance import tasks as maintenance_tasks
from pools.overrides import tasks as override_tasks
from pools.reclamation import tasks as reclamation_tasks
from pools.recurring import tasks as recurring_tasks
from pools.serving import tasks as serving_tasks
from pools.sizing import tasks as sizing_tasks
from pools.tokenflow import tasks as tokenflow_tasks
from pools.waiting import tasks as waiting_tasks

__all__ = [
    "advisor_tasks",
    "calibration_tasks",
    "capacity_tasks",
    "cluster_tasks",
    "dashboard_tasks",
    "elastic_tasks",
    "inventory_tasks",
    "maintenance_tasks",
    "outbox_tasks",
    "override_tasks",
    "reclamation_tasks",
    "recurring_tasks",
    "serving_tasks",
    "sizing_tasks",
    "waiting_tasks",
    "tokenflow_tasks",
]
