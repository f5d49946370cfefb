"""The Kubernetes and vLLM-token importers against a real Prometheus whose TSDB is backfilled
with four hours of kube-state-metrics and vLLM series across the October/November boundary
(31 Oct 2026 22:00 → 1 Nov 02:00 UTC, scraped every 15 s). Expected numbers worked out by hand
in the test docstrings. Missing Prometheus is a failure, never a skip."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from factories import TeamFactory
from integration.prometheus.server import backfilled_prometheus, openmetrics

from billing.choices import UsageSource, UsageUnit
from billing.models import UsageRecord
from billing.services.prometheus_import import usage_import_kubernetes, usage_import_vllm_tokens
from scheduler_adapters.prometheus import PrometheusAdapter

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

START = datetime(2026, 10, 31, 22, tzinfo=UTC)
END = datetime(2026, 11, 1, 2, tzinfo=UTC)
EVERY = 15
RESET_AT = 600  # sample index of 1 Nov 00:30:00: the vLLM pod restarted


def _history() -> str:
    t0, n = int(START.timestamp()), int((END - START).total_seconds()) // EVERY
    families: dict[str, list[str]] = {
        "kube_node_labels": [],
        "kube_pod_container_resource_requests": [],
        "vllm:prompt_tokens_total": [],
        "vllm:generation_tokens_total": [],
        "kube_pod_status_phase": [],
    }

    def emit(metric, labels, value_at):
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        for i in range(n):
            value = value_at(i)
            if value is not None:
                families[metric].append(f"{metric}{{{text}}} {value} {t0 + i * EVERY}")

    emit("kube_node_labels",
         {"node": "k8s-n1", "label_nvidia_com_gpu_product": "NVIDIA-A100-SXM4-80GB"},
         lambda i: 1)  # fmt: skip
    req = "kube_pod_container_resource_requests"
    base = {"resource": "nvidia_com_gpu", "unit": "integer", "container": "main"}
    emit(req, {**base, "namespace": "team-nlp", "pod": "a", "node": "k8s-n1"}, lambda i: 2)
    # pod b: 23:30 (i=360) to 00:30 (i=600)
    emit(req, {**base, "namespace": "team-nlp", "pod": "b", "node": "k8s-n1"},
         lambda i: 1 if 360 <= i < 600 else None)  # fmt: skip
    emit(req, {**base, "namespace": "team-nlp", "pod": "pending", "node": ""}, lambda i: 4)
    emit(req, {**base, "namespace": "kube-system", "pod": "x", "node": "k8s-n1"}, lambda i: 1)
    # a finished Job pod: requests still exported, phase Succeeded throughout → not charged
    emit(req, {**base, "namespace": "team-nlp", "pod": "done", "node": "k8s-n1"}, lambda i: 8)
    emit("kube_pod_status_phase", {"namespace": "team-nlp", "pod": "done", "phase": "Succeeded"},
         lambda i: 1)  # fmt: skip
    vllm = {"namespace": "team-nlp", "pod": "qwen-0", "model_name": "qwen"}
    emit("vllm:prompt_tokens_total", vllm,
         lambda i: 1000 + 10 * i if i < RESET_AT else 5 + 10 * (i - RESET_AT))  # fmt: skip
    emit("vllm:generation_tokens_total", vllm, lambda i: 2 * i)
    return openmetrics(families)


@pytest.fixture(scope="module")
def usage_prometheus(tmp_path_factory) -> Iterator[str]:
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus-usage"), _history()) as url:
        yield url


def _rows(source):
    rows = UsageRecord.objects.filter(source=source).order_by("month", "source_id")
    return [(r.month, r.gpu_model.slug if r.gpu_model else r.served_model, r.unit, r.quantity)
            for r in rows]  # fmt: skip


def test_kubernetes_card_seconds_per_month(usage_prometheus):
    """Steps of 60 s from each day's midnight (UTC billing zone), now = 02:00 on 1 Nov.

    October: pod a 2 cards × 120 steps × 60 s = 14,400; pod b 1 card 23:30 → 24:00, 30 steps
    = 1,800 → 16,200. November: pod a 2 × 120 × 60 = 14,400; pod b's last sample 00:29:45 is
    seen through the 5-minute lookback until the 00:34 step: 35 steps = 2,100 → 16,500. The
    pending pod (node="") and the Succeeded pod "done" are not charged; kube-system is
    reported, not charged. GPU model from the node's nvidia.com/gpu.product label.
    """
    TeamFactory(slug="nlp")
    metrics = PrometheusAdapter(usage_prometheus, timeout_s=10)
    try:
        report = usage_import_kubernetes(metrics=metrics, start=START, end=END, now=END)
        again = usage_import_kubernetes(metrics=metrics, start=START, end=END, now=END)
    finally:
        metrics.close()
    assert [i["code"] for i in report.issues] == ["unknown_namespace"]
    cs = UsageUnit.CARD_SECONDS
    assert _rows(UsageSource.KUBERNETES) == [
        (date(2026, 10, 1), "a100_80g_sxm", cs, Decimal(16200)),
        (date(2026, 11, 1), "a100_80g_sxm", cs, Decimal(16500)),
    ]
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 2)


def test_vllm_tokens_with_a_counter_reset(usage_prometheus):
    """Raw 15 s samples; each increase goes to the day of the later sample.

    Prompt: +10 per scrape; October pairs end at i = 1..479 → 4,790. November: i = 480..599
    → 1,200, the restart at 00:30 (…→ 5) → 5, then i = 601..959 → 3,590: 4,795.
    Generation: +2 per scrape: 958 in October, 960 in November.
    """
    TeamFactory(slug="nlp")
    metrics = PrometheusAdapter(usage_prometheus, timeout_s=10)
    try:
        report = usage_import_vllm_tokens(metrics=metrics, start=START, end=END, now=END)
    finally:
        metrics.close()
    assert report.issues == []
    inp, out = UsageUnit.INPUT_TOKENS, UsageUnit.OUTPUT_TOKENS
    assert _rows(UsageSource.PROMETHEUS_TOKENS) == [
        (date(2026, 10, 1), "qwen", inp, Decimal(4790)),
        (date(2026, 10, 1), "qwen", out, Decimal(958)),
        (date(2026, 11, 1), "qwen", inp, Decimal(4795)),
        (date(2026, 11, 1), "qwen", out, Decimal(960)),
    ]


def test_a_cluster_with_its_own_prometheus_is_billed_the_same_figures_under_its_keys(
    usage_prometheus, settings
):
    """The beat's path (issue 29): the Kubernetes cluster ``edge`` names this Prometheus as its
    own and ``PROMETHEUS_URL`` is unset, so it is the only one read; its node ``k8s-n1`` and
    the unplaced ``team-nlp`` namespace are the cluster's. The figures are the two tests'
    above (16,200 / 16,500 card-s; 4,790 / 958 / 4,795 / 960 tokens), keyed ``@<cluster>``;
    a second run writes nothing."""
    from factories import ClusterFactory, NodeFactory, PoolFactory

    from billing.services.prometheus_meters import usage_import_meters
    from pools.common.choices import Scheduler

    settings.PROMETHEUS_URL = ""
    TeamFactory(slug="nlp")
    edge = ClusterFactory(slug="edge", kind=Scheduler.KUBERNETES, prometheus_url=usage_prometheus)
    pool = PoolFactory(slug="edge-gpu", cluster=edge, scheduler=Scheduler.KUBERNETES,
                       slurm_partition="")  # fmt: skip
    NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    importers = {"kubernetes": usage_import_kubernetes, "vllm-tokens": usage_import_vllm_tokens}
    first = usage_import_meters(importers=importers, start=START, end=END, now=END)
    again = usage_import_meters(importers=importers, start=START, end=END, now=END)
    assert (first.created, again.created, first.failed) == (
        {"kubernetes": 2, "vllm-tokens": 4}, {"kubernetes": 0, "vllm-tokens": 0}, [])  # fmt: skip
    cs, inp, out = UsageUnit.CARD_SECONDS, UsageUnit.INPUT_TOKENS, UsageUnit.OUTPUT_TOKENS
    assert _rows(UsageSource.KUBERNETES) == [
        (date(2026, 10, 1), "a100_80g_sxm", cs, Decimal(16200)),
        (date(2026, 11, 1), "a100_80g_sxm", cs, Decimal(16500)),
    ]
    assert _rows(UsageSource.PROMETHEUS_TOKENS) == [
        (date(2026, 10, 1), "qwen", inp, Decimal(4790)),
        (date(2026, 10, 1), "qwen", out, Decimal(958)),
        (date(2026, 11, 1), "qwen", inp, Decimal(4795)),
        (date(2026, 11, 1), "qwen", out, Decimal(960)),
    ]
    keys = UsageRecord.objects.values_list("source_id", flat=True)
    assert all(key.split(":")[0].endswith(f"@{edge.pk}") for key in keys)
