"""Shared fixtures: paths of the fixture files, API clients and users of each role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


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
        from pools import models

        return {
            model.__name__: model.objects.count()
            for model in (
                models.Node,
                models.Gpu,
                models.MigDevice,
                models.DriverGroup,
                models.InventoryImport,
                models.AuditEvent,
                models.GpuModelAlias,
                models.Pool,
            )
        }

    return counts
