"""Billing's Prometheus imports per cluster (issue 29): each cluster's series billed once, from
the Prometheus its span names, under keys naming the cluster. Fakes per URL; the numbers are
worked out by hand in each test's comments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from urllib.parse import parse_qs

import httpx
import pytest
from factories import AllocationFactory, ClusterFactory, NodeFactory, PoolFactory

from billing.choices import UsageSource
from billing.models import MetricsUrlSpan, UsageImport, UsageRecord
from billing.services.extra_charges_prometheus import extra_charges_import_prometheus
from billing.services.prometheus_import import usage_import_kubernetes, usage_import_vllm_tokens
from billing.services.prometheus_meters import usage_import_meters
from pools.clusters.models import ClusterError
from pools.common.choices import Scheduler
from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.prometheus import PrometheusAdapter, Sample, Series
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

SHARED, OWN_A, OWN_B = "http://prom.shared:9090", "http://prom.a:9090", "http://prom.b:9090"
IMPORTERS = {"kubernetes": usage_import_kubernetes, "vllm-tokens": usage_import_vllm_tokens}


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def scrape(start, end, value, every=30):
    out, t = [], start
    while t < end:
        out.append(Sample(t.timestamp(), float(value)))
        t += timedelta(seconds=every)
    return tuple(out)


def gpu_request(namespace, pod, node, cards, start, end) -> Series:
    labels = {"namespace": namespace, "pod": pod, "container": "main", "node": node,
              "resource": "nvidia_com_gpu", "unit": "integer"}  # fmt: skip
    return Series("kube_pod_container_resource_requests", tuple(sorted(labels.items())),
                  scrape(start, end, cards))  # fmt: skip


def two_own_prometheuses(t0, t1) -> dict:
    """The shared Prometheus (empty) and clusters a's and b's own, each holding the same node
    name ``k8s-a`` and namespace ``team-nlp``: 2 cards requested in a's, 3 in b's, over
    ``[t0, t1)``."""
    return {
        SHARED: FakePrometheus(),
        OWN_A: FakePrometheus(series=[a100_node("k8s-a", t0, t1),
                                      gpu_request("team-nlp", "p", "k8s-a", 2, t0, t1)]),
        OWN_B: FakePrometheus(series=[a100_node("k8s-a", t0, t1),
                                      gpu_request("team-nlp", "p", "k8s-a", 3, t0, t1)]),
    }  # fmt: skip


def a100_node(node, start, end) -> Series:
    labels = {"node": node, "label_nvidia_com_gpu_product": "NVIDIA-A100-SXM4-80GB"}
    return Series("kube_node_labels", tuple(sorted(labels.items())), scrape(start, end, 1))


def prompt_tokens(namespace, points) -> Series:
    labels = {"namespace": namespace, "model_name": "qwen", "pod": f"{namespace}-vllm-0"}
    samples = tuple(Sample(t.timestamp(), float(v)) for t, v in points)
    return Series("vllm:prompt_tokens_total", tuple(sorted(labels.items())), samples)


def k8s_cluster(slug, url=""):
    """A Kubernetes cluster with pool ``<slug>-gpu`` holding node ``k8s-a`` (every cluster
    names its node alike: host names are unique per cluster only)."""
    cluster = ClusterFactory(slug=slug, kind=Scheduler.KUBERNETES, prometheus_url=url)
    pool = PoolFactory(slug=f"{slug}-gpu", cluster=cluster, scheduler=Scheduler.KUBERNETES,
                       slurm_partition="")  # fmt: skip
    NodeFactory(hostname="k8s-a", pool=pool, scheduler=Scheduler.KUBERNETES)
    return cluster


def records():
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES).order_by("source_id")
    return {r.source_id: (r.team.slug, r.quantity, r.period_start, r.period_end) for r in rows}


def run(fakes, *, start, end, now, **kwargs):
    return usage_import_meters(importers=IMPORTERS, start=start, end=end, now=now,
                               adapter_for=fakes.__getitem__, **kwargs)  # fmt: skip


def test_two_clusters_each_with_its_own_prometheus_are_billed_once_each(team, settings):
    # Clusters a and b, each with its own Prometheus; both have a node k8s-a and a namespace
    # team-nlp. 5 Oct 10:00 → 12:00, now 12:00, steps of 60 s from the day's 00:00:
    #   a: 2 cards × 120 steps × 60 s = 14,400 card-s;  b: 3 cards × 120 × 60 = 21,600.
    # One record each, keyed by the cluster; the shared Prometheus (environment) has nothing.
    settings.PROMETHEUS_URL = SHARED
    a, b = k8s_cluster("a", OWN_A), k8s_cluster("b", OWN_B)
    t0, t1 = utc(2026, 10, 5, 10), utc(2026, 10, 5, 12)
    fakes = two_own_prometheuses(t0, t1)
    first = run(fakes, start=t0, end=t1, now=t1)
    day = utc(2026, 10, 5)
    assert records() == {
        f"k8s@{a.pk}:team-nlp:a100_80g_sxm:2026-10-05:used": ("nlp", Decimal(14400), day, t1),
        f"k8s@{b.pk}:team-nlp:a100_80g_sxm:2026-10-05:used": ("nlp", Decimal(21600), day, t1),
    }
    assert (first.created, first.failed) == ({"kubernetes": 2, "vllm-tokens": 0}, [])
    # each Prometheus read once per family: 5 queries (product and sharing node labels,
    # requests, 2 phases) + 2 token counters, and one UsageImport per Prometheus and importer
    assert [len(f.queries) for f in fakes.values()] == [7, 7, 7]
    assert UsageImport.objects.filter(source=UsageSource.KUBERNETES).count() == 3
    again = run(fakes, start=t0, end=t1, now=t1)
    assert again.created == {"kubernetes": 0, "vllm-tokens": 0}
    assert len(records()) == 2


def test_switch_to_own_prometheus_mid_month_bills_no_hour_twice(team, settings):
    # Cluster x first reads the shared Prometheus (blank URL); at the import of 5 Oct 18:00
    # its own Prometheus is set. Both servers hold x's whole series (1 card on k8s-a,
    # 5 Oct 00:00 → 6 Oct 06:00 = 30 h = 108,000 card-s) — the shared one still scrapes it.
    #   import 1 (now 12:00, x on shared): 5 Oct [00:00, 12:00) = 43,200 from the shared;
    #   URL set; import 2 (now 18:00): the switch is seen, x's span on its own from 18:00:
    #     the shared bills [00:00, 18:00) = 64,800 (same key, updated), its own nothing yet;
    #   import 3 (now 6 Oct 06:00, window from 5 Oct 06:00, overlapping):
    #     shared: 5 Oct [00:00, 18:00) = 64,800 unchanged (x's later steps are its own's);
    #     own: 5 Oct [18:00, 24:00) = 21,600 keyed <day>@<18:00>, 6 Oct [00:00, 06:00) = 21,600.
    # Total 64,800 + 21,600 + 21,600 = 108,000 = 30 h × 3,600: every hour once.
    settings.PROMETHEUS_URL = SHARED
    x = k8s_cluster("x")
    begin, stop = utc(2026, 10, 5), utc(2026, 10, 6, 6)
    history = [a100_node("k8s-a", begin, stop), gpu_request("team-nlp", "p", "k8s-a", 1, begin,
                                                            stop)]  # fmt: skip
    fakes = {SHARED: FakePrometheus(series=history), OWN_A: FakePrometheus(series=history)}
    noon, evening = utc(2026, 10, 5, 12), utc(2026, 10, 5, 18)
    run(fakes, start=begin, end=noon, now=noon)
    key = f"k8s@{x.pk}:team-nlp:a100_80g_sxm:2026-10-05:used"
    assert records() == {key: ("nlp", Decimal(43200), begin, noon)}
    x.prometheus_url = OWN_A
    x.save()
    run(fakes, start=begin, end=evening, now=evening)
    assert records() == {key: ("nlp", Decimal(64800), begin, evening)}
    assert list(MetricsUrlSpan.objects.filter(cluster=x).values_list("since", "url")) == [
        (None, SHARED),
        (evening, OWN_A),
    ]
    third = run(fakes, start=utc(2026, 10, 5, 6), end=stop, now=stop)
    mark = int(evening.timestamp())
    assert records() == {
        key: ("nlp", Decimal(64800), begin, evening),
        f"k8s@{x.pk}:team-nlp:a100_80g_sxm:2026-10-05@{mark}:used": (
            "nlp", Decimal(21600), evening, utc(2026, 10, 6)),
        f"k8s@{x.pk}:team-nlp:a100_80g_sxm:2026-10-06:used": (
            "nlp", Decimal(21600), utc(2026, 10, 6), stop),
    }  # fmt: skip
    assert sum(q for _, q, _, _ in records().values()) == Decimal(30 * 3600)
    assert third.created["kubernetes"] == 2


def test_tokens_of_equal_namespaces_in_two_clusters_do_not_collide(team, settings):
    # team-nlp serves qwen in both clusters; each counter goes 0 → 100 → 250 (a) and
    # 0 → 40 (b) in the window: a's increase 250, b's 40, one record each (the environment's
    # key would have been one record for both, 290, overwritten by whichever came last).
    settings.PROMETHEUS_URL = ""
    a, b = k8s_cluster("a", OWN_A), k8s_cluster("b", OWN_B)
    t = utc(2026, 10, 5, 10)
    fakes = {
        OWN_A: FakePrometheus(series=[prompt_tokens("team-nlp", [
            (t, 0), (t + timedelta(minutes=1), 100), (t + timedelta(minutes=2), 250)])]),
        OWN_B: FakePrometheus(series=[prompt_tokens("team-nlp", [
            (t, 0), (t + timedelta(minutes=1), 40)])]),
    }  # fmt: skip
    run(fakes, start=utc(2026, 10, 5), end=utc(2026, 10, 5, 11), now=utc(2026, 10, 5, 11))
    tokens = UsageRecord.objects.filter(source=UsageSource.PROMETHEUS_TOKENS)
    assert dict(tokens.values_list("source_id", "quantity")) == {
        f"vllm@{a.pk}:team-nlp:qwen:input-tokens:2026-10-05": Decimal(250),
        f"vllm@{b.pk}:team-nlp:qwen:input-tokens:2026-10-05": Decimal(40),
    }


def test_an_unreachable_prometheus_is_its_clusters_error_and_the_others_are_imported(
    team, settings, monkeypatch
):
    # a's Prometheus is down: nothing of a is written, a's health keeps the error; b's
    # 2 cards since t0 are imported; the task then raises (retried).
    import billing.services.prometheus_meters as meters_module
    from billing import tasks

    settings.PROMETHEUS_URL = ""
    a, b = k8s_cluster("a", OWN_A), k8s_cluster("b", OWN_B)
    # An hour inside one day: an hour across midnight would be two daily records.
    now = utc(2026, 10, 5, 12, 34, 56)
    hour_ago = now - timedelta(hours=1)
    t0 = hour_ago.replace(second=0)
    fakes = {
        OWN_A: FakePrometheus(down=True,
                              series=[gpu_request("team-nlp", "p", "k8s-a", 5, t0, now)]),
        OWN_B: FakePrometheus(series=[a100_node("k8s-a", t0, now),
                                      gpu_request("team-nlp", "p", "k8s-a", 2, t0, now)]),
    }  # fmt: skip
    monkeypatch.setattr(meters_module, "metrics_adapter", lambda url: fakes[url])
    monkeypatch.setattr(tasks, "metrics_adapter", lambda: None)
    monkeypatch.setattr(tasks.timezone, "now", lambda: now)  # the task's "now" is ours
    with pytest.raises(SchedulerUnavailable, match=OWN_A):
        tasks.usage_import_prometheus_task(hours=1)
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES)
    assert [r.source_id.split(":")[0] for r in rows] == [f"k8s@{b.pk}"]
    # the steps from t0 (a whole minute, the first sample) up to now, the last one clipped at
    # now: 2 cards × (now - t0) seconds; none before t0 (no sample)
    assert sum(r.quantity for r in rows) == Decimal(2 * int((now - t0).total_seconds()))
    errors = list(ClusterError.objects.values_list("cluster__slug", "operation"))
    assert errors == [("a", "usage")]
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.usage_imported_at, b.usage_imported_at is not None) == (None, True)


def _egress_prometheus(answers: dict[datetime, float]):
    """A Prometheus (real adapter, HTTP mocked) answering the egress increase query at each
    time of ``answers`` with that many bytes for namespace ``nlp-infer``; keeps the
    ``(time, query)`` asked."""
    asked: list[tuple[datetime, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        params = {k: v[0] for k, v in parse_qs(request.url.query.decode()).items()}
        at = datetime.fromtimestamp(float(params["time"]), tz=UTC)
        asked.append((at, params["query"]))
        result = [
            {"metric": {"namespace": "nlp-infer"}, "value": [at.timestamp(), str(answers[at])]}
        ]
        body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return httpx.Response(200, json=body)

    def adapter() -> PrometheusAdapter:  # a new one per import: each is closed after it
        return PrometheusAdapter("http://p.test", transport=httpx.MockTransport(answer))

    return adapter, asked


def test_egress_after_a_switch_is_read_per_stretch_and_billed_once(team, settings):
    # Namespace nlp-infer is bound to nlp's allocation in cluster x's pool. x reads the shared
    # Prometheus until the import of 1 Nov 12:00 sees its own URL. Egress is an increase, so
    # no read may straddle the switch:
    #   import at 11:00 (x on the shared one): its increase over [00:00, 11:00) = 4 GB;
    #   import at 12:00 (the same record): the shared one's increase over [00:00, 12:00)
    #     = 5 GB (x's span on its own starts at 12:00, this period's end: nothing for it);
    #   import at 15:00: [00:00, 12:00) from the shared = 5 GB again (unchanged), and
    #     [12:00, 15:00) from its own = 3 GB, keyed with the span's start. The own server's
    #     answer for [00:00, 12:00) (9 GB) and the shared one's for [12:00, 15:00) (7 GB)
    #     are another meter's and not billed. Total 8 GB.
    settings.PROMETHEUS_URL = SHARED
    settings.EXTRA_CHARGES_STORAGE_PROMQL = ""
    settings.EXTRA_CHARGES_EGRESS_PROMQL = "container_network_transmit_bytes_total"
    x = k8s_cluster("x")
    pool = x.pools.get()
    AllocationFactory(team=team, pool=pool, scheduler_binding={"namespace": "nlp-infer"})
    nov, noon, three = utc(2026, 11, 1), utc(2026, 11, 1, 12), utc(2026, 11, 1, 15)
    shared, shared_asked = _egress_prometheus({utc(2026, 11, 1, 11): 4e9, noon: 5e9, three: 7e9})
    own, own_asked = _egress_prometheus({noon: 9e9, three: 3e9})
    servers = {SHARED: shared, OWN_A: own}
    extra = {"extra": extra_charges_import_prometheus}
    usage_import_meters(importers=extra, start=nov, end=noon, now=utc(2026, 11, 1, 11),
                        adapter_for=lambda url: servers[url]())  # fmt: skip
    x.prometheus_url = OWN_A
    x.save()
    for now in (noon, three):
        usage_import_meters(importers=extra, start=nov, end=now, now=now,
                            adapter_for=lambda url: servers[url]())  # fmt: skip
    found = UsageRecord.objects.filter(source=UsageSource.EXTRA_CHARGES_PROMETHEUS)
    assert {r.source_id: (r.quantity, r.period_start, r.period_end) for r in found} == {
        f"prom@{x.pk}:egress:nlp:2026-11": (Decimal(5), nov, noon),
        f"prom@{x.pk}:egress:nlp:2026-11@{int(noon.timestamp())}": (Decimal(3), noon, three),
    }
    # the 15:00 import asked each server for both stretches: 12 h at 12:00 and 3 h at 15:00
    assert [(at, "[43200s]" in q or "[10800s]" in q) for at, q in own_asked[-2:]] == [
        (noon, True),
        (three, True),
    ]
    assert [at for at, _ in shared_asked] == [utc(2026, 11, 1, 11), noon, noon, three]


def test_import_usage_cluster_reads_only_that_clusters_prometheus(team, settings, monkeypatch):
    # --cluster b: only b's Prometheus is asked (the Kubernetes source's 5 queries), and only
    # b's 3 cards × 7,200 s = 21,600 card-s are written; an unknown or Slurm
    # cluster, or --cluster with the reservation source, is a usage error (exit 2).
    from django.core.management import call_command

    import billing.management.commands.import_usage as command

    settings.PROMETHEUS_URL = SHARED
    k8s_cluster("a", OWN_A)
    b = k8s_cluster("b", OWN_B)
    ClusterFactory(slug="hpc")
    t0, t1 = utc(2026, 10, 5, 10), utc(2026, 10, 5, 12)
    fakes = two_own_prometheuses(t0, t1)
    monkeypatch.setattr(command, "metrics_adapter", lambda url: fakes[url])
    monkeypatch.setattr(command.timezone, "now", lambda: t1)
    call_command("import_usage", source="kubernetes", start=t0.date(),
                 end=t0.date() + timedelta(days=1), cluster="b")  # fmt: skip
    assert [len(f.queries) for f in fakes.values()] == [0, 0, 5]
    assert {k: v[1] for k, v in records().items()} == {
        f"k8s@{b.pk}:team-nlp:a100_80g_sxm:2026-10-05:used": Decimal(21600)
    }
    for source, slug in (("kubernetes", "nowhere"), ("kubernetes", "hpc"), ("reservation", "b")):
        with pytest.raises(SystemExit) as exit_:
            call_command("import_usage", source=source, start=t0.date(),
                         end=t0.date() + timedelta(days=1), cluster=slug)  # fmt: skip
        assert exit_.value.code == 2
