"""Faults against the real slurmrestd: expired and foreign tokens, errors behind an HTTP 500,
and version discovery. (Nothing listening and a server that never answers are in
tests/scheduler_adapters/test_slurm_client_faults.py: they need no Slurm.)"""

import time
from pathlib import Path

import httpx
import pytest
from integration.slurm.slurm_cluster import build_adapter

from scheduler_adapters.errors import SchedulerAuthError, SchedulerRejected
from scheduler_adapters.records import JobSpec
from scheduler_adapters.slurm.client import SlurmRestAdapter
from scheduler_adapters.slurm.dialects import DIALECTS
from scheduler_adapters.slurm.transport import mint_token

pytestmark = pytest.mark.integration


def adapter_with_tokens(settings, tokens):
    """An adapter whose provider hands out ``tokens`` in turn and records who asked."""
    asked = []

    def provider(user):
        asked.append(user)
        return tokens[min(len(asked), len(tokens)) - 1](user)

    adapter = SlurmRestAdapter(
        url=settings["SLURMRESTD_URL"],
        user=settings["SLURM_ADMIN_USER"],
        cluster=settings["SLURM_CLUSTER"],
        token_provider=provider,
        api_version=settings.get("SLURM_API_VERSION") or None,
    )
    return adapter, asked


def key(settings):
    return Path(settings["SLURM_JWT_KEY"]).read_bytes()


def expired(settings):
    return lambda user: mint_token(key(settings), user, lifespan_s=10, now=time.time() - 100)


def fresh(settings):
    return lambda user: mint_token(key(settings), user, lifespan_s=300)


def test_an_expired_token_is_renewed_once_on_the_slurmdbd_side(slurm_settings):
    adapter, asked = adapter_with_tokens(
        slurm_settings, [expired(slurm_settings), fresh(slurm_settings)]
    )

    assert adapter.get_gpu_limits("root") == ()  # slurmdbd answered 1007, then accepted
    assert asked == ["portal", "portal"]


def test_an_expired_token_is_renewed_once_on_the_controller_side(slurm_settings, cluster):
    adapter, asked = adapter_with_tokens(
        slurm_settings, [expired(slurm_settings), fresh(slurm_settings)]
    )

    nodes = adapter.list_nodes().nodes  # slurmctld answered only -1; slurmdbd told why

    assert {node.hostname for node in nodes} == cluster.hostnames  # as scontrol lists them
    assert asked == ["portal", "portal"]


def test_a_token_signed_with_another_key_is_an_auth_error(slurm_settings):
    adapter, asked = adapter_with_tokens(
        slurm_settings, [lambda user: mint_token(b"not the key" * 3, user, lifespan_s=300)]
    )

    with pytest.raises(SchedulerAuthError) as caught:
        adapter.list_nodes()

    assert asked == ["portal", "portal"]
    assert not caught.value.transient


def test_an_error_behind_http_500_keeps_its_slurm_number(slurm, slurm_settings, a100_partition):
    spec = JobSpec(
        account="no-such-account",
        user="alice",
        partition=a100_partition,
        script="#!/bin/bash\ntrue\n",
        gpus=1,
        gres_type="a100",
    )

    with pytest.raises(SchedulerRejected) as caught:
        slurm.submit_job(spec)

    # slurmrestd answers this refusal with 500 up to 25.x and 422 from 26.05 (both recorded).
    release = tuple(int(part) for part in slurm_settings.get("SLURM_RELEASE", "0.0").split(".")[:2])
    assert caught.value.http_status == (422 if release >= (26, 5) else 500)
    assert caught.value.error_numbers == (2045,)


def test_the_api_version_is_discovered_from_the_server(slurm_settings):
    """The newest version both sides know, worked out here from the server's own document
    (whatever version the env file pins for the rest of the tier)."""
    discovering = build_adapter(slurm_settings, API_VERSION=None)
    document = httpx.get(
        f"{slurm_settings['SLURMRESTD_URL']}/openapi/v3",
        headers={
            "X-SLURM-USER-NAME": slurm_settings["SLURM_ADMIN_USER"],
            "X-SLURM-USER-TOKEN": fresh(slurm_settings)(slurm_settings["SLURM_ADMIN_USER"]),
        },
        timeout=30,
    ).json()
    served = {path.split("/")[2] for path in document["paths"] if path.startswith("/slurm/v")}
    newest = max(served & DIALECTS.keys(), key=lambda v: tuple(map(int, v[1:].split("."))))

    assert discovering.api_version == newest
    discovering.close()
    release = slurm_settings.get("SLURM_RELEASE", "")
    if release.startswith("22.05."):
        assert newest == "v0.0.38"
    if release.startswith("24.11."):
        assert newest == "v0.0.42"


def test_the_tier_speaks_the_version_the_env_file_names(slurm, slurm_settings):
    pinned = slurm_settings.get("SLURM_API_VERSION")
    if pinned:
        assert slurm.api_version == pinned
    else:
        assert slurm.api_version in DIALECTS
