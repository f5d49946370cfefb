"""A real Prometheus stand-in for the fleet-wide readers' routing tests: a loopback HTTP server
that answers every instant query (Prometheus HTTP API, ``/api/v1/query``) with an empty vector
and every range query (``/api/v1/query_range``) with an empty matrix, recording what it was
asked. Source of the answer shape: https://prometheus.io/docs/prometheus/latest/querying/api/
("Instant queries", "Range queries").

And the set-up every per-cluster Prometheus test shares: the :func:`prometheuses` fixture
(three servers, ``global`` as ``PROMETHEUS_URL``; registered for every test by
``tests/conftest.py``) and :func:`prometheus_clusters` (a cluster for each, and two without
one of their own)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from factories import ClusterFactory

from pools.clusters.models import Cluster


class RecordingPrometheus:
    """A loopback HTTP server answering ``/api/v1/query`` with ``{"status": "success",
    "data": {"resultType": "vector", "result": []}}`` (``/api/v1/query_range``: ``"matrix"``);
    ``queries`` lists the ``query`` parameters it was sent."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        recorded = self.queries

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                parts = urlsplit(self.path)
                recorded.extend(parse_qs(parts.query).get("query", []))
                kind = {"/api/v1/query": "vector", "/api/v1/query_range": "matrix"}
                body = {"status": "success", "data": {"resultType": kind.get(parts.path),
                                                      "result": []}}  # fmt: skip
                if parts.path not in kind:
                    body = {"status": "error", "errorType": "bad_data", "error": parts.path}
                raw = json.dumps(body).encode()
                self.send_response(200 if parts.path in kind else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self._running = True

    def stop(self) -> None:
        """Shut the server down (its port then refuses connections); safe twice."""
        if self._running:
            self._running = False
            self._httpd.shutdown()
            self._httpd.server_close()


def asked(servers: dict[str, RecordingPrometheus]) -> dict[str, int]:
    """How many queries each server of ``servers`` (by name) was sent."""
    return {name: len(server.queries) for name, server in servers.items()}


@pytest.fixture
def prometheuses(settings):
    """Three :class:`RecordingPrometheus` by name, ``global``, ``train`` and ``infer``;
    ``global`` is ``PROMETHEUS_URL`` (the fleet's, read where a cluster names none). All
    stopped after the test."""
    servers = {name: RecordingPrometheus() for name in ("global", "train", "infer")}
    settings.PROMETHEUS_URL = servers["global"].url
    yield servers
    for server in servers.values():
        server.stop()


def prometheus_clusters(
    servers: dict[str, RecordingPrometheus], **fields: Any
) -> dict[str, Cluster | None]:
    """By slug: clusters ``train`` and ``infer`` reading their own server of ``servers`` (the
    :func:`prometheuses`; infer's URL ends in ``/``, which must not matter), ``plain`` with
    none of its own, and ``env``: ``None``, the pools without a cluster; ``plain`` and
    ``env`` read ``PROMETHEUS_URL``. ``fields`` go to every cluster (``kind=...``)."""
    return {
        "train": ClusterFactory(slug="train", prometheus_url=servers["train"].url, **fields),
        "infer": ClusterFactory(slug="infer", prometheus_url=servers["infer"].url + "/", **fields),
        "plain": ClusterFactory(slug="plain", **fields),
        "env": None,
    }


def gpu_pod(name, node, cards, start, end, namespace="team-nlp"):
    """A pod's kube-state-metrics GPU request series (``kube_pod_container_resource_requests``,
    ``nvidia_com_gpu``): ``cards`` scraped every 4 min from ``start`` (inside the 5 min lookback,
    so every 60 s step of the import sees one), then 0 at ``end``: the import counts it over
    exactly ``[start, end)``. Few samples: the fakes scan them all at every step."""
    from datetime import timedelta

    from scheduler_adapters.prometheus import Sample, Series

    labels = {"namespace": namespace, "pod": name, "container": "main", "node": node,
              "resource": "nvidia_com_gpu", "unit": "integer"}  # fmt: skip
    samples, t = [], start
    while t < end:
        samples.append(Sample(t.timestamp(), float(cards)))
        t += timedelta(minutes=4)
    samples.append(Sample(end.timestamp(), 0.0))
    return Series("kube_pod_container_resource_requests", tuple(sorted(labels.items())),
                  tuple(samples))  # fmt: skip
