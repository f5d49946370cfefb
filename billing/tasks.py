"""Celery tasks of billing: thin callers of services, safe to run twice."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from celery import shared_task
from django.utils import timezone

from billing.budgets.alerts import budget_alerts_send
from billing.budgets.slurm import budget_minutes_sync, budget_minutes_sync_all
from billing.conf import billing_zone
from billing.services.cluster_usage import (
    usage_import_cluster,
    usage_import_clusters_here,
    usage_import_clusters_queue,
    usage_import_environment_recorded,
)
from billing.services.extra_charges_prometheus import (
    configured_charges,
    extra_charges_import_prometheus,
)
from billing.services.prometheus_import import usage_import_kubernetes, usage_import_vllm_tokens
from billing.services.prometheus_meters import usage_import_meters
from billing.services.shared_card_import import shared_card_usage_import
from billing.services.statements import statements_close_month
from billing.services.usage_import import (
    usage_import_elastic_burst,
    usage_import_reservations,
    usage_import_slurm,
)
from pools.clusters.adapters import metrics_adapter, scheduler_config
from pools.tenancy.models import Team
from scheduler_adapters.errors import SchedulerError, SchedulerUnavailable
from scheduler_adapters.registry import build_scheduler_adapter


@shared_task(acks_late=True)
def statements_close_month_task() -> list[int]:
    """Beat (hourly): on the 1st in the billing time zone, import the last days' usage and close
    the previous month. Other days do nothing; closing twice changes nothing."""
    now = timezone.now()
    if now.astimezone(billing_zone()).day != 1:
        return []
    usage_import_task(hours=72, fan_out=False)
    return [s.pk for s in statements_close_month(now=now)]


@shared_task(
    acks_late=True,
    autoretry_for=(SchedulerUnavailable,),
    retry_backoff=True,
    max_retries=6,
)
def usage_import_task(hours: int = 48, fan_out: bool = True) -> dict[str, int]:
    """Import reservations, elastic burst and the environment's Slurm accounting of the last
    ``hours`` (overlapping windows are harmless: records are keyed independently of the
    window), and queue one import per Slurm cluster kept as data (``fan_out``; else import
    them here, one after the other, as the month close needs)."""
    end = timezone.now()
    start = end - timedelta(hours=hours)
    counts = {"reservation": usage_import_reservations(start=start, end=end).records_created}
    counts["elastic-burst"] = usage_import_elastic_burst(start=start, end=end).records_created
    config = scheduler_config("slurm")
    if config:
        adapter = build_scheduler_adapter(config)  # its own connection, closed below
        try:
            counts["slurm"] = usage_import_slurm(
                scheduler=adapter, start=start, end=end
            ).records_created
        except SchedulerError as error:
            usage_import_environment_recorded(error=error)
            raise
        finally:
            adapter.close()
        usage_import_environment_recorded()
    if fan_out:
        counts["clusters-queued"] = usage_import_clusters_queue(hours=hours)
    else:  # the month close needs every cluster's usage in before it closes
        counts |= usage_import_clusters_here(start=start, end=end)
    return counts


@shared_task(
    acks_late=True,
    autoretry_for=(SchedulerUnavailable,),
    retry_backoff=True,
    max_retries=6,
)
def usage_import_cluster_task(cluster_id: int, hours: int = 48) -> int | None:
    """Import the last ``hours`` of one Slurm cluster's accounting (kept as data); returns the
    records created (``None``: cluster gone or credentials unreadable — its health says so).
    Safe twice: records are keyed independently of the window."""
    end = timezone.now()
    imported = usage_import_cluster(
        cluster_id=cluster_id, start=end - timedelta(hours=hours), end=end
    )
    return None if imported is None else imported.records_created


@shared_task(
    acks_late=True,
    autoretry_for=(SchedulerUnavailable,),
    retry_backoff=True,
    max_retries=6,
)
def usage_import_prometheus_task(hours: int = 48) -> dict[str, int]:
    """Import Kubernetes GPU requests and vLLM token counters of the last ``hours`` from every
    cluster's Prometheus, each distinct URL once (:mod:`billing.services.prometheus_meters`:
    ``Cluster.prometheus_url``, blank = ``settings.PROMETHEUS_URL``; no URL anywhere: nothing),
    and pods on shared cards' replicas (:mod:`billing.services.shared_card_import`) from
    ``settings.PROMETHEUS_URL``. Records are keyed by cluster and billing day, so overlapping
    windows are harmless. A Prometheus that cannot be reached is kept as its clusters' error
    and the others are imported; then :class:`SchedulerUnavailable` is raised so the task is
    retried (safe: nothing is counted twice)."""
    end = timezone.now()
    start = end - timedelta(hours=hours)
    imported = usage_import_meters(
        importers={"kubernetes": usage_import_kubernetes, "vllm-tokens": usage_import_vllm_tokens},
        start=start,
        end=end,
        now=end,
    )
    counts = dict(imported.created)
    metrics = metrics_adapter()
    if metrics is not None:
        try:
            counts["shared-cards"] = shared_card_usage_import(
                metrics=metrics, start=start, end=end
            ).records_created
        finally:
            metrics.close()
    _raise_if_transient(imported.failed)
    return counts


@shared_task(
    acks_late=True,
    autoretry_for=(SchedulerUnavailable,),
    retry_backoff=True,
    max_retries=6,
)
def extra_charges_prometheus_task(hours: int = 48) -> dict[str, int]:
    """Beat (hourly): storage and egress of every billing month the last ``hours`` touch, each
    month whole up to now, from every cluster's Prometheus, each distinct URL once
    (:mod:`billing.services.extra_charges_prometheus`, :mod:`billing.services.prometheus_meters`;
    no URL or no PromQL configured: nothing). One record per charge, team, cluster and month
    (and span, after a cluster's Prometheus changed): running it twice writes nothing new. A
    Prometheus that cannot be reached is its clusters' error, the others are imported, then
    :class:`SchedulerUnavailable` is raised so the task is retried."""
    charges = configured_charges()
    if not charges:
        return {}
    end = timezone.now()
    imported = usage_import_meters(
        importers={"extra": partial(extra_charges_import_prometheus, charges=charges)},
        start=end - timedelta(hours=hours),
        end=end,
        now=end,
    )
    _raise_if_transient(imported.failed)
    if not imported.imports:
        return {}
    return {
        "created": sum(i.records_created for i in imported.imports),
        "updated": sum(i.records_updated for i in imported.imports),
        "unchanged": sum(i.records_unchanged for i in imported.imports),
        "issues": sum(len(i.issues) for i in imported.imports),
    }


def _raise_if_transient(failed: list[dict]) -> None:
    """Raise :class:`SchedulerUnavailable` naming the Prometheus servers that could not be read
    when one may answer later (the task is then retried; what was read is kept)."""
    if any(f["transient"] for f in failed):
        names = "; ".join(f"{f['url']}: {f['error']}" for f in failed)
        raise SchedulerUnavailable(f"Prometheus not read, the others imported: {names}")


@shared_task(acks_late=True)
def budget_minutes_sync_task(team_id: int | None = None) -> dict:
    """Beat (hourly) and after every budget change (``team_id``): the teams' Slurm
    GrpTRESMins from their card-hour budgets (:mod:`billing.budgets.slurm`; safe to run twice,
    refusals are kept on the budgets, not raised)."""
    if team_id is None:
        return {str(k): v for k, v in budget_minutes_sync_all().items()}
    team = Team.objects.filter(pk=team_id).first()
    return {} if team is None else budget_minutes_sync(team=team)


@shared_task(acks_late=True)
def budget_alerts_task() -> list[int]:
    """Beat (hourly): e-mail managers each budget threshold newly reached (safe to run twice)."""
    return budget_alerts_send()
