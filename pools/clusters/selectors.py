"""Read-side queries of clusters."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from pools.clusters.models import Cluster, ClusterError

ERROR_WINDOW = timedelta(hours=1)


def _count(relation: str, condition: Q | None = None) -> Subquery:
    """How many rows of the cluster's reverse ``relation`` (pools, drifts, errors) match
    ``condition``, as a scalar subquery of its own: figures counted through separate joins of
    one query would multiply each other."""
    counted = (
        Cluster.objects.filter(pk=OuterRef("pk"))
        .annotate(n=Count(relation, filter=condition))
        .values("n")
    )
    return Subquery(counted, output_field=IntegerField())


def _unrepaired_drifts() -> QuerySet:
    """The drifts :func:`pools.capacity.selectors.unrepaired_drifts` lists, from the model's
    queryset (``SchedulerDriftQuerySet.unrepaired``); the model is reached through the
    cluster's ``drifts`` relation: capacity sits above clusters and is not imported here."""
    return Cluster._meta.get_field("drifts").related_model.objects.unrepaired()


def cluster_list(*, now: datetime | None = None) -> QuerySet[Cluster]:
    """Every cluster by name, with its health figures; one query whatever the number of
    clusters:

    - ``pool_count``: its pools;
    - ``drift_count``: scheduler drifts found in it that reconcile could not repair and that are
      still the newest of their object — the dashboard's rows
      (:func:`pools.capacity.selectors.unrepaired_drifts`): a drift a later reconcile repaired
      no longer counts;
    - ``errors_last_hour``: :class:`ClusterError` rows (failed checks, reconciles, imports,
      idle scans) in the hour before ``now``;
    - ``last_error``: the newest error's message (any age, kept 7 days), or ``None``.
    """
    now = now or timezone.now()
    newest = (
        ClusterError.objects.filter(cluster=OuterRef("pk"))
        .order_by("-at", "-pk")
        .values("message")[:1]
    )
    return Cluster.objects.annotate(
        pool_count=_count("pools"),
        drift_count=_count("drifts", Q(drifts__in=_unrepaired_drifts())),
        errors_last_hour=_count("errors", Q(errors__at__gte=now - ERROR_WINDOW)),
        last_error=Subquery(newest),
    ).order_by("name", "pk")


def cluster_checks_pending() -> bool:
    """Whether any cluster has a connection check asked for and not yet recorded
    (``check_requested_at`` set): the clusters page polls while one is."""
    return Cluster.objects.filter(check_requested_at__isnull=False).exists()
