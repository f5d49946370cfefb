"""Shared-card uses from Prometheus against the fake: dcgm-exporter virtual-GPU series and GPU
feature discovery's replica labels, worked out by hand; the Kubernetes meter no longer charges
a replica as a whole card."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from factories import TeamFactory, node_with_gpus

from billing.models import SharedCardUse, UsageImport, UsageRecord
from billing.services.prometheus_import import usage_import_kubernetes
from billing.services.shared_card_import import shared_card_usage_import
from billing.services.statements import statement_build
from scheduler_adapters.prometheus import Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


T0, T1, T2 = utc(2026, 10, 5, 10), utc(2026, 10, 5, 11), utc(2026, 10, 5, 12)


def scrape(labels: dict, start: datetime, end: datetime, metric: str, value: float = 1.0):
    samples, t = [], start
    while t < end:
        samples.append(Sample(t.timestamp(), value))
        t += timedelta(seconds=30)
    return Series(metric, tuple(sorted(labels.items())), tuple(samples))


def replica(node, uuid, namespace, pod, vgpu, start, end) -> Series:
    labels = {"Hostname": node, "UUID": uuid, "gpu": "0", "modelName": "NVIDIA L40S",
              "namespace": namespace, "pod": pod, "vgpu": str(vgpu)}  # fmt: skip
    return scrape(labels, start, end, "DCGM_FI_DEV_GPU_UTIL", 37.0)


def node_labels(node, replicas, strategy="time-slicing") -> Series:
    labels = {"node": node, "label_nvidia_com_gpu_replicas": str(replicas),
              "label_nvidia_com_gpu_sharing_strategy": strategy}  # fmt: skip
    return scrape(labels, T0, T2, "kube_node_labels")


@pytest.fixture
def fleet(db, rates):
    for slug in ("alpha", "beta"):
        TeamFactory(slug=slug, name=slug.title())
    for host in ("ts-01", "plain-01"):
        gpu = node_with_gpus(1, gpu_model="l40s", hostname=host).gpus.get()
        gpu.uuid = f"GPU-{host}"
        gpu.save()
    return FakePrometheus(series=[
        node_labels("ts-01", 4),
        node_labels("plain-01", 1),  # one replica: not shared
        replica("ts-01", "GPU-ts-01", "team-alpha", "a", 0, T0, T2),
        replica("ts-01", "GPU-ts-01", "team-beta", "b", 1, T1, T2),
        replica("ts-01", "GPU-ts-01", "team-beta", "b", 2, T1, T2),
        replica("ts-01", "GPU-ts-01", "kube-system", "x", 3, T0, T2),
        replica("plain-01", "GPU-plain-01", "team-alpha", "c", 0, T0, T2),
        Series("kube_pod_container_resource_requests", tuple(sorted({
            "namespace": "team-alpha", "pod": "a", "node": "ts-01",
            "resource": "nvidia_com_gpu", "unit": "integer"}.items())),
            scrape({}, T0, T2, "x").samples),
    ])  # fmt: skip


def uses():
    return [(u.team.slug, u.period_start, u.period_end, u.parts_held, u.parts_per_card, u.basis)
            for u in SharedCardUse.objects.order_by("team__slug", "period_start")]  # fmt: skip


def test_pods_on_replicas_become_uses_and_bill_their_share(fleet):
    """Window 5 Oct 10:00 → 12:00, now 12:00, steps of 60 s from local midnight.
    pod a (alpha) holds replica 0 from 10:00: 120 steps, one use [10:00, 12:00) of 1/4;
    pod b (beta) holds replicas 1 and 2 from 11:00: one use [11:00, 12:00) of 2/4;
    kube-system's pod holds replica 3: no team's, reported; the pod on plain-01 (1 replica):
    not shared, reported. October at 8.00 EUR (L40S reserved), 744 h = 5,952.00 EUR:
    alpha 7,200 s × 1/4 = 1,800 card-s = 0.5 card-h = 4.00; beta 3,600 × 2/4 = 1,800 card-s
    = 4.00; idle 743 card-h = 5,944.00."""
    run = shared_card_usage_import(metrics=fleet, start=T0, end=T2, now=T2)
    assert uses() == [
        ("alpha", T0, T2, 1, 4, "time-slicing"),
        ("beta", T1, T2, 2, 4, "time-slicing"),
    ]
    assert sorted(i["code"] for i in run.issues) == ["not_shared", "unknown_namespace"]
    again = shared_card_usage_import(metrics=fleet, start=T0, end=T2, now=T2)
    assert again.records_created == 2 and SharedCardUse.objects.count() == 2  # replaced
    alpha = statement_build(team=TeamFactory(slug="alpha"), month=date(2026, 10, 1))
    beta = statement_build(team=TeamFactory(slug="beta"), month=date(2026, 10, 1))
    assert (alpha.total_amount, beta.total_amount) == (Decimal("4.00"), Decimal("4.00"))


def test_mps_strategy_and_more_replicas_than_the_card(fleet):
    """A node labelled mps with 2 replicas: pod a's one replica is an MPS use of 1/2; a pod
    seen on 3 replicas of a 2-replica card is reported, not written."""
    fleet.series = [s for s in fleet.series if s.label("node") != "ts-01"]
    fleet.series.append(node_labels("ts-01", 2, "mps"))
    fleet.series.append(replica("ts-01", "GPU-ts-01", "team-beta", "b", 3, T1, T2))
    run = shared_card_usage_import(metrics=fleet, start=T0, end=T2, now=T2)
    assert uses() == [("alpha", T0, T2, 1, 2, "mps")]
    assert "over_replicas" in {i["code"] for i in run.issues}


def test_kubernetes_meter_leaves_shared_nodes_to_the_share(fleet):
    """The request of pod a on ts-01 (1 nvidia.com/gpu = one of 4 replicas) is no whole card:
    no usage record, a ``shared_card`` issue (OpenCost #3828's double count avoided)."""
    run = usage_import_kubernetes(metrics=fleet, start=T0, end=T2, now=T2)
    assert not UsageRecord.objects.exists()
    assert [i["code"] for i in run.issues] == ["shared_card"]
    assert UsageImport.objects.count() == 1
