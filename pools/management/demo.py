"""The demo fleet, generated as the real formats the importers read.

Nothing here writes to the database: :func:`demo_fleet` returns what a site would feed the
importers (nvidia-smi CSV per node, a slurmrestd ``/nodes`` payload, a Kubernetes NodeList),
so ``load_demo`` exercises exactly the code paths real input takes. The fleet is deterministic.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

# (hostname prefix, count, nvidia-smi name, Slurm GRES type, cards per node, MiB, driver)
_SLURM_TRAINING = [
    ("trn-a100", 8, "NVIDIA A100-SXM4-80GB", "a100_80g_sxm", 8, 81920, "535.129.03"),
    ("trn-h800", 6, "NVIDIA H800", "h800_sxm", 8, 81559, "550.54.15"),
]
_SLURM_DEV = [
    ("dev-4090", 8, "NVIDIA GeForce RTX 4090", "rtx4090", 4, 24564, "570.86.10"),
    ("dev-4090d", 2, "NVIDIA GeForce RTX 4090 D", "rtx4090d", 4, 24564, "570.86.10"),
]
_K8S_INFERENCE = [
    ("inf-l40s", 10, "NVIDIA L40S", 4, 46068, "550.54.15"),
    ("inf-a100", 4, "NVIDIA A100 80GB PCIe", 2, 81920, "570.86.10"),
]
# Issue 35: a rented pool in a cloud's Kubernetes, the burst pool elastic scale-up spills into
# when the inference pool is full (label gpu-pool.example.com/pool=burst).
_K8S_BURST = [("cloud-l40s", 2, "NVIDIA L40S", 4, 46068, "550.54.15")]
# Nodes only Slurm knows about, with a GRES type no catalogue alias matches.
_LEGACY = [("legacy-p100", 2, "p100", 4)]

POOLS = [
    {
        "slug": "train-slurm",
        "name": "Training (Slurm)",
        "scheduler": "slurm",
        "slurm_partition": "train",
        "description": "A100 and H800 SXM nodes for training jobs.",
    },
    {
        "slug": "infer-k8s",
        "name": "Inference (Kubernetes)",
        "scheduler": "kubernetes",
        "k8s_node_selector": {"gpu-pool.example.com/pool": "inference"},
        "description": "L40S and A100 PCIe node group for model serving.",
    },
    {
        "slug": "dev-4090",
        "name": "Dev (consumer cards)",
        "scheduler": "slurm",
        "slurm_partition": "dev",
        "description": "RTX 4090 / 4090 D boxes for experiments.",
    },
    {
        "slug": "burst-cloud",
        "name": "Burst (rented cloud)",
        "scheduler": "kubernetes",
        "k8s_node_selector": {"gpu-pool.example.com/pool": "burst"},
        "burst": True,
        "description": "Rented L40S in a cloud's Kubernetes: elastic peaks when Inference is "
        "full, at the burst price plus storage and egress.",
    },
]


# The demo's clusters (issue 35): two Slurm, one being retired, and two Kubernetes, one rented
# in a GPU cloud (burst pools go there). The two that hold the demo's pools are the clusters the
# environment variables define — not set in the demo, so the portal keeps records only and
# never calls out; the other two are clusters kept as data with their credentials by path, whose
# health is what their last checks would have found (set by load_demo, see CLUSTER_HEALTH).
CLUSTERS = [
    {
        "slug": "env-slurm",
        "name": "Training Slurm (SLURM_REST_URL)",
        "kind": "slurm",
        "credential_kind": "environment",
        "slurm_cluster_name": "train",
        "site": "fra-1",
        "provider": "on premises",
        "pools": ["train-slurm", "dev-4090"],
    },
    {
        "slug": "slurm-legacy",
        "name": "Legacy Slurm 22.05",
        "kind": "slurm",
        "api_url": "http://slurm-legacy.fra-1.example.internal:6820",
        "slurm_cluster_name": "legacy",
        "slurm_user": "portal",
        "credential_kind": "jwt-key",
        "credential_path": "/run/secrets/slurm-legacy/jwt_hs256.key",
        "api_version": "v0.0.38",
        "site": "fra-1",
        "provider": "on premises",
        "retiring": True,
        "pools": [],  # its pools have moved to the training cluster
    },
    {
        "slug": "env-kubernetes",
        "name": "Inference Kubernetes (KUBERNETES_* variables)",
        "kind": "kubernetes",
        "credential_kind": "environment",
        "site": "fra-1",
        "provider": "on premises",
        "pools": ["infer-k8s"],
    },
    {
        "slug": "k8s-rented",
        "name": "Rented GPU cloud (Amsterdam)",
        "kind": "kubernetes",
        "api_url": "https://api.k8s.gpu-cloud.example.com:6443",
        "credential_kind": "token-file",
        "credential_path": "/run/secrets/gpu-cloud/token",
        "kueue": True,
        "site": "ams-2",
        "provider": "GPU cloud (rented)",
        "pools": [],  # burst pools
    },
]
# (slug, status, reason, API version, minutes since the last answer or None, credentials
# expire in days or None, errors of the last hour as (minutes ago, operation, message))
CLUSTER_HEALTH = [
    (
        "slurm-legacy",
        "unreachable",
        "scheduler_unavailable: connection refused (slurm-legacy.fra-1.example.internal:6820)",
        "v0.0.38",
        3 * 24 * 60,
        None,
        [(5, "check", "scheduler_unavailable: connection refused"),
         (35, "check", "scheduler_unavailable: connection refused")],
    ),
    ("k8s-rented", "reachable", "", "v1.34", 4, 5, []),
]  # fmt: skip


@dataclass(frozen=True)
class NvidiaSmiCapture:
    hostname: str
    csv: str


CSV_COLUMNS = (
    "index, name, uuid, serial, pci.bus_id, memory.total [MiB], driver_version, mig.mode.current"
)


def _uuid(host_number: int, index: int) -> str:
    return f"GPU-{host_number:08x}-{index:04x}-4000-8000-{host_number * 16 + index:012x}"


def _nvidia_smi_csv(host_number: int, name: str, cards: int, mib: int, driver: str) -> str:
    lines = [CSV_COLUMNS]
    mig = "[N/A]" if "GeForce" in name else "Disabled"
    for index in range(cards):
        lines.append(
            f"{index}, {name}, {_uuid(host_number, index)}, "
            f"{1320000000000 + host_number * 16 + index}, "
            f"00000000:{0x18 + index * 0x10:02X}:00.0, {mib} MiB, {driver}, {mig}"
        )
    return "\n".join(lines) + "\n"


def _state(number: int) -> tuple[list[str], str]:
    if number % 11 == 5:
        return ["IDLE", "DRAIN"], "ECC errors under investigation"
    if number % 13 == 7:
        return ["DOWN"], "Not responding"
    return (["MIXED"] if number % 3 else ["IDLE"]), ""


def demo_fleet() -> tuple[list[NvidiaSmiCapture], str, str]:
    """Return ``(nvidia-smi captures, slurmrestd nodes JSON, Kubernetes NodeList JSON)``.

    About 40 nodes: 14 Slurm training nodes (A100 SXM4 80GB, H800), 10 Slurm dev nodes
    (RTX 4090, RTX 4090 D), 14 Kubernetes inference nodes (L40S, A100 80GB PCIe), 2 rented
    L40S nodes of the burst pool (issue 35) and 2 legacy
    Slurm nodes with an unrecognised GRES type, across driver branches 535, 550 and 570.
    """
    captures: list[NvidiaSmiCapture] = []
    slurm_nodes: list[dict] = []
    k8s_nodes: list[dict] = []
    number = 0
    for partition, groups in (("train", _SLURM_TRAINING), ("dev", _SLURM_DEV)):
        for prefix, count, name, gres, cards, mib, driver in groups:
            for i in range(1, count + 1):
                number += 1
                host = f"{prefix}-{i:02d}"
                captures.append(
                    NvidiaSmiCapture(host, _nvidia_smi_csv(number, name, cards, mib, driver))
                )
                state, reason = _state(number)
                slurm_nodes.append(
                    {
                        "name": host,
                        "hostname": host,
                        "state": state[0].lower(),
                        "state_flags": state[1:],
                        "cpus": 128,
                        "real_memory": 1031000,
                        "gres": f"gpu:{gres}:{cards}(S:0-1)",
                        "gres_used": f"gpu:{gres}:0(IDX:N/A)",
                        "partitions": [partition],
                        "reason": reason,
                    }
                )
    for prefix, count, gres, cards in _LEGACY:
        for i in range(1, count + 1):
            host = f"{prefix}-{i:02d}"
            slurm_nodes.append(
                {
                    "name": host,
                    "hostname": host,
                    "state": "idle",
                    "state_flags": [],
                    "gres": f"gpu:{gres}:{cards}",
                    "partitions": ["train"],
                    "reason": "",
                }
            )
    k8s_groups = [(*g, "inference") for g in _K8S_INFERENCE] + [(*g, "burst") for g in _K8S_BURST]
    for prefix, count, name, cards, mib, driver, pool_label in k8s_groups:
        for i in range(1, count + 1):
            number += 1
            host = f"{prefix}-{i:02d}"
            captures.append(
                NvidiaSmiCapture(host, _nvidia_smi_csv(number, name, cards, mib, driver))
            )
            major, minor, rev = driver.split(".")
            ready = "False" if number % 13 == 7 else "True"
            k8s_nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": host,
                        "labels": {
                            "gpu-pool.example.com/pool": pool_label,
                            "nvidia.com/gpu.product": name.replace(" ", "-"),
                            "nvidia.com/gpu.count": str(cards),
                            "nvidia.com/gpu.memory": str(mib),
                            "nvidia.com/cuda.driver-version.full": driver,
                            "nvidia.com/cuda.driver-version.major": major,
                            "nvidia.com/cuda.driver-version.minor": minor,
                            "nvidia.com/cuda.driver-version.revision": rev,
                        },
                    },
                    "spec": {},
                    "status": {
                        "allocatable": {
                            "cpu": "64",
                            "memory": "512Gi",
                            "nvidia.com/gpu": str(cards),
                        },
                        "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(cards)},
                        "conditions": [{"type": "Ready", "status": ready}],
                    },
                }
            )
    slurm_payload = json.dumps(
        {"meta": {"Slurm": {"release": "22.05.8"}}, "errors": [], "nodes": slurm_nodes}, indent=1
    )
    k8s_payload = json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": k8s_nodes}, indent=1)
    return captures, slurm_payload, k8s_payload


# ---------------------------------------------------------------------------- elastic traffic

# The demo's inference traffic by hour of the day (UTC), in cards' worth of work at 100 %
# utilisation: quiet nights, a shoulder from 08:00 and over lunch, peaks 09:00-12:00 and
# 14:00-17:00. Requests finished per second are REQUESTS_PER_CARD per card's worth.
_LOAD_BY_HOUR = [1.0] * 8 + [2.6] + [7.5] * 3 + [2.6] * 2 + [7.5] * 3 + [1.0] * 7
REQUESTS_PER_CARD = 1.8


def demo_signal(load_cards: float, cards: int, noise: float) -> tuple[float, float]:
    """(utilisation %, mean latency ms) when ``load_cards`` cards' worth of work meets
    ``cards`` cards: utilisation is the share of them it keeps busy (at most 100 %); latency
    is 300 ms plus a queueing term that grows with the square of utilisation above 60 %
    (1,500 ms when saturated). ``noise`` in [-1, 1] shakes both a little."""
    util = min(100.0, 100.0 * load_cards / max(cards, 1)) + 3.0 * noise
    util = max(0.0, min(100.0, util))
    latency = 300.0 + 1200.0 * max(0.0, (util - 60.0) / 40.0) ** 2 + 40.0 * noise
    return round(util, 1), round(latency)


def demo_elastic_history(policy, *, start: float, minutes: int, seed: int = 19):
    """``minutes`` of the demo traffic from ``start`` (Unix s, on a minute) through the loop's
    own rules, one pass a minute as the beat task runs it: each minute's reading is what the
    cards held then would show (:func:`demo_signal`), and the decision
    (:func:`pools.elastic.policy.evaluate` on the readings so far) takes effect at once.
    Returns ``(readings, changes, last)``: readings ``(unix s, util %, latency ms, requests/s,
    cards held after the pass)``, the decisions that changed the cards, and the last one.
    Pure and deterministic (``seed``)."""
    import random

    from pools.elastic.policy import Action, MetricSample, evaluate

    rng = random.Random(seed)
    window = max(policy.up_window_s, policy.down_window_s) // 60 + 5
    cards = policy.lower_bound_cards
    last_scaled: float | None = None
    samples: list = []
    readings: list[tuple[float, float, float, float, int]] = []
    changes = []
    decision = None
    for minute in range(minutes):
        at = start + 60 * minute
        load = _LOAD_BY_HOUR[int(at // 3600) % 24]
        util, latency = demo_signal(load, cards, rng.uniform(-1, 1))
        samples.append(MetricSample(at, util, latency))
        decision = evaluate(
            policy, samples[-window:], cards_now=cards, now=at, last_scaled_at=last_scaled
        )
        if decision.action is not Action.HOLD and decision.cards_to != cards:
            cards = decision.cards_to
            last_scaled = at
            changes.append(decision)
        rate = round(load * REQUESTS_PER_CARD * (1 + 0.05 * rng.uniform(-1, 1)), 2)
        readings.append((at, util, latency, rate, cards))
    return readings, changes, decision


DEMO_HOME_CARDS = 8
"""The demo's elastic allocation bursts once (issue 35): the first time the loop takes it above
this many cards, the inference pool is full and the cards above it go to the burst pool."""


def demo_burst_once(changes, *, home_cards: int = DEMO_HOME_CARDS) -> list[int]:
    """Per decision of ``changes`` (those :func:`demo_elastic_history` returns), the cards of
    its ``cards_to`` placed in the burst pool: above ``home_cards`` during the first run of
    decisions above it, 0 everywhere else (burst cards go back first, so the decision that
    brings the cards to ``home_cards`` or below ends the run)."""
    placed, state = [], "before"
    for decision in changes:
        if state == "before" and decision.cards_to > home_cards:
            state = "in"
        elif state == "in" and decision.cards_to <= home_cards:
            state = "after"
        placed.append(max(0, decision.cards_to - home_cards) if state == "in" else 0)
    return placed


# ---------------------------------------------------------------------------- serving signals

# Histogram bounds the engines export (seconds): vLLM vllm/v1/metrics/loggers.py, SGLang
# python/sglang/srt/metrics/collector.py (TokenizerMetricsCollector defaults).
VLLM_TTFT_LE = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
VLLM_ITL_LE = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)  # fmt: skip
VLLM_E2E_LE = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
               120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
SGLANG_TTFT_LE = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_ITL_LE = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035,
                 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0,
                 8.0)  # fmt: skip
SGLANG_E2E_LE = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
                 1200, 1800, 2400)  # fmt: skip
# The demo's serving allocations: (sizing catalogue model, precision, TP, engine) per team, as
# their requests' justifications say (vision's Qwen2-VL-7B as the catalogue's Qwen2.5-7B).
DEMO_SERVED = {
    "nlp": ("qwen2_5_14b", "FP8", 1, "sglang"),
    "vision": ("qwen2_5_7b", "BF16", 2, "vllm"),
}
# Tokens per demo request: 525 in, 250 out (the prompt 2.1 times the answer).
DEMO_INPUT_TOKENS, DEMO_OUTPUT_TOKENS = 525, 250
DEMO_GPU = "l40s"


@functools.lru_cache(maxsize=512)
def demo_tok_s_per_card(team: str, concurrency: int) -> float:
    """Output tok/s per card the sizing engine gives ``team``'s served model
    (:data:`DEMO_SERVED`) on L40S at ``concurrency`` sequences per replica (at least 1), with
    the demo's lengths: what a replica at that batch really emits, so the demo's token counters
    and the calibration pass (which sizes the same model at the measured concurrency) agree.
    Qwen2.5-7B BF16 at TP 2: 35.5 tok/s per card at 1 sequence, 138.9 at 4 (its ITL at that
    batch is a memory-bandwidth bound, :mod:`pools.sizing.throughput`)."""
    from pools.sizing.gpus import gpu_spec
    from pools.sizing.plan import estimate_replica
    from pools.sizing.presets import model_preset

    model_id, precision, tp, engine = DEMO_SERVED[team]
    estimate = estimate_replica(
        model=model_preset(model_id),
        gpu=gpu_spec(DEMO_GPU),
        precision=precision,
        kv_cache_dtype=None,
        tp=tp,
        input_tokens=DEMO_INPUT_TOKENS,
        output_tokens=DEMO_OUTPUT_TOKENS,
        concurrency=max(1, concurrency),
        engine=engine,
    )
    return estimate.output_tok_s_total / tp


def _lognormal_cdf(x: float, median: float, sigma: float = 0.5) -> float:
    import math

    return 0.5 * (1 + math.erf(math.log(x / median) / (sigma * math.sqrt(2))))


def demo_serving_answers(
    *,
    namespace: str,
    at: float,
    cards: int,
    troubled: bool,
    rng,
    age: float,
    traffic_cards: int | None = None,
):
    """What the serving family queries would answer for one demo allocation over the 5 minutes
    before ``at`` (Unix s): a list of series with the labels of
    :mod:`scheduler_adapters.serving_metrics` (``signal``, ``engine``, ``metric``, ``le``).

    Healthy (vLLM): the demo traffic (:data:`_LOAD_BY_HOUR`) on ``cards`` cards, short queue,
    KV cache at 20-70 %. Troubled (SGLang): twice the traffic on the same cards, so the queue
    grows to tens of requests at the peaks, the KV pool stays full, requests are retracted, and
    free framebuffer falls from 9 GiB to about 1 GiB per card over the week (``age`` 0..1, the
    share of the recorded week gone). Latencies are log-normal around a median that grows with
    utilisation; bucket counts are that distribution at the engine's own bounds.

    ``cards`` are the cards held in the bucket; ``traffic_cards`` (default ``cards``) the
    allocation's floor the traffic is sized to, so an elastic allocation's traffic does not grow
    with the cards it scaled to. Output tokens are the sizing engine's at the batch each replica
    runs (:func:`demo_tok_s_per_card`), never a fixed rate."""
    from scheduler_adapters.prometheus import Sample, Series

    engine = "sglang" if troubled else "vllm"
    team = "nlp" if troubled else "vision"
    floor = traffic_cards or cards
    load = _LOAD_BY_HOUR[int(at // 3600) % 24] * (2.2 if troubled else 0.45) * floor / 8
    util, _latency = demo_signal(load, cards, rng.uniform(-1, 1))
    busy = util / 100.0
    overload = max(0.0, load / cards - 0.85)
    # Tokens from the sizing engine at the batch each replica runs (module constants above);
    # an overloaded SGLang retracts requests and redoes their prefill: up to 40 % of its
    # decode work lost, so it serves below what its batch would give (the unhealthy story).
    running = round(min(load, cards) * 8, 1)
    replicas = max(1, cards // DEMO_SERVED[team][2])
    per_card = demo_tok_s_per_card(team, round(running / replicas))
    wasted = min(0.4, overload) if troubled else 0.0
    output = per_card * cards * 300 * (1 - wasted) * (1 + 0.03 * rng.uniform(-1, 1))
    requests = output / DEMO_OUTPUT_TOKENS
    out = []

    def add(signal, metric, value, le=None):
        labels = {"signal": signal, "engine": metric.split(":")[0] if ":" in metric else "dcgm",
                  "metric": metric, "namespace": namespace}  # fmt: skip
        if le is not None:
            labels["le"] = le
        out.append(Series("", tuple(sorted(labels.items())), (Sample(at, value),)))

    def histogram(signal, metric, bounds, median):
        for bound in bounds:
            add(signal, metric, round(requests * _lognormal_cdf(bound, median)), le=f"{bound:g}")
        add(signal, metric, round(requests), le="+Inf")

    name = {
        "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total",
                 "vllm:generation_tokens_total", "vllm:request_success_total",
                 "vllm:num_preemptions_total", "vllm:prefix_cache_hits_total",
                 "vllm:prefix_cache_queries_total"),
        "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                   "sglang:prompt_tokens_total", "sglang:generation_tokens_total",
                   "sglang:num_requests_total", "sglang:num_retracted_requests_total",
                   "sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
    }[engine]  # fmt: skip
    running_name, waiting, kv, prompt, generation, finished, preempted, hits, queries = name
    add("requests_running", running_name, running)
    add("requests_waiting", waiting, round(overload * 60 + max(0.0, rng.gauss(0, 1)), 1))
    add("kv_cache_usage_pct", kv, min(1.0, 0.2 + 0.5 * busy + (0.5 if overload else 0.0)))
    add("prompt_tokens", prompt, round(requests * DEMO_INPUT_TOKENS))
    add("prefix_cache_queries", queries, round(requests * DEMO_INPUT_TOKENS))
    add("prefix_cache_hits", hits,
        round(requests * DEMO_INPUT_TOKENS * (0.35 if troubled else 0.55)))  # fmt: skip
    add("generation_tokens", generation, round(output))
    add("requests_finished", finished, round(requests))
    add("preemptions", preempted, round(overload * 40))
    failed = "sglang:num_aborted_requests_total" if troubled else "vllm:request_success_total"
    add("requests_failed", failed, round(overload * 6))
    if troubled:
        histogram("ttft", "sglang:time_to_first_token_seconds_bucket", SGLANG_TTFT_LE,
                  0.35 + 6 * overload)  # fmt: skip
        histogram("itl", "sglang:inter_token_latency_seconds_bucket", SGLANG_ITL_LE,
                  0.03 + 0.04 * busy)  # fmt: skip
        histogram("e2e", "sglang:e2e_request_latency_seconds_bucket", SGLANG_E2E_LE,
                  6 + 30 * overload)  # fmt: skip
    else:
        histogram("ttft", "vllm:time_to_first_token_seconds_bucket", VLLM_TTFT_LE,
                  0.12 + 0.2 * busy)  # fmt: skip
        histogram("itl", "vllm:inter_token_latency_seconds_bucket", VLLM_ITL_LE,
                  0.022 + 0.02 * busy)  # fmt: skip
        histogram("e2e", "vllm:e2e_request_latency_seconds_bucket", VLLM_E2E_LE,
                  3 + 3 * busy)  # fmt: skip
    total_mib = 46068 * cards  # L40S: 46,068 MiB each (nvidia-smi)
    free_per_card = (9216 - 8192 * age) if troubled else 12288 + 512 * rng.uniform(-1, 1)
    add("gpu_util_pct", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", round(busy, 3))
    add("sm_active_pct", "DCGM_FI_PROF_SM_ACTIVE", round(busy * 0.82, 3))
    add("dram_active_pct", "DCGM_FI_PROF_DRAM_ACTIVE", round(busy * 0.55, 3))
    add("fb_free_mib", "DCGM_FI_DEV_FB_FREE", round(free_per_card * cards))
    add("fb_used_mib", "DCGM_FI_DEV_FB_USED", round(total_mib - free_per_card * cards))
    add("temperature_c", "DCGM_FI_DEV_GPU_TEMP", round(38 + 40 * busy))
    add("xid_last", "DCGM_FI_DEV_XID_ERRORS", 0)
    add("cards_reporting", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", cards)
    add("cards_busy", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", round(cards * min(1.0, busy + 0.1)))
    return out


# ---------------------------------------------------------------------------- advisor signals

A100_80G_MIB = 81920  # nvidia-smi memory.total of an A100 80GB


def demo_advisor_rollups(*, start, end, cards: int, rng) -> list[dict]:
    """5-minute rollup rows (fields of :class:`pools.serving.models.ServingRollup`) for nlp's
    four A100 on one node (a vLLM evaluation endpoint beside the LoRA run), from ``start`` to
    ``end`` (aware datetimes on a bucket), so the advisor has two more symptoms to find:

    - *framebuffer decay* (000 §5.3): free framebuffer per card falls from 20 GiB to 5 GiB
      over the recorded days while output tokens per busy card-second fall from 1,500 to
      1,050 (a 30 % loss);
    - *batching* (004 §5.1 row 1) in the last 45 minutes: utilisation 22 %, 14 requests
      waiting, the KV cache at 30 %: the engine takes too few sequences per batch.

    Otherwise healthy: utilisation about 60 %, a short queue, TTFT p95 0.4 s, NVLink busy
    (TP = 4). Deterministic for a seeded ``rng``."""
    from datetime import timedelta

    buckets = int((end - start).total_seconds() // 300)
    rows = []
    for index in range(buckets):
        at = start + timedelta(minutes=5 * index)
        age = index / max(buckets - 1, 1)
        throttled = buckets - index <= 9
        util = 22.0 + rng.uniform(-2, 2) if throttled else 60.0 + rng.uniform(-8, 8)
        busy_cards = 0 if util < 30 else cards
        free = 20480 - 15360 * age
        speed = 1500.0 * (1 - 0.3 * age)
        rows.append(
            {
                "bucket_start": at,
                "cards_held": cards,
                "engine": "vllm",
                "requests_running": 6.0 if throttled else round(24 + rng.uniform(-4, 4), 1),
                "requests_waiting": 14.0 if throttled else round(max(0.0, rng.gauss(0.3, 0.3)), 1),
                "kv_cache_usage_pct": 30.0 if throttled else round(50 + rng.uniform(-5, 5), 1),
                "ttft_p50_s": 0.9 if throttled else 0.18,
                "ttft_p95_s": 2.4 if throttled else 0.4,
                "itl_p50_s": 0.02,
                "itl_p95_s": 0.03,
                "e2e_p50_s": 6.0 if throttled else 2.5,
                "e2e_p95_s": 9.0 if throttled else 4.0,
                "prompt_tokens": round(speed * busy_cards * 300 * 1.8),
                "generation_tokens": round(speed * busy_cards * 300) if busy_cards else 2000.0,
                "requests_finished": 120.0 if throttled else 900.0,
                "requests_failed": 0.0,
                "preemptions": 0.0,
                "gpu_util_pct": round(util, 1),
                "sm_active_pct": round(util * 0.8, 1),
                "dram_active_pct": round(util * 0.5, 1),
                "fb_free_mib": round(free * cards),
                "fb_used_mib": round((A100_80G_MIB - free) * cards),
                "temperature_c": round(35 + 0.4 * util),
                "xid_last": 0.0,
                "nvlink_bytes_s": 4.0e9 * util / 60,
                "cards_reporting": float(cards),
                "cards_busy": float(busy_cards),
            }
        )
    return rows


def demo_gpu_rollups(devices, *, start, end, busy_pct: float) -> list[dict]:
    """5-minute rollup rows (GPU fields of :class:`pools.serving.models.ServingRollup`) of an
    allocation that runs no inference engine, folded from the dcgm-exporter readings
    ``devices`` (:class:`scheduler_adapters.prometheus.DeviceUsage`, one per card) as the
    serving queries fold them (:data:`scheduler_adapters.serving_metrics.SIGNALS`): utilisation
    the mean over the cards (%), framebuffer used their sum (MiB), ``cards_busy`` the cards whose
    bucket mean is at least ``busy_pct`` (%), ``cards_reporting`` the cards with a sample in the
    bucket. Buckets from ``start`` to ``end`` (aware datetimes on a bucket); engine fields
    unknown. So the serving page of the demo's idle allocation shows the readings its idle
    finding was judged on."""
    from datetime import timedelta

    buckets = int((end - start).total_seconds() // 300)

    def means(series) -> dict[int, float]:
        """Bucket index -> the mean of the series' known samples in it."""
        sums: dict[int, list[float]] = {}
        for sample in series:
            index = int((sample.timestamp - start.timestamp()) // 300)
            if sample.value is not None and 0 <= index < buckets:
                sums.setdefault(index, []).append(sample.value)
        return {index: sum(values) / len(values) for index, values in sums.items()}

    util = [means(d.util_pct) for d in devices]
    fb = [means(d.fb_used_mib) for d in devices]
    rows = []
    for index in range(buckets):
        utils = [card[index] for card in util if index in card]
        fbs = [card[index] for card in fb if index in card]
        if not utils:
            continue
        mean = sum(utils) / len(utils)
        rows.append(
            {
                "bucket_start": start + timedelta(minutes=5 * index),
                "cards_held": len(devices),
                "gpu_util_pct": round(mean, 1),
                "fb_used_mib": round(sum(fbs)) if fbs else None,
                "cards_reporting": float(len(utils)),
                "cards_busy": float(sum(1 for u in utils if u >= busy_pct)),
            }
        )
    return rows
