"""What share of a Blackwell card's peaks its FP4 kernels reach: two chip families, two sets.

FP4 (NVFP4 / MXFP4) multiplies on Blackwell's tensor cores, but the kernels that do it differ by
chip: the datacentre chips (B200, B300, GB200, GB300: compute capability 10.x, "SM100") and the
workstation / GeForce chip GB202 (RTX PRO 6000 Blackwell, RTX 5090: compute capability 12.0,
"SM120") have different tensor-core instructions and TensorRT-LLM builds separate CUTLASS
kernels for each. Measured, they reach very different shares of their peaks: on an SM100 card
the FP4 GEMMs reach a third of a peak that is twice the FP8 one, and a mixture of experts'
routed GEMMs a seventh of it and under half the bandwidth; on the RTX PRO 6000, whose FP4 peak
is a quarter of a B200's and whose GDDR7 moves a fifth of the bytes, the same ops reach about
0.6, 0.36 and 0.83 of its own peaks. One share for both families (what the model held until
this module) under-predicts every RTX PRO 6000 measurement (TensorRT-LLM's perf overview: 27
cells, median -25 %).

:data:`SM100_KERNELS` holds the shares published for the B200 (the constants below);
:data:`SM120_KERNELS` the shares NVIDIA's aiconfigurator tables measure on an RTX PRO 6000
Blackwell Server. ``benchmarks/fp4_kernel_shares.py`` prints them, and the same three shares
measured the same way on the B200 (0.392 / 0.162 / 0.489) and GB200 (0.381 / 0.158 / 0.506):
by one method, the SM120 chip's kernels reach 1.6 - 2.2 times the SM100 chips' shares. The SM100
set keeps the published figures (0.338 / 0.140 / 0.397), which the model was scored with.
:func:`fp4_kernels` picks a card's set; ``pools.sizing.throughput`` applies it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pools.sizing.gpus import SM120_CARDS, GpuSpec, fp4_dense_tflops

#: Share of a card's dense FP4 tensor peak that dense NVFP4 GEMMs reach on SM100 Blackwell,
#: activation quantisation included - a published kernel measurement, not an end-to-end fit: vLLM
#: pull request 20646 ("Basic tuned configs for NVFP4 CUTLASS dense GEMM", 2025-07,
#: ``benchmarks/kernels/bench_nvfp4_gemm.py``), Llama-3.1-8B's QKV shape N = 6,144, K = 4,096:
#: "nvfp4" (quantise the BF16 activations, then multiply) levels off at 2,948 / 3,025 / 3,039 TFLOPS
#: at 4,096 / 8,192 / 16,384 rows, "nvfp4-noquant" at 3,904. The card is an SM100 one (3,904 TFLOPS
#: exceeds every SM120 card's FP4 peak, 2,015 for the RTX PRO 6000); taken as a B200, 9,000 dense
#: FP4 TFLOPS: 3039 / 9000 = 0.338, below the 0.5 of every other tensor rate
#: (``engines.COMPUTE_EFFICIENCY``). NVIDIA's B200 datasheet FP4 rate is twice its FP8 rate; these
#: kernels reach 0.68 x the FP8 peak. flashinfer-ai/flashinfer issue 1732 (2025-09, "[Perf] FP4 GEMM
#: on B200", priority P0) reports the same: the CUTLASS FP4 GEMM "not approaching the hardware
#: limit" for compute- and memory-bound shapes alike.
DENSE_FP4_GEMM_PEAK_SHARE = 3039 / 9000


#: Share of a card's dense FP4 tensor peak that a mixture of experts' routed-expert GEMMs reach in
#: NVFP4 on SM100 Blackwell - published kernel-level measurements of whole MoE layers (grouped
#: expert GEMMs with their routing, activation quantisation and combine), not an end-to-end fit:
#: "TFLOPS Gap: Why FP4 MoE Kernel Engineering Matters on Blackwell" (Hugging Face blog,
#: huggingface.co/blog/apsys/blackwell-nvfp4-comparison, 2026-01), one B200, GPT-OSS-20B's MoE layer
#: (32 experts, top 4) at 4,096 tokens (512 rows per expert): SGLang's NVFP4 kernels 1,262 TFLOPS,
#: FlashInfer CuteDSL 1,225, vLLM 1,117. The best of the three over the B200's 9,000 dense FP4
#: TFLOPS (:data:`pools.sizing.gpus.FP4_DENSE_TFLOPS`): 1262 / 9000 = 0.1402, against the 0.5
#: (``engines.COMPUTE_EFFICIENCY``) the dense layers are given. Corroborated by
#: NVIDIA/TransformerEngine issue 2281 (2025-10): on a B200, NVFP4 ``GroupedLinear`` at DeepSeek-V3
#: MoE shapes ran "no better than MXFP8 in many shapes" and at most 15 % faster, the maintainer
#: naming the quantisation kernels and the small GEMM sizes of MoE layers. The measurement is one
#: card type; the other SM100 cards get the same share of their own peak.
MOE_FP4_GROUPED_GEMM_PEAK_SHARE = 1262 / 9000


#: Share of a card's peak memory bandwidth at which a mixture of experts' routed-expert weights
#: stream in NVFP4 on SM100 Blackwell, against ``throughput.BANDWIDTH_EFFICIENCY`` (0.8) for every
#: other weight - a published kernel measurement, not an end-to-end fit: NVIDIA's aiconfigurator
#: tables of TensorRT-LLM's fused MoE op (``CutlassFusedMoE`` forward: routing, input quantisation,
#: both grouped GEMMs, activation, finalize), ai-dynamo/aiconfigurator @095f58a5
#: ``aic-core/src/aiconfigurator_core/systems/data/{b200_sxm,gb200}/moe/trtllm/
#: 1.3.0rc20/moe_perf.parquet`` (latency in ms per op, balanced routing, MoE TP 1). Where the op is
#: weight-stream bound - 2 to 32 rows per local expert - its local experts' NVFP4 bytes (E / EP x 3
#: x hidden x I x 4.5 / 8, scales included) over its latency reach a median 0.397 of the 8 TB/s peak
#: (the median of the medians of the 164 (card, shape, EP) groups holding at least 100 MB of them;
#: Llama 4 Maverick's shape at EP 8 on a B200: 1.13 GB in 0.41 ms, 0.34). The FP8 op at the same
#: shapes and token counts takes only 1 / 0.84 as long (median of the NVFP4 / FP8 latency ratio over
#: 68 shape groups a card), not 1 / 0.5625 as its bytes would: the NVFP4 kernels do not turn the
#: smaller weights into a shorter stream at decode's row counts. The FP8 op on Hopper meets
#: ``BANDWIDTH_EFFICIENCY`` (H100 / H200, Llama 4 Maverick at EP 8: 0.84 of peak), which is why only
#: NVFP4 experts get this share.
MOE_FP4_WEIGHT_STREAM_SHARE = 0.397


@dataclass(frozen=True)
class Fp4Kernels:
    """Shares of one chip family's peaks its FP4 kernels reach (each a fraction, 0-1).

    ``dense_gemm``: of the dense FP4 tensor peak, dense NVFP4 GEMMs (activation quantisation
    included); ``moe_gemm``: of the same peak, a mixture of experts' routed-expert grouped GEMMs;
    ``moe_stream``: of the peak memory bandwidth, the routed experts' NVFP4 weights streaming at
    decode's row counts. ``source``: the publication, as the sizing page names it.
    """

    dense_gemm: float
    moe_gemm: float
    moe_stream: float
    source: str


#: The datacentre Blackwell chips' FP4 kernels (compute capability 10.x), from the publications
#: cited on :data:`DENSE_FP4_GEMM_PEAK_SHARE`, :data:`MOE_FP4_GROUPED_GEMM_PEAK_SHARE` and
#: :data:`MOE_FP4_WEIGHT_STREAM_SHARE`.
SM100_KERNELS = Fp4Kernels(
    dense_gemm=DENSE_FP4_GEMM_PEAK_SHARE,
    moe_gemm=MOE_FP4_GROUPED_GEMM_PEAK_SHARE,
    moe_stream=MOE_FP4_WEIGHT_STREAM_SHARE,
    source='vLLM pull request 20646; Hugging Face blog "TFLOPS Gap", B200 NVFP4 MoE layers',
)

#: The GB202 chip's FP4 kernels (compute capability 12.0), measured by NVIDIA's aiconfigurator on an
#: RTX PRO 6000 Blackwell Server (ai-dynamo/aiconfigurator @095f58a5, ``aic-core/src/
#: aiconfigurator_core/systems/data/rtx_pro_6000_server/{gemm,moe}/trtllm/1.3.0rc20/``;
#: TensorRT-LLM's NVFP4 GEMM and fused MoE op, latency per op), by the methods
#: ``benchmarks/fp4_kernel_shares.py`` states: dense NVFP4 GEMMs with m, n, k >= 4,096 reach a
#: median 0.624 of the 2,015.2 TFLOPS FP4 peak (675 shapes); the MoE op's multiply slope between
#: 4,096 / 8,192 / 16,384 tokens at >= 512 rows per expert 0.356 (178 shape, EP and pair points);
#: its NVFP4 experts' bytes over its latency at 2 - 32 rows per expert 0.832 of the 1,597 GB/s
#: (median of 110 shape and EP groups of >= 100 MB) - above the 0.8 every other weight streams at
#: (``throughput.BANDWIDTH_EFFICIENCY``), so there they stream as the rest do. The RTX 5090 has the
#: same chip family and kernels; it is taken to reach the same shares.
SM120_KERNELS = Fp4Kernels(
    dense_gemm=0.624,
    moe_gemm=0.356,
    moe_stream=0.832,
    source="NVIDIA aiconfigurator, TensorRT-LLM's NVFP4 GEMM and MoE ops on an RTX PRO 6000 "
    "Blackwell Server",
)


def fp4_kernels(gpu: GpuSpec) -> Fp4Kernels | None:
    """The FP4 kernel shares of ``gpu``'s chip family: :data:`SM120_KERNELS` for
    :data:`SM120_CARDS`, :data:`SM100_KERNELS` for every other card with FP4 tensor cores
    (``pools.sizing.gpus.FP4_DENSE_TFLOPS``), ``None`` for a card without (FP4 runs de-quantised
    there, ``throughput.precision_on_gpu``). RTX PRO 6000 Server: SM120_KERNELS; B200:
    SM100_KERNELS; H100: None."""
    if not fp4_dense_tflops(gpu):
        return None
    return SM120_KERNELS if gpu.slug in SM120_CARDS else SM100_KERNELS
