"""Serving engines as the sizing model sees them: memory rule, batch cap and the efficiencies
of one engine generation (:class:`EngineProfile`), chosen by name and version.

Where first principles give the number (bandwidth, FLOPS, bytes moved) the throughput model
uses them; what depends on an engine's kernels and scheduler - fixed time per step, the share
of tensor peak its GEMMs reach - is a profile field, each with its source below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from pools.sizing import SizingInputError

#: Share of dense tensor peak that inference GEMMs reach, one value for every engine. Bounded by
#: llm-analysis's "up to 0.7" for inference (sizing_anchors.md 2.5); the value is the one
#: ``benchmarks/sizing.py`` fits on every published measurement (grid 0.35-0.70, least mean
#: |log(predicted / measured)|) together with the GEMM overlap exponents below: 0.50 (0.45
#: under the hard roofline, which the fit no longer picks). Since a step's prompt attention is
#: added to its decode attention instead of hidden in a max with it
#: (``throughput.replica_throughput``) the fit on every source picks 0.55; 0.50 stays shipped
#: because the seeds' worked examples and the pages' card counts are stated at it. Its
#: cross-validation refits it without the source it scores, so the scored figures are the
#: same either way. Below the peak because attention, norms, sampling and (FP8/INT8)
#: activation quantisation run between the GEMMs.
COMPUTE_EFFICIENCY = 0.50

#: GEMM overlap exponents p of (stream^p + multiply^p)^(1/p) (``throughput.overlapped_s``), per
#: engine family, as ``benchmarks/sizing.py`` fits them on every published measurement with
#: more than one sequence in flight (grid 1, 1.5, 2, 3, 4 and the hard max): vLLM (V0 and V1)
#: 1.0 - its decode GEMMs do not hide the weight stream behind the multiplies at all -,
#: TensorRT-LLM 1.5. Issue 17's evidence: under the hard max the vLLM 0.8.5 runs' TPOTs were
#: predicted about half their measured value at 16-64 sequences, the max(stream, multiply)
#: being reached by neither near the ridge point. Cross-validated (refitted without the scored
#: source): P90 |error| 33.3 % -> 24.7 %, TPOT median 17.4 % -> 6.7 % over 227 rows. SGLang
#: has no published rows here and keeps the hard max.
#:
#: Issue 34: with the 130 MoE / NVFP4 cells (``benchmarks/sizing.py``'s third set) added, the
#: fit on every source moves to TensorRT-LLM 1.0 and efficiency 0.60; the shipped 1.5 and 0.50
#: stay. The cross-validated table is the same either way (every fold refits both without the
#: source it scores: 357 rows, median 11.2 %, P90 41.7 % with CUDA-graph padding). Scored
#: in-sample with each pair (no refit): the default 227 rows give median 8.0 / P90 20.8 % at
#: (0.50, 1.5) against 7.3 / 22.8 % at (0.60, 1.0); all 357 rows 10.4 / 46.9 % against
#: 10.7 / 41.7 %. The move comes only with cells the model predicts 40-170 % fast for reasons
#: it lacks (Llama 4 on H100, single-card Qwen3-30B-A3B on B200; issue 34's notes), which
#: p = 1 (no overlap) and a higher efficiency trade off against each other; shipping that fit
#: would tune the constants to those cells. With the NVFP4 experts streaming at the published
#: MoE-kernel share of the bandwidth (``fp4_kernels.MOE_FP4_WEIGHT_STREAM_SHARE``) the fit on
#: every source of the 357 rows is 0.55 and 1.5 again, the default rows' own fit.
VLLM_GEMM_OVERLAP_EXPONENT = 1.0
TENSORRT_LLM_GEMM_OVERLAP_EXPONENT = 1.5

#: Fixed time per decoder layer per forward step, seconds, for which bandwidth and FLOPS do not
#: account (kernel launch and tail latency of about ten kernels a layer). NVIDIA aiconfigurator
#: ``mem_empirical_constant_latency`` 3 us per memory-bound op x 10 kernels (sizing_anchors.md
#: 2.4). An engine profile may replace it (see ``ENGINE_PROFILES``).
STEP_OVERHEAD_S_PER_LAYER = 10 * 3e-6

#: Step overhead per layer of the vLLM V0 engine (releases before 0.8), seconds. Not a vendor
#: figure: ``benchmarks/sizing.py`` fits it as the median, over the single-stream rows of vLLM
#: 0.4.2 and 0.6.3 with prompts of at most 2,048 tokens (Qwen2 and Qwen2.5 speed benchmarks,
#: A100 80GB, 7B-72B, BF16 / GPTQ / AWQ), of (measured time per output token - modelled time
#: without overhead) / layers: 115 us, about four times the kernel-latency default (V0
#: schedules and samples in Python between forward passes). The modelled time already holds
#: the kernels these releases ran (vLLM 0.4.2's original AWQ kernel and per-query-head KV reads,
#: ``VLLM_AWQ_MARLIN_FIRST_VERSION`` and ``VLLM_FLASH_DECODE_FIRST_VERSION`` below), so the
#: overhead is what is left. The cross-validation refits it without the source it scores
#: (0.6.3 alone gives about 111 us, 0.4.2 alone about 129 us).
VLLM_V0_STEP_OVERHEAD_S_PER_LAYER = 115e-6

#: Host (CPU) seconds per sequence in flight per step of TensorRT-LLM's PyTorch backend
#: (PyExecutor: scheduling, sampling and request bookkeeping in Python, one loop per rank) on a
#: Grace host (GB200 / GB300, ``pools.sizing.gpus.GRACE_HOSTED``): NVIDIA/TensorRT-LLM pull
#: request 10273 measured a host-bound run (GB200, GPT-OSS-120B, attention DP 2 with
#: max_batch_size 1536 per rank, ISL = OSL = 1k, "scenarios where the host overhead is the
#: bottleneck"): "the average per iteration host_step_time is 45.11 ms", 45.11 ms / 1536 =
#: 29.4 us per sequence. Its overlap scheduler (on by default) runs a step's host work while the
#: previous step's kernels run, so a step lasts max(GPU, host)
#: (``pools.sizing.throughput.replica_throughput``). Not a fit: a cited measurement.
#: What it measures: ``host_step_time`` is the executor loop's wall time between two iterations
#: (``PyExecutor`` profiler, ``profile_step``), so it is the host time only because that run was
#: host bound, and it includes attention DP's per-step synchronisation of the two ranks. A
#: single rank's Grace cost per sequence is lower in the releases after 1.0: the later
#: perf-overview tables (``sizing_dataset_2026_trtllm_next.json``) measure gpt-oss-20b on one
#: GB200 at 55,823 output tok/s, which a loop costing h per sequence per step caps at 1 / h, so
#: h <= 17.9 us there, while the 1.0 tables' Qwen3-30B-A3B on one GB200 runs at 0.61-0.85 x the
#: B200 where this figure makes it host bound. One figure for both releases is kept (issue 34
#: note: the x86 figure for Grace moves the three gpt-oss-20b cells -50 % -> -6 % and four 1.0
#: Qwen3 cells +16 ... +23 % -> +36 ... +92 %); the release is not stated on the later tables.
TRTLLM_PYTORCH_HOST_S_PER_SEQUENCE_GRACE = 45.11e-3 / 1536

#: The same on an x86 host: the Grace figure x 13.48 / 37.08, the CPU time of one PyTorch
#: ``Linear`` call on an H100 DGX (Xeon Platinum 8480C) over a GB200 (NVIDIA/TransformerEngine
#: issue 2053's table: 13.48 us vs 37.08 us): 10.7 us. NVIDIA/TensorRT-LLM issue 13957 agrees
#: (B200, Llama-3.1-8B-Instruct-FP8, 64 sequences: "~580 us/iter of host overhead" exposed,
#: 9.1 us per sequence).
TRTLLM_PYTORCH_HOST_S_PER_SEQUENCE = TRTLLM_PYTORCH_HOST_S_PER_SEQUENCE_GRACE * 13.48 / 37.08

#: Share of dense tensor peak the PyTorch backend's GEMMs reach, and how far its host time hides
#: behind the GPU's (p of (GPU^p + host^p)^(1/p), ``pools.sizing.throughput.overlapped_s``):
#: ``benchmarks/sizing.py`` fits each engine generation's own efficiency once a fold holds eight
#: of its rows (``fit_efficiencies``), and the PyTorch backend's rows come from four releases'
#: perf-overview tables (0.20, 0.21, 1.0 and the per-GPU tables after it) and a user's thread.
#: Every one of the 13 leave-one-source-out folds fits 0.55 and 1.5, so each release's cells
#: are predicted from the others' fit. p = 1.5 is neither the overlap scheduler's ideal
#: max(GPU, host) (``None``) nor the sum: TensorRT-LLM issue 13957 finds "~580 us/iter of host
#: overhead" exposed as GPU idle at 64 sequences on a B200, i.e. part of the host loop does not
#: overlap. Issue 34: the 20 Qwen3-30B-A3B single-card NVFP4 cells of the 1.0 tables went from
#: -2 ... +95 % to -21 ... +33 % (the later tables' same cells agree: B200 26,971 tok/s, GB200
#: 22,856 on its slower Grace host).
TRTLLM_PYTORCH_COMPUTE_EFFICIENCY = 0.55
TRTLLM_PYTORCH_HOST_OVERLAP_EXPONENT = 1.5

#: The CUDA-graph batch sizes TensorRT-LLM's published PyTorch-backend runs capture, with
#: ``enable_padding: true``: the ``llm_options.yml`` of the perf-overview tables, for dense and
#: MoE models alike (NVIDIA/TensorRT-LLM ``docs/source/performance/perf-overview.md``
#: @00f37686aa854010d68bcbd0f4ab000221541ca6, "Running the Benchmark"). A decode-only step of
#: b sequences runs the graph of the smallest captured size >= b, so it multiplies that many
#: rows (``pools.sizing.throughput.cuda_graph_sizes``).
TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES = (
    1,
    2,
    4,
    8,
    16,
    32,
    64,
    128,
    256,
    384,
    512,
    1024,
    2048,
    4096,
    8192,
)

#: How a mixture of experts moves its tokens between attention data-parallel ranks
#: (``EngineProfile.moe_dp_exchange``; ``pools.sizing.throughput.moe_exchange_s``):
#: ``"all_to_all"`` sends each token only to the ranks of its k experts and back (DeepSeek-V3
#: technical report §3.4, DeepEP); ``"allgather"`` gathers every rank's tokens on every card,
#: runs the MoE of its own experts over all of them and reduce-scatters the 16-bit output.
#: TensorRT-LLM's PyTorch MoE does the latter with attention DP: its CUTLASS backend's flow is
#: "routing(topK, etc.) [+ dynamic quant for fp8 qdq and nvfp4 ] [+ fp4_allgather] + FusedMoe
#: Op[no allreduce] + reducescatter, with AttentionDP on" (NVIDIA/TensorRT-LLM
#: ``tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py`` @000a01de66f0eab4ab05640711f0
#: 253f50f5209c, ``forward_chunk``: ``allgather([x, x_sf, token_selected_experts,
#: token_final_scales])`` then ``reducescatter``), and its all-to-all needs a multi-node NVLink
#: (MNNVL) fabric and more expert-parallel ranks than experts per token
#: (``fused_moe_trtllm_gen.py`` @7b437aaa73bf5a44b1102aee5c631074da763b8f ``enable_alltoall``:
#: ``moe_ep_size > experts_per_token and enable_attention_dp and tp_size > 1 ...
#: MnnvlMemory.supports_mnnvl()``), i.e. a GB200 / GB300 NVL72 rack.
MOE_DP_EXCHANGES = ("all_to_all", "allgather")


@dataclass(frozen=True)
class EngineProfile:
    """What distinguishes serving engines in this model: memory rule and batch cap.

    ``reserve_of_free``: the unused share :data:`RESERVE_FRACTION` is taken of the memory left
    after weights and overhead (TensorRT-LLM) instead of the card's total (vLLM, SGLang).
    ``max_batch`` caps sequences in flight per replica (``None``: only KV memory limits it).
    ``step_overhead_s_per_layer``: fixed seconds per decoder layer per forward step.
    ``compute_efficiency``: share of dense tensor peak the GEMMs reach. Bandwidth efficiency is
    the same for every engine (``pools.sizing.throughput.BANDWIDTH_EFFICIENCY``).
    ``awq_kernel``: how AWQ checkpoints multiply - ``"marlin"`` (de-quantised in registers while
    the next weights stream in: vLLM's awq_marlin, TensorRT-LLM's and SGLang's weight-only GEMMs)
    or ``"gemm"`` (vLLM's original AWQ GEMM kernel, releases before
    :data:`VLLM_AWQ_MARLIN_FIRST_VERSION`: load, de-quantise, multiply one after another; see
    ``pools.sizing.throughput.dequant_seconds``).
    ``gemm_overlap_exponent``: how far a linear layer's weight stream and its tensor-core work
    overlap, ``p`` of (memory^p + compute^p)^(1/p) (``pools.sizing.throughput.overlapped_s``);
    ``None``: fully, the hard roofline max(memory, compute). Fitted per engine family
    (:data:`VLLM_GEMM_OVERLAP_EXPONENT`, :data:`TENSORRT_LLM_GEMM_OVERLAP_EXPONENT`).
    ``decode_kv_reads_per_query_head``: the decode attention kernel reads a sequence's KV cache
    once per query head instead of once per KV head (vLLM before
    :data:`VLLM_FLASH_DECODE_FIRST_VERSION`: its paged-attention kernel gives every query head
    its own thread block, so grouped-query attention saves no reads).
    ``host_s_per_sequence`` / ``host_s_per_sequence_grace``: host seconds per sequence in flight
    that each step adds on an x86 / a Grace host (``pools.sizing.gpus.grace_hosted``); 0 for
    engines whose host loop is not charged per sequence (vLLM, SGLang, TensorRT-LLM's C++
    executor).
    ``host_overlap_exponent``: how far that host time hides behind the step's GPU time, p of
    (GPU^p + host^p)^(1/p) as for the GEMMs (``pools.sizing.throughput.overlapped_s``); ``None``:
    wholly, max(GPU, host), the overlap scheduler's ideal.
    ``moe_dp_exchange``: how a mixture of experts exchanges tokens between attention DP ranks,
    one of :data:`MOE_DP_EXCHANGES` (``"allgather"`` for TensorRT-LLM, which uses an all-to-all
    only on an NVL72 rack's NVLink fabric).
    ``window_keeps_full_kv``: a model with a window - sliding (gpt-oss) or chunked attention
    (Llama 4, ``ModelArch.window_chunked``) - keeps (allocates) its whole context's KV on every
    layer but still reads only the window on its windowed layers
    (:data:`TENSORRT_LLM_WINDOW_KEEPS_FULL_KV`): memory only, not throughput.
    ``chunked_decode_per_query_head``: on a card without TensorRT-LLM's trtllm-gen attention
    kernels (``pools.sizing.gpus.trtllm_gen_attention``), the decode of a chunked-attention
    layer reads a sequence's KV once per query head, not once per KV head
    (:data:`TENSORRT_LLM_CHUNKED_DECODE_PER_QUERY_HEAD`).
    ``hopper_mxfp4_moe_triton``: the engine runs a mixture of experts' MXFP4 experts on Hopper
    as TensorRT-LLM does - weights kept in MXFP4, BF16 activations, its TRITON MoE backend
    (:data:`TENSORRT_LLM_HOPPER_MXFP4_MOE_TRITON`) - whose measured rates
    (``pools.sizing.throughput.hopper_mxfp4_routed_rate``) replace the engine's GEMM
    efficiency for those experts. False: vLLM's kernel for the same checkpoint reaches the
    engine's own efficiency (``benchmarks/mxfp4_hopper_moe.py``: 0.55 - 0.58 of the BF16 peak).
    ``cuda_graph_batch_sizes``: the CUDA-graph batch sizes the engine captures with padding on
    (:data:`TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES` for TensorRT-LLM's PyTorch backend as its
    published runs configure it); a decode-only step multiplies the padded batch
    (``pools.sizing.throughput.cuda_graph_padding_tokens``). Empty: no padding.
    """

    name: str
    reserve_of_free: bool
    max_batch: int | None
    source: str
    step_overhead_s_per_layer: float = STEP_OVERHEAD_S_PER_LAYER
    compute_efficiency: float = COMPUTE_EFFICIENCY
    awq_kernel: str = "marlin"
    decode_kv_reads_per_query_head: bool = False
    gemm_overlap_exponent: float | None = None
    host_s_per_sequence: float = 0.0
    host_s_per_sequence_grace: float = 0.0
    host_overlap_exponent: float | None = None
    moe_dp_exchange: str = "all_to_all"
    window_keeps_full_kv: bool = False
    chunked_decode_per_query_head: bool = False
    hopper_mxfp4_moe_triton: bool = False
    cuda_graph_batch_sizes: tuple[int, ...] = ()


#: TensorRT-LLM allocates a windowed layer's KV - a sliding window's or a chunked-attention
#: layer's (Llama 4's ``attention_chunk_size``) - to ``max_seq_len``, but its decode reads only
#: the window: the KV cache manager takes ``max_seq_len`` as every layer's window when
#: ``KvCacheConfig.max_attention_window`` is unset (NVIDIA/TensorRT-LLM
#: ``tensorrt_llm/_torch/pyexecutor/resource_manager.py`` @001541bad83b84ae4c5c4a279e464572d5f690f7,
#: ``KVCacheManager.__init__``), and nothing sets it from the checkpoint (pull request 5722, which
#: would have read ``sliding_window`` from the Hugging Face config, was closed unmerged;
#: trtllm-bench's perf options do not set it), while gpt-oss's sliding layers pass their window
#: to the attention op on every call (``tensorrt_llm/_torch/models/modeling_gpt_oss.py``
#: @050b6cb92871a4ed73486c5e5a573d4198d1a6d9, ``AttentionBlock``: ``attention_window_size =
#: self.sliding_window`` on even layers) and a chunked layer's op gets its chunk in the decode
#: too: pull request 4693 ("enable chunked-attention in the generation-phase by
#: default", May 2025) - the attention op hands ``attention_chunk_size`` to the decode kernels
#: unless ``TRTLLM_DISABLE_CHUNKED_ATTENTION_IN_GEN_PHASE`` is set (``cpp/tensorrt_llm/common/
#: attentionOp.cpp``, ``xqaParams.chunked_attention_size``), where the 1.0 long-sequence doc
#: still says chunked attention "can only be applied to context requests". The long-sequence doc
#: says of a window that is set: allocation "still relies on the buffer's maximum value".
#: gpt-oss-120b at 22,000 tokens: 36 x 22,000 layer-tokens kept, not 18 x 22,000 + 18 x 128;
#: read per step as the window gives. Llama 4 Scout at 22,000: 48 x 22,000 kept, 36 of its 48
#: layers read at most 8,192.
TENSORRT_LLM_WINDOW_KEEPS_FULL_KV = True

#: TensorRT-LLM decodes a chunked-attention layer with its masked multi-head attention (MMHA)
#: kernel on cards without trtllm-gen attention (Hopper, Ada, Ampere, RTX Blackwell): the XQA
#: kernels refuse chunked attention (``cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/
#: decoderXQAImplJIT/kernelUtils.cpp``, ``supportConfigCommon``: "chunked attention is not
#: supported yet"), and the dispatcher falls back to MMHA (``xqaDispatcher.cpp``); pull request
#: 6306 says it outright: "XQA does not support chunked attention at the moment, while MMHA
#: supports chunked attention but is slower" (its fix picks XQA only when the engine's
#: ``max_seq_len`` is below the chunk; Llama 4's checkpoints set 1 M / 10 M). MMHA gives every
#: query head of every sequence its own thread block, so grouped-query attention saves no reads:
#: a chunked layer's KV is read ``num_attention_heads / num_kv_heads`` times per step (Llama 4:
#: 40 / 8 = 5), as vLLM's V0 paged attention did (``decode_kv_reads_per_query_head``). This is
#: the "known performance regression (only affect LLaMA4 model) on Hopper" of the 0.21 release
#: notes. Blackwell's trtllm-gen kernels take the chunk (``xqaDispatcher.cpp``
#: ``tllmRunnerParams.mChunkedAttentionSize``), so B200 and GB200 read once per KV head.
TENSORRT_LLM_CHUNKED_DECODE_PER_QUERY_HEAD = True

#: TensorRT-LLM's PyTorch backend serves an MXFP4 checkpoint (openai/gpt-oss-*: routed experts
#: MXFP4, attention, router, embeddings and head BF16) on Hopper as weight-only MXFP4: it loads
#: ``quant_method`` mxfp4 as ``QuantAlgo.W4A16_MXFP4`` below SM 100 unless
#: ``OVERRIDE_QUANT_ALGO`` says otherwise (NVIDIA/TensorRT-LLM ``tensorrt_llm/_torch/
#: model_config.py`` @1a0dc5f70054f66d892df6a964996fc5ead6f81e, ``ModelConfig.
#: get_mxfp4_quant_algo``), and its gpt-oss support matrix lists Hopper as activation bf16,
#: weight mxfp4, MoE backend **TRITON** ("use the TRITON moe_backend on Hopper for both latency
#: and throughput", ``examples/models/core/gpt_oss/README.md``), the backend the perf-overview
#: tables' GPT-OSS options file switches to on Hopper (``moe_config: backend: CUTLASS  #
#: Hopper: use TRITON``, docs/source/developer-guide/perf-overview.md
#: @03e27c7d5ff0c6e89f8328838c0a8e64f1b34f9d) - the tables' "(FP8)" column label names no
#: FP8 checkpoint (the page's FP8 list has no GPT-OSS) and the options file keeps the KV
#: cache at the checkpoint's 16 bit on Hopper ("# Hopper: use auto").
TENSORRT_LLM_HOPPER_MXFP4_MOE_TRITON = True


ENGINE_PROFILES = {
    "vllm": EngineProfile(
        "vllm",
        False,
        256,
        "vLLM: KV = total x gpu_memory_utilization (0.9) - weights - activation peak "
        "(v1/worker/gpu_worker.py); --max-num-seqs default 256 (engine arguments)",
        gemm_overlap_exponent=VLLM_GEMM_OVERLAP_EXPONENT,
    ),
    "vllm-v0": EngineProfile(
        "vllm-v0",
        False,
        256,
        "vLLM before 0.8 (the V0 engine: per-step Python scheduling and sampling between "
        "forward passes; V1 became the default in 0.8): memory rule and max-num-seqs as vllm; "
        "step overhead fitted on vLLM 0.4/0.6 single-stream measurements",
        VLLM_V0_STEP_OVERHEAD_S_PER_LAYER,
        gemm_overlap_exponent=VLLM_GEMM_OVERLAP_EXPONENT,
    ),
    "sglang": EngineProfile(
        "sglang",
        False,
        None,
        "SGLang: --mem-fraction-static is a share of total memory for weights and KV pool; "
        "max_running_requests follows from the KV token pool when not set",
    ),
    "tensorrt-llm": EngineProfile(
        "tensorrt-llm",
        True,
        4096,
        "TensorRT-LLM: KV = free_gpu_memory_fraction (0.9) x free memory after weights and "
        "activations (docs reference/memory.md); trtllm-bench max_batch_size default 4096 "
        "(sizing_dataset.json trt014 rows' notes)",
        gemm_overlap_exponent=TENSORRT_LLM_GEMM_OVERLAP_EXPONENT,
        moe_dp_exchange="allgather",
        window_keeps_full_kv=TENSORRT_LLM_WINDOW_KEEPS_FULL_KV,
        chunked_decode_per_query_head=TENSORRT_LLM_CHUNKED_DECODE_PER_QUERY_HEAD,
    ),
    "tensorrt-llm-pytorch": EngineProfile(
        "tensorrt-llm-pytorch",
        True,
        4096,
        "TensorRT-LLM's PyTorch backend (trtllm-bench --backend pytorch, trtllm-serve; the "
        "perf-overview tables from v0.19 on): memory rule, batch cap and kernels as "
        "tensorrt-llm, plus its Python executor's host time per sequence per step "
        "(TensorRT-LLM issue 13957 on x86, pull request 10273 on Grace), and decode-only steps "
        "padded to a captured CUDA-graph batch size (perf-overview llm_options.yml), and "
        "MXFP4 experts on Hopper on its TRITON MoE backend (weight-only, BF16 activations)",
        gemm_overlap_exponent=TENSORRT_LLM_GEMM_OVERLAP_EXPONENT,
        compute_efficiency=TRTLLM_PYTORCH_COMPUTE_EFFICIENCY,
        host_s_per_sequence=TRTLLM_PYTORCH_HOST_S_PER_SEQUENCE,
        host_s_per_sequence_grace=TRTLLM_PYTORCH_HOST_S_PER_SEQUENCE_GRACE,
        host_overlap_exponent=TRTLLM_PYTORCH_HOST_OVERLAP_EXPONENT,
        moe_dp_exchange="allgather",
        window_keeps_full_kv=TENSORRT_LLM_WINDOW_KEEPS_FULL_KV,
        chunked_decode_per_query_head=TENSORRT_LLM_CHUNKED_DECODE_PER_QUERY_HEAD,
        hopper_mxfp4_moe_triton=TENSORRT_LLM_HOPPER_MXFP4_MOE_TRITON,
        cuda_graph_batch_sizes=TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES,
    ),
}


#: vLLM releases before this one run the V0 engine by default (V1 is the default from 0.8.0,
#: vLLM release notes), so a version below it selects the ``vllm-v0`` profile.
VLLM_V1_FIRST_VERSION = (0, 8)

#: First vLLM release that runs AWQ checkpoints on the Marlin kernel: vllm-project/vllm pull
#: request 6612 ("[Kernel][Core] Add AWQ support to the Marlin kernel", merged July 2024; its
#: testers ran it as the vllm/vllm-openai:v0.5.3.post1 image) adds ``awq_marlin``, which vLLM
#: picks by itself for every AWQ checkpoint Marlin can run (awq_marlin.py
#: ``is_awq_marlin_compatible``, as the SGLang pull request 818 thread quotes it). Earlier
#: releases run the original AWQ GEMM kernel (``csrc/quantization/awq/gemm_kernels.cu``).
VLLM_AWQ_MARLIN_FIRST_VERSION = (0, 5, 3)

#: First vLLM release whose decode attention reads each KV head once for its whole query-head
#: group. Before it, decode ran vLLM's own paged-attention kernel, of which a vLLM maintainer
#: wrote: "vLLM's current paged attention kernel also does not leverage the benefits of
#: MQA/GQA" (vllm-project/vllm issue 1880: "MQA/GQA can reduce memory bandwidth for reading KV
#: cache ... this benefit can be only realized when using optimized kernels that vLLM does not
#: have at the moment"); its grid is one thread block per (query head, sequence, partition)
#: (``csrc/attention/attention_kernels.cu``). Pull request 3648 ("[Kernel] Use flash-attn for
#: decoding") moved decode to FlashAttention's paged-KV kernel, which shares each KV head across
#: its group; it was on main by 19 May 2024 (pull request 4907, "[Kernel] Add flash-attn back",
#: names the decoding errors it caused), after 0.4.2 (5 May 2024), so 0.4.3 is the first release
#: with it.
VLLM_FLASH_DECODE_FIRST_VERSION = (0, 4, 3)


def _version(text: str | None) -> tuple[int, ...] | None:
    numbers = re.findall(r"\d+", str(text or ""))[:3]
    return tuple(int(n) for n in numbers) if numbers else None


def engine_profile(name: str | EngineProfile | None, version: str | None = None) -> EngineProfile:
    """The profile for ``name`` (vllm, vllm-v0, sglang, tensorrt-llm / trt-llm,
    tensorrt-llm-pytorch / trtllm-pytorch; ``None`` = the current vllm); a profile passes
    through unchanged (callers that override one).

    ``version`` is the engine's release (``"0.6.3"``): vLLM below 0.8 is ``vllm-v0``; below
    0.5.3 it also runs AWQ on its original GEMM kernel (``awq_kernel="gemm"``,
    :data:`VLLM_AWQ_MARLIN_FIRST_VERSION`) and below 0.4.3 its decode attention reads the KV
    cache once per query head (:data:`VLLM_FLASH_DECODE_FIRST_VERSION`); other engines have one
    profile for every version on record. Raises :class:`SizingInputError` (reason
    ``unknown_engine``).
    """
    if isinstance(name, EngineProfile):
        return name
    key = str(name or "vllm").strip().lower().replace("_", "-").replace(" ", "-")
    key = {
        "trt-llm": "tensorrt-llm",
        "trtllm": "tensorrt-llm",
        "trt-llm-pytorch": "tensorrt-llm-pytorch",
        "trtllm-pytorch": "tensorrt-llm-pytorch",
    }.get(key, key)
    parsed = _version(version)
    if key == "vllm" and parsed is not None and parsed < VLLM_V1_FIRST_VERSION:
        key = "vllm-v0"
    try:
        profile = ENGINE_PROFILES[key]
    except KeyError:
        raise SizingInputError(
            f"unknown engine {name!r}; use one of {', '.join(ENGINE_PROFILES)}",
            reason="unknown_engine",
            field="engine",
        ) from None
    if key == "vllm-v0" and parsed is not None and parsed < VLLM_AWQ_MARLIN_FIRST_VERSION:
        profile = replace(
            profile,
            awq_kernel="gemm",
            source=profile.source + "; before 0.5.3 AWQ runs the original AWQ GEMM kernel",
        )
    if key == "vllm-v0" and parsed is not None and parsed < VLLM_FLASH_DECODE_FIRST_VERSION:
        profile = replace(
            profile,
            decode_kv_reads_per_query_head=True,
            source=profile.source + "; before 0.4.3 decode attention reads KV per query head",
        )
    return profile


def batch_cap(profile: EngineProfile, dp_attention: int = 1) -> int | None:
    """Sequences in flight the engine admits to one replica: ``profile.max_batch`` per
    scheduler, and with attention data parallelism every one of the ``dp_attention`` ranks runs
    its own scheduler, so d x ``max_batch`` in all. TensorRT-LLM's PyTorch executor admits new
    requests up to ``total_max_num_active_requests = self.dist.tp_size *
    self.max_num_active_requests`` when ``enable_attention_dp`` is on and spreads them so that
    each rank holds about the same number (``expected_num_active_requests``), against
    ``self.max_num_active_requests`` without it (NVIDIA/TensorRT-LLM
    ``tensorrt_llm/_torch/pyexecutor/py_executor.py`` @9521caf4696c1fb79b0f946f0d980f8f0ebd3e64,
    ``_fetch_new_requests``). ``None``: no engine cap (only the KV cache limits the batch).
    TensorRT-LLM (4,096) with 8 attention DP ranks: 32,768."""
    if profile.max_batch is None:
        return None
    return profile.max_batch * dp_attention


#: The fields of a profile ``benchmarks/sizing.py`` fits; :func:`with_fitted` copies only these.
FITTED_FIELDS = (
    "step_overhead_s_per_layer",
    "compute_efficiency",
    "gemm_overlap_exponent",
    "host_overlap_exponent",
)


def with_fitted(profile: EngineProfile, fitted: EngineProfile | None) -> EngineProfile:
    """``profile`` with the fitted numbers (:data:`FITTED_FIELDS`) of ``fitted``, which is a
    refit of the same generation; the version-chosen kernels of ``profile`` stay as they are.
    ``fitted`` ``None``: ``profile`` unchanged.
    """
    if fitted is None:
        return profile
    return replace(profile, **{field: getattr(fitted, field) for field in FITTED_FIELDS})
