"""``KubernetesAdapter.pending_workloads`` over HTTP against the fake API server holding the
recorded Workload objects of ``tests/fixtures/kubernetes/kueue_workloads.json`` (their source
is in the file's ``_source``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from scheduler_adapters.kueue_workloads import QuotaShortfall, quota_shortfall

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes" / "kueue_workloads.json"


def _items() -> list[dict]:
    return json.loads(RECORDED.read_text())["items"]


def _serve(apiserver, items):
    for obj in items:
        namespace = obj["metadata"]["namespace"]
        if apiserver.get("", "namespaces", None, namespace) is None:
            apiserver.put_object(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        apiserver.put_object(obj, manager="kueue-controller")


def test_not_admitted_workloads_with_their_reasons(apiserver, make_adapter):
    _serve(apiserver, _items())
    adapter = make_adapter()

    found = {w.name: w for w in adapter.pending_workloads()}

    assert "job-running-1a1a5" not in found  # Admitted True: not waiting
    assert len(found) == 8
    llama = found["job-train-llama-5c1f2"]
    # 2 pods x 4 nvidia.com/gpu each = 8 cards
    assert (llama.namespace, llama.queue_name, llama.gpus_requested) == ("team-alpha", "default", 8)
    assert (llama.condition, llama.reason) == ("QuotaReserved", "Pending")
    assert llama.shortfall == QuotaShortfall("nvidia-a100-sxm4-80gb", more_needed=4)
    assert llama.created == datetime(2026, 12, 4, 13, 40, tzinfo=UTC)

    huge = found["job-sweep-huge-77aa0"]
    # previously considered 0 + current 16 > maximum 8
    assert huge.shortfall == QuotaShortfall("nvidia-a100-sxm4-80gb", requested=16, maximum=8)

    preempted = found["job-finetune-a1b2c"]
    assert (preempted.condition, preempted.reason) == ("Evicted", "Preempted")
    assert preempted.shortfall == QuotaShortfall("nvidia-h100-80gb-hbm3", more_needed=2)

    checks = found["job-burst-0f0f1"]
    assert (checks.condition, checks.reason, checks.admission_checks) == (
        "Admitted", "UnsatisfiedAdmissionChecks", ("dws-prov",),
    )  # fmt: skip
    assert found["job-queued-9a9a3"].condition is None
    assert found["job-odd-4c4c4"].reason == "SomeFutureReason"
    listed = [r for r in apiserver.requests if r.method == "GET" and "workloads" in r.path]
    assert len(listed) == 1  # one list call across namespaces


def test_without_kueue_nothing_is_read(k8s_fake, make_adapter):
    server = k8s_fake.FakeApiServer(kueue=False).start()
    try:
        adapter = make_adapter(host=server.url, token=server.token)
        assert adapter.pending_workloads() == []
        assert not [r for r in server.requests if "workloads" in r.path]
    finally:
        server.stop()


def test_messages_of_other_resources_have_no_gpu_figures():
    cpu = (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
        "default-flavor, 9 more needed"
    )
    assert quota_shortfall(cpu) is None
