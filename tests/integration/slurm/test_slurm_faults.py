"""Faults against the real slurmrestd: expired and foreign tokens, errors behind an HTTP 500,
and version discovery. (Nothing listening and a server that never answers are in
tests/scheduler_adapters/test_slurm_client_faults.py: they need no Slurm.)"""

import time
from pathlib import Path

import pytest

from scheduler_adapters.errors import SchedulerAuthError, SchedulerRejected
from scheduler_adapters.records import JobSpec
from scheduler_adapters.slurm.client import SlurmRestAdapter, mint_token

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
        api_version=settings["SLURM_API_VERSION"],
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


def test_an_expired_token_is_renewed_once_on_the_controller_side(slurm_settings):
    adapter, asked = adapter_with_tokens(
        slurm_settings, [expired(slurm_settings), fresh(slurm_settings)]
    )

    nodes = adapter.list_nodes().nodes  # slurmctld answered only -1; slurmdbd told why

    assert {node.hostname for node in nodes} == {"gpu-a100-01", "gpu-4090-01"}
    assert asked == ["portal", "portal"]


def test_a_token_signed_with_another_key_is_an_auth_error(slurm_settings):
    adapter, asked = adapter_with_tokens(
        slurm_settings, [lambda user: mint_token(b"not the key" * 3, user, lifespan_s=300)]
    )

    with pytest.raises(SchedulerAuthError) as caught:
        adapter.list_nodes()

    assert asked == ["portal", "portal"]
    assert not caught.value.transient


def test_an_error_behind_http_500_keeps_its_slurm_number(slurm):
    spec = JobSpec(
        account="no-such-account",
        user="alice",
        partition="gpu",
        script="#!/bin/bash\ntrue\n",
        gpus=1,
        gres_type="a100",
    )

    with pytest.raises(SchedulerRejected) as caught:
        slurm.submit_job(spec)

    assert caught.value.http_status == 500
    assert caught.value.error_numbers == (2045,)


def test_the_api_version_is_discovered_from_the_server(slurm):
    assert slurm.api_version == "v0.0.38"
