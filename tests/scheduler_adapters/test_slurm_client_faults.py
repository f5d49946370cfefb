"""Network faults against real local sockets: nothing listening, a server that never answers,
a server that hangs up (what a crashing slurmrestd looks like). Each is bounded in time."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.slurm.client import SlurmRestAdapter


def adapter_for(port: int, *, timeout_s: float = 5.0) -> SlurmRestAdapter:
    return SlurmRestAdapter(
        url=f"http://127.0.0.1:{port}",
        user="portal",
        cluster="portal",
        token_provider=lambda user: f"token-{user}",
        api_version="v0.0.38",
        timeout_s=timeout_s,
        connect_timeout_s=timeout_s,
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once the socket is closed


@contextmanager
def local_server(on_connect) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that hands each accepted connection to ``on_connect``."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            held.append(connection)
            on_connect(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        for connection in held:
            connection.close()
        server.close()


def test_nothing_listening_is_unavailable():
    started = time.monotonic()

    with pytest.raises(SchedulerUnavailable) as caught:
        adapter_for(closed_port()).list_nodes()

    assert caught.value.transient
    assert "cannot reach slurmrestd" in str(caught.value)
    assert time.monotonic() - started < 2


def test_a_server_that_never_answers_times_out():
    with local_server(lambda connection: None) as port:  # accepts, reads nothing, says nothing
        started = time.monotonic()
        with pytest.raises(SchedulerUnavailable) as caught:
            adapter_for(port, timeout_s=0.3).get_job(1)
        waited = time.monotonic() - started

    assert "did not answer GET /slurm/v0.0.38/job/1 in time" in str(caught.value)
    assert caught.value.operation == "get_job"
    assert 0.3 <= waited < 3


def test_a_server_that_hangs_up_is_unavailable():
    def hang_up(connection: socket.socket) -> None:
        connection.recv(65536)
        connection.close()

    with local_server(hang_up) as port:
        with pytest.raises(SchedulerUnavailable, match="cannot reach slurmrestd"):
            adapter_for(port).list_nodes()
