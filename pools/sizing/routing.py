"""How unevenly a mixture of experts' tokens reach its experts, and what the busiest card pays.

The routed experts' costs (:func:`pools.sizing.throughput.routed_expert_flops_rate`'s shares of
the peak, :func:`pools.sizing.throughput.moe_glue_s`) are measured or counted with every expert
given the same share of the tokens. A trained router does not spread them so: some experts take
many times their share, and with expert parallelism the card holding the busiest experts sets
the layer's time while the others wait for it (on one card, the grouped GEMM of a few large and
many small experts runs slower than one of equal ones). NVIDIA's aiconfigurator prices
TensorRT-LLM's MoE layers with routing drawn from a power law (ai-dynamo/aiconfigurator
@095f58a5, ``collector/helper.py`` ``_generate_power_law_distribution``: tokens per expert
sampled from a bounded power law of exponent alpha, scaled to tokens x k, the expert-parallel
rank with the most tokens timed): alpha 1.01 for the DeepSeek family (``sdk/models/
deepseek.py``, also DeepSeek V3.2 and V4) and 1.2 for every other mixture of experts
(``sdk/models/moe.py``); it measures the fused MoE op under that routing and under balanced
routing (``systems/data/<system>/moe/trtllm/1.3.0rc20/moe_perf.parquet``).

The latency ratio, power law / balanced, rises with the tokens of a pass - below 1 at 128
tokens, where the op streams weights and a skewed router touches fewer experts, to a level
where the op multiplies: eight ranks, alpha 1.2: 0.93 at 128 tokens, 1.21 at 1,024, 1.59 at
4,096, 1.74-1.80 at 8,192-16,384. That rise is the op turning compute bound, which the model
already draws with its own roofline (the routed multiplies against the weight stream,
:func:`pools.sizing.throughput.overlapped_s`); what the skew adds is the compute-bound level.
:data:`ROUTING_SKEW_RATIO` is that level: the median ratio over MoE dtypes (BF16, FP8, block
FP8, NVFP4, MXFP4 variants), expert shapes, three systems (B200, H200, H100 SXM) and 8,192,
12,288 and 16,384 tokens, for 1, 2, 4 and 8 expert-parallel ranks (MoE TP 1).
``benchmarks/routing_skew.py`` prints it, and the ratio at each token count, from those files
(a research aid: it needs pandas and pyarrow). The model multiplies the routed experts'
multiplies and the activation traffic around them (:func:`pools.sizing.throughput.moe_glue_s`)
by it; the weight stream is not multiplied. One factor whatever the batch, so a larger batch
never gives less throughput for it.

The multi-head latent attention models (DeepSeek-V3 / R1, Kimi-K2: ``ModelArch.is_mla``) are the
DeepSeek family here; a custom architecture is placed by the same test.
"""

from __future__ import annotations

from pools.sizing.presets import ModelArch

#: (power-law exponent, expert-parallel ranks) -> latency of TensorRT-LLM's fused MoE op under
#: power-law routing / under balanced routing where the op is compute bound (module docstring;
#: ``benchmarks/routing_skew.py``).
ROUTING_SKEW_RATIO: dict[tuple[float, int], float] = {
    (1.01, 1): 1.089,
    (1.01, 2): 1.212,
    (1.01, 4): 1.351,
    (1.01, 8): 1.521,
    (1.2, 1): 1.112,
    (1.2, 2): 1.267,
    (1.2, 4): 1.489,
    (1.2, 8): 1.764,
}


def routing_exponent(model: ModelArch) -> float:
    """aiconfigurator's power-law exponent for ``model``'s router: 1.01 for the DeepSeek family
    (multi-head latent attention), 1.2 for any other mixture of experts (module docstring)."""
    return 1.01 if model.is_mla else 1.2


def skew_factor(*, model: ModelArch, ranks: int) -> float:
    """How much longer the routed experts' multiplies and their activation traffic take on the
    busiest of ``ranks`` expert-parallel cards (1: one card holding every expert, or a TP slice
    of each) than under balanced routing: :data:`ROUTING_SKEW_RATIO` of ``model``'s exponent
    (:func:`routing_exponent`). 3 ranks take the 4-rank value, 5 or more the 8-rank one (the
    table stops there); 1.0 for a dense model. Qwen3-235B-A22B on eight ranks: 1.764;
    DeepSeek-V3: 1.521."""
    if not model.is_moe:
        return 1.0
    column = 1 if ranks <= 1 else 2 if ranks == 2 else 4 if ranks <= 4 else 8
    return ROUTING_SKEW_RATIO[(routing_exponent(model), column)]
