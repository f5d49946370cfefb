"""Replaying recorded slurmrestd answers through ``httpx.MockTransport``."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler_adapters.slurm.client import SlurmRestAdapter

RECORDINGS = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / "rest_v0.0.38"
# After the recorded jobs (submitted 1795968514), so that elapsed times are known exactly.
NOW = datetime.fromtimestamp(1795968524, tz=UTC)

Answer = tuple[int, Any] | Callable[[httpx.Request], httpx.Response]


class Recordings:
    """Access to the recorded exchanges (see the README next to them)."""

    now = NOW

    @staticmethod
    def recording(name: str) -> dict[str, Any]:
        """One exchange: ``{"request", "status", "body", "request_body"?}``."""
        return json.loads((RECORDINGS / f"{name}.json").read_text(encoding="utf-8"))

    @classmethod
    def answer(cls, name: str) -> tuple[int, Any]:
        """The ``(status, body)`` slurmrestd gave in recording ``name``."""
        record = cls.recording(name)
        return record["status"], record["body"]

    @classmethod
    def body(cls, name: str) -> Any:
        return cls.recording(name)["body"]

    @staticmethod
    def ok(**fields: Any) -> tuple[int, dict[str, Any]]:
        """A 200 with an empty ``errors`` list, as slurmrestd answers a successful write."""
        return 200, {"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}, "errors": [], **fields}


class SlurmReplay:
    """Answers each (method, path) from a queue; the last answer repeats. Unknown paths get
    slurmrestd's own 404 text. ``requests`` keeps everything sent, for assertions."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], deque[Answer]] = defaultdict(deque)
        self.requests: list[httpx.Request] = []

    def on(self, method: str, path: str, *answers: Answer) -> SlurmReplay:
        self.routes[(method, path)].extend(answers)
        return self

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queue = self.routes.get((request.method, request.url.path))
        if not queue:
            return httpx.Response(
                404,
                text="Unable find requested URL. Please view /openapi/v3 for API reference.",
                headers={"content-type": "text/plain"},
            )
        item = queue.popleft() if len(queue) > 1 else queue[0]
        if callable(item):
            return item(request)
        status, body = item
        if isinstance(body, str):
            return httpx.Response(status, text=body, headers={"content-type": "text/plain"})
        return httpx.Response(status, json=body)

    def sent(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]

    def bodies(self, method: str, path: str) -> list[Any]:
        return [json.loads(r.content) for r in self.sent(method, path)]


@pytest.fixture
def rec() -> type[Recordings]:
    return Recordings


@pytest.fixture
def replay() -> SlurmReplay:
    return SlurmReplay()


@pytest.fixture
def make_adapter(replay: SlurmReplay) -> Callable[..., SlurmRestAdapter]:
    """An adapter talking to ``replay``; tokens are ``"token-<user>-<n>"``."""
    issued: list[str] = []

    def provider(user: str) -> str:
        issued.append(user)
        return f"token-{user}-{len(issued)}"

    def make(**overrides: Any) -> SlurmRestAdapter:
        options: dict[str, Any] = {
            "url": "http://slurmrestd.test",
            "user": "portal",
            "cluster": "portal",
            "token_provider": provider,
            "api_version": "v0.0.38",
            "transport": httpx.MockTransport(replay),
            "clock": lambda: NOW,
        }
        options.update(overrides)
        adapter = SlurmRestAdapter(**options)
        adapter.issued_tokens = issued  # type: ignore[attr-defined]
        return adapter

    return make
