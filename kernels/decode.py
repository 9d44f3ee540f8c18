"""Launch wrappers for paged-attention decode: ``paged_decode`` and ``paged_decode_mla``.

Supported: MHA/GQA/MQA, MLA (shared latent: K = kv_lora_rank + rope columns, V = the first
kv_lora_rank columns of the same buffer), any head_dim (padded to a power of two and
masked), q in fp32/fp16/bf16, KV in the q dtype or fp8 (e4m3fn, e5m2) with per-tensor
scales, sliding windows. Not supported: more than one query token per sequence, per-token
or per-head KV scales, ALiBi, logit soft-capping, attention sinks.

The kernels are in ``kvplan.kernels.decode_kernels``, their tile and split choices in
``kvplan.kernels.config``. Dimension names are defined in ``kvplan.kernels``.
"""

from __future__ import annotations

import math

import torch
import triton

from kvplan.kernels.checks import check_inputs, check_table_width, output_buffer, split_buffers
from kvplan.kernels.config import default_num_splits, heads_per_program, stage1_constexprs
from kvplan.kernels.decode_kernels import paged_decode_stage1_kernel, paged_decode_stage2_kernel

_LOG2E = 1.4426950408889634  # 1 / ln(2): exp(x) = exp2(x · log2(e))


def _paged_decode(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor | None,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    rope_dim: int,
    sm_scale: float | None,
    k_scale: float,
    v_scale: float,
    window: int | None,
    num_splits: int | None,
    max_seq_len: int | None,
    out: torch.Tensor | None,
    mid_o: torch.Tensor | None,
    mid_lse: torch.Tensor | None,
    num_warps: int,
    num_stages: int,
    tokens_per_tile: int | None,
) -> torch.Tensor:
    check_inputs(q, k_pool, v_pool, block_table, seq_lens, rope_dim)
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1 or None, got {window}")
    if tokens_per_tile is not None and (
        tokens_per_tile < 16 or tokens_per_tile & (tokens_per_tile - 1)
    ):
        raise ValueError(f"tokens_per_tile must be a power of two >= 16, got {tokens_per_tile}")
    batch, num_heads, head_dim_k = q.shape
    tokens_per_page, num_kv_heads = k_pool.shape[1], k_pool.shape[2]
    head_dim = head_dim_k - rope_dim  # V width and the non-rope K columns
    out = output_buffer(q, out, (batch, num_heads, head_dim))
    if batch == 0:  # nothing to attend to: no launch, no split choice
        return out
    max_seq_len = check_table_width(block_table, seq_lens, tokens_per_page, max_seq_len)

    if num_splits is None and mid_o is not None:
        num_splits = mid_o.shape[2]
    if num_splits is None:
        num_splits = default_num_splits(
            batch,
            num_heads,
            num_kv_heads,
            head_dim_k,
            max_seq_len,
            tokens_per_page,
            q.device,
            window=window,
        )
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    if num_splits > 1:
        mid_o, mid_lse = split_buffers(q, mid_o, mid_lse, tuple(out.shape), num_splits)
    else:
        mid_o = mid_lse = out  # not read: NUM_SPLITS == 1 writes out directly

    _launch_stage1(
        q,
        k_pool,
        k_pool if v_pool is None else v_pool,
        block_table,
        seq_lens,
        out,
        mid_o,
        mid_lse,
        qk_scale_log2=(1.0 / math.sqrt(head_dim_k) if sm_scale is None else sm_scale)
        * k_scale
        * _LOG2E,
        v_scale=v_scale,
        window=window,
        rope_dim=rope_dim,
        num_splits=num_splits,
        shared_kv=v_pool is None,
        num_warps=num_warps,
        num_stages=num_stages,
        tokens_per_tile=tokens_per_tile,
    )
    if num_splits > 1:
        _launch_stage2(out, mid_o, mid_lse, v_scale=v_scale, num_splits=num_splits)
    return out


def _launch_stage1(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_source: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor,
    mid_o: torch.Tensor,
    mid_lse: torch.Tensor,
    *,
    qk_scale_log2: float,
    v_scale: float,
    window: int | None,
    rope_dim: int,
    num_splits: int,
    shared_kv: bool,
    num_warps: int,
    num_stages: int,
    tokens_per_tile: int | None,
) -> None:
    """Stage 1 over grid (B, Hkv · ⌈G / BLOCK_H⌉, S); at S = 1 it writes ``out`` itself."""
    batch, num_heads, head_dim_k = q.shape
    num_kv_heads = k_pool.shape[2]
    group_size = num_heads // num_kv_heads
    block_h = heads_per_program(group_size, head_dim_k)
    is_split = num_splits > 1
    grid = (batch, num_kv_heads * triton.cdiv(group_size, block_h), num_splits)
    paged_decode_stage1_kernel[grid](
        q_ptr=q,
        k_pool_ptr=k_pool,
        v_pool_ptr=v_source,
        block_table_ptr=block_table,
        seq_lens_ptr=seq_lens,
        out_ptr=out,
        mid_o_ptr=mid_o,
        mid_lse_ptr=mid_lse,
        qk_scale_log2=qk_scale_log2,
        v_scale=v_scale,
        window=0 if window is None else window,
        stride_q_b=q.stride(0),
        stride_q_h=q.stride(1),
        stride_q_d=q.stride(2),
        stride_k_n=k_pool.stride(0),
        stride_k_p=k_pool.stride(1),
        stride_k_h=k_pool.stride(2),
        stride_k_d=k_pool.stride(3),
        stride_v_n=v_source.stride(0),
        stride_v_p=v_source.stride(1),
        stride_v_h=v_source.stride(2),
        stride_v_d=v_source.stride(3),
        stride_block_table_b=block_table.stride(0),
        stride_out_b=out.stride(0),
        stride_out_h=out.stride(1),
        stride_out_d=out.stride(2),
        stride_mid_o_b=mid_o.stride(0) if is_split else 0,
        stride_mid_o_h=mid_o.stride(1) if is_split else 0,
        stride_mid_o_s=mid_o.stride(2) if is_split else 0,
        stride_mid_o_d=mid_o.stride(3) if is_split else 0,
        stride_mid_lse_b=mid_lse.stride(0) if is_split else 0,
        stride_mid_lse_h=mid_lse.stride(1) if is_split else 0,
        stride_mid_lse_s=mid_lse.stride(2) if is_split else 0,
        **stage1_constexprs(
            tokens_per_page=k_pool.shape[1],
            group_size=group_size,
            head_dim=head_dim_k - rope_dim,
            rope_dim=rope_dim,
            num_splits=num_splits,
            shared_kv=shared_kv,
            has_window=window is not None,
            tokens_per_tile=tokens_per_tile,
        ),
        num_warps=num_warps,
        num_stages=num_stages,
    )


def _launch_stage2(
    out: torch.Tensor,
    mid_o: torch.Tensor,
    mid_lse: torch.Tensor,
    *,
    v_scale: float,
    num_splits: int,
) -> None:
    """Stage 2 over grid (B, Hq): the LSE-weighted sum of the S partial outputs."""
    batch, num_heads, head_dim = out.shape
    paged_decode_stage2_kernel[(batch, num_heads)](
        out_ptr=out,
        mid_o_ptr=mid_o,
        mid_lse_ptr=mid_lse,
        v_scale=v_scale,
        stride_out_b=out.stride(0),
        stride_out_h=out.stride(1),
        stride_out_d=out.stride(2),
        stride_mid_o_b=mid_o.stride(0),
        stride_mid_o_h=mid_o.stride(1),
        stride_mid_o_s=mid_o.stride(2),
        stride_mid_o_d=mid_o.stride(3),
        stride_mid_lse_b=mid_lse.stride(0),
        stride_mid_lse_h=mid_lse.stride(1),
        stride_mid_lse_s=mid_lse.stride(2),
        HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
        NUM_SPLITS=num_splits,
        BLOCK_S=triton.next_power_of_2(num_splits),
        num_warps=4,
    )


def paged_decode(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    sm_scale: float | None = None,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    window: int | None = None,
    num_splits: int | None = None,
    max_seq_len: int | None = None,
    out: torch.Tensor | None = None,
    mid_o: torch.Tensor | None = None,
    mid_lse: torch.Tensor | None = None,
    num_warps: int = 4,
    num_stages: int = 2,
    tokens_per_tile: int | None = None,
) -> torch.Tensor:
    """Decode attention output for one query token per sequence over paged K and V.

    Args:
        q: ``[B, Hq, D]`` fp32, fp16 or bf16.
        k_pool: ``[N, P, Hkv, D]`` in q's dtype, or fp8 (float8_e4m3fn / float8_e5m2).
        v_pool: ``[N, P, Hkv, D]``, same dtype rule.
        block_table: ``[B, max_blocks]`` int32; row b's first ⌈L_b / P⌉ entries are read.
        seq_lens: ``[B]`` int32 tokens per sequence (L_b ≥ 0; a length 0 gives zeros).
        sm_scale: softmax scale; default 1 / √D.
        k_scale: per-tensor dequantisation scale of K (K = stored · k_scale).
        v_scale: per-tensor dequantisation scale of V.
        window: attend only to the last ``window`` tokens; None for full attention.
        num_splits: S; None chooses it with ``choose_num_splits`` (or takes it from
            ``mid_o``). Fix it for measurements so the bytes moved are deterministic.
        max_seq_len: an upper bound on every L_b, used to choose S and to check the block
            table's width; None reads seq_lens (a host sync on a GPU). On CPU seq_lens is
            always read and checked.
        out: optional preallocated ``[B, Hq, D]`` in q's dtype.
        mid_o: optional preallocated ``[B, Hq, S, D]`` float32 partial outputs.
        mid_lse: optional preallocated ``[B, Hq, S]`` float32 partial log2-sum-exp2.
        num_warps: warps per stage-1 program.
        num_stages: software-pipelining stages of the stage-1 loop.
        tokens_per_tile: BLOCK_N, tokens per loop iteration (a power of two ≥ 16); None
            picks it by head width. For tuning sweeps.

    Returns:
        ``out``: ``[B, Hq, D]`` in q's dtype.

    Raises:
        ValueError: a shape, dtype, stride or device does not fit, or a block-table row is
            narrower than its sequence's pages; the message names it. An empty batch (B = 0)
            is no error: it returns ``out`` (or an empty ``[0, Hq, D]``) without launching.
    """
    if v_pool is None:
        raise ValueError("v_pool is required; use paged_decode_mla for a shared latent")
    return _paged_decode(
        q,
        k_pool,
        v_pool,
        block_table,
        seq_lens,
        rope_dim=0,
        sm_scale=sm_scale,
        k_scale=k_scale,
        v_scale=v_scale,
        window=window,
        num_splits=num_splits,
        max_seq_len=max_seq_len,
        out=out,
        mid_o=mid_o,
        mid_lse=mid_lse,
        num_warps=num_warps,
        num_stages=num_stages,
        tokens_per_tile=tokens_per_tile,
    )


def paged_decode_mla(
    q: torch.Tensor,
    latent_pool: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    qk_rope_head_dim: int,
    sm_scale: float,
    kv_scale: float = 1.0,
    num_splits: int | None = None,
    max_seq_len: int | None = None,
    out: torch.Tensor | None = None,
    mid_o: torch.Tensor | None = None,
    mid_lse: torch.Tensor | None = None,
    num_warps: int = 4,
    num_stages: int = 2,
    tokens_per_tile: int | None = None,
) -> torch.Tensor:
    """MLA decode output over a paged latent (weight-absorbed form, as in DeepSeek-V2/V3).

    K is the whole latent row (kv_lora_rank + qk_rope_head_dim columns) and V is its first
    kv_lora_rank columns: the latent is read once and serves as both.

    Args:
        q: ``[B, Hq, Dk]``: absorbed q_nope (kv_lora_rank) then q_rope (qk_rope_head_dim).
        latent_pool: ``[N, P, 1, Dk]`` in q's dtype or fp8.
        block_table: ``[B, max_blocks]`` int32.
        seq_lens: ``[B]`` int32.
        qk_rope_head_dim: trailing rope columns of the latent (64 for DeepSeek-V3).
        sm_scale: the model's softmax scale, 1 / √(qk_nope_head_dim + qk_rope_head_dim)
            (not derivable from Dk).
        kv_scale: per-tensor dequantisation scale of the latent.
        num_splits: S, as for ``paged_decode``.
        max_seq_len: as for ``paged_decode``.
        out: optional ``[B, Hq, Dv]`` in q's dtype, Dv = kv_lora_rank.
        mid_o: optional ``[B, Hq, S, Dv]`` float32.
        mid_lse: optional ``[B, Hq, S]`` float32.
        num_warps: warps per stage-1 program.
        num_stages: software-pipelining stages of the stage-1 loop.
        tokens_per_tile: BLOCK_N as for ``paged_decode``.

    Returns:
        ``[B, Hq, Dv]`` in q's dtype.
    """
    if latent_pool.dim() != 4 or latent_pool.shape[2] != 1:
        raise ValueError(f"latent_pool must be [N, P, 1, Dk], got {tuple(latent_pool.shape)}")
    return _paged_decode(
        q,
        latent_pool,
        None,
        block_table,
        seq_lens,
        rope_dim=qk_rope_head_dim,
        sm_scale=sm_scale,
        k_scale=kv_scale,
        v_scale=kv_scale,
        window=None,
        num_splits=num_splits,
        max_seq_len=max_seq_len,
        out=out,
        mid_o=mid_o,
        mid_lse=mid_lse,
        num_warps=num_warps,
        num_stages=num_stages,
        tokens_per_tile=tokens_per_tile,
    )
