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
