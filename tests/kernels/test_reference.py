"""The reference itself against dense attention on contiguous K/V (no pages involved)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kvplan.kernels import paged_decode_reference


def _dense_attention(q, k, v, scale):
    """SDPA of one sequence: q [Hq, D], k/v [L, Hkv, D], float64, GQA by repetition."""
    group_size = q.shape[0] // k.shape[1]
    k = k.repeat_interleave(group_size, dim=1).transpose(0, 1)  # [Hq, L, D]
    v = v.repeat_interleave(group_size, dim=1).transpose(0, 1)  # [Hq, L, D]
    return F.scaled_dot_product_attention(q[:, None], k, v, scale=scale)[:, 0]  # [Hq, D]


def test_reference_matches_dense_sdpa_with_window_and_scales(make_case):
    case = make_case((1, 37, 80), num_heads=8, num_kv_heads=2, dtype=torch.float32)
    window, k_scale, v_scale = 50, 0.5, 2.0
    got = paged_decode_reference(
        case.q,
        case.k_pool,
        case.v_pool,
        case.block_table,
        case.seq_lens,
        window=window,
        k_scale=k_scale,
        v_scale=v_scale,
    ).cpu()
    for b, (k, v) in enumerate(zip(case.k_dense, case.v_dense, strict=True)):
        k, v = k[-window:].double() * k_scale, v[-window:].double() * v_scale
        want = _dense_attention(case.q[b].cpu().double(), k, v, scale=64**-0.5)
        torch.testing.assert_close(got[b], want, rtol=1e-12, atol=1e-12)


def test_reference_mla_uses_latent_prefix_as_v(make_case):
    case = make_case(
        (5, 33), num_heads=4, num_kv_heads=1, head_dim=32, rope_dim=8, dtype=torch.float32
    )
    got = paged_decode_reference(
        case.q, case.k_pool, None, case.block_table, case.seq_lens, rope_dim=8, sm_scale=0.1
    ).cpu()
    assert got.shape == (2, 4, 32)
    for b, latent in enumerate(case.k_dense):
        latent = latent.double()
        want = _dense_attention(case.q[b].cpu().double(), latent, latent[..., :32], scale=0.1)
        torch.testing.assert_close(got[b], want, rtol=1e-12, atol=1e-12)
