"""Read-side queries of clusters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, IntegerField, Min, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from pools.clusters.models import CHECK_UNCLAIMED_AFTER, Cluster, ClusterError

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


# How often the clusters page asks for its table while a check is pending: every 3 s while one
# may land any moment; every 30 s once every pending one waits for a worker (nothing will land
# until one starts; beat queues a check of every cluster each 5 minutes). The portal's choice.
CHECK_POLL_S = 3
CHECK_POLL_UNCLAIMED_S = 30


@dataclass(frozen=True)
class PendingChecks:
    """Connection checks asked for and not recorded yet: ``pending`` clusters, ``unclaimed``
    of them waiting for a worker (:attr:`Cluster.check_unclaimed`), the ``oldest`` request
    (aware; ``None`` when none is pending)."""

    pending: int
    unclaimed: int
    oldest: datetime | None

    @property
    def poll_s(self) -> int | None:
        """Seconds until the page asks again; ``None``: nothing to wait for."""
        if not self.pending:
            return None
        return CHECK_POLL_UNCLAIMED_S if self.unclaimed == self.pending else CHECK_POLL_S


def cluster_checks_pending(*, now: datetime | None = None) -> PendingChecks:
    """The clusters whose connection check is asked for and not recorded yet
    (``check_requested_at`` set), in one query: the clusters page polls while there are any."""
    now = now or timezone.now()
    unclaimed = Q(check_started_at__isnull=True, check_requested_at__lt=now - CHECK_UNCLAIMED_AFTER)
    figures = Cluster.objects.filter(check_requested_at__isnull=False).aggregate(
        pending=Count("pk"),
        unclaimed=Count("pk", filter=unclaimed),
        oldest=Min("check_requested_at"),
    )
    return PendingChecks(**figures)
