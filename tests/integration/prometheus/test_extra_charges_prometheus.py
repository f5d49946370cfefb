"""Storage and egress charges against a real Prometheus (Debian's 2.42) whose TSDB is
backfilled with four hours of PVC sizes (kube-state-metrics) and pod transmit counters
(cAdvisor) across the October/November boundary: 31 Oct 2026 22:00 → 1 Nov 02:00 UTC, one
sample every 15 s, both ends included (961 samples). Expected GB-months and GB worked out by
hand in the docstring. Missing Prometheus is a failure, never a skip."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.test import override_settings
from factories import TeamFactory
from integration.prometheus.server import backfilled_prometheus, openmetrics

from billing.choices import ChargeBasis, UsageSource
from billing.models import UsageRecord
from billing.services.extra_charges_prometheus import extra_charges_import_prometheus
from scheduler_adapters.prometheus import PrometheusAdapter

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

START = datetime(2026, 10, 31, 22, tzinfo=UTC)
END = datetime(2026, 11, 1, 2, tzinfo=UTC)
EVERY = 15
PVC = "kube_persistentvolumeclaim_resource_requests_storage_bytes"
SENT = "container_network_transmit_bytes_total"


def _history() -> str:
    t0, n = int(START.timestamp()), int((END - START).total_seconds()) // EVERY + 1
    families: dict[str, list[str]] = {PVC: [], SENT: []}

    def emit(metric, labels, value_at):
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        for i in range(n):
            value = value_at(i)
            if value is not None:
                families[metric].append(f"{metric}{{{text}}} {value} {t0 + i * EVERY}")

    emit(PVC, {"namespace": "team-nlp", "persistentvolumeclaim": "data"}, lambda i: 500 * 10**9)
    # 23:00 (i = 240) to 01:00 (i = 720, last sample 00:59:45), then deleted
    emit(PVC, {"namespace": "team-nlp", "persistentvolumeclaim": "scratch"},
         lambda i: 200 * 10**9 if 240 <= i < 720 else None)  # fmt: skip
    emit(PVC, {"namespace": "kube-system", "persistentvolumeclaim": "etcd"}, lambda i: 10**9)
    eth0 = {"interface": "eth0"}
    # api-0: +1 MB per scrape from 0; restarts at 00:30 (i = 600) having sent 5 MB since
    emit(SENT, {**eth0, "namespace": "team-nlp", "pod": "api-0"},
         lambda i: 10**6 * i if i < 600 else 5 * 10**6 + 10**6 * (i - 600))  # fmt: skip
    # web-0: from 01:00 (i = 720), +2.5 MB per scrape from 0
    emit(SENT, {**eth0, "namespace": "team-vision", "pod": "web-0"},
         lambda i: 2_500_000 * (i - 720) if i >= 720 else None)  # fmt: skip
    emit(SENT, {**eth0, "namespace": "kube-system", "pod": "coredns"}, lambda i: 10**3 * i)
    return openmetrics(families)


@pytest.fixture(scope="module")
def charges_prometheus(tmp_path_factory) -> Iterator[str]:
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus-extra"), _history()) as url:
        yield url


def test_storage_gb_months_and_egress_gb_per_month_from_a_real_prometheus(charges_prometheus):
    """Storage, steps of 300 s from each month's start, GB-months = Σ GB × 300 s ÷ the month:

    - October (2,678,400 s), steps 22:00 … 23:55 (24): data 500 GB × 24 × 300 = 3,600,000
      GB·s, scratch 200 GB × 12 steps (23:00 … 23:55) × 300 = 720,000 → 4,320,000 ÷
      2,678,400 = 1.612903;
    - November (2,592,000 s) to now = 02:00, steps 00:00 … 01:55 (24): data 3,600,000; scratch
      00:00 … 01:00 = 13 steps (its last sample 00:59:45 is still seen at 01:00 through the
      5-minute lookback; one step of staleness error: backfilled data has no staleness marker)
      × 300 × 200 = 780,000 → 4,380,000 ÷ 2,592,000 = 1.689815.

    Egress, ``increase()`` per series over the period, summed per namespace, 1 GB = 10^9 B:

    - October, window [1 Oct, 1 Nov 00:00]: api-0 0 → 480 MB at 00:00 (i = 480) = 0.48 GB
      (starts at 0, so no extrapolation before its first sample; ends on the window's end);
    - November, [00:00, 02:00]: api-0 480 → 599 MB (119 MB), the restart's 5 MB (a drop: the
      whole new value), 5 → 365 MB (360 MB) = 484 MB = 0.484 GB; web-0 0 → 600 MB (240
      scrapes × 2.5 MB) = 0.6 GB.

    kube-system is no team's: reported for each charge and month, not charged.
    Imported again: the five rows unchanged."""
    TeamFactory(slug="nlp")
    TeamFactory(slug="vision")
    metrics = PrometheusAdapter(charges_prometheus, timeout_s=10)
    try:
        with override_settings(EXTRA_CHARGES_STORAGE_PROMQL=PVC,
                               EXTRA_CHARGES_EGRESS_PROMQL=f'{SENT}{{interface="eth0"}}',
                               EXTRA_CHARGES_STEP_S=300):  # fmt: skip
            report = extra_charges_import_prometheus(metrics=metrics, start=START, end=END, now=END)
            again = extra_charges_import_prometheus(metrics=metrics, start=START, end=END, now=END)
    finally:
        metrics.close()
    assert sorted((i["charge"], i["month"], i["namespace"], i["code"]) for i in report.issues) == [
        ("egress", "2026-10", "kube-system", "unknown_namespace"),
        ("egress", "2026-11", "kube-system", "unknown_namespace"),
        ("storage", "2026-10", "kube-system", "unknown_namespace"),
        ("storage", "2026-11", "kube-system", "unknown_namespace"),
    ]
    found = UsageRecord.objects.filter(source=UsageSource.EXTRA_CHARGES_PROMETHEUS)
    oct_, nov = date(2026, 10, 1), date(2026, 11, 1)
    assert sorted(
        (r.month, r.basis, r.team.slug, r.quantity) for r in found.select_related("team")
    ) == [
        (oct_, ChargeBasis.EGRESS, "nlp", Decimal("0.48")),
        (oct_, ChargeBasis.STORAGE, "nlp", Decimal("1.612903")),
        (nov, ChargeBasis.EGRESS, "nlp", Decimal("0.484")),
        (nov, ChargeBasis.EGRESS, "vision", Decimal("0.6")),
        (nov, ChargeBasis.STORAGE, "nlp", Decimal("1.689815")),
    ]
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 5)
