"""The Kubernetes manifests (``deploy/kubernetes/``, base plus the default and production
overlays) render and are what a platform team needs: every object validates against the
Kubernetes OpenAPI schemas (kubernetes-validate), probes, autoscaling, exactly one beat,
migrations before the pods start, resource requests, unprivileged containers."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kustomize_lite import render

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = ROOT / "deploy" / "kubernetes" / "overlays"
K8S_VERSION = kubernetes_validate.latest_version()
# Custom resources have no schema in kubernetes-validate; checked by hand below.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def by_key(objects: list[dict]) -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


@pytest.fixture(scope="module", params=["default", "production"])
def overlay(request):
    return request.param, by_key(render(OVERLAYS / request.param))


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


@pytest.mark.parametrize("name", ["default", "production"])
def test_the_renderer_agrees_with_kubectl_kustomize(name):
    """Against what Kustomize v5.5.0 rendered (recorded: no reachable registry ships kubectl),
    and against kubectl itself where this machine has it, so a stale recording is caught too."""
    recorded = (ROOT / "tests" / "fixtures" / "kustomize" / f"{name}.yaml").read_text()
    rendered = by_key(render(OVERLAYS / name))

    assert rendered == by_key(d for d in yaml.safe_load_all(recorded) if d)
    if shutil.which("kubectl"):
        live = subprocess.run(
            ["kubectl", "kustomize", str(OVERLAYS / name)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert live == recorded, "re-record tests/fixtures/kustomize (see its README)"


def test_every_object_validates_against_the_kubernetes_schemas(overlay):
    _, objects = overlay
    validated = 0
    for obj in objects.values():
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        validated += 1
    assert validated == len(objects) - sum(
        (o["apiVersion"], o["kind"]) in CUSTOM_KINDS for o in objects.values()
    )
    assert validated >= 9


def test_the_objects_a_deployment_needs_are_there(overlay):
    name, objects = overlay
    kinds = sorted(kind for kind, _ in objects)
    expected = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Deployment",
        "Deployment",
        "HorizontalPodAutoscaler",
        "Ingress",
        "Job",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    ]
    if name == "production":
        expected = sorted([*expected, "ServiceMonitor"])
    assert kinds == expected
    namespaced = [o for o in objects.values() if not o["kind"].startswith("Cluster")]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-pool-portal"}
    assert all("namespace" not in o["metadata"] for o in objects.values() if o not in namespaced)


def test_web_has_probes_on_its_port_a_service_an_ingress_and_an_hpa(overlay):
    name, objects = overlay
    web = objects["Deployment", "gpu-pool-portal-web"]
    (container,) = pod_spec(web)["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]
    assert container["command"][:2] == ["gunicorn", "portal.wsgi"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}

    service = objects["Service", "gpu-pool-portal-web"]
    assert service["spec"]["selector"] == web["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http"}]
    ingress = objects["Ingress", "gpu-pool-portal"]
    (rule,) = ingress["spec"]["rules"]
    assert rule["http"]["paths"][0]["backend"]["service"] == {
        "name": "gpu-pool-portal-web",
        "port": {"name": "http"},
    }
    config = objects["ConfigMap", "gpu-pool-portal"]["data"]
    assert config["ALLOWED_HOSTS"] == rule["host"]
    assert config["CSRF_TRUSTED_ORIGINS"] == f"https://{rule['host']}"
    assert ingress["spec"]["tls"][0]["hosts"] == [rule["host"]]

    hpa = objects["HorizontalPodAutoscaler", "gpu-pool-portal-web"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "gpu-pool-portal-web",
    }
    low, high = (2, 6) if name == "default" else (3, 12)
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (low, high)
    assert web["spec"]["replicas"] == low
    pdb = objects["PodDisruptionBudget", "gpu-pool-portal-web"]
    assert pdb["spec"]["selector"]["matchLabels"] == web["spec"]["selector"]["matchLabels"]


def test_exactly_one_beat_never_two_during_a_rollout(overlay):
    _, objects = overlay
    beats = [
        o
        for o in objects.values()
        if o["kind"] == "Deployment" and "beat" in " ".join(pod_spec(o)["containers"][0]["command"])
    ]
    (beat,) = beats
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    targets = {
        o["spec"]["scaleTargetRef"]["name"]
        for o in objects.values()
        if o["kind"] == "HorizontalPodAutoscaler"
    }
    assert beat["metadata"]["name"] not in targets


def test_migrations_run_in_a_job_and_every_pod_waits_for_them(overlay):
    _, objects = overlay
    job = objects["Job", "gpu-pool-portal-migrate"]
    (migrate,) = pod_spec(job)["containers"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for name in ("web", "worker", "beat"):
        (wait,) = pod_spec(objects["Deployment", f"gpu-pool-portal-{name}"])["initContainers"]
        assert "manage.py migrate --check" in wait["command"][-1], name
        assert wait["image"] == migrate["image"], name


def all_pods(objects):
    return [pod_spec(o) for o in objects.values() if o["kind"] in ("Deployment", "Job")]


def test_every_container_requests_resources_and_runs_unprivileged_as_the_image_user(overlay):
    _, objects = overlay
    dockerfile_user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    containers = 0
    for pod in all_pods(objects):
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert str(pod["securityContext"]["runAsUser"]) == dockerfile_user[1]
        assert str(pod["securityContext"]["runAsGroup"]) == dockerfile_user[2]
        for container in pod.get("initContainers", []) + pod["containers"]:
            containers += 1
            requests = container["resources"]["requests"]
            assert {"cpu", "memory"} <= set(requests), container["name"]
            assert "memory" in container["resources"]["limits"], container["name"]
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["image"] == "registry.example.com/gpu-pool-portal:0.1.0"
            # Settings from the ConfigMap and the externally created Secret of that name.
            assert container["envFrom"] == [
                {"configMapRef": {"name": "gpu-pool-portal"}},
                {"secretRef": {"name": "gpu-pool-portal"}},
            ]
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts  # the only writable place
    assert containers == 7  # web, worker, beat (each with its init container) and migrate


def test_configmap_keys_are_settings_the_portal_reads():
    settings_source = (ROOT / "portal" / "settings" / "base.py").read_text()
    for name in ("default", "production"):
        data = by_key(render(OVERLAYS / name))["ConfigMap", "gpu-pool-portal"]["data"]
        for key in data:
            if key in ("GUNICORN_CMD_ARGS", "XDG_CACHE_HOME"):  # read by gunicorn, fontconfig
                continue
            assert f'"{key}"' in settings_source, key
        assert data["DEBUG"] == "0"
        assert int(data["NUM_PROXIES"]) >= 1  # behind the ingress controller
        # A request's deadline falls before gunicorn's worker timeout, so it answers JSON.
        gunicorn_timeout = int(data["GUNICORN_CMD_ARGS"].split("--timeout ")[1].split()[0])
        assert 0 < float(data["REQUEST_TIMEOUT_S"]) < gunicorn_timeout


def test_production_scales_out_and_is_scraped_by_prometheus():
    objects = by_key(render(OVERLAYS / "production"))
    assert objects["Deployment", "gpu-pool-portal-worker"]["spec"]["replicas"] == 4
    worker = pod_spec(objects["Deployment", "gpu-pool-portal-worker"])["containers"][0]
    assert "--concurrency=4" in worker["command"]
    web = objects["Deployment", "gpu-pool-portal-web"]
    assert pod_spec(web)["containers"][0]["resources"]["requests"] == {
        "cpu": "1",
        "memory": "768Mi",
    }
    monitor = objects["ServiceMonitor", "gpu-pool-portal-web"]
    service = objects["Service", "gpu-pool-portal-web"]
    assert monitor["spec"]["selector"]["matchLabels"] == service["metadata"]["labels"]
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert "http" in {p["name"] for p in service["spec"]["ports"]}


def test_the_worker_liveness_probe_asks_the_process_not_the_broker(overlay):
    """``celery inspect ping`` goes through Redis: a broker outage failed it on every worker
    and Kubernetes restarted them all (issue #27). The probe reads the heartbeat file the
    worker rewrites (portal/worker_health.py), which the worker's env names."""
    _, objects = overlay
    (container,) = pod_spec(objects["Deployment", "gpu-pool-portal-worker"])["containers"]
    assert container["livenessProbe"]["exec"]["command"] == [
        "python", "-m", "portal.worker_health",
    ]  # fmt: skip
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["WORKER_HEARTBEAT_FILE"].startswith("/tmp/")  # the writable emptyDir
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    # 3 failures 60 s apart, and the file may be 120 s old: a 30 s beat misses 4 before that
    probe = container["livenessProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 120
