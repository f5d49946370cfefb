"""What the benchmarks share: running on a test database (:func:`on_test_database`), the
serving fleet of the serving and advisor benchmarks (:func:`serving_fleet`), and approvals from
concurrent forked clients beside a bare replay of their statements (:func:`concurrent_rounds`,
:func:`capture_statements`, :func:`replay`; ``approvals.py`` and ``fleet.py``). Import it after
``django.setup()``."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import django
from django.test.utils import get_runner, setup_test_environment


def on_test_database(run: Callable[[], None]) -> None:
    """Call ``run`` on a freshly migrated test database (``test_`` + the configured name),
    dropped afterwards."""
    setup_test_environment()
    runner = get_runner(django.conf.settings)(verbosity=0, interactive=False)
    old = runner.setup_databases()
    try:
        run()
    finally:
        runner.teardown_databases(old)


def serving_fleet(n: int, user, now: datetime) -> list:
    """``n`` teams (slugs ``0001`` …), each with one approved two-card L40S inference request
    in the Kubernetes pool ``serve`` requested by ``user`` and its active allocation, from two
    days before ``now`` to five days after; returns the allocations."""
    from pools.capacity.models import Allocation, CapacityRequest
    from pools.common.choices import AllocationStatus, RequestStatus, Scheduler
    from pools.inventory.models import GpuModel, Pool
    from pools.tenancy.models import Team

    pool, _ = Pool.objects.get_or_create(
        slug="serve", defaults={"name": "Serving", "scheduler": Scheduler.KUBERNETES}
    )
    model = GpuModel.objects.get(slug="l40s")
    window = {"starts_at": now - timedelta(days=2), "ends_at": now + timedelta(days=5)}
    teams = Team.objects.bulk_create(
        [Team(slug=f"{i:04d}", name=f"Team {i}") for i in range(1, n + 1)]
    )
    shared = {"pool": pool, "gpu_model": model, "card_count": 2, **window}
    requests = CapacityRequest.objects.bulk_create(
        [
            CapacityRequest(team=t, requested_by=user, workload_kind="inference",
                            justification="bench", status=RequestStatus.APPROVED, **shared)
            for t in teams
        ]
    )  # fmt: skip
    return Allocation.objects.bulk_create(
        [
            Allocation(request=r, team=r.team, status=AllocationStatus.ACTIVE, **shared)
            for r in requests
        ]
    )


# Approvals beside a *bare* replay of their statements (``approvals.py``, ``fleet.py``).


class _Rollback(Exception):
    pass


def capture_statements(fn: Callable[[], object]) -> list[tuple[str, object, bool]]:
    """The (SQL, params, many) ``fn`` executes on the default connection, captured with
    ``connection.execute_wrapper`` in a transaction that is then rolled back, so nothing is
    written and no on-commit work runs; savepoint statements left out."""
    from django.db import connection, transaction

    statements: list[tuple[str, object, bool]] = []

    def wrapper(execute, sql, params, many, context):
        statements.append((sql, params, many))
        return execute(sql, params, many, context)

    try:
        with transaction.atomic(), connection.execute_wrapper(wrapper):
            fn()
            raise _Rollback
    except _Rollback:
        pass
    return [s for s in statements if "SAVEPOINT" not in s[0]]


def replay(statements: list[tuple[str, object, bool]]) -> float:
    """Run ``statements`` (as :func:`capture_statements` returns them) with their parameters in
    one transaction through the raw driver cursor -- the floor any implementation of them pays
    for round trips and the server's work, locks included; returns the milliseconds taken."""
    from django.db import connection, transaction

    connection.ensure_connection()
    raw = connection.connection
    start = time.perf_counter()
    with transaction.atomic(), raw.cursor() as cursor:
        for sql, params, many in statements:
            if many:
                cursor.executemany(sql, params)
            else:
                cursor.execute(sql, params)
    return (time.perf_counter() - start) * 1000


@dataclass(frozen=True)
class ConcurrentRun:
    """One concurrent run of approvals: ``rate`` approvals/s over the wall time from the first
    client's start to the last one's end; ``p50_ms``, ``p95_ms`` of the single approvals;
    ``failed`` (raised: refused, or an error); ``cpu_ms`` the clients' own CPU per approval
    (``time.process_time``, so without the database server's share)."""

    rate: float
    p50_ms: float
    p95_ms: float
    failed: int
    cpu_ms: float


_BARRIER_TIMEOUT_S = 900  # a client that died before the start must not hang the others


def _approval_client(
    path: str, ids: list[int], admin_id: int, barrier, results, profile: bool = False
) -> None:
    """One forked client process: approve the requests ``ids`` one after another through
    ``path`` (``service``: ``capacity_request_approve``; ``bare``: :func:`replay` of the
    statements the service issues for each, captured untimed before the start) once every
    client is ready; puts (ms samples, failures, first start, last end, CPU s) on ``results``,
    or ``None`` when the client could not start. With ``profile``, prints a cProfile of its
    approvals (the 30 costliest functions by own time, then by cumulative time)."""
    try:
        from django.contrib.auth import get_user_model

        from pools.capacity.models import CapacityRequest
        from pools.capacity.services.requests import capacity_request_approve as approve

        admin = get_user_model().objects.get(pk=admin_id)
        # as the API and the page hand them over: team, pool and model joined
        queue = list(
            CapacityRequest.objects.filter(pk__in=ids)
            .select_related("team", "pool", "gpu_model")
            .order_by("pk")
        )
        work: list = queue
        if path == "bare":
            work = [capture_statements(lambda r=r: approve(request=r, actor=admin)) for r in queue]
    except Exception as exc:
        print(f"{path} client could not start: {exc!r}", flush=True)
        barrier.abort()
        results.put(None)
        return
    samples, failed = [], 0
    try:
        barrier.wait(timeout=_BARRIER_TIMEOUT_S)
    except threading.BrokenBarrierError:  # another client could not start
        results.put(None)
        return
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    first, cpu = time.perf_counter(), time.process_time()
    for item in work:
        start = time.perf_counter()
        try:
            if path == "bare":
                replay(item)
            else:
                approve(request=item, actor=admin)
        except Exception as exc:  # counted; the benches leave room for all of them
            failed += 1
            if failed == 1:
                print(f"{path} approval failed: {exc!r}", flush=True)
        samples.append((time.perf_counter() - start) * 1000)
    last, cpu = time.perf_counter(), time.process_time() - cpu
    if profiler is not None:
        import pstats

        profiler.disable()
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)
    results.put((samples, failed, first, last, cpu))


def approve_concurrently(
    path: str, request_ids: list[int], admin_id: int, clients: int, profile: bool = False
):
    """Approve the submitted requests ``request_ids`` from ``clients`` forked processes, each
    with its own database connection (as gunicorn workers) and every ``clients``-th id, through
    ``path`` (``service`` or ``bare``, see :func:`_approval_client`); returns a
    :class:`ConcurrentRun`. Closes this process's connections first (a child must not share
    them). With ``profile`` the first client prints a cProfile of its approvals. Raises
    ``RuntimeError`` when a client could not start."""
    import multiprocessing

    from django.db import connections

    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(clients), ctx.Queue()
    procs = [
        ctx.Process(
            target=_approval_client,
            args=(path, request_ids[c::clients], admin_id, barrier, results, profile and c == 0),
        )
        for c in range(clients)
    ]
    for p in procs:
        p.start()
    outcome = [results.get(timeout=2 * _BARRIER_TIMEOUT_S) for _ in procs]
    for p in procs:
        p.join()
    if any(o is None for o in outcome):
        raise RuntimeError(f"a {path} approval client could not start")
    samples = sorted(s for o in outcome for s in o[0])
    wall = max(o[3] for o in outcome) - min(o[2] for o in outcome)
    return ConcurrentRun(
        rate=len(samples) / wall,
        p50_ms=statistics.median(samples),
        p95_ms=statistics.quantiles(samples, n=20, method="inclusive")[18],
        failed=sum(o[1] for o in outcome),
        cpu_ms=sum(o[4] for o in outcome) * 1000 / len(samples),
    )


@dataclass(frozen=True)
class ConcurrentSummary:
    """Rounds of :func:`approve_concurrently` for one path: ``rate`` approvals/s over the
    rounds' summed wall time, ``p50_ms`` the median of the rounds' p50s, ``cpu_ms`` the mean
    client CPU per approval, ``failed`` summed, ``approvals`` in all."""

    rate: float
    p50_ms: float
    cpu_ms: float
    failed: int
    approvals: int


def concurrent_rounds(
    request_ids: list[int], admin_id: int, *, clients: int, rounds: int, profile: bool = False
) -> dict[str, ConcurrentSummary]:
    """``rounds`` rounds of bare then service (so that load on a shared machine falls on both
    alike), each path approving its own consecutive ``len(request_ids) // (2 * rounds)`` of
    ``request_ids`` from ``clients`` processes; the summary per path (``bare``, ``service``).
    With ``profile``, one service client of the last round prints a cProfile."""
    per_round = len(request_ids) // (2 * rounds)
    runs: dict[str, list[ConcurrentRun]] = {"bare": [], "service": []}
    for r in range(rounds):
        for i, path in enumerate(("bare", "service")):
            lo = (2 * r + i) * per_round
            runs[path].append(
                approve_concurrently(
                    path,
                    request_ids[lo : lo + per_round],
                    admin_id,
                    clients,
                    profile=profile and path == "service" and r == rounds - 1,
                )  # fmt: skip
            )
    return {
        path: ConcurrentSummary(
            rate=per_round * rounds / sum(per_round / run.rate for run in done),
            p50_ms=statistics.median(run.p50_ms for run in done),
            cpu_ms=statistics.mean(run.cpu_ms for run in done),
            failed=sum(run.failed for run in done),
            approvals=per_round * rounds,
        )
        for path, done in runs.items()
    }
