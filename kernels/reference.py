"""PyTorch reference for paged decode attention: dense gather, float64, written for clarity.

Also the CPU fallback of ``kvplan verify``. Dimension names are defined in
``kvplan.kernels``.
"""

from __future__ import annotations

import math

import torch


def _gather_tokens(pool: torch.Tensor, pages: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Tokens 0..seq_len-1 of one sequence from a pool, as float64 ``[L, Hkv, D]``."""
    # index_select on the raw bytes: fp8 tensors support few ops, a byte copy works for all.
    raw = pool.view(torch.uint8) if pool.element_size() == 1 else pool
    gathered = raw.index_select(0, pages.long()).view(pool.dtype)  # [pages, P, Hkv, D]
    return gathered.flatten(0, 1)[:seq_len].to(torch.float64)  # [L, Hkv, D]


def paged_decode_reference(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor | None,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    sm_scale: float | None = None,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    window: int | None = None,
    rope_dim: int = 0,
    out_dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Decode attention output, one query token per sequence, over paged K and V.

    Args:
        q: ``[B, Hq, Dk]``.
        k_pool: ``[N, P, Hkv, Dk]`` (MLA: the latent ``[N, P, 1, Dk]``).
        v_pool: ``[N, P, Hkv, Dv]``, or None for MLA: V is then the first
            ``Dk − rope_dim`` columns of ``k_pool``.
        block_table: ``[B, max_blocks]`` int32 page ids; row b's first ⌈L_b / P⌉ are used.
        seq_lens: ``[B]`` int32 tokens per sequence.
        sm_scale: softmax scale; default 1 / √Dk.
        k_scale: per-tensor dequantisation scale of K (fp8 KV); K = stored · k_scale.
        v_scale: per-tensor dequantisation scale of V.
        window: attend only to the last ``window`` tokens; None for all.
        rope_dim: MLA only: trailing K columns that are not part of V.
        out_dtype: dtype of the result.

    Returns:
        ``[B, Hq, Dv]``; zeros for a sequence of length 0.
    """
    batch, num_heads, head_dim_k = q.shape
    tokens_per_block, num_kv_heads = k_pool.shape[1], k_pool.shape[2]
    group_size = num_heads // num_kv_heads
    head_dim_v = head_dim_k - rope_dim if v_pool is None else v_pool.shape[-1]
    scale = 1.0 / math.sqrt(head_dim_k) if sm_scale is None else sm_scale

    # Computed on q's device (float64 on a GPU too), so large pools are never copied.
    out = torch.zeros(batch, num_heads, head_dim_v, dtype=torch.float64, device=q.device)
    for b in range(batch):
        seq_len = int(seq_lens[b])
        if seq_len == 0:
            continue
        pages = block_table[b, : math.ceil(seq_len / tokens_per_block)]
        k_stored = _gather_tokens(k_pool, pages, seq_len)  # [L, Hkv, Dk]
        # MLA: V is a view of the latent's first Dv columns, not a second tensor.
        v_stored = (
            k_stored[..., :head_dim_v] if v_pool is None else _gather_tokens(v_pool, pages, seq_len)
        )  # [L, Hkv, Dv]
        k, v = k_stored * k_scale, v_stored * v_scale
        first = 0 if window is None else max(seq_len - window, 0)
        k, v = k[first:], v[first:]
        k = k.repeat_interleave(group_size, dim=1)  # [L', Hq, Dk]
        v = v.repeat_interleave(group_size, dim=1)  # [L', Hq, Dv]
        scores = torch.einsum("hd,lhd->hl", q[b].to(torch.float64), k) * scale
        probs = torch.softmax(scores, dim=-1)  # [Hq, L']
        out[b] = torch.einsum("hl,lhd->hd", probs, v)
    return out.to(out_dtype)
