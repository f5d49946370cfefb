"""Cluster health: credential expiry read from a token or a kubeconfig (never stored), the
figures of each cluster (drifts, errors in the last hour, last successes) computed by one
query, and the errors kept a week."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import ClusterFactory, PoolFactory, TeamFactory

from pools.capacity.models import SchedulerDrift
from pools.clusters.credentials import jwt_expiry, kubeconfig_expiry
from pools.clusters.models import Cluster, ClusterError
from pools.clusters.selectors import cluster_list
from pools.clusters.services import cluster_check, cluster_operation_record
from pools.common.choices import ClusterOperation, ClusterStatus, Scheduler


def jwt(claims: dict) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def certificate(not_after: datetime) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "portal")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(not_after - timedelta(days=365))
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def kubeconfig(user: dict) -> str:
    return json.dumps(  # JSON is YAML
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "portal@east",
            "clusters": [{"name": "east", "cluster": {"server": "https://east:6443"}}],
            "contexts": [{"name": "portal@east", "context": {"cluster": "east", "user": "p"}}],
            "users": [{"name": "p", "user": user}],
        }
    )


# 1_800_000_000 s after the epoch = 20,833 days + 28,800 s = 2027-01-15 08:00:00 UTC
EXP = 1_800_000_000
EXP_AT = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)


def test_a_jwt_expiry_is_its_exp_claim():
    assert jwt_expiry(jwt({"exp": EXP, "sun": "portal"})) == EXP_AT
    assert jwt_expiry(jwt({"sun": "portal"})) is None  # no exp: unknown
    assert jwt_expiry("an-opaque-token") is None
    assert jwt_expiry("a.b!!.c") is None


def test_a_kubeconfig_expiry_is_its_client_certificate_not_after(tmp_path):
    not_after = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
    inline = tmp_path / "inline.yaml"
    inline.write_text(
        kubeconfig({"client-certificate-data": base64.b64encode(certificate(not_after)).decode()})
    )
    (tmp_path / "portal.crt").write_bytes(certificate(not_after))
    by_path = tmp_path / "by-path.yaml"
    by_path.write_text(kubeconfig({"client-certificate": "portal.crt"}))
    token = tmp_path / "token.yaml"
    token.write_text(kubeconfig({"token": jwt({"exp": EXP})}))
    exec_plugin = tmp_path / "exec.yaml"
    exec_plugin.write_text(kubeconfig({"exec": {"command": "aws"}}))

    assert kubeconfig_expiry(str(inline)) == not_after
    assert kubeconfig_expiry(str(by_path)) == not_after
    assert kubeconfig_expiry(str(token)) == EXP_AT
    assert kubeconfig_expiry(str(exec_plugin)) is None
    assert kubeconfig_expiry(str(inline), "no-such-context") is None


@pytest.mark.django_db
def test_the_check_keeps_the_expiry_and_never_the_token(tmp_path, monkeypatch):
    token_file = tmp_path / "slurm.jwt"
    secret = jwt({"exp": EXP, "sun": "portal"})
    token_file.write_text(secret + "\n")
    cluster = ClusterFactory(
        slug="t", credential_kind="token-file", credential_path=str(token_file)
    )
    monkeypatch.setattr("pools.clusters.services._probe", lambda c: "v0.0.42")

    cluster_check(cluster=cluster)

    stored = Cluster.objects.get(pk=cluster.pk)
    assert stored.credential_expires_at == EXP_AT
    assert stored.status == ClusterStatus.REACHABLE
    row = Cluster.objects.filter(pk=cluster.pk).values().get()
    assert not any(secret in str(value) for value in row.values())


@pytest.mark.django_db
def test_health_figures_per_cluster():
    """a: 3 pools, 2 unrepaired drifts and 1 repaired, errors at now-10 min, now-50 min (in
    the last hour) and now-2 h (not); b: nothing. Counted in separate subqueries, a's figures
    are 3 / 2 / 2 — joined in one query they would multiply (3 × 3 × 3 rows)."""
    now = timezone.now()
    a = ClusterFactory(slug="a", name="A")
    ClusterFactory(slug="b", name="B")
    for n in range(3):
        PoolFactory(slug=f"a{n}", cluster=a)
    for account, repaired in (("x", False), ("y", False), ("z", True)):
        SchedulerDrift.objects.create(
            scheduler=Scheduler.SLURM,
            subject=f"account {account} GrpTRES gres/gpu:a100",
            expected="0",
            found="3",
            repaired=repaired,
            cluster=a,
        )
    for minutes, message in ((120, "oldest"), (50, "older"), (10, "newest")):
        ClusterError.objects.create(
            cluster=a,
            operation=ClusterOperation.RECONCILE,
            message=message,
            at=now - timedelta(minutes=minutes),
        )

    with CaptureQueriesContext(connection) as captured:
        rows = {c.slug: c for c in cluster_list(now=now)}
    assert len(captured) == 1
    figures = {
        s: (r.pool_count, r.drift_count, r.errors_last_hour, r.last_error) for s, r in rows.items()
    }
    assert figures == {"a": (3, 2, 2, "newest"), "b": (0, 0, 0, None)}


@pytest.mark.django_db
def test_health_counts_only_drifts_still_the_newest_of_their_object():
    """A history on cluster a (subject = the object; times are detected_at):

    - account x: unrepaired at t0, t1, then repaired at t2 -> repaired now: 0;
    - account y: repaired at t0, unrepaired at t1 -> 1 (its newest);
    - account z: unrepaired at t0 and t1, both with the same time for w (two rows, the
      higher id newest) -> 1;
    - account v on team T: unrepaired at t0; account v, no team, repaired at t1 -> another
      object (team differs): 1;
    - account x again, Kubernetes, unrepaired at t0 -> another scheduler: 1.
    Newest per object: 4 (every unrepaired row ever: 7); cluster b: 0. The old count was 7."""
    t0 = timezone.now() - timedelta(hours=3)
    t1, t2 = t0 + timedelta(hours=1), t0 + timedelta(hours=2)
    a = ClusterFactory(slug="a", name="A")
    ClusterFactory(slug="b", name="B")
    team = TeamFactory()
    history = [
        (Scheduler.SLURM, None, "account x", t0, False),
        (Scheduler.SLURM, None, "account x", t1, False),
        (Scheduler.SLURM, None, "account x", t2, True),
        (Scheduler.SLURM, None, "account y", t0, True),
        (Scheduler.SLURM, None, "account y", t1, False),
        (Scheduler.SLURM, None, "account z", t1, False),
        (Scheduler.SLURM, None, "account z", t1, False),
        (Scheduler.SLURM, team, "account v", t0, False),
        (Scheduler.SLURM, None, "account v", t1, True),
        (Scheduler.KUBERNETES, None, "account x", t0, False),
    ]
    for scheduler, owner, subject, at, repaired in history:
        drift = SchedulerDrift.objects.create(
            scheduler=scheduler, team=owner, subject=subject, expected="0", found="1",
            repaired=repaired, cluster=a,
        )  # fmt: skip
        SchedulerDrift.objects.filter(pk=drift.pk).update(detected_at=at)  # auto_now_add
    assert SchedulerDrift.objects.filter(repaired=False).count() == 7

    rows = {c.slug: c.drift_count for c in cluster_list()}
    assert rows == {"a": 4, "b": 0}


@pytest.mark.django_db
def test_a_success_is_stamped_and_errors_older_than_a_week_go():
    cluster = ClusterFactory(slug="a")
    at = timezone.now()
    ClusterError.objects.create(
        cluster=cluster, operation="usage", message="long ago", at=at - timedelta(days=8)
    )

    cluster_operation_record(cluster=cluster, operation=ClusterOperation.USAGE, errors=[], at=at)
    assert Cluster.objects.get(pk=cluster.pk).usage_imported_at == at
    assert ClusterError.objects.count() == 1  # a success prunes nothing, writes no error

    cluster_operation_record(
        cluster=cluster, operation=ClusterOperation.USAGE, errors=["slurmdbd down"], at=at
    )
    assert list(ClusterError.objects.values_list("message", flat=True)) == ["slurmdbd down"]
    assert Cluster.objects.get(pk=cluster.pk).usage_imported_at == at  # the last success stays


@pytest.mark.django_db
def test_credential_state_warns_a_week_ahead():
    now = timezone.now()
    states = [
        ClusterFactory(slug=f"c{n}", credential_expires_at=at).credential_state
        for n, at in enumerate(
            (None, now - timedelta(minutes=1), now + timedelta(days=6), now + timedelta(days=8))
        )
    ]
    assert states == [None, "expired", "soon", "valid"]


@pytest.mark.django_db
@override_settings(SCHEDULERS={})
def test_an_environment_cluster_without_its_variables_is_portal_only_not_down():
    """The demo and a records-only deployment: nothing to reach, so the cluster is not
    unreachable and its pools stay writable."""
    cluster = ClusterFactory(
        slug="env-slurm", credential_kind="environment", credential_path="", api_url=""
    )

    cluster_check(cluster=cluster)

    stored = Cluster.objects.get(pk=cluster.pk)
    assert stored.status == ClusterStatus.UNKNOWN
    assert "configure no slurm connection" in stored.status_reason
    assert not stored.is_down
    assert not ClusterError.objects.exists()
