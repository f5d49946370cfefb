"""Kueue ``v1beta2`` only (issue #28 item 6): on first use the adapter reads which versions the
server serves (discovery, ``GET /apis``, once per adapter) and refuses plainly, before writing
anything, when the Kueue version it writes is not among them. Kueue 0.15 added ``v1beta2``;
Kueue 0.20 serves nothing else (``v1beta1`` removed)."""

import pytest

from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_transport import api_client_from_settings

A100 = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture
def cluster_with(k8s_fake):
    started = []

    def start(**options):
        server = k8s_fake.FakeApiServer(**options).start()
        adapter = KubernetesAdapter(
            api_client=api_client_from_settings(host=server.url, token=server.token)
        )
        started.append((server, adapter))
        return server, adapter

    yield start
    for server, adapter in started:
        adapter.close()
        server.stop()


def _ensure(adapter, **options):
    return adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 2}, **options)


def test_kueue_0_14_serving_only_v1beta1_is_refused_before_any_write(cluster_with):
    server, adapter = cluster_with(kueue=False, kueue_versions=("v1beta1",))

    with pytest.raises(SchedulerRejected) as refused:
        _ensure(adapter, kueue=True)

    assert refused.value.message == (
        "the cluster serves kueue.x-k8s.io v1beta1, but the portal writes "
        "kueue.x-k8s.io/v1beta2: install Kueue >= 0.15"
    )
    assert refused.value.transient is False
    assert server.writes() == []
    assert _ensure(adapter, kueue=False) is True  # without Kueue the team is made
    with pytest.raises(SchedulerRejected, match="serves kueue.x-k8s.io v1beta1"):
        adapter.get_gpu_quota("nlp", kueue=True)


def test_kueue_0_20_serving_only_v1beta2_is_used_and_discovery_read_once(cluster_with):
    server, adapter = cluster_with(kueue=True)

    assert _ensure(adapter, kueue=True) is True
    assert _ensure(adapter, kueue=True) is False
    adapter.get_gpu_quota("nlp", kueue=True)

    assert [r.path.rstrip("/") for r in server.requests].count("/apis") == 1


def test_without_kueue_no_discovery_is_needed(cluster_with):
    server, adapter = cluster_with(kueue=False)

    assert _ensure(adapter, kueue=False) is True

    assert "/apis" not in [r.path.rstrip("/") for r in server.requests]
