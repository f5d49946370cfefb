"""Workload classes as Slurm QOS (issue #36): one QOS per class, named ``portal-<slug>``, whose
priority is the class's and whose ``Preempt`` list names every class of a lower preemption
order (https://slurm.schedmd.com/preempt.html, ``PreemptType=preempt/qos``). Plain data here;
:mod:`pools.capacity.services.class_qos` writes it through the pool's cluster adapter."""

from __future__ import annotations

from collections.abc import Iterable

from pools.classes.models import WorkloadClass
from scheduler_adapters.records import QosSpec

QOS_PREFIX = "portal-"
PREEMPT_MODE = "REQUEUE"
"""What a preempted job of a portal class undergoes: requeued (it runs again when the cards come
back, as the batch job did on the test clusters), never cancelled, so no class loses work it can
redo; Slurm's default for requeueable batch jobs."""


def class_qos_name(slug: str) -> str:
    """The QOS of the class ``slug``: ``"portal-production"``."""
    return f"{QOS_PREFIX}{slug}"


def class_qos_specs(classes: Iterable[WorkloadClass]) -> list[QosSpec]:
    """One :class:`QosSpec` per class, the lowest preemption order first (the order they must
    be written in: a QOS's Preempt list may only name QOS that exist). Each may preempt every
    class of a lower order; its priority is the class's (a plain number, higher first)."""
    ordered = sorted(classes, key=lambda c: c.preemption_order)
    specs = []
    for index, workload_class in enumerate(ordered):
        specs.append(
            QosSpec(
                name=class_qos_name(workload_class.slug),
                priority=workload_class.priority,
                preempts=tuple(sorted(class_qos_name(c.slug) for c in ordered[:index])),
                preempt_mode=PREEMPT_MODE,
                description=f"gpu-pool-portal workload class {workload_class.name}"[:100],
            )
        )
    return specs
