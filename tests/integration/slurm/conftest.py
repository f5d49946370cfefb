"""Fixtures of the Slurm integration tier (needs ``scripts/services/slurm.sh`` to have run)."""

from collections.abc import Iterator

import pytest
from integration.slurm.slurm_cluster import Cleanup, build_adapter, require_reachable, slurm_env

from scheduler_adapters.slurm.client import SlurmRestAdapter


@pytest.fixture(scope="session")
def slurm_settings() -> dict[str, str]:
    return slurm_env()


@pytest.fixture(scope="session")
def slurm(slurm_settings) -> Iterator[SlurmRestAdapter]:
    adapter = build_adapter(slurm_settings, API_VERSION=None)  # discovered from the server
    require_reachable(adapter)
    yield adapter
    adapter.close()


@pytest.fixture
def cleanup(slurm) -> Iterator[Cleanup]:
    tidy = Cleanup(slurm)
    yield tidy
    tidy.run()
