"""What the tests of clusters as data share: adapters built afresh around each test
(:func:`fresh_adapters`, registered for every test by ``tests/conftest.py``; a module asks for
it with ``pytest.mark.usefixtures("fresh_adapters")``) and the fields of a Slurm cluster that is
checked without any network (:func:`offline_slurm_fields`)."""

from __future__ import annotations

from typing import Any

import pytest

from pools.clusters import adapters


@pytest.fixture
def fresh_adapters():
    """:mod:`pools.clusters.adapters` keeps one adapter per cluster in the process: emptied
    before the test and after it, so that no test reads another's clusters' adapters."""
    adapters.reset()
    yield
    adapters.reset()


def offline_slurm_fields(**extra: Any) -> dict[str, Any]:
    """A Slurm cluster ``legacy`` whose JWT key file does not exist, as a form or the API
    takes it: its connection check fails on the credentials before any network (saved
    unreachable with that reason). ``extra`` adds or replaces fields."""
    return {
        "slug": "legacy",
        "name": "Legacy",
        "kind": "slurm",
        "api_url": "http://slurm-legacy.example.com:6820",
        "slurm_cluster_name": "legacy",
        "slurm_user": "portal",
        "credential_kind": "jwt-key",
        "credential_path": "/nonexistent/jwt.key",
        "time_zone": "UTC",
        **extra,
    }
