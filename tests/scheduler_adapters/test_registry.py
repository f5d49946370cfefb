"""Building adapters from plain settings dicts."""

import pytest

from scheduler_adapters.fake import FakeScheduler
from scheduler_adapters.registry import (
    build_scheduler_adapter,
    read_env_file,
    slurm_settings_from_env,
)
from scheduler_adapters.slurm.client import SlurmRestAdapter

ENV_FILE = """# Written by gpu-pool-portal scripts/services/slurm.sh; rerun it rather than editing.
SLURMRESTD_URL=http://127.0.0.1:6820
SLURM_API_VERSION=v0.0.38
SLURM_CLUSTER=portal
SLURM_PARTITION=gpu
SLURM_JWT_KEY={key}
SLURM_ADMIN_USER=portal
SLURM_TEST_USERS="alice bob"
"""


def test_fake_backend():
    adapter = build_scheduler_adapter({"BACKEND": "fake", "PARTITIONS": {"p": {"l40s": 8}}})

    assert isinstance(adapter, FakeScheduler)
    assert adapter.partitions == {"p": {"l40s": 8}}


def test_slurm_backend_from_the_test_cluster_env_file(tmp_path):
    key = tmp_path / "jwt_hs256.key"
    key.write_bytes(b"k" * 32)
    env_file = tmp_path / "slurm-test.env"
    env_file.write_text(ENV_FILE.format(key=key))

    env = read_env_file(env_file)
    adapter = build_scheduler_adapter(slurm_settings_from_env(env))

    assert env["SLURM_TEST_USERS"] == "alice bob"
    assert isinstance(adapter, SlurmRestAdapter)
    assert adapter.api_version == "v0.0.38"  # configured: no request made
    adapter.close()


def test_fixed_token_and_sacctmgr():
    adapter = build_scheduler_adapter(
        {
            "BACKEND": "slurm",
            "URL": "http://slurm:6820",
            "USER": "portal",
            "CLUSTER": "c",
            "TOKEN": "t",
            "API_VERSION": "v0.0.38",
            "SACCTMGR": {"ENABLED": True, "PATH": "/usr/bin/sacctmgr"},
        }
    )

    assert adapter._rest._provider("alice") == "t"
    assert adapter._accounts._sacctmgr is not None


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"BACKEND": "pbs"}, "BACKEND"),
        ({"BACKEND": "fake", "URL": "x"}, "unknown scheduler settings keys: URL"),
        ({"BACKEND": "slurm", "USER": "p", "CLUSTER": "c", "TOKEN": "t"}, "need URL"),
        (
            {"BACKEND": "slurm", "URL": "u", "USER": "p", "CLUSTER": "c"},
            "exactly one of JWT_KEY_PATH and TOKEN",
        ),
        (
            {
                "BACKEND": "slurm",
                "URL": "u",
                "USER": "p",
                "CLUSTER": "c",
                "TOKEN": "t",
                "TIMEOUT": 3,
            },
            "unknown scheduler settings keys: TIMEOUT",
        ),
        (
            {
                "BACKEND": "slurm",
                "URL": "u",
                "USER": "p",
                "CLUSTER": "c",
                "TOKEN": "t",
                "SACCTMGR": {"ENABLE": True},
            },
            "unknown scheduler SACCTMGR keys: ENABLE",
        ),
    ],
)
def test_bad_settings_are_named(settings, message):
    with pytest.raises(ValueError, match=message):
        build_scheduler_adapter(settings)
