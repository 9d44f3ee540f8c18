"""The per-operation step model (kvplan.perf.step_model) against hand computations.

A "flat" constants file (every fraction 1, no shape penalty, no overhead) makes each term
the plain bytes ÷ bandwidth or FLOPs ÷ peak worked out in the comments; separate tests switch
single constants on and check the one term they drive.
"""

from __future__ import annotations

import pytest
from factories import make_model
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.catalog import Catalog
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.engine.settings import EngineSettings
from kvplan.perf.collectives import (
    all_reduce_bytes,
    all_reduce_s,
    all_to_all_bytes,
    pipeline_sends_s,
)
from kvplan.perf.constants import PerfConstants, shipped_constants
from kvplan.perf.flops import gemm_flops
from kvplan.perf.operations import gemm_s, saturating_fraction
from kvplan.perf.step_model import OPERATIONS, StepShape, step_model
from kvplan.specs import SkuSpec

EXACT = engine("exact")


def flat_constants(**changes: float) -> PerfConstants:
    """Shipped constant names, every fraction 1, halves and overheads 0, then `changes`."""
    values = {}
    for name in shipped_constants().values:
        base = name.split(".")[0]
        values[name] = 1.0 if base.endswith("_fraction") else 0.0
    values["eager_overhead_factor"] = 1.0
    values |= changes
    return PerfConstants(values, dict.fromkeys(values, "test"), {}, "flat")


def make_sku(**changes) -> SkuSpec:
    """1 TB/s, 1 PFLOP/s bf16, a 100 GB/s link with 10 µs collectives (round numbers)."""
    fields = dict(
        name="test-gpu",
        vendor="other",
        family="test",
        memory_bytes=2**30,
        memory_basis="test",
        memory_type="HBM",
        bandwidth_bytes_per_s=10**12,
        peak_flop_per_s={"bf16": 10**15},
        interconnect_bytes_per_s=10**11,
        interconnect_latency_s=1e-5,
        interconnect_latency_basis="test",
        source="test factory",
    )
    return SkuSpec(**(fields | changes))


# --- the pieces ---------------------------------------------------------------------


def test_gemm_flops_are_two_m_n_k():
    assert gemm_flops(3, 5, 7) == 2 * 3 * 5 * 7 == 210


def test_all_reduce_moves_two_n_minus_one_over_n_of_the_buffer():
    # Ring all-reduce: reduce-scatter + all-gather, each (n-1)/n of the buffer per rank.
    assert all_reduce_bytes(1000, 4) == pytest.approx(2 * 3 / 4 * 1000)
    assert all_reduce_bytes(1000, 1) == 0
    # 8 ranks, 1 MB at 100 GB/s + 10 µs: 1.75 MB / 1e11 = 17.5 µs, + 10 µs.
    assert all_reduce_s(1e6, 8, 1e11, 1e-5) == pytest.approx(1e-5 + 1.75e6 / 1e11)
    assert all_reduce_s(1e6, 1, 1e11, 1e-5) == 0.0
    assert all_to_all_bytes(800, 8) == pytest.approx(700)
    assert pipeline_sends_s(1e6, 3, 1e11, 1e-5) == pytest.approx(2 * (1e-5 + 1e-5))
    assert pipeline_sends_s(1e6, 1, 1e11, 1e-5) == 0.0


def test_small_m_gemm_efficiency_curve():
    # Half the large-M fraction at M = M_half; the peak fraction as M grows.
    assert saturating_fraction(0.8, 64, 64) == pytest.approx(0.4)
    assert saturating_fraction(0.8, 10**9, 64) == pytest.approx(0.8, rel=1e-6)
    assert saturating_fraction(0.8, 0, 64) == 0.0
    # A 4096 x 4096 bf16 GEMM at M = 64 on 1 TB/s / 1 PFLOP/s at 50 % of peak (M_half = M):
    # memory 4096² x 2 B / 1e12 = 33.55 µs; compute 2 x 64 x 4096² / (1e15 x 0.5) = 4.29 µs.
    seconds = gemm_s(4096**2 * 2, 2 * 64 * 4096**2, 64, 1e12, 1e15, 1.0, 64)
    assert seconds == pytest.approx(4096**2 * 2 / 1e12)
    # At M = 8192 compute binds: 2 x 8192 x 4096² / (1e15 x 8192/8256).
    big = gemm_s(4096**2 * 2, 2 * 8192 * 4096**2, 8192, 1e12, 1e15, 1.0, 64)
    assert big == pytest.approx(2 * 8192 * 4096**2 / (1e15 * 8192 / 8256))


# --- whole steps, by hand -----------------------------------------------------------

# make_model(): hidden 512, 4 full layers, 8 heads / 2 KV heads of 64, gated FFN 1024, vocab
# 1000, untied, bf16. Per layer: q 512x512 + k, v 2 x 512x128 = 393_216 (qkv), o 262_144,
# FFN 3 x 512 x 1024 = 1_572_864: 2_228_224 params = 4_456_448 B; 4 layers 17_825_792 B.
# lm_head 1000 x 512 x 2 B = 1_024_000 B. KV per token: 4 x 2 x 2 x 64 x 2 B = 2_048 B.
# Elementwise per token per layer (16-bit): norms 2 x 2 x 512, residual adds 2 x 3 x 512,
# rotary 2 x (8 + 2) x 64, activation 3 x 1024 -> 9_472 elements = 18_944 B; KV write
# 2_048 / 4 = 512 B per layer.
TINY_LAYER_WEIGHT_BYTES = 17_825_792
TINY_LM_HEAD_BYTES = 1_024_000


def test_tiny_decode_step_by_hand():
    # 2 sequences of 100 tokens on the flat model:
    #   weights 17_825_792 + lm_head 1_024_000 (compute: 2 tokens, far under the line)
    #   KV 2 x 100 x 2_048 = 409_600
    #   elementwise 2 tokens x 4 layers x (18_944 + 512) = 155_648
    #   sampling 2 x 1000 logits x 4 B x 3 passes = 24_000
    # all at 1 TB/s: 19_439_040 B -> 19.43904 µs.
    model = step_model(Deployment(make_model(), EXACT), make_sku(), flat_constants())
    shape = StepShape(2, 409_600.0)
    parts = model.parts(shape)
    assert parts["qkv_proj"] == pytest.approx(4 * 393_216 * 2 / 1e12)
    assert parts["out_proj"] == pytest.approx(4 * 262_144 * 2 / 1e12)
    assert parts["mlp"] == pytest.approx(4 * 1_572_864 * 2 / 1e12)
    assert parts["logits"] == pytest.approx(TINY_LM_HEAD_BYTES / 1e12)
    assert parts["attention_decode"] == pytest.approx(409_600 / 1e12)
    assert parts["elementwise"] == pytest.approx(155_648 / 1e12)
    assert parts["sampling"] == pytest.approx(24_000 / 1e12)
    assert parts["tp_all_reduce"] == parts["engine_overhead"] == 0.0
    assert model.step_s(shape) == pytest.approx(19_439_040 / 1e12)
    assert list(parts) == list(OPERATIONS)


def test_tp_pays_two_all_reduces_per_layer():
    # tp 2, 2 tokens: each all-reduce is 2 x 512 x 2 B = 2_048 B, of which 2 (2-1)/2 = 1 x
    # moves: 2_048 / 1e11 = 20.48 ns + 10 µs latency; 4 layers x 2 = 8 of them.
    model = step_model(Deployment(make_model(), EXACT, tp=2), make_sku(), flat_constants())
    parts = model.parts(StepShape(2, 0.0))
    assert parts["tp_all_reduce"] == pytest.approx(8 * (1e-5 + 2_048 / 1e11))
    # Each GPU reads half of every matrix.
    assert parts["mlp"] == pytest.approx(4 * 1_572_864 * 2 / 2 / 1e12)


def test_engine_overhead_is_per_step_per_sequence_and_per_kernel():
    constants = flat_constants(
        **{
            "engine_step_overhead_s.other": 1e-3,
            "engine_sequence_overhead_s.other": 1e-5,
            "kernel_overhead_s": 1e-6,
        }
    )
    model = step_model(Deployment(make_model(), EXACT), make_sku(), constants)
    # A layer of softmax attention and a gated MLP launches norm, QKV, rotary, KV write,
    # attention, output projection, norm, gate-up, activation, down: 10 kernels; 4 layers.
    # 1 ms + 3 sequences x 10 µs + 40 kernels x 1 µs = 1.07 ms.
    assert model.parts(StepShape(3, 0.0))["engine_overhead"] == pytest.approx(1.07e-3)
    eager = step_model(
        Deployment(make_model(), EXACT),
        make_sku(),
        flat_constants(kernel_overhead_s=1e-6, eager_overhead_factor=3.0),
        cuda_graphs=False,
    )
    assert eager.parts(StepShape(3, 0.0))["engine_overhead"] == pytest.approx(40 * 3e-6)


def test_an_mla_moe_layer_launches_more_kernels_than_a_dense_one():
    # DeepSeek-V3's config: q_lora_rank 1536, one shared expert, first_k_dense_replace 3 of
    # 61 layers. MLA 12 kernels; dense FFN 4; routed MoE 8 + one shared expert 3.
    model = step_model(
        Deployment(Catalog().model("deepseek-v3"), EXACT, weight_dtype="bf16"),
        make_sku(),
        flat_constants(kernel_overhead_s=1e-6),
    )
    expected = 3 * (12 + 4) + 58 * (12 + 8 + 3)
    assert model.parts(StepShape(1, 0.0))["engine_overhead"] == pytest.approx(expected * 1e-6)


def test_trtllm_before_xqa_reads_a_gqa_groups_kv_once_per_query_head():
    # Llama-2-70b: 64 query heads, 8 KV heads (its config.json): 8 query heads a KV head, at
    # any TP up to 8. Before 0.8 (no XQA kernel) each reads the KV head itself.
    llama = Catalog().model("llama-2-70b")
    trt = engine("trtllm")
    for version, reads in (("0.6.1", 8), ("0.8.0", 1), ("1.0.0", 1)):
        deployment = Deployment(llama, trt, tp=4, settings=EngineSettings(version=version))
        assert trt.decode_kv_reads(deployment) == reads
    old = step_model(
        Deployment(llama, trt, tp=4, weight_dtype="bf16", settings=EngineSettings(version="0.6.1")),
        make_sku(),
        flat_constants(),
    )
    new = step_model(
        Deployment(llama, trt, tp=4, weight_dtype="bf16", settings=EngineSettings(version="0.8.0")),
        make_sku(),
        flat_constants(),
    )
    kv = 1e9
    assert old.decode_attention_s(8, kv) == pytest.approx(8 * new.decode_attention_s(8, kv))


def test_short_contexts_pay_a_fixed_attention_cost_per_sequence():
    # 256 tokens' worth of KV per sequence: 2 sequences x 256 x 2_048 B more read time.
    constants = flat_constants(attention_decode_fixed_tokens=256.0)
    model = step_model(Deployment(make_model(), EXACT), make_sku(), constants)
    parts = model.parts(StepShape(2, 409_600.0))
    assert parts["attention_decode"] == pytest.approx((409_600 + 2 * 256 * 2_048) / 1e12)


def test_prefill_chunk_attention_flops_at_the_chunk_fraction():
    # A 64-token prompt: attention 4 layers x 2 x (2 x 8 x 64) x Σ_{i=1..64} i (= 2_080)
    # = 17_039_360 FLOPs; at 50 % of 1 PFLOP/s (chunk = M_half = 64): 34.08 µs.
    constants = flat_constants(attention_prefill_half_efficiency_tokens=64.0)
    model = step_model(Deployment(make_model(), EXACT), make_sku(), constants)
    parts = model.parts(StepShape(0, 0.0, ((0, 64),)))
    assert parts["attention_prefill"] == pytest.approx(17_039_360 / 0.5e15)


def test_moe_reads_the_touched_experts_and_computes_the_routed_flops():
    # E 4, k 2, expert width 256: one expert 3 x 512 x 256 = 393_216 params (786_432 B).
    # 1 token touches 2 experts: 4 layers x 2 x 786_432 B = 6_291_456 B at 1 TB/s.
    model_spec = make_model(
        moe={"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 256}
    )
    model = step_model(Deployment(model_spec, EXACT), make_sku(), flat_constants())
    assert model.parts(StepShape(1, 0.0))["routed_experts"] == pytest.approx(6_291_456 / 1e12)
    # 100_000 tokens touch all 4; FLOPs 2 x 100_000 x 2 x 393_216 per layer = 1.57e11, x 4
    # layers at 1 PFLOP/s = 629 µs, far above the 12.6 µs of weights.
    many = model.parts(StepShape(0, 0.0, ((0, 100_000),)))["routed_experts"]
    assert many == pytest.approx(4 * 2 * 100_000 * 2 * 393_216 / 1e15)


# --- properties the event loop relies on ---------------------------------------------


def test_decode_line_is_exact():
    model = step_model(Deployment(make_model(), engine("vllm")), make_sku(), shipped_constants())
    a, b = model.decode_line(7)
    for kv in (0.0, 1e6, 3.3e8):
        assert model.step_s(StepShape(7, kv)) == pytest.approx(a + b * kv, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 512),
    st.integers(0, 10**9),
    st.integers(0, 8192),
    st.integers(0, 4096),
)
def test_step_time_never_falls_as_a_step_grows(seqs, kv_bytes, chunk, done):
    model = step_model(Deployment(make_model(), engine("vllm")), make_sku(), shipped_constants())
    base = model.step_s(StepShape(seqs, float(kv_bytes)))
    assert model.step_s(StepShape(seqs + 1, float(kv_bytes))) >= base
    assert model.step_s(StepShape(seqs, float(kv_bytes) + 4096)) >= base
    if chunk:
        chunks = ((done, chunk),)
        mixed = model.step_s(StepShape(seqs, float(kv_bytes), chunks))
        assert mixed >= base
        longer = model.step_s(StepShape(seqs, float(kv_bytes), ((done, chunk + 1),)))
        assert longer >= mixed


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2048))
def test_tokens_per_s_never_falls_with_batch_at_no_kv(batch):
    # More sequences share the weight reads: throughput per step grows (until compute binds,
    # where it stays flat); a sequence more never makes the batch slower per token.
    model = step_model(Deployment(make_model(), engine("vllm")), make_sku(), shipped_constants())
    one = batch / model.step_s(StepShape(batch, 0.0))
    two = (batch + 1) / model.step_s(StepShape(batch + 1, 0.0))
    assert two >= one * (1 - 1e-9)


MOE = {"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 256}


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([(1, 1, 1, False), (2, 1, 1, False), (1, 2, 1, False), (1, 1, 4, True)]),
    st.booleans(),
    st.integers(0, 300),
    st.integers(0, 10**8),
    st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 3000)), max_size=3),
)
def test_step_time_is_the_sum_of_its_parts(layout, moe, seqs, kv_bytes, chunks):
    # step_s sums stage totals; parts sums operation by operation: the same arithmetic.
    tp, pp, dp, ep = layout
    spec = make_model(moe=MOE) if moe or ep else make_model()
    deployment = Deployment(spec, engine("vllm"), tp=tp, pp=pp, dp=dp, ep=ep)
    model = step_model(deployment, make_sku(), shipped_constants())
    shape = StepShape(seqs, float(kv_bytes), tuple(chunks), 1000.0 * len(chunks))
    if shape.tokens == 0:
        return
    assert model.step_s(shape) == pytest.approx(sum(model.parts(shape).values()), rel=1e-9)


def test_every_weight_dtype_has_a_compute_dtype():
    """A checkpoint of any weight type kvplan accepts is timed (AWQ/GPTQ int4 run in fp16)."""
    from typing import get_args

    from kvplan.perf.rates import COMPUTE_DTYPES
    from kvplan.specs.dtypes import WeightDtypeName

    assert set(get_args(WeightDtypeName)) <= set(COMPUTE_DTYPES)
