"""Shared fixtures: paths of the fixture files, API clients and users of each role."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from browser_support import browser, page  # noqa: F401  (one session browser for all)
from cluster_support import fresh_adapters  # noqa: F401  (adapters built afresh)
from db_marks import require_postgresql
from kubernetes_support import apiservers  # noqa: F401  (two fake Kubernetes clusters)
from prometheus_support import prometheuses  # noqa: F401  (three recording Prometheus)

from pools.audit import models as audit_models
from pools.inventory import models as inventory_models

FIXTURES = Path(__file__).parent / "fixtures"
MID_MONTH = datetime(2026, 11, 18, 12, 0, 30, tzinfo=UTC)
"""A Wednesday noon in the middle of November 2026 (UTC, the billing zone's default)."""


def pytest_runtest_setup(item):
    """The ``postgresql`` mark (:func:`db_marks.require_postgresql`)."""
    require_postgresql(item)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache (the dashboard caches Prometheus readings)."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def mid_month(monkeypatch) -> datetime:
    """``django.utils.timezone.now`` (what the pages, services and factories read) pinned to
    :data:`MID_MONTH`, which it returns: a test of "this month so far", "the last hour" or
    "since yesterday" cannot cross a month's or a day's edge (run on the 1st at 00:20, the
    hour before is last month's), nor drift by the seconds the test takes."""
    monkeypatch.setattr("django.utils.timezone.now", lambda: MID_MONTH)
    return MID_MONTH


@pytest.fixture
def outside_a_transaction():
    """Read as a page reads, outside a transaction (the test's own is one), so generation-keyed
    sums are read from and kept in the cache (:func:`pools.common.generation.cached`); writes
    reach them through committed generations (``django_capture_on_commit_callbacks``)."""
    from unittest import mock

    with mock.patch("pools.common.generation.in_transaction", return_value=False):
        yield


@pytest.fixture
def read_as_a_page():
    """A context manager: the reads inside it run as a page's do, outside a transaction (the
    test's own hidden from the connection's ``in_atomic_block``), so generation-keyed sums are
    read from and kept in the cache. Reads only: a write there would not be in the test's
    transaction's bookkeeping."""
    from contextlib import contextmanager
    from unittest import mock

    from django.db import connection

    @contextmanager
    def outside():
        with mock.patch.object(connection, "in_atomic_block", False):
            yield

    return outside


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def tricky_inputs() -> dict[str, dict]:
    """The shared tricky inputs (../shared/fixtures/tricky_inputs.json), by id."""
    rows = json.loads((FIXTURES / "tricky_inputs.json").read_text(encoding="utf-8"))
    return {row["id"]: row for row in rows}


@pytest.fixture
def pool_admin(django_user_model):
    return django_user_model.objects.create_user("root-admin", password="pw", is_staff=True)


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("member", password="pw")


@pytest.fixture
def admin_api(pool_admin):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(pool_admin)
    return client


@pytest.fixture
def member_api(member):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(member)
    return client


@pytest.fixture
def admin_page(pool_admin):
    """A Django test client signed in as a pool admin (staff)."""
    from django.test import Client

    client = Client()
    client.force_login(pool_admin)
    return client


@pytest.fixture
def member_page(member):
    """A Django test client signed in as a plain member."""
    from django.test import Client

    client = Client()
    client.force_login(member)
    return client


@pytest.fixture
def table_counts():
    """Row counts of every inventory table, to assert that a refused action wrote nothing."""

    def counts() -> dict[str, int]:

        return {
            model.__name__: model.objects.count()
            for model in (
                inventory_models.Node,
                inventory_models.Gpu,
                inventory_models.MigDevice,
                inventory_models.DriverGroup,
                inventory_models.InventoryImport,
                audit_models.AuditEvent,
                inventory_models.GpuModelAlias,
                inventory_models.Pool,
            )
        }

    return counts


# ---------------------------------------------------------------------------------------------
# Capacity requests and allocations: two pools, two teams, one user per role.


@pytest.fixture
def l40s(db):
    from pools.inventory.models import GpuModel

    return GpuModel.objects.get(slug="l40s")


@pytest.fixture
def infer_pool(db):
    """Kubernetes pool ``infer``: 2 nodes x 4 L40S on driver 550.54.15 (CUDA up to 12.4)."""
    from factories import PoolFactory, node_with_gpus

    from pools.common.choices import Scheduler

    pool = PoolFactory(
        slug="infer", name="Inference", scheduler=Scheduler.KUBERNETES, slurm_partition=""
    )
    for host in (1, 2):
        node_with_gpus(
            4,
            gpu_model="l40s",
            hostname=f"inf-{host:02d}",
            pool=pool,
            scheduler=Scheduler.KUBERNETES,
            driver_version="550.54.15",
        )
    return pool


@pytest.fixture
def train_pool(db):
    """Slurm pool ``train``: 1 node x 8 A100 SXM4 80GB on driver 535.129.03 (CUDA up to 12.2)."""
    from factories import PoolFactory, node_with_gpus

    pool = PoolFactory(slug="train", name="Training", slurm_partition="train")
    node_with_gpus(8, hostname="trn-01", pool=pool, driver_version="535.129.03")
    return pool


@pytest.fixture
def team(db):
    from factories import TeamFactory

    return TeamFactory(slug="nlp", name="NLP")


@pytest.fixture
def team_member(team):
    """``alice``, a plain member of team ``nlp``."""
    from factories import MembershipFactory

    return MembershipFactory(team=team, user__username="alice").user


@pytest.fixture
def team_manager(team):
    """``mia``, manager of team ``nlp``."""
    from factories import MembershipFactory

    from pools.common.choices import TeamRole

    return MembershipFactory(team=team, user__username="mia", role=TeamRole.MANAGER).user


@pytest.fixture
def other_member(db):
    """``victor``, a member of team ``vision`` only."""
    from factories import MembershipFactory

    return MembershipFactory(team__slug="vision", team__name="Vision", user__username="victor").user


@pytest.fixture
def api_as():
    """``api_as(user)``: an API client signed in as ``user`` (``None``: anonymous)."""
    from rest_framework.test import APIClient

    def client_for(user):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return client_for


@pytest.fixture
def request_state():
    """Every request and allocation row, and the audit event count: a refused action leaves
    this exactly as it was."""

    def state() -> dict:
        from pools.audit.models import AuditEvent
        from pools.capacity.models import Allocation, CapacityRequest

        return {
            "requests": list(CapacityRequest.objects.order_by("pk").values()),
            "allocations": list(Allocation.objects.order_by("pk").values()),
            "audit_events": AuditEvent.objects.count(),
        }

    return state
