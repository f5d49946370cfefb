"""Kubernetes errors by meaning (issue #28 item 2): what no retry cures is final and names the
object and the field; only timeouts, connection errors, 429 and 503 (and a 500 that says it
timed out) are transient. Tasks retry transient errors with back-off up to a ceiling
(pools/jobs.py ``retry_countdown``, ``MAX_RETRIES``)."""

import copy
import datetime
import ipaddress
import json
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scheduler_adapters.errors import SchedulerRejected, SchedulerUnavailable
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_transport import (
    TlsVerificationFailed,
    api_client_from_settings,
)
from scheduler_adapters.types import KueueCohort

A100 = "NVIDIA-A100-SXM4-80GB"
NS = "team-nlp"


def _ensure(adapter, quota=None, **options):
    return adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota=quota or {A100: 2}, **options)


def test_a_field_the_installed_crd_does_not_know_is_final_and_named(
    k8s_fake, apiserver, make_adapter, monkeypatch
):
    """A cluster whose Kueue ClusterQueue schema has no ``cohortName`` (an older CRD): the
    apply answers the real server's 500 "failed to create typed patch object (/team-nlp;
    kueue.x-k8s.io/v1beta2, Kind=ClusterQueue): .spec.cohortName: field not declared in
    schema". One PATCH, then a final rejection naming the object and the field: before issue
    #28 it was SchedulerUnavailable (transient) and the task retried it for ever."""
    key = ("kueue.x-k8s.io/v1beta2", "ClusterQueue")
    older = copy.deepcopy(k8s_fake.KUEUE_SCHEMAS[key])
    del older["properties"]["spec"]["properties"]["cohortName"]
    monkeypatch.setitem(k8s_fake.KUEUE_SCHEMAS, key, older)
    adapter = make_adapter()
    _ensure(adapter, {A100: 4}, kueue=True)
    before = len(apiserver.requests)

    with pytest.raises(SchedulerRejected) as rejected:
        _ensure(adapter, {A100: 4}, cohort=KueueCohort("pool-a", {A100: 2}))

    assert rejected.value.transient is False
    assert rejected.value.http_status == 500
    assert rejected.value.message == (
        "ClusterQueue team-nlp: field .spec.cohortName is not in the schema the cluster serves "
        "(an older CRD or API version installed?)"
    )
    patches = [r for r in apiserver.requests[before:] if r.method == "PATCH"]
    assert [(r.path, r.status) for r in patches] == [
        (f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{NS}", 500)
    ]


def test_the_fake_answers_an_unknown_applied_field_as_the_real_server(apiserver, make_adapter):
    """The body of kubernetes/kubernetes#122480: no ``reason``, code 500."""
    adapter = make_adapter()
    _ensure(adapter)
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException

    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota"},
        "spec": {"hardd": {"pods": "1"}},
    }
    with pytest.raises(ApiException) as error:
        CoreV1Api(adapter.transport.api_client).patch_namespaced_resource_quota(
            "gpu-quota",
            NS,
            body,
            field_manager="someone",
            _content_type="application/apply-patch+yaml",
        )
    assert json.loads(error.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "failed to create typed patch object (team-nlp/gpu-quota; /v1, "
        "Kind=ResourceQuota): .spec.hardd: field not declared in schema",
        "code": 500,
    }


@pytest.mark.parametrize(
    ("status", "message", "transient"),
    [
        (429, "Too many requests, please try again later.", True),
        (503, "the server is currently unable to handle the request", True),
        (504, "the server was unable to return a response in the time allotted", True),
        (500, "etcdserver: request timed out", True),
        (
            500,
            'Internal error occurred: failed calling webhook "mclusterqueue.kb.io": Post '
            '"https://kueue-webhook-service.kueue-system.svc:443/mutate": dial tcp '
            "10.96.0.12:443: connect: connection refused",
            True,
        ),
        (500, "Internal error occurred: unexpected response: 400", False),
    ],
)
def test_only_what_passes_by_itself_is_transient(
    apiserver, make_adapter, status, message, transient
):
    apiserver.fail("GET", None, status=status, reason="InternalError", message=message)

    with pytest.raises((SchedulerUnavailable, SchedulerRejected)) as error:
        make_adapter().get_gpu_quota("nlp")

    assert (error.value.http_status, error.value.transient) == (status, transient)
    assert message in error.value.message


def test_a_value_the_client_itself_refuses_is_final_and_names_the_object(make_adapter):
    """The client checks arguments before sending (pydantic ``ValidationError``, a
    ``ValueError``): a name that is not a string never reaches the server."""
    adapter = make_adapter()
    bad = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": 42, "namespace": NS},
        "spec": {},
    }

    with pytest.raises(SchedulerRejected) as refused:
        adapter.transport.apply(bad, operation="set_gpu_quota")

    assert refused.value.transient is False
    assert refused.value.operation == "set_gpu_quota"
    assert refused.value.message == (
        f"the Kubernetes client refused ResourceQuota {NS}/42: name: Input should be a valid string"
    )


# --------------------------------------------------------------------------- TLS


@pytest.fixture
def tls_server(tmp_path):
    """An HTTPS endpoint with a self-signed certificate for 127.0.0.1 (not in any CA bundle
    the client trusts): the handshake fails on the client's verification."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}", cert_path
    stop.set()
    thread.join(timeout=2)
    listener.close()


def test_a_certificate_that_does_not_verify_is_final(tls_server):
    """Before issue #28 a TLS verification failure was SchedulerUnavailable, transient."""
    url, _ = tls_server
    adapter = KubernetesAdapter(
        api_client=api_client_from_settings(host=url, token="t"), connect_timeout_s=2
    )
    try:
        with pytest.raises(TlsVerificationFailed) as failed:
            adapter.get_gpu_quota("nlp")
    finally:
        adapter.close()

    assert failed.value.transient is False
    assert failed.value.code == "scheduler_tls"
    assert f"TLS verification of the Kubernetes API at {url} failed" in failed.value.message
    assert "CERTIFICATE_VERIFY_FAILED" in failed.value.message


def test_the_right_ca_gets_past_verification(tls_server):
    """With the server's own certificate as CA the handshake succeeds (the endpoint then
    closes the connection: a transient error, not a TLS one)."""
    url, cert_path = tls_server
    adapter = KubernetesAdapter(
        api_client=api_client_from_settings(host=url, token="t", ca_cert=str(cert_path)),
        connect_timeout_s=2,
        timeout_s=2,
    )
    try:
        with pytest.raises(SchedulerUnavailable) as failed:
            adapter.get_gpu_quota("nlp")
    finally:
        adapter.close()
    assert failed.value.transient is True
