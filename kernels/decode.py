"""Triton paged-attention decode: one query token per sequence, split-K, LSE reduce.

Stage 1, grid (B, Hkv · head blocks, S): one program streams one split of one sequence's
pages for one KV head and all G query heads that share it (GQA/MQA: KV is read once, not
G times). Stage 2, grid (B, Hq): combines the S partial outputs by their log-sum-exp; it
is skipped when S = 1 and stage 1 writes the output directly.

Supported: MHA/GQA/MQA, MLA (shared latent: K = kv_lora_rank + rope columns, V = the first
kv_lora_rank columns of the same buffer), any head_dim (padded to a power of two and
masked), q in fp32/fp16/bf16, KV in the q dtype or fp8 (e4m3fn, e5m2) with per-tensor
scales, sliding windows. Not supported: more than one query token per sequence, per-token
or per-head KV scales, ALiBi, logit soft-capping, attention sinks.

Uses plain pointer arithmetic only (no block pointers or tensor descriptors) so the same
source compiles with Triton 3.6 and runs in the Triton 3.9 interpreter. Dimension names
are defined in ``kvplan.kernels``.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl
from kvplan.kernels.splits import choose_num_splits

# The interpreter stores bf16 as raw uint16 bits and computes on the bits (tl.dot, *, +,
# tl.sum all give garbage); casting to fp32 before any math is correct. Read when this
# module is imported, like the interpreter switch itself (read when @triton.jit runs).
_UPCAST = os.environ.get("TRITON_INTERPRET") == "1"

Q_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
# H100/H200 SXM: used to choose splits when the tensors are not on a CUDA device.
DEFAULT_SM_COUNT = 132
_LOG2E = 1.4426950408889634  # 1 / ln(2): exp(x) = exp2(x · log2(e))


@triton.jit
def _paged_decode_stage1_kernel(
    q_ptr,
    k_pool_ptr,
    v_pool_ptr,
    block_table_ptr,
    seq_lens_ptr,
    out_ptr,
    mid_o_ptr,
    mid_lse_ptr,
    qk_scale_log2,
    v_scale,
    window,
    stride_q_b,
    stride_q_h,
    stride_q_d,
    stride_k_n,
    stride_k_p,
    stride_k_h,
    stride_k_d,
    stride_v_n,
    stride_v_p,
    stride_v_h,
    stride_v_d,
    stride_block_table_b,
    stride_out_b,
    stride_out_h,
    stride_out_d,
    stride_mid_o_b,
    stride_mid_o_h,
    stride_mid_o_s,
    stride_mid_o_d,
    stride_mid_lse_b,
    stride_mid_lse_h,
    stride_mid_lse_s,
    TOKENS_PER_PAGE: tl.constexpr,
    GROUP_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROPE_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_R: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    SHARED_KV: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # HEAD_DIM is the V width and the first K columns; ROPE_DIM extra K columns (MLA only).
    tl.static_assert(BLOCK_H >= 16, "tl.dot needs at least 16 rows on NVIDIA tensor cores")
    tl.static_assert(BLOCK_N >= 16, "tl.dot needs K >= 16 for 16-bit operands")
    tl.static_assert(BLOCK_D >= HEAD_DIM, "BLOCK_D pads HEAD_DIM up to a power of two")

    cur_batch = tl.program_id(0)
    cur_head_block = tl.program_id(1)  # KV head × block of its G query heads
    cur_split = tl.program_id(2)
    num_head_blocks: tl.constexpr = (GROUP_SIZE + BLOCK_H - 1) // BLOCK_H
    cur_kv_head = cur_head_block // num_head_blocks
    first_group_head = (cur_head_block % num_head_blocks) * BLOCK_H

    offs_h = tl.arange(0, BLOCK_H)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_h = first_group_head + offs_h < GROUP_SIZE
    mask_d = offs_d < HEAD_DIM
    cur_heads = cur_kv_head * GROUP_SIZE + first_group_head + offs_h  # query heads [BLOCK_H]

    # Page-aligned split ranges: no page is read by two splits. With a window, only the
    # pages from the one holding token L − W onwards are split.
    seq_len = tl.load(seq_lens_ptr + cur_batch)
    window_start = 0
    if HAS_WINDOW:
        window_start = tl.maximum(seq_len - window, 0)
    first_token = (window_start // TOKENS_PER_PAGE) * TOKENS_PER_PAGE
    pages_per_split = tl.cdiv(tl.cdiv(seq_len - first_token, NUM_SPLITS), TOKENS_PER_PAGE)
    split_start = first_token + cur_split * pages_per_split * TOKENS_PER_PAGE
    split_end = tl.minimum(split_start + pages_per_split * TOKENS_PER_PAGE, seq_len)

    q_base = q_ptr + cur_batch.to(tl.int64) * stride_q_b
    q_offs = cur_heads[:, None] * stride_q_h + offs_d[None, :] * stride_q_d
    q = tl.load(q_base + q_offs, mask=mask_h[:, None] & mask_d[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)  # [BLOCK_H, BLOCK_D]
    if ROPE_DIM > 0:
        offs_r = HEAD_DIM + tl.arange(0, BLOCK_R)
        mask_r = offs_r < HEAD_DIM + ROPE_DIM
        q_rope_offs = cur_heads[:, None] * stride_q_h + offs_r[None, :] * stride_q_d
        q_rope = tl.load(q_base + q_rope_offs, mask=mask_h[:, None] & mask_r[None, :], other=0.0)
        if UPCAST:
            q_rope = q_rope.to(tl.float32)  # [BLOCK_H, BLOCK_R]

    block_table_row = block_table_ptr + cur_batch.to(tl.int64) * stride_block_table_b
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)  # running max, log2 units
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)  # running sum of exp2
    acc = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)

    for tile_start in range(split_start, split_end, BLOCK_N):
        tokens = tile_start + offs_n
        mask_n = (tokens < split_end) & (tokens >= window_start)
        # A tile may span pages (BLOCK_N > P) or sit inside one: look up each token's page.
        pages = tl.load(block_table_row + tokens // TOKENS_PER_PAGE, mask=mask_n, other=0)
        pages = pages.to(tl.int64)  # page × stride overflows int32 past 2^31 elements
        slots = tokens % TOKENS_PER_PAGE

        k_offs = pages * stride_k_n + slots * stride_k_p + cur_kv_head * stride_k_h
        # K is loaded transposed, [BLOCK_D, BLOCK_N]: in sm_90 AOT compiles this took
        # 179 registers at D 128 against 244 for a [BLOCK_N, BLOCK_D] load plus tl.trans.
        k_t = tl.load(
            k_pool_ptr + k_offs[None, :] + offs_d[:, None] * stride_k_d,
            mask=mask_d[:, None] & mask_n[None, :],
            other=0.0,
        )
        k_t = k_t.to(q.dtype)  # fp8 → q dtype (8-bit dots need K >= 32); bf16 → fp32 if UPCAST
        scores = tl.dot(q, k_t, input_precision="ieee")  # [BLOCK_H, BLOCK_N]
        if ROPE_DIM > 0:
            k_rope_t = tl.load(
                k_pool_ptr + k_offs[None, :] + offs_r[:, None] * stride_k_d,
                mask=mask_r[:, None] & mask_n[None, :],
                other=0.0,
            ).to(q_rope.dtype)  # [BLOCK_R, BLOCK_N]
            scores += tl.dot(q_rope, k_rope_t, input_precision="ieee")
        # qk_scale_log2 = sm_scale · k_scale · log2(e): fp8 dequant and exp→exp2 in one mul.
        scores = tl.where(mask_n[None, :], scores * qk_scale_log2, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(scores, 1))
        # A fully masked tile leaves m_new = -inf; subtracting 0 instead avoids
        # -inf − (-inf) = NaN and keeps alpha and p at exactly 0.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(scores - m_safe[:, None])  # [BLOCK_H, BLOCK_N]
        l_i = l_i * alpha + tl.sum(p, 1)

        if SHARED_KV:
            v = tl.trans(k_t)  # MLA: V is the latent's first HEAD_DIM columns, already loaded
        else:
            v_offs = pages * stride_v_n + slots * stride_v_p + cur_kv_head * stride_v_h
            v = tl.load(
                v_pool_ptr + v_offs[:, None] + offs_d[None, :] * stride_v_d,
                mask=mask_n[:, None] & mask_d[None, :],
                other=0.0,
            ).to(q.dtype)  # [BLOCK_N, BLOCK_D]
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new

    # An empty split (or sequence) has l_i = 0: write 0 and LSE = -inf, never 0/0.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    o = acc / l_safe[:, None]  # [BLOCK_H, BLOCK_D]
    if NUM_SPLITS == 1:
        out_offs = cur_heads[:, None] * stride_out_h + offs_d[None, :] * stride_out_d
        tl.store(
            out_ptr + cur_batch.to(tl.int64) * stride_out_b + out_offs,
            (o * v_scale).to(out_ptr.dtype.element_ty),
            mask=mask_h[:, None] & mask_d[None, :],
        )
    else:
        mid_base = cur_batch.to(tl.int64) * stride_mid_o_b + cur_split * stride_mid_o_s
        mid_offs = cur_heads[:, None] * stride_mid_o_h + offs_d[None, :] * stride_mid_o_d
        tl.store(mid_o_ptr + mid_base + mid_offs, o, mask=mask_h[:, None] & mask_d[None, :])
        lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.log2(l_safe))  # log2 units
        lse_offs = (
            cur_batch.to(tl.int64) * stride_mid_lse_b
            + cur_heads * stride_mid_lse_h
            + cur_split * stride_mid_lse_s
        )
        tl.store(mid_lse_ptr + lse_offs, lse, mask=mask_h)


@triton.jit
def _paged_decode_stage2_kernel(
    out_ptr,
    mid_o_ptr,
    mid_lse_ptr,
    v_scale,
    stride_out_b,
    stride_out_h,
    stride_out_d,
    stride_mid_o_b,
    stride_mid_o_h,
    stride_mid_o_s,
    stride_mid_o_d,
    stride_mid_lse_b,
    stride_mid_lse_h,
    stride_mid_lse_s,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    cur_batch = tl.program_id(0)
    cur_head = tl.program_id(1)

    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    mask_s = offs_s < NUM_SPLITS
    mask_d = offs_d < HEAD_DIM

    lse_base = cur_batch.to(tl.int64) * stride_mid_lse_b + cur_head * stride_mid_lse_h
    lse = tl.load(
        mid_lse_ptr + lse_base + offs_s * stride_mid_lse_s, mask=mask_s, other=float("-inf")
    )  # [BLOCK_S], log2 units
    lse_max = tl.max(lse, 0)
    lse_max = tl.where(lse_max == float("-inf"), 0.0, lse_max)  # all splits empty: L = 0
    weights = tl.exp2(lse - lse_max)  # empty splits weigh exactly 0
    weight_sum = tl.sum(weights, 0)
    weight_sum = tl.where(weight_sum == 0.0, 1.0, weight_sum)

    mid_base = cur_batch.to(tl.int64) * stride_mid_o_b + cur_head * stride_mid_o_h
    mid_offs = offs_s[:, None] * stride_mid_o_s + offs_d[None, :] * stride_mid_o_d
    partial = tl.load(
        mid_o_ptr + mid_base + mid_offs, mask=mask_s[:, None] & mask_d[None, :], other=0.0
    )  # [BLOCK_S, BLOCK_D]
    o = tl.sum(partial * weights[:, None], 0) / weight_sum * v_scale  # [BLOCK_D]
    out_base = cur_batch.to(tl.int64) * stride_out_b + cur_head * stride_out_h
    tl.store(
        out_ptr + out_base + offs_d * stride_out_d,
        o.to(out_ptr.dtype.element_ty),
        mask=mask_d,
    )


def _heads_per_program(group_size: int, head_dim_k: int) -> int:
    """BLOCK_H: all G query heads of a KV head in one program, 16 rows at least (tl.dot)."""
    # The fp32 accumulator is BLOCK_H × BLOCK_D: cap it near 16K elements (64 KB) so wide
    # MLA heads (512 + 64) take 16 heads per program, as SGLang's Triton MLA does.
    cap = 64 if head_dim_k <= 256 else 16
    return min(max(16, triton.next_power_of_2(group_size)), cap)


def _tokens_per_tile(head_dim_k: int) -> int:
    """BLOCK_N, the tokens per loop iteration, by K width.

    From sm_90 AOT compiles (Triton 3.9, 4 warps; registers / stack bytes): D 128 bf16 at
    32 tokens 179 / 0, fp8 186 / 0, at 64 tokens 255 / 112 (spills); D 256 at 32 tokens
    200 / 0; MLA 512 + 64 at 16 tokens 168 / 0, fp8 217 / 0, at 32 tokens 251 / 0. Not yet
    timed on a GPU: sweep with bench/decode_bench.py --sweep-config.
    """
    return 32 if head_dim_k <= 256 else 16


def _stage1_constexprs(
    *,
    tokens_per_page: int,
    group_size: int,
    head_dim: int,
    rope_dim: int,
    num_splits: int,
    shared_kv: bool,
    has_window: bool,
    tokens_per_tile: int | None = None,
) -> dict[str, int | bool]:
    """Compile-time parameters of the stage-1 kernel for one problem shape."""
    head_dim_k = head_dim + rope_dim
    return {
        "TOKENS_PER_PAGE": tokens_per_page,
        "GROUP_SIZE": group_size,
        "HEAD_DIM": head_dim,
        "ROPE_DIM": rope_dim,
        "BLOCK_H": _heads_per_program(group_size, head_dim_k),
        "BLOCK_N": tokens_per_tile or _tokens_per_tile(head_dim_k),
        "BLOCK_D": triton.next_power_of_2(head_dim),
        "BLOCK_R": triton.next_power_of_2(max(rope_dim, 1)),
        "NUM_SPLITS": num_splits,
        "SHARED_KV": shared_kv,
        "HAS_WINDOW": has_window,
        "UPCAST": _UPCAST,
    }


def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return DEFAULT_SM_COUNT


def _check_inputs(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor | None,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    rope_dim: int,
) -> None:
    if q.dim() != 3:
        raise ValueError(f"q must be [B, Hq, Dk], got shape {tuple(q.shape)}")
    if k_pool.dim() != 4:
        raise ValueError(f"k_pool must be [N, P, Hkv, Dk], got shape {tuple(k_pool.shape)}")
    batch, num_heads, head_dim_k = q.shape
    _, _, num_kv_heads, pool_dim = k_pool.shape
    if pool_dim != head_dim_k:
        raise ValueError(
            f"q head dim {head_dim_k} != k_pool head dim {pool_dim} "
            f"(q {tuple(q.shape)}, k_pool {tuple(k_pool.shape)})"
        )
    if num_heads % num_kv_heads:
        raise ValueError(
            f"query heads {num_heads} are not a multiple of KV heads {num_kv_heads} "
            f"(q {tuple(q.shape)}, k_pool {tuple(k_pool.shape)})"
        )
    if v_pool is not None and v_pool.shape != k_pool.shape:
        raise ValueError(
            f"v_pool shape {tuple(v_pool.shape)} != k_pool shape {tuple(k_pool.shape)}"
        )
    if not 0 <= rope_dim < head_dim_k:
        raise ValueError(f"rope_dim must be in [0, {head_dim_k}), got {rope_dim}")
    if q.dtype not in Q_DTYPES:
        raise ValueError(f"q dtype must be one of {Q_DTYPES}, got {q.dtype}")
    for name, pool in (("k_pool", k_pool), ("v_pool", v_pool)):
        if pool is not None and pool.dtype != q.dtype and pool.dtype not in FP8_DTYPES:
            raise ValueError(f"{name} dtype must be {q.dtype} (as q) or fp8, got {pool.dtype}")
    if block_table.dim() != 2 or block_table.shape[0] != batch:
        raise ValueError(
            f"block_table must be [B={batch}, max_blocks], got shape {tuple(block_table.shape)}"
        )
    if seq_lens.shape != (batch,):
        raise ValueError(f"seq_lens must be [B={batch}], got shape {tuple(seq_lens.shape)}")
    for name, tensor in (("block_table", block_table), ("seq_lens", seq_lens)):
        if tensor.dtype != torch.int32:
            raise ValueError(f"{name} must be int32, got {tensor.dtype}")
    if not seq_lens.is_contiguous():
        raise ValueError("seq_lens must be contiguous")
    for name, tensor in (
        ("q", q),
        ("k_pool", k_pool),
        ("v_pool", v_pool),
        ("block_table", block_table),
        ("seq_lens", seq_lens),
    ):
        if tensor is not None and tensor.device != q.device:
            raise ValueError(f"{name} is on {tensor.device}, q on {q.device}")


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
    _check_inputs(q, k_pool, v_pool, block_table, seq_lens, rope_dim)
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1 or None, got {window}")
    batch, num_heads, head_dim_k = q.shape
    tokens_per_page, num_kv_heads = k_pool.shape[1], k_pool.shape[2]
    group_size = num_heads // num_kv_heads
    head_dim = head_dim_k - rope_dim  # V width and the non-rope K columns
    block_h = _heads_per_program(group_size, head_dim_k)

    if num_splits is None and mid_o is not None:
        num_splits = mid_o.shape[2]
    if num_splits is None:
        if max_seq_len is None:
            max_seq_len = int(seq_lens.max()) if batch else 0  # host sync; pass it to avoid
        num_splits = choose_num_splits(
            batch,
            num_kv_heads,
            group_size,
            max_seq_len,
            _sm_count(q.device),
            heads_per_program=block_h,
            tokens_per_block=tokens_per_page,
            window=window,
        )
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    if tokens_per_tile is not None and (
        tokens_per_tile < 16 or tokens_per_tile & (tokens_per_tile - 1)
    ):
        raise ValueError(f"tokens_per_tile must be a power of two >= 16, got {tokens_per_tile}")

    out_shape = (batch, num_heads, head_dim)
    if out is None:
        out = torch.empty(out_shape, dtype=q.dtype, device=q.device)
    elif out.shape != out_shape or out.dtype != q.dtype:
        raise ValueError(
            f"out must be {list(out_shape)} {q.dtype}, got {tuple(out.shape)} {out.dtype}"
        )
    if num_splits > 1:
        mid_o_shape = (batch, num_heads, num_splits, head_dim)
        if mid_o is None:
            mid_o = torch.empty(mid_o_shape, dtype=torch.float32, device=q.device)
        if mid_lse is None:
            mid_lse = torch.empty(mid_o_shape[:3], dtype=torch.float32, device=q.device)
        if mid_o.shape != mid_o_shape or mid_o.dtype != torch.float32:
            raise ValueError(
                f"mid_o must be {list(mid_o_shape)} float32, got {tuple(mid_o.shape)} {mid_o.dtype}"
            )
        if mid_lse.shape != mid_o_shape[:3] or mid_lse.dtype != torch.float32:
            raise ValueError(
                f"mid_lse must be {list(mid_o_shape[:3])} float32, "
                f"got {tuple(mid_lse.shape)} {mid_lse.dtype}"
            )
    else:
        mid_o = mid_lse = out  # not read: NUM_SPLITS == 1 writes out directly
    if batch == 0:
        return out

    scale = 1.0 / math.sqrt(head_dim_k) if sm_scale is None else sm_scale
    v_source = k_pool if v_pool is None else v_pool
    is_split = num_splits > 1
    grid = (batch, num_kv_heads * triton.cdiv(group_size, block_h), num_splits)
    _paged_decode_stage1_kernel[grid](
        q_ptr=q,
        k_pool_ptr=k_pool,
        v_pool_ptr=v_source,
        block_table_ptr=block_table,
        seq_lens_ptr=seq_lens,
        out_ptr=out,
        mid_o_ptr=mid_o,
        mid_lse_ptr=mid_lse,
        qk_scale_log2=scale * k_scale * _LOG2E,
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
        **_stage1_constexprs(
            tokens_per_page=tokens_per_page,
            group_size=group_size,
            head_dim=head_dim,
            rope_dim=rope_dim,
            num_splits=num_splits,
            shared_kv=v_pool is None,
            has_window=window is not None,
            tokens_per_tile=tokens_per_tile,
        ),
        num_warps=num_warps,
        num_stages=num_stages,
    )
    if is_split:
        _paged_decode_stage2_kernel[(batch, num_heads)](
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
    return out


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
        max_seq_len: longest L_b, used only to choose S; None reads seq_lens (a host sync).
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
        ValueError: a shape, dtype or device does not fit; the message names it.
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
