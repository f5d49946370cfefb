"""The GPU facts the estimator needs, as a small frozen :class:`GpuSpec`.

Built from the shipped catalogue (``pools/inventory/catalogue/gpu_models.json``, read through
:func:`pools.inventory.catalogue.load_gpu_models`) or from a ``GpuModel`` row, which carries the
same field
names: ``gpu_spec_from_fields(**{f: getattr(row, f) for f in GPU_SPEC_FIELDS})``. Catalogue slugs
are the GPU ids of the shared sizing dataset (``h100_sxm``, ``a100_80g_sxm`` ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

from pools.inventory.catalogue import load_gpu_models
from pools.sizing import SizingInputError

GIB = 1024**3

#: Catalogue / model fields :func:`gpu_spec_from_fields` reads.
GPU_SPEC_FIELDS = (
    "slug",
    "name",
    "architecture",
    "card_class",
    "form_factor",
    "memory_gib",
    "memory_bandwidth_gbps",
    "fp16_dense_tflops",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "int8_dense_tops",
    "nvlink_gbps",
    "sources",
)

#: PCIe bandwidth per direction between two cards, GB/s (1e9 B/s): x16 Gen4 32, Gen5 64. These are
#: the intra-node bandwidths NVIDIA aiconfigurator assigns to PCIe systems (systems/*.yaml: L40S,
#: L4, A100-PCIe 32 GB/s; H100 PCIe 64 GB/s), see shared/research/sizing_anchors.md section 2.4.
PCIE_GEN4_GBPS = 32.0
PCIE_GEN5_GBPS = 64.0


def _number(value: Any) -> float | None:
    if value is None:
        return None
    return float(Decimal(str(value)))


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model (SKU) as the sizing model uses it.

    ``memory_bytes`` is the usable capacity in bytes (catalogue ``memory_gib`` × 2**30).
    Bandwidths are GB/s = 1e9 B/s: ``memory_bandwidth_gbps`` HBM/GDDR peak,
    ``nvlink_gbps`` NVLink total both directions (``None``: no NVLink), ``pcie_gbps`` PCIe per
    direction. Tensor rates are dense (no sparsity) peaks in TFLOPS / TOPS; ``None`` = unknown or
    absent. ``fp8_native`` is True when the card has FP8 tensor cores, False when the catalogue
    says it has none (Ampere, Turing), ``None`` when unknown.
    """

    slug: str
    name: str
    architecture: str
    card_class: str
    form_factor: str
    memory_bytes: int
    memory_bandwidth_gbps: float | None
    fp16_dense_tflops: float | None
    bf16_dense_tflops: float | None
    fp8_dense_tflops: float | None
    int8_dense_tops: float | None
    nvlink_gbps: float | None
    pcie_gbps: float
    fp8_native: bool | None

    @property
    def has_nvlink(self) -> bool:
        """True when the card links to its peers over NVLink."""
        return self.nvlink_gbps is not None and self.nvlink_gbps > 0

    def nvlink_spans(self, tp: int) -> bool:
        """True when a TP group of ``tp`` cards talks over NVLink: always for SXM NVLink cards;
        for bridged PCIe cards (form factor ``nvl``, sold as NVLink-bridged pairs) only up to 2.
        """
        if not self.has_nvlink:
            return False
        return self.form_factor != "nvl" or tp <= 2

    def peer_bandwidth_bytes_per_s(self, tp: int) -> float:
        """All-reduce bandwidth for a TP group of ``tp``, B/s per direction: NVLink total / 2
        where :meth:`nvlink_spans` the group, else PCIe.
        """
        if self.nvlink_spans(tp):
            return self.nvlink_gbps / 2 * 1e9
        return self.pcie_gbps * 1e9

    @property
    def memory_gib(self) -> float:
        """Capacity in GiB (2**30 bytes)."""
        return self.memory_bytes / GIB


def gpu_spec_from_fields(
    *,
    slug: str,
    name: str,
    memory_gib: Any,
    memory_bandwidth_gbps: Any,
    architecture: str = "",
    card_class: str = "",
    form_factor: str = "",
    fp16_dense_tflops: Any = None,
    bf16_dense_tflops: Any = None,
    fp8_dense_tflops: Any = None,
    int8_dense_tops: Any = None,
    nvlink_gbps: Any = None,
    sources: Mapping[str, str] | None = None,
) -> GpuSpec:
    """Build a :class:`GpuSpec` from catalogue-style fields (numbers, Decimals or ``None``).

    ``memory_gib`` is GiB; bandwidths GB/s; tensor rates dense TFLOPS/TOPS. ``sources`` is the
    catalogue's field -> citation map: an FP8 citation starting ``none:`` marks a card without FP8
    tensor cores. PCIe generation: Gen5 for Hopper cards, Gen4 otherwise (every PCIe card in the
    catalogue that is not Hopper is Ampere, Ada or Turing, all Gen4).

    Raises :class:`SizingInputError` (reason ``not_positive``) for a missing or non-positive
    memory size.
    """
    memory = _number(memory_gib)
    if memory is None or memory <= 0:
        raise SizingInputError(
            f"GPU {slug!r} has no positive memory size", reason="not_positive", field="memory_gib"
        )
    fp8 = _number(fp8_dense_tflops)
    fp8_source = (sources or {}).get("fp8_dense_tflops", "")
    if fp8 is not None:
        fp8_native: bool | None = True
    elif fp8_source.startswith("none:"):
        fp8_native = False
    else:
        fp8_native = None
    hopper = "hopper" in (architecture or "").lower()
    return GpuSpec(
        slug=slug,
        name=name,
        architecture=architecture or "",
        card_class=card_class or "",
        form_factor=form_factor or "",
        memory_bytes=int(round(memory * GIB)),
        memory_bandwidth_gbps=_number(memory_bandwidth_gbps),
        fp16_dense_tflops=_number(fp16_dense_tflops),
        bf16_dense_tflops=_number(bf16_dense_tflops),
        fp8_dense_tflops=fp8,
        int8_dense_tops=_number(int8_dense_tops),
        nvlink_gbps=_number(nvlink_gbps),
        pcie_gbps=PCIE_GEN5_GBPS if hopper else PCIE_GEN4_GBPS,
        fp8_native=fp8_native,
    )


#: Non-tensor FP32 peak of the CUDA cores, TFLOPS (= 2 x CUDA cores x boost clock: one fused
#: multiply-add per core per cycle), by catalogue slug, as NVIDIA's datasheets state it: A100
#: (40/80 GB, SXM and PCIe; the A800 is the same chip) 19.5; H100 SXM 67, H100 PCIe 51, H100
#: NVL 60; H200 SXM 67; L40S 91.6; L4 30.3; A10 31.2; GeForce RTX 4090 82.6 (16,384 CUDA cores x
#: 2.52 GHz boost x 2, the RTX 4090 specifications page). The catalogue keeps CUDA core counts but
#: no clocks, so the rate lives here; the de-quantisation term of weight-only kernels
#: (``pools.sizing.throughput``) runs on these cores. A card missing here has no such term.
CUDA_CORE_FP32_TFLOPS = {
    "a100_40g_pcie": 19.5,
    "a100_40g_sxm": 19.5,
    "a100_80g_pcie": 19.5,
    "a100_80g_sxm": 19.5,
    "a800_80g_sxm": 19.5,
    "h100_sxm": 67.0,
    "h100_pcie": 51.0,
    "h100_nvl": 60.0,
    "h200_sxm": 67.0,
    "l40s": 91.6,
    "l4": 30.3,
    "a10": 31.2,
    "rtx4090": 82.6,
}


#: Dense FP4 (NVFP4 / MXFP4) tensor peak, TFLOPS, of the cards with FP4 tensor cores (Blackwell),
#: by catalogue slug; the catalogue has no FP4 column, so the rate lives here, each from the
#: source cited on the card's catalogue entry (``notes`` and ``sources``): B200 9,000 (HGX,
#: 1,000 W), B300 13,500 (HGX B300 108 PF dense / 8), GB200 10,000 (NVL72 1,440 PF sparse / 72
#: / 2), GB300 15,000 (NVL72 1,080 PF dense / 72), RTX PRO 6000 Blackwell 2,015.2 (RTX Blackwell
#: whitepaper: 4,030.4 sparse), GeForce RTX 5090 1,676 (same whitepaper: 3,352 sparse). A card
#: missing here runs FP4 de-quantised (``pools.sizing.throughput.precision_on_gpu``).
FP4_DENSE_TFLOPS = {
    "b200": 9000.0,
    "b300": 13500.0,
    "gb200": 10000.0,
    "gb300": 15000.0,
    "rtx_pro_6000_server": 2015.2,
    "rtx_pro_6000_ws": 2015.2,
    "rtx5090": 1676.0,
}

#: GPUs in one NVLink domain, by slug, where it is larger than a node: a GB200 / GB300 NVL72
#: rack joins 72 GPUs (18 compute trays of 4) through NVLink switches (NVIDIA GB200 NVL72 and
#: GB300 NVL72 specifications: "72 Blackwell GPUs ... NVLink domain"), so tensor parallelism
#: may span trays there.
NVLINK_DOMAIN_GPUS = {"gb200": 72, "gb300": 72}

#: Cards of one server node, the span tensor parallelism stays inside: ``000`` §4.1 ("单节点内
#: 8卡，张量并行度设8是安全选择" - in an 8-card node TP 8 is the safe choice; across nodes
#: tensor parallelism goes over the NIC, pipeline parallelism is the usual split). HGX / DGX
#: servers hold 8 cards; an NVL72 rack's NVLink domain is larger (:data:`NVLINK_DOMAIN_GPUS`).
GPUS_PER_NODE = 8


#: Cards whose host CPU is an NVIDIA Grace (Arm Neoverse V2) instead of an x86 server CPU: a
#: GB200 / GB300 superchip pairs one Grace CPU with two Blackwell GPUs (NVIDIA GB200 NVL72 and
#: GB300 NVL72 specifications: "36 Grace CPUs, 72 Blackwell GPUs"). An engine whose host
#: work per step grows with the batch runs it at Grace's speed there
#: (``pools.sizing.engines.EngineProfile.host_s_per_sequence_grace``).
GRACE_HOSTED = frozenset({"gb200", "gb300"})


def grace_hosted(gpu: GpuSpec) -> bool:
    """True when ``gpu``'s host CPU is a Grace (:data:`GRACE_HOSTED`): GB200 yes, B200 no."""
    return gpu.slug in GRACE_HOSTED


def node_gpus(gpu: GpuSpec) -> int:
    """Cards that talk without the NIC: the NVLink domain of a rack-scale system, else one node
    of :data:`GPUS_PER_NODE`. GB200: 72; H100 SXM: 8."""
    return NVLINK_DOMAIN_GPUS.get(gpu.slug, GPUS_PER_NODE)


def fp4_dense_tflops(gpu: GpuSpec) -> float | None:
    """The card's dense FP4 tensor rate, TFLOPS (:data:`FP4_DENSE_TFLOPS`), ``None`` without FP4
    tensor cores."""
    return FP4_DENSE_TFLOPS.get(gpu.slug)


#: Catalogue slugs of the cards with a compute capability 12.0 chip (GB202): NVIDIA's CUDA GPU
#: compute capability table (developer.nvidia.com/cuda-gpus) lists the RTX PRO 6000 Blackwell
#: (Server and Workstation Editions) and the GeForce RTX 5090 at 12.0; B200 and GB200 at 10.0, B300
#: and GB300 at 10.3. The other cards of :data:`FP4_DENSE_TFLOPS` are the SM 100 / 103 ones.
SM120_CARDS = frozenset({"rtx_pro_6000_server", "rtx_pro_6000_ws", "rtx5090"})


def trtllm_gen_attention(gpu: GpuSpec) -> bool:
    """Whether TensorRT-LLM runs its attention on ``gpu`` with the trtllm-gen kernels: on SM 100
    and later except SM 120 / 121 (NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/common/attentionOp.h``:
    ``mUseTllmGen = (mSM >= 100) && (mSM != 120) && (mSM != 121)``), i.e. the cards with FP4
    tensor cores (:data:`FP4_DENSE_TFLOPS`) outside :data:`SM120_CARDS`; elsewhere its decode
    runs the XQA kernels, or the masked multi-head attention kernel where XQA refuses the layer
    (``pools.sizing.engines.TENSORRT_LLM_CHUNKED_DECODE_PER_QUERY_HEAD``). B200, GB300: True;
    H200, RTX PRO 6000 Blackwell, A100: False."""
    return fp4_dense_tflops(gpu) is not None and gpu.slug not in SM120_CARDS


def cuda_core_instructions_per_s(gpu: GpuSpec) -> float | None:
    """Instructions per second the CUDA cores of one ``gpu`` issue, one per core per cycle:
    :data:`CUDA_CORE_FP32_TFLOPS` x 1e12 / 2 (an FMA counts two FLOPs). A100: 9.75e12.
    ``None`` for a card without a figure.
    """
    tflops = CUDA_CORE_FP32_TFLOPS.get(gpu.slug)
    return None if tflops is None else tflops * 1e12 / 2


def gpu_specs_from_catalogue() -> dict[str, GpuSpec]:
    """Return every GPU model of the shipped catalogue as a :class:`GpuSpec`, by slug."""
    return {
        entry["slug"]: gpu_spec_from_fields(**{key: entry.get(key) for key in GPU_SPEC_FIELDS})
        for entry in load_gpu_models()
    }


def gpu_spec(slug: str, specs: Mapping[str, GpuSpec] | None = None) -> GpuSpec:
    """Return the spec with this slug from ``specs`` (default: the shipped catalogue).

    Raises :class:`SizingInputError` (reason ``unknown_gpu``) listing the known slugs.
    """
    specs = gpu_specs_from_catalogue() if specs is None else specs
    try:
        return specs[slug]
    except (KeyError, TypeError):
        raise SizingInputError(
            f"unknown GPU model {slug!r}; known: {', '.join(specs)}",
            reason="unknown_gpu",
            field="gpu",
        ) from None


@cache
def _shipped_name_index() -> tuple[list[str], dict[str, str], dict[str, tuple[str, ...]]]:
    """The shipped catalogue's slugs, name keys and ambiguous names, built once."""
    from pools.inventory.catalogue import load_ambiguous_names
    from pools.inventory.gpu_names import ambiguous_name_index, model_key_index

    models = load_gpu_models()
    slugs = [m["slug"] for m in models]
    by_key = model_key_index(models)
    return slugs, by_key, ambiguous_name_index(load_ambiguous_names(), slugs=slugs, by_key=by_key)


def gpu_slug_for_name(name: str, models: list[Mapping[str, Any]] | None = None) -> str:
    """The catalogue slug a GPU is known by: its slug, or any name it answers to - the name
    nvidia-smi prints (``NVIDIA H100 80GB HBM3``), its display name, a Kubernetes label value or
    a Slurm GRES type - matched as the inventory matches them
    (:func:`pools.inventory.gpu_names.normalise_model_key`, exact keys, never substrings).

    Raises :class:`SizingInputError` with field ``gpu``: reason ``ambiguous_gpu`` naming the
    candidates when the name fits several SKUs (``NVIDIA H100``: SXM, PCIe or NVL - give the
    slug), ``unknown_gpu`` when it fits none.
    """
    from pools.inventory.catalogue import load_ambiguous_names
    from pools.inventory.gpu_names import (
        ambiguous_name_index,
        model_key_index,
        normalise_model_key,
    )

    if models is None:
        slugs, by_key, ambiguous = _shipped_name_index()
    else:
        slugs = [m["slug"] for m in models]
        by_key = model_key_index(models)
        ambiguous = ambiguous_name_index(load_ambiguous_names(), slugs=slugs, by_key=by_key)
    if name in slugs:
        return name
    key = normalise_model_key(str(name))
    if key in by_key:
        return by_key[key]
    if key in ambiguous:
        candidates = ambiguous[key]
        raise SizingInputError(
            f"GPU {name!r} names several catalogue models: {', '.join(candidates)}; give one of "
            "these slugs",
            reason="ambiguous_gpu",
            field="gpu",
            candidates=list(candidates),
        )
    raise SizingInputError(
        f"unknown GPU model {name!r}; give a catalogue slug ({', '.join(slugs)}) or the name "
        "nvidia-smi prints",
        reason="unknown_gpu",
        field="gpu",
    )
