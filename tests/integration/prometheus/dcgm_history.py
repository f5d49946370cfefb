"""Synthetic dcgm-exporter history as OpenMetrics for ``promtool tsdb create-blocks-from
openmetrics`` (timestamps in seconds; one contiguous block per metric family; each series in
time order; ``# EOF`` at the end). Adapted from ../shared/research/k8s_prom/backfill_dcgm.py.

GPUs on node ``k8s-n1`` (each a workload of its own namespace), utilisation over the last hours:

- ``team-busy``: 85 % throughout (L40S, ``Hostname`` label, older exporter);
- ``team-idle``: 2 % throughout, 0 MiB framebuffer (H100, ``hostname`` label, newer exporter;
  namespace arrives as ``exported_namespace``: honorLabels false);
- ``team-mig``: an A100 in MIG mode: the parent's ``DCGM_FI_DEV_GPU_UTIL`` reads 0, instance 1
  ``GR_ENGINE_ACTIVE`` 0.8 (80 %), instance 2 0.0;
- ``team-gap``: 0 % but no samples in the last 20 minutes (exporter restart).

And the four A100 of the Slurm test cluster's node ``gpu-a100-01`` (scripts/services/slurm.sh),
device-level series (no pod: Slurm), from three hours before ``end`` to an hour after it, so a
scan can look at a window after jobs started (see SLURM_CARDS for what each card does); and
card 0 of ``gpu-4090-01``, an RTX 4090 at 55 % with no profiling metrics at all.
"""

from __future__ import annotations

from integration.prometheus.server import openmetrics

HOST = "k8s-n1"
INSTANCE = "10.0.0.7:9400"
SLURM_NODE = "gpu-a100-01"
CONSUMER_NODE = "gpu-4090-01"  # the Slurm test cluster's RTX 4090 node
SLURM_AHEAD_S = 3600
# device index -> (DCGM_FI_PROF_GR_ENGINE_ACTIVE ratio, DCGM_FI_DEV_FB_USED MiB)
SLURM_CARDS = {0: (0.9, 30000), 1: (0.0, 0), 2: (0.7, 20000), 3: (0.0, 0)}

# (uuid, model, host label, namespace label, extra labels, metric -> value(age_s) or None)
GPUS = [
    ("GPU-busy-0001", "NVIDIA L40S", "Hostname", "namespace", {}, "team-busy"),
    ("GPU-idle-0002", "NVIDIA H100 80GB HBM3", "hostname", "exported_namespace", {}, "team-idle"),
    ("GPU-mig-0003", "NVIDIA A100-SXM4-80GB", "Hostname", "namespace", {}, "team-mig"),
    ("GPU-gap-0004", "NVIDIA L40S", "Hostname", "namespace", {}, "team-gap"),
]


def _labels(uuid, model, host_key, ns_key, namespace, index, extra=()):
    pairs = [
        ("gpu", str(index)),
        ("UUID", uuid),
        ("device", f"nvidia{index}"),
        ("modelName", model),
        (host_key, HOST),
        ("DCGM_FI_DRIVER_VERSION", "550.54.15"),
        ("container", "main"),
        (ns_key, namespace),
        ("exported_pod" if ns_key == "exported_namespace" else "pod", f"{namespace}-0"),
    ]
    if ns_key == "exported_namespace":  # what honorLabels false leaves in namespace/pod
        pairs += [("namespace", "gpu-operator"), ("pod", "nvidia-dcgm-exporter-abcde")]
    pairs += list(extra) + [("job", "dcgm"), ("instance", INSTANCE)]
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def generate(*, end: float, minutes: int = 180, step: int = 15) -> str:
    start = int(end) - minutes * 60
    stamps = list(range(start, int(end) + 1, step))
    families: dict[str, list[str]] = {
        "DCGM_FI_DEV_GPU_UTIL": [],
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [],
        "DCGM_FI_DEV_FB_USED": [],
    }

    def emit(metric, labels, value_at):
        for t in stamps:
            value = value_at(end - t)
            if value is not None:
                families[metric].append(f"{metric}{{{labels}}} {value} {t}")

    for index, (uuid, model, host_key, ns_key, _extra, namespace) in enumerate(GPUS):
        base = _labels(uuid, model, host_key, ns_key, namespace, index)
        if namespace == "team-busy":
            emit("DCGM_FI_DEV_GPU_UTIL", base, lambda age: 100)
            emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", base, lambda age: 0.85)
            emit("DCGM_FI_DEV_FB_USED", base, lambda age: 30000)
        elif namespace == "team-idle":
            emit("DCGM_FI_DEV_GPU_UTIL", base, lambda age: 2)
            emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", base, lambda age: 0.02)
            emit("DCGM_FI_DEV_FB_USED", base, lambda age: 0)
        elif namespace == "team-mig":
            emit("DCGM_FI_DEV_GPU_UTIL", base, lambda age: 0)  # unsupported under MIG
            for gi, ratio in (("1", 0.8), ("2", 0.0)):
                labels = _labels(
                    uuid,
                    model,
                    host_key,
                    ns_key,
                    namespace,
                    index,
                    [("GPU_I_PROFILE", "3g.40gb"), ("GPU_I_ID", gi)],
                )
                emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, lambda age, r=ratio: r)
                emit("DCGM_FI_DEV_FB_USED", labels, lambda age: 20000)
        else:  # team-gap: samples stop 20 minutes before the end
            emit("DCGM_FI_DEV_GPU_UTIL", base, lambda age: 0 if age > 1200 else None)
            emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", base, lambda age: 0.0 if age > 1200 else None)
            emit("DCGM_FI_DEV_FB_USED", base, lambda age: 0 if age > 1200 else None)
    slurm_stamps = list(range(start, int(end) + SLURM_AHEAD_S + 1, step))
    for index, (ratio, fb_mib) in SLURM_CARDS.items():
        labels = ",".join(
            f'{k}="{v}"'
            for k, v in (
                ("gpu", str(index)),
                ("UUID", f"GPU-slurm-a100-{index}"),
                ("device", f"nvidia{index}"),
                ("modelName", "NVIDIA A100-SXM4-80GB"),
                ("Hostname", SLURM_NODE),
                ("job", "dcgm"),
                ("instance", f"{SLURM_NODE}:9400"),
            )
        )
        for metric, value in (
            ("DCGM_FI_DEV_GPU_UTIL", round(ratio * 100)),
            ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", ratio),
            ("DCGM_FI_DEV_FB_USED", fb_mib),
        ):
            families[metric] += [f"{metric}{{{labels}}} {value} {t}" for t in slurm_stamps]
    # a consumer card: no profiling metrics at all, only DCGM_FI_DEV_GPU_UTIL (and FB_USED)
    consumer = (
        'gpu="0",UUID="GPU-4090-0",device="nvidia0",modelName="NVIDIA GeForce RTX 4090",'
        f'Hostname="{CONSUMER_NODE}",job="dcgm",instance="{CONSUMER_NODE}:9400"'
    )
    families["DCGM_FI_DEV_GPU_UTIL"] += [
        f"DCGM_FI_DEV_GPU_UTIL{{{consumer}}} 55 {t}" for t in slurm_stamps
    ]
    families["DCGM_FI_DEV_FB_USED"] += [
        f"DCGM_FI_DEV_FB_USED{{{consumer}}} 9000 {t}" for t in slurm_stamps
    ]
    return openmetrics(families)
