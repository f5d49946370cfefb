"""The HTTP fake of kube-apiserver (``tests/scheduler_adapters/kubernetes/fake_apiserver.py``)
for tests outside its folder, and a Django setting that points the portal's Kubernetes adapter
at it. The module is loaded from its path once, under the name its own conftest uses, so both
see one module (with ``--import-mode=importlib`` a test folder's module is not importable)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from django.test import override_settings

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
