"""The portal running in the cluster it manages configures its client from its pod's
service account (issue #28 item 3), when no kubeconfig, host or token is set."""

import pytest

from scheduler_adapters.kubernetes_transport import api_client_from_settings

ENVIRON = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture
def service_account(tmp_path):
    (tmp_path / "token").write_text("sa-token-1")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    return tmp_path


def test_the_pods_service_account_is_used_when_nothing_else_is_set(service_account):
    client = api_client_from_settings(service_account_dir=service_account, environ=ENVIRON)
    configuration = client.configuration
    try:
        assert configuration.host == "https://10.96.0.1:443"
        # the header the client sends (auth setting "BearerToken"), re-read before it expires
        assert configuration.auth_settings()["BearerToken"]["value"] == "bearer sa-token-1"
        assert configuration.refresh_api_key_hook is not None
        assert configuration.ssl_ca_cert == str(service_account / "ca.crt")
        assert configuration.retries == 0
    finally:
        client.close()


def test_a_host_and_token_win_over_the_service_account(service_account):
    client = api_client_from_settings(
        host="https://k8s.example.com:6443",
        token="portal-token",
        service_account_dir=service_account,
        environ=ENVIRON,
    )
    try:
        assert client.configuration.host == "https://k8s.example.com:6443"
        assert (
            client.configuration.get_api_key_with_prefix("authorization") == "Bearer portal-token"
        )
    finally:
        client.close()


def test_outside_a_cluster_the_settings_say_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match=rf"a service-account token at {tmp_path}/token"):
        api_client_from_settings(service_account_dir=tmp_path, environ=ENVIRON)


def test_a_pod_without_the_service_host_is_refused_plainly(service_account):
    with pytest.raises(ValueError, match="in-cluster Kubernetes configuration: Service host/port"):
        api_client_from_settings(service_account_dir=service_account, environ={})
