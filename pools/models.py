"""The app's model registry: Django loads ``pools.models``, and each sub-domain defines its own.

Code imports a model from its sub-domain (``pools.inventory.models``, ``pools.capacity.models`` …);
this module only makes every model known to Django under the ``pools`` app label. Tables keep
their names (``pools_<model>``), so moving a model between sub-domains needs no migration.
"""

from pools.access.models import ApiToken
from pools.advisor.models import AdvisorDigestOptIn, AdvisorFinding, AdvisorRun
from pools.audit.models import AuditEvent
from pools.calendar.models import TeamCalendarFeed
from pools.capacity.models import Allocation, CapacityRequest, PlacedCards, SchedulerDrift
from pools.classes.models import WorkloadClass
from pools.clusters.models import Cluster, ClusterError
from pools.elastic.models import BurstOptIn, ElasticPolicy, ElasticWhatIf, ScaleEvent
from pools.inventory.models import (
    DriverGroup,
    Gpu,
    GpuModel,
    GpuModelAlias,
    InventoryImport,
    MigDevice,
    Node,
    Pool,
)
from pools.jobs.models import QueuedJob
from pools.maintenance.models import MaintenanceWindow
from pools.overrides.models import TemporaryOverride
from pools.reclamation.models import (
    Exemption,
    IdleFinding,
    IdleGroupEvaluation,
    IdleScanRun,
    ReclamationPolicy,
    ReclamationWhatIf,
)
from pools.recurring.models import RecurringReservation
from pools.serving.models import (
    ServedModel,
    ServingCalibrationDay,
    ServingCoverage,
    ServingRollup,
    ServingRollupRun,
)
from pools.sizing.models import CalibrationRecord, SizingEstimate
from pools.tenancy.models import Membership, Team
from pools.tokenflow.models import AgentCall, AgentTask, AgentTaskDay
from pools.waiting.models import PendingWork, PendingWorkRead, WaitingWatch

__all__ = [
    "WorkloadClass",
    "PendingWork",
    "RecurringReservation",
    "PendingWorkRead",
    "WaitingWatch",
    "AdvisorDigestOptIn",
    "AdvisorFinding",
    "AdvisorRun",
    "AgentCall",
    "AgentTask",
    "AgentTaskDay",
    "Allocation",
    "ApiToken",
    "AuditEvent",
    "CalibrationRecord",
    "CapacityRequest",
    "Cluster",
    "ClusterError",
    "DriverGroup",
    "BurstOptIn",
    "ElasticPolicy",
    "ElasticWhatIf",
    "Exemption",
    "Gpu",
    "GpuModel",
    "GpuModelAlias",
    "IdleFinding",
    "IdleGroupEvaluation",
    "IdleScanRun",
    "InventoryImport",
    "MaintenanceWindow",
    "Membership",
    "MigDevice",
    "Node",
    "PlacedCards",
    "Pool",
    "QueuedJob",
    "ReclamationPolicy",
    "ReclamationWhatIf",
    "ScaleEvent",
    "SchedulerDrift",
    "ServedModel",
    "TemporaryOverride",
    "ServingCalibrationDay",
    "ServingCoverage",
    "ServingRollup",
    "ServingRollupRun",
    "SizingEstimate",
    "Team",
    "TeamCalendarFeed",
]
