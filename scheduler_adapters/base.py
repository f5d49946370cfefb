"""The interfaces scheduler adapters offer: :class:`SchedulerAdapter` for batch schedulers
(Slurm) and :class:`NamespaceQuotaAdapter` for Kubernetes namespaces.

Implemented by :class:`~scheduler_adapters.slurm.client.SlurmRestAdapter` (slurmrestd) and
:class:`~scheduler_adapters.fake.FakeScheduler` (in memory, for unit tests); both pass the
contract tests in ``tests/scheduler_adapters/contract/``.

Rules every implementation keeps:

- **Idempotent writes.** ``ensure_*``, ``set_gpu_limit``, ``remove_gpu_limit`` and
  ``cancel_job`` may be called any number of times; the second call changes nothing and does
  not fail. They return ``True`` when they changed something, ``False`` when it was already so.
  ``submit_job`` is the one call that is not idempotent: each call is a new job.
- **Errors** come from :mod:`scheduler_adapters.errors` only: :class:`SchedulerUnavailable`
  (transient: down, timed out), :class:`SchedulerAuthError`, :class:`SchedulerRejected` (the
  scheduler's error numbers kept), :class:`NotFound`, :class:`UnexpectedResponse`. A name the
  scheduler would mangle raises ``ValueError`` before anything is sent.
- **No partial limits.** A limit change is read back; when the scheduler did not apply it the
  call raises instead of returning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol, runtime_checkable

from scheduler_adapters.records import (
    AccountQos,
    GpuLimit,
    JobPlacement,
    JobQueue,
    JobRecord,
    JobSpec,
    QosSpec,
    ReservationRecord,
    ReservationSpec,
)
from scheduler_adapters.types import KueueCohort, ParseResult


@runtime_checkable
class ReservationAdapter(Protocol):
    """Advance reservations of whole nodes for an account (Slurm: ``scontrol create
    reservation``); what makes a placement shape real in the scheduler. Idempotent like the
    rest: ``create_reservation`` returns ``False`` when the same reservation exists and raises
    SchedulerRejected when one by that name exists with other values; ``delete_reservation``
    returns ``False`` when there was none, and ends the reservation within the coming second
    instead when a job (running or pending) still ties it, whatever the timing: before its
    start, in its first second or later (:mod:`scheduler_adapters.slurm.reservations`)."""

    def create_reservation(self, spec: ReservationSpec) -> bool: ...

    def delete_reservation(self, name: str) -> bool: ...

    def get_reservation(self, name: str) -> ReservationRecord | None: ...


@runtime_checkable
class QosAdapter(Protocol):
    """Slurm QOS, one per workload class (issue #36), and the QOS an account may use; written
    and read back like every other object the portal owns. ``ensure_qos`` raises NotFound
    when a QOS it preempts does not exist; ``set_account_qos`` when a QOS or the account does
    not; both return ``False`` when nothing had to change."""

    def ensure_qos(self, spec: QosSpec) -> bool: ...

    def get_qos(self, name: str) -> QosSpec | None: ...

    def set_account_qos(self, wanted: AccountQos) -> bool: ...

    def get_account_qos(self, account: str) -> AccountQos: ...

    def account_qos_refusal(self) -> str | None:
        """Why an account's QOS list cannot be written here (``None``: it can), known without
        writing: asked before the first write of a change, so nothing is half-applied."""
        ...


@runtime_checkable
class SchedulerAdapter(Protocol):
    """Accounts, GPU limits and jobs of one batch-scheduler cluster."""

    def list_nodes(self) -> ParseResult:
        """Every node with its GPUs (one ``GpuSnapshot`` per card, model = GRES type), state and
        partitions. Unreadable nodes become issues, not errors.

        Raises SchedulerUnavailable, SchedulerAuthError, UnexpectedResponse.
        """
        ...

    def ensure_account(self, account: str, *, description: str, organization: str) -> bool:
        """Make the account exist under the configured parent, with this description and
        organization; ``True`` when the account or its association was created.

        Raises SchedulerUnavailable, SchedulerAuthError, SchedulerRejected.
        """
        ...

    def ensure_user_association(self, account: str, user: str, partition: str) -> bool:
        """Let ``user`` run jobs under ``account`` in ``partition`` (a user association);
        ``True`` when it was created.

        Raises NotFound (account or partition missing), SchedulerUnavailable,
        SchedulerAuthError, SchedulerRejected.
        """
        ...

    def set_gpu_limit(self, limit: GpuLimit) -> bool:
        """Cap the account at ``limit.cards`` cards of ``limit.gres_type`` (0 means none may
        run), leaving its limits on other types as they are; ``True`` when it changed.

        Raises NotFound (account or partition missing), SchedulerRejected (the partition has
        no such GPU type; with ``transient=True`` when the scheduler accepted the change but
        did not apply it, even after retries), SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def remove_gpu_limit(self, account: str, partition: str | None, gres_type: str) -> bool:
        """Lift the account's cap on ``gres_type``, so that jobs held by it can start; ``True``
        when there was one. A missing account has no limit, so it gives ``False``, not NotFound.

        Raises SchedulerUnavailable, SchedulerAuthError, SchedulerRejected (as for
        :meth:`set_gpu_limit`).
        """
        ...

    def set_gpu_minutes(self, account: str, gres_type: str | None, minutes: int | None) -> bool:
        """Cap what the account may still use of ``gres/gpu:<type>`` (untyped: every GPU) at
        ``minutes`` card-minutes (Slurm's GrpTRESMins), or lift that cap (``None``); other
        limits stay. ``True`` when it changed.

        Raises NotFound (no account), SchedulerRejected (the scheduler does not account that
        TRES, or cannot set such a limit: then the portal alone enforces the budget),
        SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def get_gpu_minutes(self, account: str) -> dict[str, int]:
        """The account's GPU minute caps by TRES name (``{"gres/gpu:a100": 120000}``).

        Raises NotFound (no account), SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def get_gpu_minutes_used(self, account: str) -> dict[str, float] | None:
        """What the scheduler counts against the account's minute caps now, in card-minutes
        by TRES name; ``None`` when it cannot say (then a cap counts from 0).

        Raises SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def get_gpu_limits(self, account: str) -> tuple[GpuLimit, ...]:
        """The account's GPU caps, one per GRES type, sorted by type.

        Raises NotFound (no such account), SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def submit_job(self, spec: JobSpec) -> int:
        """Queue a batch job as ``spec.user``; returns the job id. Not idempotent.

        Raises SchedulerRejected (no association: Slurm 2045; no such GPU type or too many
        cards: 2014; bad partition: 2000), SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def cancel_job(self, job_id: int) -> None:
        """Cancel the job; cancelling a finished job does nothing.

        Raises NotFound (unknown id), SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def get_job(self, job_id: int) -> JobRecord:
        """The job as the controller sees it now, or from accounting once the controller has
        forgotten it.

        Raises NotFound, SchedulerUnavailable, SchedulerAuthError, UnexpectedResponse.
        """
        ...

    def running_gpu_jobs(self, partition: str | None = None) -> tuple[JobPlacement, ...]:
        """Jobs holding GPUs now (running, suspended, completing), optionally only those of
        ``partition``, each with the cards (node, device index) it holds; sorted by job id.

        Raises ValueError (bad partition name), SchedulerUnavailable, SchedulerAuthError,
        UnexpectedResponse.
        """
        ...

    def job_queue(self, accounts: Sequence[str] | None = None) -> JobQueue:
        """The pending jobs with Slurm's reason and the jobs holding GPUs with their expected
        end, of ``accounts`` when given; one read of the controller's job list.

        Raises ValueError (bad account name), SchedulerUnavailable, SchedulerAuthError,
        UnexpectedResponse.
        """
        ...

    def jobs_from_accounting(
        self, start: datetime, end: datetime, *, accounts: Sequence[str] | None = None
    ) -> tuple[JobRecord, ...]:
        """Jobs that existed at any time in ``[start, end]`` (aware datetimes), from the
        accounting database, optionally only of ``accounts``; sorted by job id. Nothing
        found gives ``()``.

        Raises ValueError (naive datetimes, end before start), SchedulerUnavailable,
        SchedulerAuthError, UnexpectedResponse.
        """
        ...

    def close(self) -> None:
        """Release connections; the adapter is not used afterwards."""
        ...


@dataclass(frozen=True)
class NamespaceGpuQuota:
    """A team's GPU quota as the cluster holds it (``get_gpu_quota``).

    ``cards`` is the ResourceQuota's ``requests.nvidia.com/gpu`` (all GPU models together);
    ``None`` when the namespace has no portal ResourceQuota, which means no GPU limit at all.
    Cards are an ``int``, or the exact ``Decimal`` of a fractional quantity someone set by
    hand (``1.5``, which the API server holds as ``1500m``): never equal to what the portal
    writes, so read as a drift.
    ``cards_by_product`` is keyed by the ``nvidia.com/gpu.product`` node label: with
    ``kueue=True`` the ClusterQueue's ``nominalQuota`` per ResourceFlavor (enforced by Kueue);
    without Kueue the split the portal recorded on the ResourceQuota (not enforced per model,
    only the total is); ``None`` when the cluster holds no such record.
    """

    team: str
    namespace: str
    cards: int | Decimal | None
    cards_by_product: Mapping[str, int | Decimal] | None
    kueue: bool


@runtime_checkable
class NamespaceQuotaAdapter(Protocol):
    """GPU quotas of teams in one Kubernetes cluster: one namespace per team.

    Implemented by :class:`~scheduler_adapters.kubernetes.KubernetesAdapter` (the API server)
    and :class:`~scheduler_adapters.kubernetes_fake.FakeKubernetes` (in memory); both pass
    the contract tests in ``tests/scheduler_adapters/kubernetes/test_contract.py``.

    ``team`` is the portal's team slug; the namespace is a configured prefix plus the slug.
    ``gpu_quota`` maps a GPU product label (``nvidia.com/gpu.product``, e.g.
    ``"NVIDIA-A100-SXM4-80GB"``) to whole cards. ``kueue`` chooses per-model caps through
    Kueue; ``None`` takes the adapter's configured default.

    The same rules as :class:`SchedulerAdapter`: writes are idempotent and return ``True``
    only when they changed something (a second identical call sends no write at all);
    errors come from :mod:`scheduler_adapters.errors`; a name Kubernetes would reject raises
    ``ValueError`` before anything is sent.
    """

    def list_nodes(self) -> ParseResult:
        """Every node with its GPUs, from GPU Feature Discovery labels and allocatable.

        Raises SchedulerUnavailable, SchedulerAuthError, UnexpectedResponse.
        """
        ...

    def ensure_team(
        self,
        team: str,
        *,
        group: str,
        gpu_quota: Mapping[str, int],
        kueue: bool | None = None,
        cohort: KueueCohort | None = None,
        mig_quota: Mapping[str, int] | None = None,
    ) -> bool:
        """Make the team's namespace, GPU ResourceQuota, LimitRange and the RoleBinding of
        ``group`` to the ``edit`` ClusterRole exist as given (with Kueue: a ResourceFlavor per
        product, the team's ClusterQueue and a LocalQueue); ``True`` when anything changed.
        ``cohort``: the ClusterQueue's Kueue cohort and borrowing (elastic allocations; it
        implies Kueue). ``mig_quota``: MIG slices per profile under the mixed strategy, quota'd
        as ``requests.nvidia.com/mig-<profile>`` (slices under the single strategy are
        ``nvidia.com/gpu`` of a ``<product>-MIG-<profile>`` product, in ``gpu_quota``).

        Raises SchedulerRejected (the API refused an object; also a namespace that belongs to
        another team), SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def set_gpu_quota(
        self, team: str, gpu_quota: Mapping[str, int], *, kueue: bool | None = None
    ) -> bool:
        """Raise or lower the team's GPU quota to exactly ``gpu_quota``; ``True`` when changed.

        Raises NotFound (no namespace: call ``ensure_team`` first), SchedulerRejected (also
        a namespace of another team), SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def remove_team_quota(self, team: str, *, kueue: bool | None = None) -> bool:
        """Lower the team's GPU quota to 0 and keep the namespace and what runs in it;
        ``True`` when it changed. A missing namespace has nothing to remove: ``False``.

        Raises SchedulerRejected, SchedulerUnavailable, SchedulerAuthError.
        """
        ...

    def get_gpu_quota(self, team: str, *, kueue: bool | None = None) -> NamespaceGpuQuota:
        """The team's GPU quota as the cluster holds it now.

        Raises NotFound (no namespace), SchedulerRejected (the namespace belongs to another
        team), SchedulerUnavailable, SchedulerAuthError, UnexpectedResponse.
        """
        ...

    def render_manifests(
        self,
        team: str,
        *,
        group: str,
        gpu_quota: Mapping[str, int],
        kueue: bool | None = None,
    ) -> str:
        """The objects ``ensure_team`` would apply, as multi-document YAML for
        ``kubectl apply --server-side -f``; sends nothing."""
        ...

    def close(self) -> None:
        """Release connections; the adapter is not used afterwards."""
        ...
