"""The shapes `verify --profile` times, from the model: pure Python, no torch.

GEMMs are one layer's, one TP rank's share, at M = the step's tokens: QKV (hidden → query,
key and value heads), the attention output (query heads → hidden), the MLP's gate + up
(hidden → 2 × intermediate, gated) and down (intermediate → hidden). MoE layers take the
expert's intermediate size (one expert's GEMM; routing is not timed). Decode attention is one
layer's paged decode over a grid of batch × context. On CPU (Triton's interpreter) every
shape is cut to a few hundred elements: the path runs, the timings mean nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.specs import ModelSpec

# M values: a decode batch (1, 8, 32), mixed steps (256) and prefill chunks (2048, 8192).
GPU_M = (1, 8, 32, 256, 2048, 8192)
GPU_ATTENTION_BATCHES = (1, 8, 32, 128)
GPU_ATTENTION_CONTEXTS = (1024, 4096, 16384)
# The interpreter runs a kernel one program at a time: a few tiny shapes only.
CPU_M = (1, 8, 32)
CPU_DIM = 128
CPU_ATTENTION_BATCHES = (1, 2)
CPU_ATTENTION_CONTEXTS = (32, 64)
CPU_KV_HEADS = 1
# The grid's KV must fit beside everything else: points past this are left out.
ATTENTION_MAX_BYTES = 8 * 2**30


@dataclass(frozen=True)
class GemmShape:
    op: str  # qkv, out, mlp_up, mlp_down
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    context_tokens: int
    num_heads: int  # query heads on this GPU
    num_kv_heads: int  # KV heads on this GPU
    head_dim: int


def gemm_shapes(model: ModelSpec, tp: int, cpu: bool) -> list[GemmShape]:
    """One layer's GEMMs on one of `tp` ranks at each M of the grid (N, K ≥ 1)."""
    attention = model.attention
    heads, kv_heads = max(1, attention.num_heads // tp), max(1, attention.num_kv_heads // tp)
    head_dim, hidden = attention.head_dim, model.hidden_size
    intermediate = model.intermediate_size
    if model.moe is not None:
        intermediate = model.moe.expert_intermediate_size
    intermediate = max(1, intermediate // tp)
    layer = (
        ("qkv", (heads + 2 * kv_heads) * head_dim, hidden),
        ("out", hidden, heads * head_dim),
        ("mlp_up", 2 * intermediate, hidden),
        ("mlp_down", hidden, intermediate),
    )
    ms = CPU_M if cpu else GPU_M
    cap = CPU_DIM if cpu else None
    return [GemmShape(op, m, min(n, cap or n), min(k, cap or k)) for op, n, k in layer for m in ms]


def attention_shapes(
    model: ModelSpec, tp: int, cpu: bool, kv_element_bytes: int
) -> list[AttentionShape]:
    """The batch × context grid of one layer's decode attention on one of `tp` ranks."""
    attention = model.attention
    heads, kv_heads = max(1, attention.num_heads // tp), max(1, attention.num_kv_heads // tp)
    head_dim = attention.head_dim
    if cpu:
        heads, kv_heads = max(1, heads // kv_heads) * CPU_KV_HEADS, CPU_KV_HEADS
        batches, contexts = CPU_ATTENTION_BATCHES, CPU_ATTENTION_CONTEXTS
    else:
        batches, contexts = GPU_ATTENTION_BATCHES, GPU_ATTENTION_CONTEXTS
    shapes = []
    for batch in batches:
        for context in contexts:
            kv_bytes = 2 * batch * context * kv_heads * head_dim * kv_element_bytes
            if kv_bytes <= ATTENTION_MAX_BYTES:
                shapes.append(AttentionShape(batch, context, heads, kv_heads, head_dim))
    return shapes
