"""The demo tells one story per allocation: an idle finding that says no card is in use stands
on an allocation whose serving page (its recorded rollups) shows it idle, and the allocation
the advisor reads as a busy endpoint (nlp's four A100) has no idle finding.

Before, the dry-run finding ("certainly idle", mean 0.66 %) stood on nlp's A100 fine-tune,
whose serving page showed about 60 % over the same hours."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from pools.advisor.models import AdvisorFinding
from pools.common.choices import IdleFindingState
from pools.reclamation.models import IdleFinding, ReclamationPolicy
from pools.serving.models import ServingRollup

pytestmark = pytest.mark.django_db


def test_the_demo_idle_finding_stands_on_an_allocation_its_serving_page_shows_idle():
    call_command("load_demo", stdout=StringIO())
    idle = IdleFinding.objects.filter(state=IdleFindingState.OPEN, cards_in_use=0)
    assert idle.count() == 1  # the dry-run finding, past its grace
    finding = idle.select_related("allocation__team", "allocation__pool").get()
    allocation = finding.allocation
    assert (allocation.team.slug, allocation.card_count) == ("vision", 16)
    assert finding.certainly_idle and finding.dry_run

    # what its serving page charts: the rollups from the finding's first sighting to its last
    rows = list(
        ServingRollup.objects.filter(
            allocation=allocation,
            bucket_start__gte=finding.first_seen_at,
            bucket_start__lt=finding.last_seen_at,
        )
    )
    assert len(rows) >= 12 * 29  # 5-minute buckets over the 30 h it has been seen idle
    mean = sum(r.gpu_util_pct for r in rows) / len(rows)
    policy = ReclamationPolicy.objects.get(pool=allocation.pool)
    # the fake dcgm-exporter's idle cards read 0, 0.5, 1 or 2 %: a mean near 0.7 %
    assert mean < float(policy.certainly_idle_below_pct)
    assert {r.cards_busy for r in rows} == {0.0}
    assert {r.cards_reporting for r in rows} == {16.0}
    # the finding's own mean (its last window) is read from the same samples
    assert abs(float(finding.mean_util_pct) - mean) < 1

    # nlp's A100 fine-tune, whose rows the advisor reads as a busy endpoint, has none
    advised = AdvisorFinding.objects.filter(rule="memory_decay").get().allocation
    assert (advised.team.slug, advised.pool.slug) == ("nlp", "train-slurm")
    busy = ServingRollup.objects.filter(allocation=advised)
    assert sum(r.gpu_util_pct for r in busy) / busy.count() > 50
    assert not IdleFinding.objects.filter(allocation=advised).exists()


def test_every_demo_finding_agrees_with_the_series_its_serving_page_reads():
    """For each idle finding the demo writes, the serving rollups of the policy's window before
    its last sighting are idle by the pool's rule (mean below ``idle_below_pct``), their mean is
    the finding's (both fold the same samples: within 1 point), no bucket has more busy cards
    than the finding says are in use, and no live advisor finding says the allocation's cards
    are saturated. A finding closed as busy again has a busy window before it closed. Before,
    the finding of nlp's 8 L40S said 12.95 % mean and 2 of 8 cards in use where its serving page
    showed 57 % and all 8 busy, under the advisor's "Sustained utilisation above 90 %"."""
    from datetime import timedelta

    call_command("load_demo", stdout=StringIO())
    findings = IdleFinding.objects.select_related("allocation__pool")
    assert findings.count() == 3
    for finding in findings:
        allocation = finding.allocation
        policy = ReclamationPolicy.objects.get(pool=allocation.pool)
        window = timedelta(minutes=policy.window_minutes)
        rows = list(
            ServingRollup.objects.filter(
                allocation=allocation,
                bucket_start__gte=finding.last_seen_at - window,
                bucket_start__lt=finding.last_seen_at - timedelta(minutes=5),
            )
        )
        assert len(rows) >= policy.window_minutes // 5 - 2, finding.pk
        mean = sum(r.gpu_util_pct for r in rows) / len(rows)
        assert mean < float(policy.idle_below_pct), finding.pk
        assert abs(float(finding.mean_util_pct) - mean) < 1, finding.pk
        assert max(r.cards_busy for r in rows) <= finding.cards_in_use, finding.pk
        assert not AdvisorFinding.objects.filter(
            allocation=allocation, rule="saturation", closed_at__isnull=True
        ).exists()
        if finding.state == IdleFindingState.RESOLVED:
            after = ServingRollup.objects.filter(
                allocation=allocation,
                bucket_start__gte=finding.closed_at - window,
                bucket_start__lt=finding.closed_at,
            )
            busy = sum(r.gpu_util_pct for r in after) / after.count()
            assert busy >= float(policy.idle_below_pct), finding.pk
    # the one the page counts down ("reclaim in 4 h 55 min", not a dry run) is nlp's retriever
    # evaluation: one of its four 4090s at work
    live = findings.get(state=IdleFindingState.OPEN, dry_run=False)
    assert (live.allocation.team.slug, live.allocation.pool.slug) == ("nlp", "dev-4090")
    assert (live.card_count, live.cards_in_use) == (4, 1)
