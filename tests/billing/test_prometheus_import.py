"""Prometheus importers (Kubernetes GPU requests, vLLM token counters) against the fake:
card-seconds and tokens worked out by hand, month split, idempotency, counter reset."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from factories import AllocationFactory, TeamFactory

from billing.choices import ChargeBasis, UsageSource, UsageUnit
from billing.models import UsageRecord
from billing.services.prometheus_import import usage_import_kubernetes, usage_import_vllm_tokens
from scheduler_adapters.prometheus import PrometheusAdapter, Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

REQ = "kube_pod_container_resource_requests"


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def scrape(start: datetime, end: datetime, value, every: int = 30) -> tuple[Sample, ...]:
    """Samples every ``every`` s in ``[start, end)``; ``value`` constant or f(t)."""
    out, t = [], start
    while t < end:
        out.append(Sample(t.timestamp(), value(t) if callable(value) else float(value)))
        t += timedelta(seconds=every)
    return tuple(out)


def gpu_request(namespace, pod, node, cards, start, end) -> Series:
    labels = {"namespace": namespace, "pod": pod, "container": "main", "node": node,
              "resource": "nvidia_com_gpu", "unit": "integer"}  # fmt: skip
    return Series(REQ, tuple(sorted(labels.items())), scrape(start, end, cards))


def node_label(node, product, start, end) -> Series:
    labels = {"node": node, "label_nvidia_com_gpu_product": product}
    return Series("kube_node_labels", tuple(sorted(labels.items())), scrape(start, end, 1))


def counter(metric, namespace, served, points) -> Series:
    labels = {"namespace": namespace, "model_name": served, "pod": f"{namespace}-vllm-0"}
    samples = tuple(Sample(t.timestamp(), float(v)) for t, v in points)
    return Series(metric, tuple(sorted(labels.items())), samples)


@pytest.fixture
def nlp(team):
    return team


def k8s_rows():
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES).order_by("source_id")
    return [(r.team.slug, r.gpu_model.slug, r.month, r.quantity, r.basis) for r in rows]


# --------------------------------------------------------------------------- Kubernetes


def test_two_pods_and_one_starting_mid_window(nlp):
    # Window 10:00 → 12:00 on 5 Oct, clipped at now = 12:00 (the day record ends there).
    # pod a: 2 cards all along = 2 × 7200 = 14,400 card-s;
    # pod b: 1 card from 10:00 to 11:00 = 3,600 card-s, series then gone (lookback 5 min keeps
    #        it 5 more steps at 60 s: +300 card-s, the documented staleness error);
    # pod c: starts mid-window at 11:30:15 with 4 cards: first step seeing it is 11:31
    #        → 29 steps × 60 s × 4 = 6,960 (true 6,940: 20 card-s of step error).
    # pod d: pending (node="") → ignored.
    t0, t1 = utc(2026, 10, 5, 10), utc(2026, 10, 5, 12)
    fake = FakePrometheus(series=[
        node_label("k8s-a", "NVIDIA-A100-SXM4-80GB", t0, t1),
        gpu_request("team-nlp", "a", "k8s-a", 2, t0 - timedelta(hours=1), t1),
        gpu_request("team-nlp", "b", "k8s-a", 1, t0, utc(2026, 10, 5, 11)),
        gpu_request("team-nlp", "c", "k8s-a", 4, utc(2026, 10, 5, 11, 30, 15), t1),
        gpu_request("team-nlp", "d", "", 8, t0, t1),
    ])  # fmt: skip
    report = usage_import_kubernetes(metrics=fake, start=t0, end=t1, now=t1)
    assert report.issues == []
    # the day starts at 00:00: pod a is there from 09:00 (2 × 3h = 21,600)
    assert k8s_rows() == [
        ("nlp", "a100_80g_sxm", date(2026, 10, 1),
         Decimal(2 * 3 * 3600 + 3600 + 300 + 29 * 60 * 4), ChargeBasis.USED),
    ]  # fmt: skip
    record = UsageRecord.objects.get()
    assert (record.period_start, record.period_end) == (utc(2026, 10, 5), t1)


def test_month_boundary_splits_and_reimport_changes_nothing(nlp, infer_pool, l40s):
    # 1 card from 31 Oct 23:00 to 1 Nov 01:00, no node label: model from the team's allocation
    # in a Kubernetes pool (L40S). Oct: 3,600; Nov: 3,600 (+300 lookback after the series ends).
    AllocationFactory(team=nlp, pool=infer_pool, gpu_model=l40s, card_count=1)
    start, end = utc(2026, 10, 31, 23), utc(2026, 11, 1, 1)
    fake = FakePrometheus(series=[gpu_request("team-nlp", "p", "k8s-x", 1, start, end)])
    window = {"start": utc(2026, 10, 31), "end": utc(2026, 11, 2), "now": utc(2026, 11, 3)}
    first = usage_import_kubernetes(metrics=fake, **window)
    months = [(r[2], r[3]) for r in k8s_rows()]
    assert months == [(date(2026, 10, 1), Decimal(3600)), (date(2026, 11, 1), Decimal(3900))]
    before = list(UsageRecord.objects.order_by("pk").values())
    # same window again, and an overlapping one: nothing created, nothing changed
    second = usage_import_kubernetes(metrics=fake, **window)
    third = usage_import_kubernetes(
        metrics=fake, start=utc(2026, 10, 31, 22), end=utc(2026, 11, 1, 0, 30), now=window["now"]
    )
    assert (first.records_created, second.records_created, second.records_unchanged) == (2, 0, 2)
    assert (third.records_created, third.records_updated) == (0, 0)
    assert list(UsageRecord.objects.order_by("pk").values()) == before


def test_finished_pod_is_not_charged_after_it_completes(nlp):
    # Job pod, 1 card, requests exported 10:00 → 11:00 but Succeeded from 10:30: 30 steps
    # × 60 s = 1,800 card-s (not 3,600).
    t0, t1 = utc(2026, 10, 5, 10), utc(2026, 10, 5, 11)
    phase = {"namespace": "team-nlp", "pod": "job-1", "phase": "Succeeded"}
    fake = FakePrometheus(series=[
        node_label("k8s-a", "NVIDIA-A100-SXM4-80GB", t0, t1),
        gpu_request("team-nlp", "job-1", "k8s-a", 1, t0, t1),
        Series("kube_pod_status_phase", tuple(sorted(phase.items())),
               scrape(t0, t1, lambda t: 1 if t >= utc(2026, 10, 5, 10, 30) else 0)),
    ])  # fmt: skip
    usage_import_kubernetes(metrics=fake, start=t0, end=t1, now=t1)
    assert [r[3] for r in k8s_rows()] == [Decimal(1800)]


def test_dst_day_has_25_hours(nlp, settings):
    # Europe/Berlin leaves summer time on 25 Oct 2026: that day is 25 h, 1 card → 90,000 card-s.
    settings.BILLING_TIME_ZONE = "Europe/Berlin"
    t0, t1 = utc(2026, 10, 24, 21), utc(2026, 10, 25, 23)  # Berlin 23:00 (CEST) → 00:00 (CET)
    fake = FakePrometheus(series=[
        node_label("k8s-a", "NVIDIA-A100-SXM4-80GB", t0, t1),
        gpu_request("team-nlp", "p", "k8s-a", 1, t0, t1),
    ])  # fmt: skip
    usage_import_kubernetes(metrics=fake, start=utc(2026, 10, 24, 22), end=t1, now=t1)
    record = UsageRecord.objects.get()
    assert (record.quantity, record.period_end - record.period_start) == (
        Decimal(25 * 3600),
        timedelta(hours=25),
    )


def test_unknown_namespace_is_reported_not_charged(nlp):
    t0, t1 = utc(2026, 10, 5, 10), utc(2026, 10, 5, 11)
    fake = FakePrometheus(series=[
        node_label("k8s-a", "NVIDIA-A100-SXM4-80GB", t0, t1),
        gpu_request("kube-system", "x", "k8s-a", 1, t0, t1),
    ])  # fmt: skip
    report = usage_import_kubernetes(metrics=fake, start=t0, end=t1, now=t1)
    assert [i["code"] for i in report.issues] == ["unknown_namespace"]
    assert report.records_created == 0 and not UsageRecord.objects.exists()


def test_unknown_gpu_model_is_reported(nlp):
    t0, t1 = utc(2026, 10, 5, 10), utc(2026, 10, 5, 11)
    fake = FakePrometheus(series=[gpu_request("team-nlp", "x", "k8s-z", 1, t0, t1)])
    report = usage_import_kubernetes(metrics=fake, start=t0, end=t1, now=t1)
    assert [i["code"] for i in report.issues] == ["unknown_gpu_model"]
    assert not UsageRecord.objects.exists()


# --------------------------------------------------------------------------- vLLM tokens


def token_rows():
    rows = UsageRecord.objects.filter(source=UsageSource.PROMETHEUS_TOKENS).order_by("source_id")
    return [(r.team.slug, r.served_model, r.unit, r.month, r.quantity) for r in rows]


def over_http(fake: FakePrometheus) -> PrometheusAdapter:
    """The real adapter reading ``fake``'s answers as Prometheus' JSON (its label cleaning
    included), where the fake alone hands the importer :class:`Series` directly."""
    return PrometheusAdapter("http://prom.test:9090", transport=fake.as_transport())


@pytest.mark.parametrize("through", [lambda fake: fake, over_http], ids=["fake", "http"])
def test_counter_reset_mid_window(nlp, through):
    # prompt: 100 → 250 → 30 (restart) → 80 = 150 + 30 + 50 = 230; output 10 → 40 = 30.
    t = utc(2026, 10, 5, 10)
    fake = FakePrometheus(series=[
        counter("vllm:prompt_tokens_total", "team-nlp", "qwen",
                [(t + timedelta(minutes=i), v) for i, v in enumerate([100, 250, 30, 80])]),
        counter("vllm:generation_tokens_total", "team-nlp", "qwen",
                [(t, 10), (t + timedelta(minutes=3), 40)]),
    ])  # fmt: skip
    fake = through(fake)
    window = {"start": utc(2026, 10, 5), "end": utc(2026, 10, 6), "now": utc(2026, 10, 7)}
    first = usage_import_vllm_tokens(metrics=fake, **window)
    assert token_rows() == [
        ("nlp", "qwen", UsageUnit.INPUT_TOKENS, date(2026, 10, 1), Decimal(230)),
        ("nlp", "qwen", UsageUnit.OUTPUT_TOKENS, date(2026, 10, 1), Decimal(30)),
    ]
    assert all(r.basis == ChargeBasis.TOKENS for r in UsageRecord.objects.all())
    again = usage_import_vllm_tokens(metrics=fake, **window)
    assert (first.records_created, again.records_created, again.records_unchanged) == (2, 0, 2)


def test_a_nul_in_a_served_model_name_is_stored_as_the_replacement_character(nlp):
    """A pod's ``model_name="qwen\\x00"`` (label values are any UTF-8): PostgreSQL's text
    refuses NUL, so the whole import failed until the adapter read it as U+FFFD. Through the
    real adapter on Prometheus' JSON; 0 → 7 prompt tokens: 7, under ``qwen\\ufffd``."""
    points = [(utc(2026, 10, 5, 10), 0), (utc(2026, 10, 5, 10, 1), 7)]
    fake = FakePrometheus(
        series=[counter("vllm:prompt_tokens_total", "team-nlp", "qwen\x00", points)]
    )

    report = usage_import_vllm_tokens(
        metrics=over_http(fake), start=utc(2026, 10, 5), end=utc(2026, 10, 6),
        now=utc(2026, 10, 7),
    )  # fmt: skip

    assert (report.records_created, report.issues) == (1, [])
    assert token_rows() == [
        ("nlp", "qwen\ufffd", UsageUnit.INPUT_TOKENS, date(2026, 10, 1), Decimal(7))
    ]
    assert UsageRecord.objects.get().source_id.startswith("vllm:team-nlp:qwen\ufffd:")


def test_tokens_split_at_month_boundary_and_unknown_namespace(nlp):
    # 23:58 → 00:02 across 31 Oct / 1 Nov: 1000, 1100 (Oct +100), 1300, 1600 (Nov +200 +300).
    points = [(utc(2026, 10, 31, 23, 58), 1000), (utc(2026, 10, 31, 23, 59), 1100),
              (utc(2026, 11, 1, 0, 0), 1300), (utc(2026, 11, 1, 0, 1), 1600)]  # fmt: skip
    TeamFactory(slug="vision")
    fake = FakePrometheus(series=[
        counter("vllm:prompt_tokens_total", "team-nlp", "qwen", points),
        counter("vllm:prompt_tokens_total", "sandbox", "qwen", points),
    ])  # fmt: skip
    window = {"start": utc(2026, 10, 31), "end": utc(2026, 11, 2), "now": utc(2026, 11, 3)}
    report = usage_import_vllm_tokens(metrics=fake, **window)
    assert [(i["namespace"], i["code"]) for i in report.issues] == [
        ("sandbox", "unknown_namespace")
    ]
    assert [(r[3], r[4]) for r in token_rows()] == [
        (date(2026, 10, 1), Decimal(100)), (date(2026, 11, 1), Decimal(500)),
    ]  # fmt: skip
    # importing only 1 Nov finds the 31 Oct 23:59 sample within the lookback: same November
    usage_import_vllm_tokens(
        metrics=fake, start=utc(2026, 11, 1), end=utc(2026, 11, 2), now=window["now"]
    )
    assert UsageRecord.objects.count() == 2
    assert [(r[3], r[4]) for r in token_rows()][1] == (date(2026, 11, 1), Decimal(500))


def test_command_and_task_use_the_prometheus_importers(nlp, monkeypatch, settings):
    from django.core.management import call_command

    import billing.management.commands.import_usage as command
    from billing.tasks import usage_import_prometheus_task

    points = [(utc(2026, 10, 5, 10), 0), (utc(2026, 10, 5, 10, 1), 7)]
    fake = FakePrometheus(series=[counter("vllm:prompt_tokens_total", "team-nlp", "qwen", points)])
    monkeypatch.setattr(command, "metrics_adapter", lambda url: fake)
    call_command("import_usage", source="vllm-tokens", start=date(2026, 10, 5),
                 end=date(2026, 10, 6), prometheus_url="http://prom:9090")  # fmt: skip
    assert [r[4] for r in token_rows()] == [Decimal(7)]
    settings.PROMETHEUS_URL = ""
    assert usage_import_prometheus_task() == {}


def test_mig_single_node_bills_a_requested_gpu_as_its_slice_of_the_base_model(nlp):
    # GFD internal/lm/mig-strategy.go: under mig.strategy=single the product label is
    # <model>-MIG-<profile> and nvidia.com/gpu counts slices (gpu-operator#981: all-1g.5gb on
    # A100 40GB). One pod holding 7 x 1g.5gb for 1 h is 7 x 1/7 x 3600 = 3,600 card-s of
    # an A100 40GB, not 25,200.
    t0, t1 = utc(2026, 10, 5, 0), utc(2026, 10, 5, 1)
    fake = FakePrometheus(series=[
        node_label("mig-a", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", t0, t1),
        gpu_request("team-nlp", "a", "mig-a", 7, t0, t1),
        node_label("mig-b", "NVIDIA-A100-SXM4-40GB-MIG-INVALID", t0, t1),
        gpu_request("team-nlp", "b", "mig-b", 1, t0, t1),
    ])  # fmt: skip
    report = usage_import_kubernetes(metrics=fake, start=t0, end=t1, now=t1)
    assert k8s_rows() == [
        ("nlp", "a100_40g_sxm", date(2026, 10, 1), Decimal("3600.000000"), ChargeBasis.USED)
    ]
    [issue] = report.issues
    assert issue["code"] == "unknown_gpu_model"
    assert "misconfigured MIG (product 'NVIDIA-A100-SXM4-40GB-MIG-INVALID')" in issue["detail"]
