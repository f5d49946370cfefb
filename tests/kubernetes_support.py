"""The HTTP fake of kube-apiserver (``tests/scheduler_adapters/kubernetes/fake_apiserver.py``)
for tests outside its folder, a Django setting that points the portal's Kubernetes adapter
at it, and two of them as two Kubernetes clusters (the ``apiservers`` fixture, shared through
``tests/conftest.py``; :func:`kubernetes_cluster`). The module is loaded from its path once,
under the name its own conftest uses, so both see one module (with ``--import-mode=importlib``
a test folder's module is not importable)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.test import override_settings

from scheduler_adapters.kubernetes_fake import DEFAULT_NODES

FAKE = Path(__file__).resolve().parent / "scheduler_adapters" / "kubernetes" / "fake_apiserver.py"
NAME = "k8s_fake_apiserver"


def fake_apiserver() -> ModuleType:
    if NAME not in sys.modules:
        spec = importlib.util.spec_from_file_location(NAME, FAKE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[NAME] = module  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(module)
    return sys.modules[NAME]


@contextmanager
def portal_on_fake_apiserver(*, nodes: Any = None, **options: Any) -> Iterator[Any]:
    """A started FakeApiServer (serving ``nodes`` when given, else its default GPU nodes),
    with ``SCHEDULERS["kubernetes"]`` pointing at it (HOST and TOKEN, plus ``options`` such as
    ``KUEUE=True``) and the adapter cache reset around it."""
    from pools.clusters import (
        adapters,  # not at import: the adapter tests' conftest loads this module
    )

    module = fake_apiserver()
    server = (
        module.FakeApiServer() if nodes is None else module.FakeApiServer(nodes=nodes)
    ).start()
    adapters.reset()
    config = {"BACKEND": "kubernetes", "HOST": server.url, "TOKEN": server.token, **options}
    try:
        with override_settings(SCHEDULERS={"kubernetes": config}):
            yield server
    finally:
        adapters.reset()
        server.stop()


@pytest.fixture
def apiservers() -> Iterator[list[Any]]:
    """Two started HTTP-fake Kubernetes API servers serving ``DEFAULT_NODES``: two clusters."""
    module = fake_apiserver()
    servers = [module.FakeApiServer(nodes=DEFAULT_NODES).start() for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()


def kubernetes_cluster_fields(server: Any, directory: Path, slug: str) -> dict[str, Any]:
    """The fields of Kubernetes cluster ``slug`` (named ``slug.title()``) on fake ``server``,
    its token written to ``directory/<slug>.token`` (credentials by reference: a file)."""
    token = directory / f"{slug}.token"
    token.write_text(server.token + "\n", encoding="utf-8")
    return {
        "slug": slug,
        "name": slug.title(),
        "kind": "kubernetes",
        "api_url": server.url,
        "credential_kind": "token-file",
        "credential_path": str(token),
    }


def kubernetes_cluster(server: Any, directory: Path, slug: str) -> Any:
    """Cluster ``slug`` on fake ``server`` created through the service (its connection
    checked), as :func:`kubernetes_cluster_fields` gives it."""
    from pools.clusters.services import cluster_create  # not at import, as above

    fields = kubernetes_cluster_fields(server, directory, slug)
    return cluster_create(fields=fields, actor=None, render=lambda c: {"slug": c.slug})
