"""Fixtures for the Kubernetes adapter: the HTTP fake API server, and one harness that runs the
contract tests against both the real adapter (over HTTP to the fake server) and FakeKubernetes.

``fake_apiserver.py`` sits next to this file; with ``--import-mode=importlib`` and no
``__init__.py`` it is not importable by name, so it is loaded from its path
(``tests/kubernetes_support.py``) and handed to the tests through the ``k8s_fake`` fixture.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_support import fake_apiserver as load_fake_apiserver

from scheduler_adapters.errors import SchedulerAuthError, SchedulerUnavailable
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_fake import DEFAULT_NODES, FakeKubernetes
from scheduler_adapters.kubernetes_transport import KINDS, api_client_from_settings

fake_apiserver = load_fake_apiserver()


@pytest.fixture(scope="session")
def k8s_fake():
    """The fake_apiserver module: FakeApiServer, validate_object, KUEUE_SCHEMAS, free_port."""
    return fake_apiserver


@pytest.fixture
def apiserver() -> Iterator[Any]:
    """A running fake API server with the two GPU nodes of FakeKubernetes' default cluster."""
    server = fake_apiserver.FakeApiServer(nodes=DEFAULT_NODES).start()
    yield server
    server.stop()


@pytest.fixture
def make_adapter(apiserver) -> Iterator[Callable[..., KubernetesAdapter]]:
    """Adapters talking to ``apiserver`` over HTTP with its bearer token, as the registry
    builds them (HOST + TOKEN), with the timeouts of 30 s read and 10 s connect: the
    fake answers in milliseconds, but on a loaded CI machine its thread may wait seconds for a
    core, and a tighter timeout turned that wait into a transient error (tests of hangs and
    timeouts pass their own)."""
    made: list[KubernetesAdapter] = []

    def make(**options: Any) -> KubernetesAdapter:
        host = options.pop("host", apiserver.url)
        token = options.pop("token", apiserver.token)
        options.setdefault("timeout_s", 30.0)
        options.setdefault("connect_timeout_s", 10.0)
        adapter = KubernetesAdapter(
            api_client=api_client_from_settings(host=host, token=token), **options
        )
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        adapter.close()


@dataclass
class Cluster:
    """What a contract test gets: the adapter and backend-neutral ways to look at the cluster
    and to break it."""

    adapter: Any
    backend: str
    server: Any = None

    @property
    def fake(self) -> FakeKubernetes:
        return self.adapter

    def writes(self) -> int:
        if self.server is not None:
            return len(self.server.writes())
        return len(self.fake.writes())

    def read(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        if self.server is not None:
            spec = KINDS[kind]
            return self.server.get(spec.group, spec.plural, namespace, name)
        found = self.fake.objects.get((kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def edit(self, kind: str, name: str, namespace: str | None, change: Callable) -> None:
        """Change an object by hand (drift)."""
        if self.server is not None:
            spec = KINDS[kind]
            self.server.edit(spec.group, spec.plural, namespace, name, change)
        else:
            self.fake.edit(kind, name, namespace, change)

    def delete_namespace(self, name: str) -> None:
        if self.server is not None:
            self.server.objects.pop(("", "namespaces", None, name))
            for key in [key for key in self.server.objects if key[2] == name]:
                del self.server.objects[key]
        else:
            self.fake.delete("Namespace", name)

    def conflict_next(self, times: int = 1) -> None:
        """The next ``times`` applies meet a concurrent writer."""
        if self.server is not None:
            self.server.concurrent_write("PATCH", times=times)
        else:
            self.fake.conflict_next(times)

    def reject_next_write(self, message: str, field: str) -> None:
        """The next write is refused 422 Invalid, as a validating webhook would."""
        if self.server is not None:
            cause = {"reason": "FieldValueInvalid", "message": message, "field": field}
            self.server.fail(
                ("POST", "PATCH"), status=422, reason="Invalid", message=message, causes=[cause]
            )
        else:
            self.fake.reject_next(message, field=field)

    def break_connection(self) -> type[Exception]:
        if self.server is not None:
            self.server.stop()
            return SchedulerUnavailable
        self.fake.down = True
        return SchedulerUnavailable

    def forbid_everything(self) -> type[Exception]:
        if self.server is not None:
            for method in ("GET", "POST", "PATCH"):
                self.server.forbid(method, None, resource="namespaces")
        else:
            self.fake.auth_broken = True
        return SchedulerAuthError


@pytest.fixture(params=["memory", "http"])
def cluster(request) -> Iterator[Cluster]:
    if request.param == "memory":
        yield Cluster(FakeKubernetes(), "memory")
        return
    server = request.getfixturevalue("apiserver")
    adapter = request.getfixturevalue("make_adapter")()
    yield Cluster(adapter, "http", server)
