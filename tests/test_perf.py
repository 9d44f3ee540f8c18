"""Roofline arithmetic (kvplan.perf). Expected values are worked out by hand in comments."""

from __future__ import annotations

import math

import pytest
from factories import make_model
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engine import EngineSettings, engine
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.kvmath import ChunkedCache, FullCache, SlidingCache, StateCache
from kvplan.perf.efficiency import Efficiency
from kvplan.perf.estimates import (
    DecodeEstimate,
    _stage_weight_bytes_read,
    batched_step,
    decode_step,
    prefill,
)
from kvplan.perf.flops import (
    attended_tokens_sum,
    causal_attention_flops,
    expected_experts_touched,
    matmul_params_per_token,
)
from kvplan.plan.sizing import size
from kvplan.specs import SkuSpec

EXACT = engine("exact")
NO_LOSS = Efficiency(bandwidth_fraction=1.0, compute_fraction=1.0)
H100_BANDWIDTH_BYTES_PER_S = 3_350_000_000_000  # sku_profiles/h100-sxm.yaml, 3.35 TB/s
H100_BF16_FLOP_PER_S = 989_400_000_000_000  # sku_profiles/h100-sxm.yaml, dense

# make_model() defaults: hidden 512, 4 full layers, 8 heads / 2 KV heads of 64, vocab 1000,
# gated FFN 1024, untied, RMSNorm. Parameters by hand:
#   attention per layer: q 512x512 + k,v 2 x 512x128 + o 512x512 = 655_360
#   FFN per layer: 3 x 512 x 1024 = 1_572_864; norms per layer: 2 x 512 = 1_024
#   4 layers: 4 x 2_229_248 = 8_916_992; final norm 512; embedding = lm_head = 1000 x 512 = 512_000
TINY_MATMUL_PARAMS = 8_916_992 + 512 + 512_000  # embedding excluded, lm_head included


# --- efficiency -------------------------------------------------------------------


def test_default_efficiencies_are_the_fitted_constants():
    # None: the step model's per-operation fractions (kvplan/perf/constants.yaml) apply.
    assert Efficiency() == Efficiency(bandwidth_fraction=None, compute_fraction=None)


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"bandwidth_fraction": 0.0}, "--bandwidth-efficiency: 0.0"),
        ({"bandwidth_fraction": 1.2}, "--bandwidth-efficiency: 1.2"),
        ({"bandwidth_fraction": math.nan}, "--bandwidth-efficiency: nan"),
        ({"compute_fraction": -0.5}, "--compute-efficiency: -0.5"),
        ({"compute_fraction": 85.0}, "--compute-efficiency: 85.0"),  # a percentage by mistake
    ],
)
def test_efficiency_out_of_range(kwargs, shown):
    with pytest.raises(KvplanError) as error:
        Efficiency(**kwargs)
    assert str(error.value) == f"{shown} must be in (0, 1]; a fraction, 0.5 = 50 %"


def test_efficiency_of_one_is_allowed():
    assert Efficiency(1.0, 1.0).bandwidth_fraction == 1.0


# --- MoE routing --------------------------------------------------------------------


def test_experts_touched_at_batch_one_is_top_k():
    # E (1 - (1 - k/E)^1) = k.
    assert expected_experts_touched(256, 8, 1) == pytest.approx(8, rel=1e-12)
    assert expected_experts_touched(60, 4, 1) == pytest.approx(4, rel=1e-12)


def test_experts_touched_at_batch_two():
    # DeepSeek-V3 routing, E 256, k 8: 256 x (1 - (31/32)^2) = 256 x 63/1024 = 15.75.
    assert expected_experts_touched(256, 8, 2) == pytest.approx(15.75, rel=1e-12)


def test_experts_touched_tends_to_all_experts():
    # (31/32)^4096 ≈ e^-130: every expert is read.
    assert expected_experts_touched(256, 8, 4096) == pytest.approx(256, rel=1e-12)
    assert expected_experts_touched(8, 8, 3) == 8  # top-k = E reads all at any batch


@given(st.integers(1, 512), st.integers(1, 64), st.integers(1, 10_000))
def test_experts_touched_bounded_and_growing(num_experts, k, batch):
    k = min(k, num_experts)
    touched = expected_experts_touched(num_experts, k, batch)
    assert k - 1e-9 <= touched <= num_experts + 1e-9
    assert expected_experts_touched(num_experts, k, batch + 1) >= touched - 1e-9


# --- decode ---------------------------------------------------------------------------


def test_llama_3_1_8b_decode_batch_one_context_one(catalog):
    # 8_030_261_248 params (published; kvmath agrees) x 2 B = 16_060_522_496 B of weights;
    # KV: 2 x 32 layers x 8 heads x 128 x 2 B = 131_072 B for the one token.
    # step = (16_060_522_496 + 131_072) / 3.35e12 = 16_060_653_568 / 3.35e12 ≈ 4.794 ms.
    sku = catalog.sku("h100-sxm")
    deployment = Deployment(catalog.model("llama-3.1-8b"), EXACT)
    estimate = decode_step(deployment, Batch.of([1]), sku, NO_LOSS)
    assert estimate.weight_bytes_read_per_gpu == 16_060_522_496
    assert estimate.kv_bytes_read_per_gpu == 131_072
    assert estimate.bytes_read_per_step == 16_060_653_568
    # The bytes at full datasheet bandwidth are a floor (the embedding table, which a lookup
    # does not read, aside: 525_336_576 B); overheads and launch gaps come on top.
    floor_s = (16_060_653_568 - 525_336_576) / H100_BANDWIDTH_BYTES_PER_S
    assert floor_s < estimate.step_s < 1.5 * floor_s
    assert estimate.tokens_per_s == pytest.approx(1 / estimate.step_s, rel=1e-12)
    assert estimate.kv_bytes_per_token == estimate.kv_bytes_per_token_per_gpu == 131_072
    assert estimate.experts_touched_per_layer is None
    # Below full bandwidth the same bytes take longer.
    default = decode_step(deployment, Batch.of([1]), sku)
    assert default.step_s > estimate.step_s
    assert (default.context_tokens, default.batch) == (1, 1)


def test_llama_3_1_8b_decode_batch_32_at_8k(catalog):
    # KV: 32 sequences x 8192 tokens x 131_072 B = 34_359_738_368 B (32 GiB).
    # bytes = 16_060_522_496 + 34_359_738_368 = 50_420_260_864; with 85 % of 3.35 TB/s:
    # step = 50_420_260_864 / 2.8475e12 ≈ 17.71 ms, so 32 / step ≈ 1807 tokens/s.
    sku = catalog.sku("h100-sxm")
    deployment = Deployment(catalog.model("llama-3.1-8b"), EXACT)
    estimate = decode_step(deployment, Batch.uniform(8192, 32), sku)
    assert estimate.kv_bytes_read_per_gpu == 34_359_738_368
    assert estimate.bytes_read_per_step == 50_420_260_864
    assert estimate.step_s > (50_420_260_864 - 525_336_576) / H100_BANDWIDTH_BYTES_PER_S
    assert estimate.tokens_per_s == pytest.approx(32 / estimate.step_s, rel=1e-12)
    assert estimate.context_tokens == 8192


def test_tp_splits_weights_and_kv_heads(catalog):
    # tp 8: 8 KV heads -> 1 per GPU: 2 x 32 x 1 x 128 x 2 = 16_384 B per token per GPU.
    # Weights per GPU are weights.py's figure (matrices and vocabulary / 8, norms replicated).
    model = catalog.model("llama-3.1-8b")
    deployment = Deployment(model, EXACT, tp=8)
    estimate = decode_step(deployment, Batch.of([1000]), catalog.sku("h100-sxm"), NO_LOSS)
    assert estimate.kv_bytes_per_token_per_gpu == 16_384
    assert estimate.kv_bytes_per_token == 131_072
    assert estimate.kv_bytes_read_per_gpu == 16_384_000
    assert estimate.weight_bytes_read_per_gpu == deployment.weights().per_gpu_bytes


def test_pipeline_stages_add_up_rather_than_overlap(catalog):
    # Llama-3.1-8B is untied: with pp 2 stage 0 holds the embedding and layers 0-15, stage 1
    # layers 16-31, the final norm and lm_head. One token passes both stages in turn, so
    # the bytes on the critical path are the whole model's: the step time of pp 1 plus one
    # stage-to-stage send (4 x 4096 x 2 B over NVLink, ~6 µs) and no more.
    model, sku = catalog.model("llama-3.1-8b"), catalog.sku("h100-sxm")
    one = decode_step(Deployment(model, EXACT), Batch.of([4096] * 4), sku)
    two = decode_step(Deployment(model, EXACT, pp=2), Batch.of([4096] * 4), sku)
    assert two.bytes_read_per_step == one.bytes_read_per_step
    assert one.step_s < two.step_s < one.step_s + 1e-4
    assert two.weight_bytes_read_per_gpu < one.weight_bytes_read_per_gpu
    assert one.notes == ()
    assert two.notes == ("pp 2: stage times add up (no micro-batch overlap)",)


def test_tiny_moe_reads_touched_experts():
    # Every layer MoE: E 4, k 2, expert width 256 (bf16, 2 B per param).
    #   one expert 3 x 512 x 256 = 393_216 params; 4 experts = 1_572_864 per layer
    #   non-expert per layer: attention 655_360 + router 512 x 4 = 2_048 + norms 1_024
    #       = 658_432 params = 1_316_864 B; 4 layers = 5_267_456 B
    #   embedding + lm_head 2 x 512_000 x 2 B = 2_048_000 B; final norm 1_024 B
    # b = 1: 2 experts x 393_216 x 2 B x 4 layers = 6_291_456 -> 13_607_936 B
    # b = 2: 4 (1 - (1/2)^2) = 3 experts -> 9_437_184 -> 16_753_664 B
    # b large: all 4 experts -> 12_582_912 -> 19_899_392 B (= every weight)
    model = make_model(
        moe={"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 256}
    )
    deployment = Deployment(model, EXACT)
    sku = make_sku()
    reads = [
        decode_step(deployment, Batch.uniform(1, b), sku).weight_bytes_read_per_gpu
        for b in (1, 2, 100)
    ]
    assert reads == [13_607_936, 16_753_664, 19_899_392]
    assert reads[0] == deployment.weights().active_bytes
    assert reads[2] == deployment.weights().per_gpu_bytes


def test_deepseek_v3_batch_one_reads_active_weights(catalog):
    # At b = 1 exactly top-8 of 256 experts per MoE layer: weights.py's active bytes.
    # The MLA latent is whole on every TP rank: 70_272 B per token per GPU, x 8 for the replica.
    model = catalog.model("deepseek-v3")
    sku = catalog.sku("h200")
    single = decode_step(Deployment(model, EXACT), Batch.of([1]), sku)
    assert single.weight_bytes_read_per_gpu == Deployment(model, EXACT).weights().active_bytes
    assert single.experts_touched_per_layer == pytest.approx(8, rel=1e-12)
    sharded = decode_step(Deployment(model, EXACT, tp=8), Batch.of([1]), sku)
    assert sharded.kv_bytes_per_token_per_gpu == 70_272
    assert sharded.kv_bytes_per_token == 8 * 70_272
    pair = decode_step(Deployment(model, EXACT), Batch.of([1, 1]), sku)
    assert pair.notes == (
        "MoE: 15.75 of 256 routed experts read per layer at batch 2 (uniform routing)",
    )


@pytest.mark.parametrize(("tp", "pp"), [(1, 1), (8, 1), (2, 2), (1, 4)])
def test_weight_reads_match_weights_py_for_every_catalogue_model(catalog, tp, pp):
    # perf mirrors weights.weight_bytes stage by stage; this pins the two together. At a batch
    # of 100_000 every expert is touched ((1 - k/E)^b underflows), so reads = all weights.
    # (The stage helper is called directly: a 100_000-sequence KV sum per model is slow.)
    for model in catalog.models():
        if pp > model.num_layers or model.attention.num_heads % tp:
            continue
        deployment = Deployment(model, EXACT, tp=tp, pp=pp)
        reads = _stage_weight_bytes_read(deployment, 100_000)
        assert max(reads) == deployment.weights().per_gpu_bytes, model.name


def test_weight_reads_follow_exact_checkpoint_bytes(catalog):
    # An HF import's safetensors total rescales per-GPU figures the way weights.py does.
    model = catalog.model("llama-3.1-8b")
    deployment = Deployment(model, EXACT, tp=2, exact_weights_bytes=16_000_000_000)
    estimate = decode_step(deployment, Batch.of([1]), catalog.sku("h100-sxm"))
    assert estimate.weight_bytes_read_per_gpu == deployment.weights().per_gpu_bytes


@pytest.mark.parametrize(
    ("name", "tp", "pp", "context"),
    [
        ("mistral-7b-v0.1", 1, 1, 32_768),  # window 4096 honoured
        ("gemma-2-9b", 2, 1, 8192),  # alternating local / global
        ("llama-3.1-8b", 2, 2, 1000),
        ("deepseek-v3", 8, 1, 4096),  # MLA latent
        ("jamba-1.5-mini", 1, 2, 4096),  # state layers
    ],
)
def test_kv_read_is_what_the_exact_engine_holds(catalog, name, tp, pp, context):
    deployment = Deployment(catalog.model(name), EXACT, tp=tp, pp=pp)
    lengths = [context, context // 2, 1]
    estimate = decode_step(deployment, Batch.of(lengths), catalog.sku("h100-sxm"))
    assert estimate.kv_bytes_read_per_gpu == size(deployment, Batch.of(lengths)).kv_bytes_per_gpu


def test_kv_read_ignores_block_padding_and_full_reservation(catalog):
    # vLLM rounds each sequence up to 16-token blocks; the kernel masks the tail, so reads
    # are exact tokens. At 1000 tokens vLLM holds 63 blocks = 1008 tokens per layer.
    model = catalog.model("mistral-7b-v0.1")
    sku = catalog.sku("h100-sxm")
    exact = decode_step(Deployment(model, EXACT), Batch.of([1000, 40_000]), sku)
    vllm = Deployment(model, engine("vllm"))
    paged = decode_step(vllm, Batch.of([1000, 40_000]), sku)
    batch = Batch.of([1000, 40_000])
    assert paged.kv_bytes_read_per_gpu == exact.kv_bytes_read_per_gpu
    assert paged.kv_bytes_read_per_gpu < size(vllm, batch).kv_bytes_per_gpu
    reserved = Deployment(model, EXACT, settings=EngineSettings(hybrid_allocator=False))
    assert exact.kv_bytes_read_per_gpu < size(reserved, batch).kv_bytes_per_gpu


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(["llama-3.1-8b", "gemma-2-9b", "deepseek-v3", "gpt-oss-20b"]),
    batch=st.integers(1, 256),
    context=st.integers(1, 65_536),
)
def test_tokens_per_s_grows_with_batch_while_step_time_grows(catalog, name, batch, context):
    # T(b) = weights(b) + b·kv with weights(b) concave (touched experts) and positive at 0,
    # so T grows with b but T/b shrinks: more tokens per second, each step slower.
    deployment = Deployment(catalog.model(name), EXACT)
    sku = catalog.sku("h100-sxm")
    smaller = decode_step(deployment, Batch.of([context] * batch), sku)
    larger = decode_step(deployment, Batch.of([context] * (batch + 1)), sku)
    assert larger.step_s > smaller.step_s
    assert larger.tokens_per_s > smaller.tokens_per_s


def test_decode_rejects_empty_batch_and_empty_sequence(catalog):
    deployment = Deployment(catalog.model("llama-3.1-8b"), EXACT)
    sku = catalog.sku("h100-sxm")
    with pytest.raises(KvplanError, match=r"^--batch: at least one sequence is needed$"):
        decode_step(deployment, Batch.of([]), sku)
    with pytest.raises(KvplanError, match=r"^--context: 0 must be at least 1 token$"):
        decode_step(deployment, Batch.of([5, 0]), sku)


def test_decode_estimate_is_frozen(catalog):
    deployment = Deployment(catalog.model("llama-3.1-8b"), EXACT)
    estimate = decode_step(deployment, Batch.of([1]), catalog.sku("h100-sxm"))
    assert isinstance(estimate, DecodeEstimate)
    with pytest.raises(AttributeError):
        estimate.step_s = 0.0  # type: ignore[misc]


# --- prefill: attention sums ----------------------------------------------------------


def brute_force_sum(cache, length: int) -> int:
    return sum(cache.tokens_kept(i) for i in range(1, length + 1))


@given(length=st.integers(0, 400), window=st.integers(1, 80))
def test_sliding_sum_closed_form_matches_loop(length, window):
    cache = SlidingCache(1, window_tokens=window)
    assert attended_tokens_sum(cache, length) == brute_force_sum(cache, length)


@given(length=st.integers(0, 400), chunk=st.integers(1, 80))
def test_chunked_sum_closed_form_matches_loop(length, chunk):
    cache = ChunkedCache(1, chunk_tokens=chunk)
    assert attended_tokens_sum(cache, length) == brute_force_sum(cache, length)


@given(length=st.integers(0, 400))
def test_full_sum_closed_form_matches_loop(length):
    assert attended_tokens_sum(FullCache(1), length) == brute_force_sum(FullCache(1), length)


def test_attended_sums_by_hand():
    # full L = 4: 1 + 2 + 3 + 4 = 10. sliding W = 2: 1 + 2 + 2 + 2 = 7.
    # chunked C = 3, L = 5: 1 + 2 + 3 | 1 + 2 = 9 = one chunk 6 + remainder 3.
    assert attended_tokens_sum(FullCache(1), 4) == 10
    assert attended_tokens_sum(SlidingCache(1, window_tokens=2), 4) == 7
    assert attended_tokens_sum(ChunkedCache(1, chunk_tokens=3), 5) == 9
    assert attended_tokens_sum(StateCache(100), 5) == 0
    # 1M tokens in closed form: 10^6 x (10^6 + 1) / 2.
    assert attended_tokens_sum(FullCache(1), 1_000_000) == 500_000_500_000


def test_tiny_causal_attention_flops():
    # 8 heads x 64, 4 full layers, L = 4: QKᵀ and PV each 2 x 8 x 64 x Σi, Σi = 10
    # -> 2 x 2 x 8 x 64 x 10 = 20_480 per layer, 81_920 for 4 layers.
    assert causal_attention_flops(make_model(), 4) == 81_920
    # [sliding, full] with window 2: sliding layers Σ = 7 -> 2 x 2 x 8 x 64 x 7 = 14_336.
    # 2 x 14_336 + 2 x 20_480 = 69_632.
    windowed = make_model(layers={"pattern": ["sliding", "full"], "sliding_window": 2})
    assert causal_attention_flops(windowed, 4) == 69_632


def test_tiny_mla_attention_flops():
    # MLA prefill per head: QKᵀ over qk_nope 32 + qk_rope 16, PV over v_head_dim 32.
    # 2 x 8 heads x (48 + 32) x Σi(=10) = 12_800 per layer, 51_200 for 4 layers.
    model = make_model(
        mla={"kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32},
        layers={"pattern": ["mla"]},
    )
    assert causal_attention_flops(model, 4) == 51_200


def test_state_layers_have_no_attention_flops(catalog):
    # Jamba-1.5-Mini: 4 attention layers of 32 heads x 128, 28 Mamba layers.
    # L = 1000: 4 x 2 x 2 x 32 x 128 x 500_500 = 32_800_768_000.
    assert causal_attention_flops(catalog.model("jamba-1.5-mini"), 1000) == 32_800_768_000


# --- prefill: whole estimate ----------------------------------------------------------


def test_tiny_prefill_by_hand(catalog):
    # matmul params 9_429_504 (see TINY_MATMUL_PARAMS); L = 4:
    # 2 x 9_429_504 x 4 = 75_436_032, + attention 81_920 = 75_517_952 FLOPs.
    # H100 SXM bf16 dense 989.4 TFLOP/s: 75_517_952 / 9.894e14 s is a floor.
    model = make_model()
    assert matmul_params_per_token(model) == TINY_MATMUL_PARAMS == 9_429_504
    estimate = prefill(Deployment(model, EXACT), 4, catalog.sku("h100-sxm"))
    assert (estimate.matmul_flops, estimate.attention_flops) == (75_436_032, 81_920)
    assert estimate.flops == 75_517_952
    assert estimate.dtype == "bf16"
    assert estimate.prompt_tokens == 4
    assert estimate.time_s > 75_517_952 / H100_BF16_FLOP_PER_S


def test_tied_lm_head_still_multiplies():
    # Tying removes lm_head's storage, not its matmul: same FLOPs per token.
    assert matmul_params_per_token(make_model(tie_word_embeddings=True)) == TINY_MATMUL_PARAMS


def test_moe_prefill_counts_active_experts_only():
    # E 4, k 2, width 256: per layer 2 active experts x 393_216 = 786_432 replaces the
    # dense FFN's 1_572_864, and the router adds 2_048: per layer 655_360 + 786_432
    # + 2_048 + 1_024 = 1_444_864; x 4 = 5_779_456; + 512 + 512_000 = 6_291_968.
    model = make_model(
        moe={"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 256}
    )
    assert matmul_params_per_token(model) == 6_291_968


def test_llama_3_1_8b_prefill_8k(catalog):
    # matmul params: 8_030_261_248 - embedding 128_256 x 4096 = 525_336_576 -> 7_504_924_672
    # (lm_head untied, already included). x 2 x 8192 = 122_960_685_826_048.
    # attention: 32 layers x 2 x 2 x 32 heads x 128 x (8192 x 8193 / 2 = 33_558_528)
    #          = 524_288 x 33_558_528 = 17_594_333_528_064.
    deployment = Deployment(catalog.model("llama-3.1-8b"), EXACT)
    estimate = prefill(deployment, 8192, catalog.sku("h100-sxm"))
    assert estimate.matmul_flops == 122_960_685_826_048
    assert estimate.attention_flops == 17_594_333_528_064
    # 140_555_019_354_112 FLOPs at the dense peak is 142 ms: a floor; public H100 runs of an
    # 8k prompt on Llama-3.1-8B take ~0.2-0.3 s, so the model may not exceed 3x the floor.
    floor_s = 140_555_019_354_112 / H100_BF16_FLOP_PER_S
    assert floor_s < estimate.time_s < 3 * floor_s


def test_prefill_tp_divides_and_pp_does_not(catalog):
    model, sku = catalog.model("llama-3.1-8b"), catalog.sku("h100-sxm")
    one = prefill(Deployment(model, EXACT), 2048, sku)
    four_way = prefill(Deployment(model, EXACT, tp=4), 2048, sku)
    # TP 4 divides every matmul by 4 and adds two all-reduces a layer (2048 x 4096 x 2 B each,
    # 1.5 x of it over NVLink): faster than one GPU, slower than a quarter of it.
    assert one.time_s / 4 < four_way.time_s < one.time_s
    two_stages = prefill(Deployment(model, EXACT, pp=2), 2048, sku)
    # Stages run in turn for one prompt: pp does not divide; one send of 2048 x 4096 x 2 B.
    assert one.time_s < two_stages.time_s < one.time_s * 1.02


@pytest.mark.parametrize(
    ("weight_dtype", "sku_name", "expected"),
    [
        ("bf16", "h100-sxm", "bf16"),
        ("fp16", "v100-32gb", "fp16"),
        ("fp8", "h100-sxm", "fp8"),
        ("fp8_block", "h200", "fp8"),
        ("int8", "a100-80gb", "int8"),
        ("int4", "b200", "bf16"),  # GPTQ/AWQ are weight-only: bf16 MMAs
        ("nvfp4", "b200", "fp4"),
        ("nvfp4", "h100-sxm", "fp8"),
        ("mxfp4", "a100-80gb", "bf16"),
        ("fp32", "h100-sxm", "fp32"),
    ],
)
def test_compute_dtype_follows_weight_dtype(catalog, weight_dtype, sku_name, expected):
    deployment = Deployment(catalog.model("llama-3.1-8b"), EXACT, weight_dtype=weight_dtype)
    estimate = prefill(deployment, 16, catalog.sku(sku_name))
    assert estimate.dtype == expected
    # A derived peak that differs from the weight dtype is said so.
    shown = () if expected == weight_dtype else (f"{weight_dtype} weights: {expected} peak",)
    assert estimate.notes == shown


def test_model_dtype_is_the_default(catalog):
    # DeepSeek-V3 ships block-FP8 weights: fp8 tensor cores.
    deployment = Deployment(catalog.model("deepseek-v3"), EXACT)
    assert prefill(deployment, 16, catalog.sku("h200")).dtype == "fp8"
    assert prefill(deployment, 16, catalog.sku("h200"), dtype="bf16").dtype == "bf16"


def test_sku_without_the_dtype(catalog):
    llama = catalog.model("llama-3.1-8b")
    with pytest.raises(KvplanError) as error:
        prefill(Deployment(llama, EXACT), 16, catalog.sku("t4"))
    assert str(error.value) == (
        "compute dtype: SKU 't4' lists no peak FLOP/s for 'bf16' (it has: fp16, fp32, int8)"
    )
    with pytest.raises(KvplanError, match=r"for 'fp8' \(it has: bf16, fp16"):
        prefill(Deployment(llama, EXACT), 16, catalog.sku("a100-80gb"), dtype="fp8")
    nvfp4 = Deployment(llama, EXACT, weight_dtype="nvfp4")
    with pytest.raises(KvplanError, match="for 'fp4' or 'fp8' or 'bf16'"):
        prefill(nvfp4, 16, catalog.sku("t4"))


def test_prefill_rejects_empty_prompt(catalog):
    with pytest.raises(KvplanError, match=r"^--context: 0 must be at least 1 token$"):
        prefill(Deployment(make_model(), EXACT), 0, catalog.sku("h100-sxm"))


def make_sku():
    """A 1 TB/s, 1 PFLOP/s bf16 SKU for tiny models (round numbers)."""
    return SkuSpec(
        name="test-gpu",
        vendor="other",
        family="test",
        memory_bytes=2**30,
        memory_basis="test",
        memory_type="HBM",
        bandwidth_bytes_per_s=10**12,
        peak_flop_per_s={"bf16": 10**15},
        source="test factory",
    )


# --- one scheduler step: decode tokens and prefill chunks together --------------------


def test_tiny_batched_step_by_hand():
    # make_model(): 9_941_504 parameters (TINY_MATMUL_PARAMS + the 512_000-row embedding),
    # bf16: 19_883_008 weight bytes, read once per step. KV per token: 4 layers x 2 (K, V)
    # x 2 KV heads x 64 x 2 B = 2_048 B.
    deployment = Deployment(make_model(), EXACT)
    sku = make_sku()  # 1 TB/s, 1 PFLOP/s bf16
    step = batched_step(deployment, sku, Batch.uniform(100, 2), [(0, 64)], efficiency=NO_LOSS)
    # Reads: weights + 2 sequences x 100 tokens x 2_048 B = 19_883_008 + 409_600.
    assert step.bytes_read == 20_292_608
    # FLOPs: 2 x 9_429_504 x (2 decode + 64 prompt tokens) = 1_244_694_528, plus the chunk's
    # attention: 4 layers x 2 x 2 x 8 heads x 64 x Σ_{i=1..64} i (= 2_080) = 17_039_360.
    assert step.flops == 1_244_694_528 + 17_039_360
    # 20.3 µs of reads against 1.26 µs of compute: the weight reads set the time.
    assert step.parts_s["mlp"] > step.parts_s["attention_prefill"]
    # A chunk that attends to 100 cached tokens reads them: 100 x 2_048 B more.
    later = batched_step(deployment, sku, Batch.uniform(100, 2), [(100, 64)], efficiency=NO_LOSS)
    assert later.bytes_read == 20_292_608 + 204_800


def test_long_chunk_makes_the_step_compute_bound():
    # 8_000 prompt tokens: 2 x 9_429_504 x 8_000 = 150_872_064_000 matmul FLOPs alone, 151 µs
    # at 1 PFLOP/s, against 20 µs of weight reads.
    deployment = Deployment(make_model(), EXACT)
    step = batched_step(deployment, make_sku(), None, [(0, 8000)], efficiency=NO_LOSS)
    # Compute-bound: every FLOP at no more than the peak, so the step is at least flops/peak.
    assert step.step_s > step.flops / 10**15
    mlp_weights_s = 4 * 1_572_864 * 2 / 10**12
    assert step.parts_s["mlp"] > 5 * mlp_weights_s


def test_a_step_needs_something_to_do():
    with pytest.raises(KvplanError, match="at least one decode sequence or prefill token"):
        batched_step(Deployment(make_model(), EXACT), make_sku(), None, [])
