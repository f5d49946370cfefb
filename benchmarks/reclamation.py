"""Idle scan at fleet size against a real Prometheus (issue #7, "Measured"); prints a table.

On a fresh database ``gpu_pool_portal_bench_reclamation`` (dropped and recreated each run):
4 Kubernetes pools x 500 nodes x 8 cards (16,000 GPUs), a dry-run reclamation policy each
(default 30 min window; nothing touches a scheduler), 100 teams and 2,000 active allocations
(20 a team, 4/12/8/8 cards in turn, 160 cards = the team's 20 nodes, started about a day ago).

dcgm-exporter history for every card, the last 40 min every 60 s, is streamed to an OpenMetrics
file, ~460 MiB (labels of the exporter's defaults less ``device``, ``container`` and
``DCGM_FI_DRIVER_VERSION``, which the scan never reads; two pools with the older exporter's
``Hostname``, two with the newer ``hostname``, one of those scraped with ``honorLabels: false``:
the workload in ``exported_namespace``/``exported_pod``). The mix is set per team,
so that a team's verdict is not simply "unknown" because one of its 20 nodes had a gap:

- 50 % of teams busy (engine active 35-100 %), 20 % half busy, half idle, 10 % idle (half of
  them at 0 % with an empty framebuffer: certainly idle; half holding memory at 0-8 %), 20 %
  half busy, half with gaps (an exporter restart: 20 min without samples mid-window, or no
  samples in the last 15 min);
- by card: 70 % busy, 20 % idle, 10 % with gaps.

The expected busy / idle / unknown allocations are worked out from the generated states with the
documented rule (any card without usable metrics makes the team's group unknown; else the busy
cards go to the oldest allocations first), not by calling the evaluator.

``promtool tsdb create-blocks-from openmetrics`` is timed alone (the command that
``scripts/services/prometheus.sh`` runs for ``PROM_BACKFILL``); then the script starts
Prometheus on a free port with its own ``PROM_DIR`` under /tmp. Blocks are loaded when
Prometheus starts, which is why they are written first: blocks added to a running one appear
only after its ~60 s reload. ``idle_scan(now=<end of history>)`` then runs ``BENCH_RUNS`` (5)
times, each with a fresh adapter as the scan would build from ``PROMETHEUS_URL``; the first run
opens the findings, the later ones update them. Reported: p50/max wall seconds, CPU seconds
per scan of this process and of Prometheus (the numbers the machine's load does not change),
PromQL requests per scan (counted at the adapter's HTTP transport), devices, verdicts checked
against the mix, peak RSS, and where the time of one more, instrumented scan goes: Prometheus
answering (plain JSON as the adapter asks, and gzip-compressed), JSON decoding, building ``Series``
and ``DeviceUsage``, attributing series to groups, evaluating them, recording each group (SQL,
COMMIT, ORM), and the garbage collector's pauses. Prometheus is stopped and its directory deleted.

Target: a scan under 10 s with a number of PromQL queries that does not grow with the fleet.
Run: ``.venv/bin/python benchmarks/reclamation.py`` (PostgreSQL on 127.0.0.1:5432, Debian's
``prometheus``/``promtool``); ``BENCH_NODES`` (a multiple of 200) sets the fleet's size
(``make bench`` runs 2,000 and 12,600: 16,000 and 100,800 GPUs), ``BENCH_PROFILE=1`` prints a
cProfile of one scan, ``BENCH_PROM_TIMEOUT_S`` (30) is the adapter's timeout per request.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench_reclamation"
)
os.environ["DATABASE_URL"] = BENCH_DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

NODES = int(os.environ.get("BENCH_NODES", "2000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
PROFILE = os.environ.get("BENCH_PROFILE", "") == "1"
# The adapter's timeout per request (PROMETHEUS_TIMEOUT_S, 30 s): at 100,800 GPUs on a loaded
# machine one summary query may take longer, and the run would stop there.
PROM_TIMEOUT_S = float(os.environ.get("BENCH_PROM_TIMEOUT_S", "30"))
GPUS_PER_NODE = 8
TEAMS = 100
HISTORY_S = 40 * 60
STEP_S = 60
TARGET_S = 10.0
SCRIPT = ROOT / "scripts" / "services" / "prometheus.sh"
# The scan's functions that record the verdicts, timed together as "record".
RECORDING = ("_record_group", "_maybe_reclaim")
METRICS = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")

# (slug, GPU model, model name as the exporter reports it, host label, honorLabels)
POOLS = [
    ("k8s-a", "h100_sxm", "NVIDIA H100 80GB HBM3", "Hostname", True),
    ("k8s-b", "h100_sxm", "NVIDIA H100 80GB HBM3", "Hostname", True),
    ("k8s-c", "a100_80g_sxm", "NVIDIA A100-SXM4-80GB", "hostname", True),
    ("k8s-d", "a100_80g_sxm", "NVIDIA A100-SXM4-80GB", "hostname", False),
]
# Team kinds, share of teams, and the state of the first / second half of each team's nodes.
MIX = [
    ("busy", 50, "busy", "busy"),
    ("half idle", 20, "busy", "idle"),
    ("idle", 5, "idle", "idle"),
    ("idle, memory held", 5, "held", "held"),
    ("half gaps", 10, "busy", "hole"),
    ("half stale", 10, "busy", "stale"),
]
CARD_PATTERN = (4, 12, 8, 8)  # a pair of allocations holds two nodes' 16 cards
GAPS = ("hole", "stale")


@dataclass(frozen=True)
class Card:
    pool: int
    hostname: str
    instance: str
    index: int
    uuid: str
    namespace: str
    pod: str
    state: str  # busy, idle (certainly), held (idle, memory held), hole, stale


# ------------------------------------------------------------------------------ the fleet


def team_kinds() -> list[tuple[str, str, str]]:
    """One (kind, first half, second half) per team, the kinds interleaved over the pools."""
    kinds = [(kind, a, b) for kind, share, a, b in MIX for _ in range(share * TEAMS // 100)]
    assert len(kinds) == TEAMS, "MIX shares must add up to 100"
    # spread each kind over the pools (team t is in pool t % 4): deal the list round-robin
    return [kinds[(t * 37) % TEAMS] for t in range(TEAMS)]


def fleet() -> list[Card]:
    """Every card with its team's namespace and generated state; team t holds the nodes
    ``(t // 4) * per_team ...`` of pool ``t % 4``."""
    assert NODES % (2 * TEAMS) == 0, "BENCH_NODES must be a multiple of 200"
    per_team = NODES // TEAMS
    per_pool = NODES // len(POOLS)
    kinds = team_kinds()
    cards = []
    for t, (_kind, first, second) in enumerate(kinds):
        p = t % len(POOLS)
        slug = POOLS[p][0]
        for j in range(per_team):
            n = (t // len(POOLS)) * per_team + j
            state = first if j < per_team // 2 else second
            hostname = f"{slug}-{n:04d}"
            instance = f"10.{p}.{n // 250}.{n % 250 + 2}:9400"
            for g in range(GPUS_PER_NODE):
                seq = p * per_pool * GPUS_PER_NODE + n * GPUS_PER_NODE + g
                cards.append(
                    Card(
                        pool=p,
                        hostname=hostname,
                        instance=instance,
                        index=g,
                        uuid=f"GPU-{(seq * 2654435761) % 2**32:08x}-{p:04x}-4{n:03x}-8{g:03x}-"
                        f"{seq:012x}",
                        namespace=f"team-{team_slug(t)}",
                        pod=f"{team_slug(t)}-w{j}",
                        state=state,
                    )
                )
    return cards


def team_slug(t: int) -> str:
    return f"t{t:03d}"


# ---------------------------------------------------------------------------- the history


def _noise(card: int, k: int) -> float:
    """Deterministic noise in [-0.1, 0.1] (no random state to keep for 16,000 cards)."""
    return (((card * 2654435761 + k * 40503) >> 7) % 201 - 100) / 1000


def _values(card: Card, c: int, k: int, age_s: int) -> tuple[float, int, int] | None:
    """(engine active ratio, GPU_UTIL %, FB_USED MiB) at sample ``k``, or ``None`` (gap)."""
    if card.state == "hole" and 300 < age_s < 1500:
        return None  # 20 min without samples (lookback fills the first 5), mid-window
    if card.state == "stale" and age_s < 900:
        return None  # the exporter stopped 15 min ago
    if card.state == "idle":
        return 0.0, 0, 0
    if card.state == "held":  # a process holds memory, barely computes: idle, not certainly
        ratio = max(0.0, 0.04 + _noise(c, k) * 0.4)
        return ratio, round(ratio * 100), 600 + c % 1400
    base = 0.45 + 0.5 * ((c * 37) % 100) / 100  # busy (and gappy) cards: 35-100 %
    ratio = min(1.0, base + _noise(c, k))
    return ratio, min(100, round(ratio * 100) + 10), 20000 + (c * 131) % 50000


def write_history(path: Path, cards: list[Card], *, end: int) -> tuple[int, int]:
    """Stream the OpenMetrics file (seconds, one block per family, each series in time order,
    ``# EOF``); returns (samples, bytes)."""
    stamps = list(range(end - HISTORY_S, end + 1, STEP_S))
    samples = 0
    with path.open("w", encoding="ascii", buffering=1 << 20) as out:
        for m, metric in enumerate(METRICS):
            out.write(f"# HELP {metric} {metric}\n# TYPE {metric} gauge\n")
            for c, card in enumerate(cards):
                _slug, _model, model_name, host_key, honor = POOLS[card.pool]
                if honor:
                    workload = f'namespace="{card.namespace}",pod="{card.pod}"'
                else:  # what honorLabels false leaves in namespace/pod: the exporter's pod
                    workload = (
                        f'exported_namespace="{card.namespace}",exported_pod="{card.pod}",'
                        f'namespace="gpu-operator",pod="nvidia-dcgm-exporter-{c // 8:05x}"'
                    )
                head = (
                    f'{metric}{{gpu="{card.index}",UUID="{card.uuid}",modelName="{model_name}",'
                    f'{host_key}="{card.hostname}",{workload},job="dcgm-exporter",'
                    f'instance="{card.instance}"}} '
                )
                lines = []
                for k, t in enumerate(stamps):
                    values = _values(card, c, k, end - t)
                    if values is None:
                        continue
                    value = f"{values[0]:.3f}" if m == 0 else values[m]
                    lines.append(f"{head}{value} {t}\n")
                samples += len(lines)
                out.writelines(lines)
        out.write("# EOF\n")
    return samples, path.stat().st_size


# ----------------------------------------------------------------------------- the database


def recreate_database() -> None:
    import psycopg

    name = BENCH_DB.rsplit("/", 1)[1]
    admin_url = BENCH_DB.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def build_database(cards: list[Card], *, now: datetime) -> list[tuple[int, int, int]]:
    """Pools, policies, nodes, cards, teams and allocations in bulk; returns
    ``(team index, allocation id, card_count)`` oldest first, the scan's order."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from pools.capacity.models import Allocation, CapacityRequest
    from pools.common.choices import AllocationStatus, Scheduler
    from pools.inventory.models import Gpu, GpuModel, Node, Pool
    from pools.reclamation.models import ReclamationPolicy
    from pools.tenancy.models import Team

    models = {m.slug: m for m in GpuModel.objects.filter(slug__in={p[1] for p in POOLS})}
    pools = [
        Pool.objects.create(slug=slug, name=slug.upper(), scheduler=Scheduler.KUBERNETES)
        for slug, *_ in POOLS
    ]
    ReclamationPolicy.objects.bulk_create(
        [ReclamationPolicy(pool=pool, dry_run=True) for pool in pools]
    )
    hostnames = list(dict.fromkeys((card.hostname, card.pool) for card in cards))
    nodes = Node.objects.bulk_create(
        [
            Node(hostname=h, pool=pools[p], scheduler=Scheduler.KUBERNETES, state="up")
            for h, p in hostnames
        ],
        batch_size=2000,
    )
    node_ids = {node.hostname: node for node in nodes}
    Gpu.objects.bulk_create(
        [
            Gpu(
                node=node_ids[card.hostname],
                index=card.index,
                uuid=card.uuid,
                gpu_model=models[POOLS[card.pool][1]],
                raw_model_name=POOLS[card.pool][2],
                health="ok",
            )
            for card in cards
        ],
        batch_size=4000,
    )
    teams = Team.objects.bulk_create(
        [Team(slug=team_slug(t), name=f"Team {t}") for t in range(TEAMS)]
    )
    user = get_user_model().objects.create_user("bench", password="x")
    per_team = NODES // TEAMS
    specs = []
    for t, team in enumerate(teams):
        p = t % len(POOLS)
        for j in range(per_team):
            cards_held = CARD_PATTERN[j % len(CARD_PATTERN)]
            # about a day ago, oldest first in the order they are listed
            starts = now - timedelta(days=1, minutes=10 * (per_team - j))
            specs.append((t, pools[p], models[POOLS[p][1]], team, cards_held, starts))
    requests = CapacityRequest.objects.bulk_create(
        [
            CapacityRequest(
                team=team,
                requested_by=user,
                workload_kind="training",
                pool=pool,
                gpu_model=model,
                card_count=count,
                starts_at=starts,
                ends_at=starts + timedelta(days=30),
                justification="bench",
                status="approved",
                submitted_at=starts,
                decided_at=starts,
            )
            for _t, pool, model, team, count, starts in specs
        ],
        batch_size=2000,
    )
    allocations = Allocation.objects.bulk_create(
        [
            Allocation(
                request=request,
                team=team,
                pool=pool,
                gpu_model=model,
                card_count=count,
                starts_at=starts,
                ends_at=starts + timedelta(days=30),
                status=AllocationStatus.ACTIVE,
            )
            for request, (_t, pool, model, team, count, starts) in zip(requests, specs, strict=True)
        ],
        batch_size=2000,
    )
    with connection.cursor() as cursor:  # what autovacuum does after a bulk load
        cursor.execute("ANALYZE")
    order = sorted(zip(specs, allocations, strict=True), key=lambda pair: (pair[0][5], pair[1].pk))
    return [(spec[0], allocation.pk, spec[4]) for spec, allocation in order]


def expected_verdicts(
    cards: list[Card], allocations: list[tuple[int, int, int]]
) -> tuple[Counter, int]:
    """Busy / idle / unknown allocations and certainly idle findings the generated mix calls
    for: a team with any card in a gap is unknown; otherwise its busy cards go to its oldest
    allocations first, and an allocation that keeps fewer cards than it holds is idle,
    certainly so when every idle card of the team reads 0 % with an empty framebuffer."""
    states: dict[str, Counter] = {}
    for card in cards:
        states.setdefault(card.namespace, Counter())[card.state] += 1
    verdicts: Counter = Counter()
    certain = 0
    remaining = {ns: s["busy"] for ns, s in states.items()}
    for t, _pk, count in allocations:
        ns = f"team-{team_slug(t)}"
        if any(states[ns][gap] for gap in GAPS):
            verdicts["unknown"] += 1
            continue
        keep = min(count, remaining[ns])
        remaining[ns] -= keep
        if keep == count:
            verdicts["busy"] += 1
        else:
            verdicts["idle"] += 1
            certain += states[ns]["held"] == 0
    return verdicts, certain


# ---------------------------------------------------------------------------- Prometheus


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_prometheus(prom_dir: Path) -> None:
    """``prometheus.sh stop`` (SIGTERM to the PID it recorded), then wait for that process to
    exit so that nothing writes into the directory while it is deleted."""
    pid_file = prom_dir / "prometheus.pid"
    if not pid_file.exists():
        return
    pid = pid_file.read_text().strip()
    env = {**os.environ, "PROM_DIR": str(prom_dir)}
    subprocess.run(["bash", str(SCRIPT), "stop"], env=env, check=False, capture_output=True)
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return  # gone
        if state == "Z":  # exited, not yet reaped by init
            return
        time.sleep(0.1)


def prometheus_cpu_s(prom_dir: Path) -> float:
    """CPU seconds (user + system) the Prometheus process has used so far, from
    ``/proc/<pid>/stat`` (fields 14 and 15, in clock ticks; proc(5)): the load-independent
    cost of its answers, where wall time on the shared machine is not."""
    pid = (prom_dir / "prometheus.pid").read_text().strip()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prometheus_rss_mib(prom_dir: Path) -> float | None:
    try:
        pid = (prom_dir / "prometheus.pid").read_text().strip()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def counting_transport(log: list[tuple[str, float]]):
    """An HTTP transport that logs each request's path and the seconds until Prometheus's
    answer starts (the server's evaluation and encoding, plus loopback)."""
    import httpx

    class CountingTransport(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            started = time.perf_counter()
            response = super().handle_request(request)
            log.append((request.url.path, time.perf_counter() - started))
            return response

    return CountingTransport()


class TimedMetrics:
    """The adapter the scan would build, each Prometheus read timed (``seconds``: all of them,
    ``by_call``: per method)."""

    def __init__(self, url: str, log: list[tuple[str, float]]) -> None:
        from scheduler_adapters.prometheus import PrometheusAdapter

        self.adapter = PrometheusAdapter(
            url, timeout_s=PROM_TIMEOUT_S, transport=counting_transport(log)
        )
        self.seconds = 0.0
        self.by_call: Counter = Counter()
        self.active = False

    def _timed(self, name: str, **kwargs):
        started, self.active = time.perf_counter(), True
        try:
            return getattr(self.adapter, name)(**kwargs)
        finally:
            elapsed = time.perf_counter() - started
            self.seconds += elapsed
            self.by_call[name] += elapsed
            self.active = False

    def gpu_usage_summary(self, **kwargs):
        return self._timed("gpu_usage_summary", **kwargs)

    def utilisation_by_namespace(self, **kwargs):
        return self._timed("utilisation_by_namespace", **kwargs)

    def gpu_usage(self, **kwargs):
        return self._timed("gpu_usage", **kwargs)


class SqlTimer:
    """``connection.execute_wrapper``: statements and seconds spent in the database, by the
    section of the scan running (``section``, set by :func:`instrumented_scan`)."""

    def __init__(self) -> None:
        self.section = "scan"
        self.count: Counter = Counter()
        self.seconds: Counter = Counter()

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.count[self.section] += 1
            self.seconds[self.section] += time.perf_counter() - started


def fetch_breakdown(url: str, *, now: datetime) -> dict[str, float]:
    """The scan's summary queries (:func:`scheduler_adapters.prometheus.summary_queries`, one
    30 min window) taken apart: each whole answer over HTTP (plain JSON, as the adapter asks
    unless ``PROMETHEUS_COMPRESS``; and gzip-compressed, for comparison), its bytes, JSON
    decoding (collector paused, as the adapter does), and building the devices from the
    decoded answers (``device_summaries``, wall and CPU s)."""
    import httpx

    from scheduler_adapters.prometheus import device_summaries, summary_queries

    end_ms = round(now.timestamp() * 1000)
    shift_ms = end_ms % (STEP_S * 1000)
    queries = summary_queries([1800], step_s=STEP_S, shift_ms=shift_ms)
    at = f"{(end_ms - shift_ms) / 1000:.3f}"
    out: Counter = Counter()
    answers = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        for name, query in queries.items():
            params = {"query": query, "time": at, "timeout": "30s"}
            started = time.perf_counter()
            client.get("/api/v1/query", params=params, headers={"Accept-Encoding": "gzip"})
            out["http gzip"] += time.perf_counter() - started
            started = time.perf_counter()
            response = client.get(
                "/api/v1/query", params=params, headers={"Accept-Encoding": "identity"}
            )
            out["http"] += time.perf_counter() - started
            out["bytes"] += len(response.content)
            gc.disable()
            started = time.perf_counter()
            answers[name] = json.loads(response.content)["data"]["result"]
            out["json"] += time.perf_counter() - started
            gc.enable()
            out["queries"] += 1
            out["results"] += len(answers[name])
    started, cpu_started = time.perf_counter(), time.process_time()
    device_summaries(
        answers, windows=[1800], end=end_ms / 1000, step_s=STEP_S, min_coverage=0.9, near_pct=[30]
    )
    out["device_summaries"] = time.perf_counter() - started
    out["device_summaries cpu"] = time.process_time() - cpu_started
    return out


def instrumented_scan(url: str, *, now: datetime) -> Counter:
    """One more scan with its parts timed: ``gpu_usage``; the functions the scan calls to
    attribute series to groups, to evaluate them and to record each allocation's verdict
    (wrapped in place for this run only); SQL, inside and outside the recording
    (``_record_group`` and ``_maybe_reclaim``, as ``record``); and the cyclic
    garbage collector's pauses (``gc.callbacks``), inside and outside ``gpu_usage``."""
    from django.db import connection

    from pools.reclamation.services import scan as service

    timings: Counter = Counter()
    metrics = TimedMetrics(url, [])
    sql = SqlTimer()

    def timed(name: str, fn):
        def wrapper(*args, **kwargs):
            started, outer = time.perf_counter(), sql.section
            sql.section = "record" if name in RECORDING else outer
            try:
                return fn(*args, **kwargs)
            finally:
                timings["record" if name in RECORDING else name] += time.perf_counter() - started
                timings[f"{name} calls"] += 1
                sql.section = outer

        return wrapper

    gc_started = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
            return
        where = "gc in fetch" if metrics.active else "gc elsewhere"
        timings[where] += time.perf_counter() - gc_started[0]
        timings["gc runs"] += 1

    names = ("devices_for_group", "evaluate_group", "split_group", *RECORDING, "_numbers")
    originals = {name: getattr(service, name) for name in names if hasattr(service, name)}
    for name, fn in originals.items():
        setattr(service, name, timed(name, fn))
    connection._commit = timed("commit", connection._commit)  # each atomic block's COMMIT
    gc.callbacks.append(on_gc)
    try:
        with connection.execute_wrapper(sql):
            started = time.perf_counter()
            service.idle_scan(now=now, metrics=metrics)
            timings["scan"] = time.perf_counter() - started
    finally:
        gc.callbacks.remove(on_gc)
        for name, fn in originals.items():
            setattr(service, name, fn)
        del connection._commit
        metrics.adapter.close()
    timings["prometheus"] = metrics.seconds
    timings["summary"] = metrics.by_call["gpu_usage_summary"]
    timings["sparklines"] = metrics.seconds - timings["summary"]
    for section in ("scan", "record"):
        timings[f"sql {section}"] = sql.seconds[section]
        timings[f"statements {section}"] = sql.count[section]
    return timings


# ------------------------------------------------------------------------------ the bench


def run(prom_dir: Path, rows: list[tuple[str, str, str, str]]) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    from pools.reclamation.models import IdleFinding
    from pools.reclamation.services.scan import idle_scan

    call_command("migrate", verbosity=0)
    end = int(time.time()) // STEP_S * STEP_S
    now = datetime.fromtimestamp(end, tz=UTC)

    started = time.perf_counter()
    cards = fleet()
    history = prom_dir / "dcgm.om"
    samples, size = write_history(history, cards, end=end)
    card_states = Counter(card.state for card in cards)
    mix = ", ".join(f"{s} {100 * n / len(cards):.0f} %" for s, n in sorted(card_states.items()))
    rows.append(
        (
            f"generate dcgm history: {len(cards)} GPUs x 3 metrics, {HISTORY_S // 60} min "
            f"every {STEP_S} s",
            f"{time.perf_counter() - started:.1f} s",
            "",
            f"{samples:,} samples, {size / 2**20:.0f} MiB; cards: {mix}",
        )
    )

    started = time.perf_counter()
    allocations = build_database(cards, now=now)
    rows.append(
        (
            f"load {len(POOLS)} pools, {NODES} nodes, {len(cards)} GPUs, {TEAMS} teams, "
            f"{len(allocations)} allocations",
            f"{time.perf_counter() - started:.1f} s",
            "",
            "bulk_create + ANALYZE",
        )
    )

    # The same command scripts/services/prometheus.sh runs for PROM_BACKFILL, timed alone.
    started = time.perf_counter()
    command = ["promtool", "tsdb", "create-blocks-from", "openmetrics"]
    subprocess.run(
        [*command, str(history), str(prom_dir / "data")], check=True, capture_output=True
    )
    backfill_s = time.perf_counter() - started
    blocks = [p for p in (prom_dir / "data").iterdir() if (p / "meta.json").exists()]
    tsdb_mib = sum(f.stat().st_size for f in (prom_dir / "data").rglob("*") if f.is_file()) / 2**20
    history.unlink()  # the blocks hold it now
    rows.append(
        (
            "backfill: promtool tsdb create-blocks-from openmetrics",
            f"{backfill_s:.1f} s",
            "",
            f"{len(blocks)} block(s), {tsdb_mib:.0f} MiB on disk",
        )
    )
    # Blocks are read when Prometheus starts (the script's loop waits for /-/ready), so it
    # serves the whole history at once; no PROM_BACKFILL here, the blocks are already there.
    port = free_port()
    env = {**os.environ, "PROM_PORT": str(port), "PROM_DIR": str(prom_dir)}
    env.pop("PROM_BACKFILL", None)
    started = time.perf_counter()
    subprocess.run(["bash", str(SCRIPT), "start"], env=env, check=True, capture_output=True)
    url = f"http://127.0.0.1:{port}"
    seconds = time.perf_counter() - started
    rows.append(
        ("start Prometheus 2.42 on the blocks, until /-/ready", f"{seconds:.1f} s", "", url)
    )

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times, reports, log = [], [], []
    own_cpu = prom_cpu = 0.0
    for _ in range(RUNS):
        metrics = TimedMetrics(url, log)
        started, cpu_started, prom_started = (
            time.perf_counter(),
            time.process_time(),
            prometheus_cpu_s(prom_dir),
        )
        report = idle_scan(now=now, metrics=metrics)
        times.append(time.perf_counter() - started)
        own_cpu += time.process_time() - cpu_started
        prom_cpu += prometheus_cpu_s(prom_dir) - prom_started
        metrics.adapter.close()
        reports.append(report)
        assert report.error is None, report.error
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    requests_per_scan = len(log) / RUNS
    last = reports[-1]
    rows.append(
        (
            f"idle_scan, {len(cards)} GPUs / {len(allocations)} allocations, {RUNS} runs",
            f"p50 {statistics.median(times):.2f} s, max {max(times):.2f} s",
            f"< {TARGET_S:.0f} s",
            f"first run {times[0]:.2f} s (opens the findings); "
            f"{'PASS' if statistics.median(times) < TARGET_S else 'FAIL'}: target p50 < "
            f"{TARGET_S:.0f} s at {len(cards):,} GPUs; load average "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        )
    )
    rows.append(
        (
            "CPU per scan: this process / Prometheus",
            f"{own_cpu / RUNS:.2f} s / {prom_cpu / RUNS:.2f} s",
            "",
            "process_time and /proc/<pid>/stat, mean of the runs: what the load does not change",
        )
    )
    paths = Counter(path for path, _ in log)
    rows.append(
        (
            "PromQL requests per scan",
            f"{requests_per_scan:g}",
            "not growing with GPUs",
            ", ".join(f"{n} x {p}" for p, n in paths.items()) + f" over {RUNS} scans",
        )
    )

    expected, certain = expected_verdicts(cards, allocations)
    got = Counter(busy=last.busy, idle=last.idle, unknown=last.unknown)
    findings = IdleFinding.objects.filter(state="open")
    certain_got = findings.filter(certainly_idle=True).count()
    same = all(
        (r.busy, r.idle, r.unknown, r.devices) == (last.busy, last.idle, last.unknown, last.devices)
        for r in reports
    )
    rows.append(
        (
            "devices returned (one per GPU and namespace)",
            str(last.devices),
            str(len(cards)),
            "ok" if last.devices == len(cards) else "MISMATCH",
        )
    )
    for verdict in ("busy", "idle", "unknown"):
        rows.append(
            (
                f"allocations {verdict}",
                str(got[verdict]),
                f"{expected[verdict]} expected",
                "ok" if got[verdict] == expected[verdict] else "MISMATCH",
            )
        )
    rows.append(
        (
            "open findings / certainly idle",
            f"{findings.count()} / {certain_got}",
            f"{expected['idle']} / {certain} expected",
            ("ok" if (findings.count(), certain_got) == (expected["idle"], certain) else "MISMATCH")
            + ("" if same else "; runs disagree"),
        )
    )
    rows.append(
        (
            "peak RSS of this process",
            f"{rss_after:.0f} MiB",
            "",
            f"{rss_before:.0f} MiB before the scans; Prometheus "
            f"{prometheus_rss_mib(prom_dir) or 0:.0f} MiB",
        )
    )

    # Where one scan's time goes: one instrumented scan, and its fetch taken apart.
    parts = fetch_breakdown(url, now=now)
    scan = instrumented_scan(url, now=now)
    attribution = scan["devices_for_group"]
    evaluation = scan["evaluate_group"] + scan["split_group"]
    rest = scan["scan"] - scan["prometheus"] - attribution - evaluation - scan["record"]
    mib = parts["bytes"] / 2**20
    record_python = scan["record"] - scan["sql record"] - scan["_numbers"] - scan["commit"]
    for label, seconds, detail in [
        ("one instrumented scan", scan["scan"], "the parts below add up to it"),
        ("gpu_usage_summary", scan["summary"], "instant queries, one value per device each"),
        (
            "  Prometheus: whole answers, plain JSON",
            parts["http"],
            f"{parts['queries']:.0f} queries (30 min window), {parts['results']:,.0f} values, "
            f"{mib:.1f} MiB of JSON",
        ),
        (
            "  the same, gzip-compressed",
            parts["http gzip"],
            "Accept-Encoding: gzip (PROMETHEUS_COMPRESS=1), not in the scan's figures",
        ),
        ("  JSON decoding", parts["json"], "json.loads, collector paused"),
        (
            "  DeviceSummary building",
            parts["device_summaries"],
            f"device_summaries, {parts['device_summaries cpu']:.2f} s CPU",
        ),
        ("sparklines of idle groups", scan["sparklines"], "utilisation_by_namespace / gpu_usage"),
        ("devices_for_group", attribution, "per (team, pool) group, scans every device"),
        ("evaluate_group + split_group", evaluation, "pools/reclamation/evaluate.py"),
        ("recording, once per group", scan["record"], "_record_group + _maybe_reclaim"),
        ("  SQL", scan["sql record"], f"{scan['statements record']:.0f} statements"),
        ("  COMMIT", scan["commit"], f"{scan['commit calls']:.0f} transactions"),
        ("  _numbers", scan["_numbers"], "each idle allocation's numbers"),
        ("  ORM and Python", record_python, "the recording less the three"),
        ("the rest of idle_scan", rest, f"{scan['statements scan']:.0f} statements, grouping"),
        (
            "of all the above: cyclic GC pauses",
            scan["gc in fetch"] + scan["gc elsewhere"],
            f"{scan['gc runs']:.0f} runs; {scan['gc in fetch']:.2f} s in or right after "
            "Prometheus reads",
        ),
    ]:
        rows.append((f"  time: {label}", f"{seconds:.2f} s", "", detail))

    if PROFILE:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        metrics = TimedMetrics(url, [])
        profiler.enable()
        idle_scan(now=now, metrics=metrics)
        profiler.disable()
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_callees("_record_group")


def main() -> None:
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            sys.exit(
                f"{tool} is not installed (apt-get install --no-install-recommends prometheus)"
            )
    recreate_database()
    prom_dir = Path(tempfile.mkdtemp(prefix="bench-reclamation-prom-", dir="/tmp"))
    rows: list[tuple[str, str, str, str]] = []
    try:
        run(prom_dir, rows)
    finally:
        stop_prometheus(prom_dir)
        shutil.rmtree(prom_dir, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print(
        f"\n{'benchmark'.ljust(width)} | result                     | target             | detail"
    )
    print("-" * (width + 90))
    for name, result, target, detail in rows:
        print(f"{name.ljust(width)} | {result.ljust(26)} | {target.ljust(18)} | {detail}")


if __name__ == "__main__":
    main()
