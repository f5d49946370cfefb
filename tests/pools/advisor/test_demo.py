"""The demo's recorded series give the advisor at least five rules to fire (issue #31), with
evidence, and loading the demo again adds no pass and no finding."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from pools.advisor.models import AdvisorFinding, AdvisorRun
from pools.serving.models import ServingCoverage, ServingRollup

pytestmark = pytest.mark.django_db


def test_the_demo_fires_six_rules_with_evidence():
    """nlp's overloaded SGLang serving: queue avalanche, memory pressure, saturation; vision's
    elastic endpoint: scaling churn; nlp's A100 evaluation endpoint: memory decay and
    batching (pools.management.demo.demo_advisor_rollups). Whatever the hour: the window is a day,
    so both daily peaks are in it, and the last 45 minutes are the batching limit's."""
    call_command("load_demo", verbosity=0)
    live = AdvisorFinding.objects.exclude(status="closed")
    assert set(live.values_list("rule", flat=True)) == {
        "queue_avalanche",
        "memory_pressure",
        "saturation",
        "scaling_churn",
        "memory_decay",
        "batching",
    }
    assert all(f.evidence and f.fix for f in live)
    # every allocation with rollups is in /api/v1/serving/'s list, which joins the coverage
    # rows a pass writes beside them (nlp's A100 evaluation endpoint was missing from it)
    # (and vision's idle pre-training and nlp's retriever evaluation on the 4090s, whose rows are
    # the readings their idle findings were judged on)
    rolled_up = set(ServingRollup.objects.values_list("allocation_id", flat=True))
    assert len(rolled_up) == 5
    assert set(ServingCoverage.objects.values_list("allocation_id", flat=True)) == rolled_up
    assert AdvisorRun.objects.count() == 13  # every two hours over the last day, and now
    findings = AdvisorFinding.objects.count()
    call_command("load_demo", verbosity=0)
    assert (AdvisorRun.objects.count(), AdvisorFinding.objects.count()) == (13, findings)
