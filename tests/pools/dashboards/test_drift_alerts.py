"""The admin dashboard's drift alerts list what the allocation panel lists: the newest drift of
each object (scheduler, team, subject) when it is not repaired. A drift a later reconcile
repaired used to stay on the dashboard for ever."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from factories import SchedulerDriftFactory, TeamFactory

from pools.capacity.models import SchedulerDrift
from pools.common.choices import Scheduler
from pools.dashboards.capacity import dashboard_alerts

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _drift(subject, minutes, *, repaired, team=None, scheduler=Scheduler.SLURM):
    drift = SchedulerDriftFactory(
        subject=subject, repaired=repaired, team=team, scheduler=scheduler
    )
    at = T0 + timedelta(minutes=minutes)
    SchedulerDrift.objects.filter(pk=drift.pk).update(detected_at=at)  # auto_now_add
    return drift.pk


def test_only_the_newest_unrepaired_drift_of_each_object_is_an_alert():
    vision, nlp = TeamFactory(slug="vision"), TeamFactory(slug="nlp")
    cap = "account vision GrpTRES gres/gpu:a100"
    # The cap: refused at 0, repaired at 10 -> no alert (the old list kept the first).
    _drift(cap, 0, repaired=False, team=vision)
    _drift(cap, 10, repaired=True, team=vision)
    # The same subject of another team is another object: refused at 5 -> an alert.
    nlp_cap = _drift(cap, 5, repaired=False, team=nlp)
    # A reservation refused at 1 and again at 20 -> one alert, the one at 20.
    _drift("reservation r-1", 1, repaired=False, team=vision)
    refused_again = _drift("reservation r-1", 20, repaired=False, team=vision)
    # Repaired at 2, refused at 30 -> an alert.
    _drift("reservation r-2", 2, repaired=True, team=vision)
    refused_later = _drift("reservation r-2", 30, repaired=False, team=vision)
    # The same subject in Kubernetes is another object: refused at 3 -> an alert.
    kube = _drift(cap, 3, repaired=False, team=vision, scheduler=Scheduler.KUBERNETES)
    # No team: refused at 4, repaired at 6 -> no alert; refused at 7 with no later one -> one.
    _drift("account orphan GrpTRES gres/gpu:a100", 4, repaired=False)
    _drift("account orphan GrpTRES gres/gpu:a100", 6, repaired=True)
    orphan = _drift("account gone GrpTRES gres/gpu:a100", 7, repaired=False)

    alerts = dashboard_alerts(now=timezone.now(), limit=10)

    # Newest first: 30, 20, 7, 5, 3.
    assert [d.pk for d in alerts.drifts] == [refused_later, refused_again, orphan, nlp_cap, kube]
    assert alerts.drift_count == 5


def test_the_count_is_of_every_alert_beyond_the_limit():
    for n in range(3):
        _drift(f"reservation r-{n}", n, repaired=False)
    _drift("reservation r-0", 9, repaired=True)  # r-0 repaired since
    alerts = dashboard_alerts(now=timezone.now(), limit=1)
    assert len(alerts.drifts) == 1
    assert alerts.drift_count == 2
