"""Triton paged-attention decode kernels: stage 1 (split-K attention) and stage 2 (LSE reduce).

Stage 1, grid (B, Hkv · head blocks, S): one program streams one split of one sequence's
pages for one KV head and all G query heads that share it (GQA/MQA: KV is read once, not
G times). Stage 2, grid (B, Hq): combines the S partial outputs by their log-sum-exp; it
is skipped when S = 1 and stage 1 writes the output directly.

Plain pointer arithmetic only (no block pointers or tensor descriptors) so the same source
compiles and interprets under Triton 3.6 and 3.9 (CI runs the interpreter under both). Launched by
``kvplan.kernels.decode``; dimension names are defined in ``kvplan.kernels``.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

# The interpreter stores bf16 as raw uint16 bits and computes on the bits (tl.dot, *, +,
# tl.sum all give garbage); casting to fp32 before any math is correct. Read when this
# module is imported, like the interpreter switch itself (read when @triton.jit runs).
UPCAST = os.environ.get("TRITON_INTERPRET") == "1"
if UPCAST:
    from kvplan.kernels.interpreter_compat import fix_interpreter_loop_bounds

    fix_interpreter_loop_bounds()  # Triton ≤ 3.6 with NumPy ≥ 2.4: see that module


@triton.jit
def paged_decode_stage1_kernel(
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
    num_head_blocks = (GROUP_SIZE + BLOCK_H - 1) // BLOCK_H  # constexpr arithmetic
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
def paged_decode_stage2_kernel(
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
