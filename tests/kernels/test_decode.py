"""Triton paged decode vs the float64 reference (interpreter on CPU, compiled on a GPU).

Each case is tiny (a few pages per sequence) because the interpreter runs programs one by
one at roughly 10 ms per tile iteration. Pools are NaN outside the sequences' tokens and
outputs are NaN before each run, so a stray read or a missing write fails the test.

Tolerances, max |kernel − reference| on unit-variance inputs (scaled by max |reference| when
that exceeds 1), where the reference gets the same already-rounded q, K and V, so only the
kernel's own rounding is measured:
- fp32: 1e-5, fp32 accumulation over ≤ 100 tokens (the dots run as IEEE fp32, not tf32).
- fp16: 2e-3, the softmax weights are rounded to fp16 (2^-11 relative) for the P·V dot and
  the output to fp16; outputs are below ~2 in magnitude.
- bf16: 1e-2, the same roundings with bf16's 8-bit mantissa (2^-8 relative).
- fp8 KV: dequantisation is exact (scales folded into the math), so against the reference
  on the same fp8 values the q dtype's tolerance holds; against the unquantised K and V the
  error is the quantisation's, bounded by 5e-2 relative (L2 norm of the error over the norm
  of the output); e4m3 keeps 3 mantissa bits, e5m2 only 2.
"""

from __future__ import annotations

import math

import pytest
import torch

from kvplan.kernels import paged_decode, paged_decode_mla, paged_decode_reference

ATOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
# Rounding to e4m3 (3 mantissa bits) errs by up to 2^-4 relative per element, e5m2 (2 bits)
# by up to 2^-3; this case measures 2.7 % and 5.3 % (relative L2). A one-token sequence
# outputs V itself, so single-element errors are not averaged away over many tokens.
FP8_RELATIVE_TOL = {torch.float8_e4m3fn: 5e-2, torch.float8_e5m2: 1e-1}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _run(case, *, num_splits, window=None, k_scale=1.0, v_scale=1.0, rope_dim=0):
    """Kernel and reference outputs (both [B, Hq, Dv] float64 on the CPU)."""
    batch, num_heads, head_dim_k = case.q.shape
    out = torch.full((batch, num_heads, head_dim_k - rope_dim), float("nan"), device=DEVICE)
    out = out.to(case.q.dtype)
    if rope_dim:
        got = paged_decode_mla(
            case.q,
            case.k_pool,
            case.block_table,
            case.seq_lens,
            qk_rope_head_dim=rope_dim,
            sm_scale=1 / math.sqrt(192),
            kv_scale=k_scale,
            num_splits=num_splits,
            out=out,
        )
    else:
        got = paged_decode(
            case.q,
            case.k_pool,
            case.v_pool,
            case.block_table,
            case.seq_lens,
            k_scale=k_scale,
            v_scale=v_scale,
            window=window,
            num_splits=num_splits,
            out=out,
        )
    want = paged_decode_reference(
        case.q,
        case.k_pool,
        case.v_pool,
        case.block_table,
        case.seq_lens,
        sm_scale=1 / math.sqrt(192) if rope_dim else None,
        k_scale=k_scale,
        v_scale=v_scale,
        window=window,
        rope_dim=rope_dim,
    )
    assert got is out
    assert torch.isfinite(got).all(), "NaN/inf in the output: a poisoned slot was read"
    return got.cpu().to(torch.float64), want.cpu()


def _max_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """Max |got − want|, divided by max |want| when that exceeds 1: the final rounding to
    fp16/bf16 is relative, and outputs of short sequences can reach |V| ≈ 4."""
    return ((got - want).abs().max() / want.abs().max().clamp(min=1.0)).item()


@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_reference_per_dtype(make_case, dtype, num_splits):
    case = make_case(dtype=dtype)
    got, want = _run(case, num_splits=num_splits)
    assert _max_error(got, want) <= ATOL[dtype]


@pytest.mark.parametrize("kv_dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fp8_kv_with_scales(make_case, dtype, kv_dtype):
    # Scales that are not 1 check that k_scale reaches the logits and v_scale the output.
    k_scale, v_scale = 0.5, 0.25
    case = make_case(dtype=dtype, kv_dtype=kv_dtype, k_scale=k_scale, v_scale=v_scale)
    got, want = _run(case, num_splits=2, k_scale=k_scale, v_scale=v_scale)
    assert _max_error(got, want) <= ATOL[dtype]

    # Against the K and V before quantisation: the error is fp8's, not the kernel's.
    unquantised = paged_decode_reference(
        case.q,
        _dense_pool(case.k_dense, case),
        _dense_pool(case.v_dense, case),
        _dense_table(case),
        case.seq_lens,
    ).cpu()
    relative = ((got - unquantised).norm() / unquantised.norm()).item()
    print(f"fp8 {kv_dtype} q {dtype}: relative error vs unquantised {relative:.3g}")
    assert relative <= FP8_RELATIVE_TOL[kv_dtype]


def _dense_table(case) -> torch.Tensor:
    """Block table for ``_dense_pool``: one page per sequence, page b for sequence b."""
    return torch.arange(case.q.shape[0], dtype=torch.int32, device=DEVICE).unsqueeze(1)


def _dense_pool(tokens: list[torch.Tensor], case) -> torch.Tensor:
    """One fp32 page per sequence holding its whole [L, Hkv, D] (for the exact reference)."""
    longest = max(t.shape[0] for t in tokens)
    pool = torch.zeros(len(tokens), longest, *tokens[0].shape[1:])
    for b, t in enumerate(tokens):
        pool[b, : t.shape[0]] = t
    return pool.to(DEVICE)


@pytest.mark.parametrize("tokens_per_page", [16, 32, 64, 128])
def test_block_sizes_with_exact_multiples_and_single_tokens(make_case, tokens_per_page):
    # L = 1, L = P (exactly one full page), L = 2P (exact multiple), L = P + 1.
    lens = (1, tokens_per_page, 2 * tokens_per_page, tokens_per_page + 1)
    case = make_case(lens, tokens_per_page=tokens_per_page, num_heads=4, num_kv_heads=1)
    got, want = _run(case, num_splits=2)
    assert _max_error(got, want) <= ATOL[torch.float16]


@pytest.mark.parametrize("head_dim", [64, 128, 256, 96])
def test_head_dims_including_non_power_of_two(make_case, head_dim):
    case = make_case((5, 40), head_dim=head_dim, num_heads=4, num_kv_heads=1)
    got, want = _run(case, num_splits=2)
    assert _max_error(got, want) <= ATOL[torch.float16]


@pytest.mark.parametrize(
    ("num_heads", "num_kv_heads"),
    [(4, 4), (8, 2), (8, 1), (6, 1), (40, 2)],
    ids=["mha-g1", "gqa-g4", "mqa-g8", "mqa-g6-not-pow2", "gqa-g20-not-pow2"],
)
def test_group_sizes(make_case, num_heads, num_kv_heads):
    case = make_case((3, 50), num_heads=num_heads, num_kv_heads=num_kv_heads)
    got, want = _run(case, num_splits=1)
    assert _max_error(got, want) <= ATOL[torch.float16]


def test_more_splits_than_pages_gives_finite_correct_output(make_case):
    # L = 1 and L = 17 over 16-token pages: 1 and 2 pages, so most of 8 splits are empty
    # and must contribute LSE = -inf with weight 0, not NaN.
    case = make_case((1, 17), num_heads=4, num_kv_heads=2)
    got, want = _run(case, num_splits=8)
    assert _max_error(got, want) <= ATOL[torch.float16]


@pytest.mark.parametrize("tokens_per_page", [16, 128])
@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("window", [1, 8, 20, 50, 200])
def test_sliding_window(make_case, window, num_splits, tokens_per_page):
    # Windows smaller than a page, straddling pages, and longer than every sequence. With
    # 128-token pages the loop starts up to 127 tokens before the window, so whole token
    # tiles are masked: their running max stays -inf and must not turn into NaN.
    case = make_case(
        (1, 37, 80),
        num_heads=4,
        num_kv_heads=2,
        dtype=torch.float32,
        tokens_per_page=tokens_per_page,
    )
    got, want = _run(case, num_splits=num_splits, window=window)
    assert _max_error(got, want) <= ATOL[torch.float32]


@pytest.mark.parametrize(
    ("dtype", "kv_dtype", "num_splits"),
    [
        (torch.float16, torch.float16, 1),
        (torch.bfloat16, torch.bfloat16, 2),
        (torch.bfloat16, torch.float8_e4m3fn, 2),
    ],
)
def test_mla_shared_latent(make_case, dtype, kv_dtype, num_splits):
    # DeepSeek-V3 latent: kv_lora_rank 512 + qk_rope_head_dim 64, one latent "head";
    # 20 query heads take two 16-head programs, the second one partly masked.
    case = make_case(
        (3, 40),
        num_heads=20,
        num_kv_heads=1,
        head_dim=512,
        rope_dim=64,
        dtype=dtype,
        kv_dtype=kv_dtype,
        tokens_per_page=32,
    )
    got, want = _run(case, num_splits=num_splits, rope_dim=64)
    assert _max_error(got, want) <= ATOL[dtype]


def test_zero_length_sequence_gives_zeros(make_case):
    case = make_case((0, 20), num_heads=4, num_kv_heads=2)
    for num_splits in (1, 2):
        got, want = _run(case, num_splits=num_splits)
        assert got[0].abs().max() == 0
        assert _max_error(got, want) <= ATOL[torch.float16]


def test_preallocated_buffers_are_used_and_reused(make_case):
    case = make_case((20, 70), num_heads=4, num_kv_heads=2)
    batch, num_heads, head_dim = case.q.shape
    num_splits = 3
    mid_o = torch.full((batch, num_heads, num_splits, head_dim), float("nan"), device=DEVICE)
    mid_lse = torch.full((batch, num_heads, num_splits), float("nan"), device=DEVICE)
    out = torch.full_like(case.q, float("nan"))
    want = paged_decode_reference(
        case.q, case.k_pool, case.v_pool, case.block_table, case.seq_lens
    ).cpu()
    for _ in range(2):
        out.fill_(float("nan"))
        got = paged_decode(
            case.q,
            case.k_pool,
            case.v_pool,
            case.block_table,
            case.seq_lens,
            out=out,
            mid_o=mid_o,
            mid_lse=mid_lse,  # S taken from mid_o
        )
        assert got is out
        assert _max_error(got.cpu().double(), want) <= ATOL[torch.float16]


def test_chosen_splits_match_reference(make_case):
    case = make_case((100, 3), num_heads=4, num_kv_heads=1)
    got = paged_decode(case.q, case.k_pool, case.v_pool, case.block_table, case.seq_lens)
    want = paged_decode_reference(case.q, case.k_pool, case.v_pool, case.block_table, case.seq_lens)
    assert _max_error(got.cpu().double(), want.cpu()) <= ATOL[torch.float16]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: {"q": c.q[0]}, "q must be"),
        (lambda c: {"q": c.q[:, :3]}, "not a multiple of KV heads"),
        (lambda c: {"q": c.q[..., :32]}, "head dim"),
        (lambda c: {"v_pool": c.v_pool[..., :32]}, "v_pool shape"),
        (lambda c: {"block_table": c.block_table.long()}, "block_table must be int32"),
        (lambda c: {"block_table": c.block_table[:1]}, "block_table must be"),
        (lambda c: {"seq_lens": c.seq_lens[:1]}, "seq_lens must be"),
        (lambda c: {"k_pool": c.k_pool.to(torch.bfloat16)}, "k_pool dtype"),
        (lambda c: {"q": c.q.to(torch.float64)}, "q dtype"),
        (lambda c: {"out": torch.empty(1, device=DEVICE)}, "out must be"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_shape(make_case, change, message):
    case = make_case((5, 9), num_heads=4, num_kv_heads=2)
    args = {
        "q": case.q,
        "k_pool": case.k_pool,
        "v_pool": case.v_pool,
        "block_table": case.block_table,
        "seq_lens": case.seq_lens,
    }
    args.update(change(case))
    with pytest.raises(ValueError, match=message):
        paged_decode(**args)


def _case_args(case) -> dict:
    return {
        "q": case.q,
        "k_pool": case.k_pool,
        "v_pool": case.v_pool,
        "block_table": case.block_table,
        "seq_lens": case.seq_lens,
    }


def test_block_table_with_strided_last_dimension_is_refused(make_case):
    # A transposed table has the right shape but steps through a row by B elements: the
    # kernel would take other rows' page ids for this row's (and the NaN pages show it).
    case = make_case((20, 40), num_heads=4, num_kv_heads=2)
    strided = case.block_table.t().contiguous().t()  # same values, strides (1, B)
    assert torch.equal(strided, case.block_table) and strided.stride(1) != 1
    with pytest.raises(ValueError, match="last dimension must be contiguous"):
        paged_decode(**{**_case_args(case), "block_table": strided})
    got = paged_decode(**{**_case_args(case), "block_table": strided.contiguous()})
    assert torch.isfinite(got).all()


def test_block_table_narrower_than_a_sequence_is_refused(make_case):
    # 40 tokens over 16-token pages need ⌈40 / 16⌉ = 3 entries; a 2-wide table would let
    # the kernel read the next row's first entry as page 3 of this one.
    case = make_case((5, 40), num_heads=4, num_kv_heads=2)
    narrow = case.block_table[:, :2]
    with pytest.raises(ValueError, match=r"2 entries per row.*40 tokens needs.*= 3 pages"):
        paged_decode(**{**_case_args(case), "block_table": narrow})
    # A max_seq_len below the real longest sequence is caught (seq_lens is read to check it
    # when it lives on the CPU, or when max_seq_len is not given).
    if DEVICE == "cpu":
        with pytest.raises(ValueError, match="max_seq_len 16 < the longest seq_lens entry 40"):
            paged_decode(**_case_args(case), max_seq_len=16)


def test_negative_sequence_length_is_refused(make_case):
    case = make_case((5, 9), num_heads=4, num_kv_heads=2)
    lens = torch.tensor([5, -1], dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="seq_lens must be >= 0"):
        paged_decode(**{**_case_args(case), "seq_lens": lens})


def test_empty_batch_returns_an_empty_result(make_case):
    case = make_case((5, 9), num_heads=4, num_kv_heads=2)
    empty = {"q": case.q[:0], "block_table": case.block_table[:0], "seq_lens": case.seq_lens[:0]}
    got = paged_decode(**{**_case_args(case), **empty})
    assert got.shape == (0, 4, 64) and got.dtype == case.q.dtype
    out = torch.empty(0, 4, 64, dtype=case.q.dtype, device=DEVICE)
    assert paged_decode(**{**_case_args(case), **empty}, out=out) is out
    with pytest.raises(ValueError, match="out must be"):
        paged_decode(**{**_case_args(case), **empty}, out=out[..., :8])


def test_empty_batch_mla(make_case):
    case = make_case((5, 9), num_heads=4, num_kv_heads=1, head_dim=64, rope_dim=16)
    got = paged_decode_mla(
        case.q[:0],
        case.k_pool,
        case.block_table[:0],
        case.seq_lens[:0],
        qk_rope_head_dim=16,
        sm_scale=0.125,
    )
    assert got.shape == (0, 4, 64)


def test_allocator_pages_feed_the_kernel():
    """End to end: PagedKVCache.write + block_table against dense per-sequence attention."""
    from kvplan.kernels import PagedKVCache

    torch.manual_seed(0)
    cache = PagedKVCache(
        num_layers=1,
        num_blocks=12,
        tokens_per_block=16,
        num_kv_heads=2,
        head_dim=64,
        dtype=torch.float16,
        device=DEVICE,
        shuffle_seed=1,
    )
    cache.k_pools[0].fill_(float("nan"))
    cache.v_pools[0].fill_(float("nan"))
    lens = {7: 30, 3: 45}
    dense = {}
    for seq_id, length in lens.items():
        cache.allocate(seq_id, length - 5)
        cache.append(seq_id, 5)  # the last tokens arrive one decode step at a time
        k, v = torch.randn(length, 2, 64), torch.randn(length, 2, 64)
        cache.write(0, seq_id, 0, k, v)
        dense[seq_id] = (k.half().double(), v.half().double())
    q = torch.randn(2, 8, 64).half().to(DEVICE)
    got = paged_decode(
        q,
        cache.k_pools[0],
        cache.v_pools[0],
        cache.block_table(),
        cache.seq_lens(),
        num_splits=2,
    )
    for row, seq_id in enumerate(cache.seq_ids):
        k, v = dense[seq_id]
        k, v = k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)  # [L, Hq, D]
        scores = torch.einsum("hd,lhd->hl", q[row].cpu().double(), k) / 8.0  # 1/√64
        want = torch.einsum("hl,lhd->hd", scores.softmax(-1), v)
        assert _max_error(got[row].cpu().double(), want) <= ATOL[torch.float16]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_gpu_llama_geometry(make_case, kv_dtype):
    # Llama-3.1-8B attention (32 q / 8 KV heads, head_dim 128), long enough for many tiles.
    case = make_case(
        (1, 1000, 4096, 2500),
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        dtype=torch.bfloat16,
        kv_dtype=kv_dtype,
        spare_pages=16,
    )
    for num_splits in (1, 7, 16):
        got, want = _run(case, num_splits=num_splits)
        assert _max_error(got, want) <= ATOL[torch.bfloat16]
