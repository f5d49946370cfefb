"""Which cards a Slurm team uses, for the idle scan (:mod:`pools.reclamation.services.scan`).

Slurm allocations are account limits (``GrpTRES``), not cards: the cards a team uses are the
ones its account's jobs hold. The scheduler adapter names them (node, device index), and
dcgm-exporter's series of the same node and ``gpu`` index say what they did.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pools.inventory.models import Gpu, Pool
from pools.reclamation.evaluate import GroupEvaluation, Thresholds, Verdict, evaluate_job_cards
from scheduler_adapters.base import SchedulerAdapter
from scheduler_adapters.prometheus import DeviceUsage
from scheduler_adapters.records import JobPlacement, JobRecord

CardKey = tuple[str, int]
"""``(node name, device index)``: Slurm's node and ``IDX``, dcgm-exporter's host and ``gpu``."""


@dataclass(frozen=True)
class SlurmPoolJobs:
    """The jobs of one pool's partition that matter for a window ending now: those holding
    cards now, and those (of the scanned accounts) that ended within the window."""

    running: tuple[JobPlacement, ...]
    ended_in_window: tuple[JobRecord, ...]


def slurm_pool_jobs(
    adapter: SchedulerAdapter,
    pool: Pool,
    accounts: Sequence[str],
    *,
    start: datetime,
    end: datetime,
) -> SlurmPoolJobs:
    """Two adapter calls: running jobs of the pool's partition, and the accounts' jobs in
    slurmdbd accounting for ``[start, end]`` that have ended. Raises the adapter's
    :class:`~scheduler_adapters.errors.SchedulerError`."""
    partition = pool.slurm_partition or None
    running = adapter.running_gpu_jobs(partition)
    held_now = {job.job_id for job in running}
    history = adapter.jobs_from_accounting(start, end, accounts=list(accounts)) if accounts else ()
    ended = tuple(
        job
        for job in history
        if job.job_id not in held_now
        and job.end is not None
        and job.end >= start
        and (partition is None or job.partition == partition)
    )
    return SlurmPoolJobs(running, ended)


def series_by_card(devices: Iterable[DeviceUsage], pool_hosts: set[str]) -> dict[CardKey, list]:
    """Device-level series (no Kubernetes namespace) of the pool's nodes, by card; MIG
    instances of one card stay together."""
    cards: dict[CardKey, list[DeviceUsage]] = defaultdict(list)
    for device in devices:
        if device.namespace is not None or device.hostname not in pool_hosts:
            continue
        if device.gpu is None or not (device.gpu.isascii() and device.gpu.isdigit()):
            continue
        cards[(device.hostname, int(device.gpu))].append(device)
    return cards


def card_models(pool: Pool) -> dict[CardKey, int | None]:
    """The GPU model of every card of the pool's inventory (``None``: unrecognised)."""
    return {
        (hostname, index): model_id
        for hostname, index, model_id in Gpu.objects.filter(node__pool=pool).values_list(
            "node__hostname", "index", "gpu_model_id"
        )
    }


def evaluate_slurm_group(
    *,
    jobs: SlurmPoolJobs,
    account: str,
    gres_type: str,
    gpu_model_id: int,
    models: Mapping[CardKey, int | None],
    pool_hosts: set[str],
    series: Mapping[CardKey, Sequence[DeviceUsage]],
    held: int,
    window_start: datetime,
    end: datetime,
    t: Thresholds,
) -> GroupEvaluation:
    """One team's (``account``) cards of one model (``gres_type``, the inventory's
    ``gpu_model_id`` for untyped GRES) in one pool; see
    :func:`pools.reclamation.evaluate.evaluate_job_cards`. A job of the account whose cards
    Slurm could not name makes the group unknown: which cards it uses cannot be guessed."""

    def ours(node: str, index: int, slot_type: str | None) -> bool:
        if node not in pool_hosts:
            return False
        if slot_type is not None:
            return slot_type == gres_type
        return models.get((node, index)) == gpu_model_id

    judged: list[tuple[str, Sequence[DeviceUsage]]] = []
    recent = 0
    for job in jobs.running:
        if job.account != account:
            continue
        if not job.placed:
            reason = f"Slurm did not say which cards job {job.job_id} of {account} holds"
            return GroupEvaluation(Verdict.UNKNOWN, (), 0, False, None, reason)
        slots = [s for s in job.slots if ours(s.node, s.index, s.gres_type)]
        if job.start is None or job.start > window_start:
            recent += len(slots)
            continue
        judged.extend((f"{s.node}:{s.index}", series.get((s.node, s.index), ())) for s in slots)
    for job in jobs.ended_in_window:
        if job.account == account:  # untyped cards too: the model cannot be told, so in use
            recent += job.gpus_allocated.get(gres_type, 0) + job.gpus_allocated.get(None, 0)
    return evaluate_job_cards(judged, held=held, recent_cards=recent, end=end.timestamp(), t=t)
