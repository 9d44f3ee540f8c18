"""Hand-derived KV and parameter arithmetic. Every expected value is worked out in a comment."""

from __future__ import annotations

from factories import make_model

from kvplan.engine import EngineSettings, engine
from kvplan.engine.deployment import Deployment
from kvplan.kvmath import (
    ChunkedCache,
    SlidingCache,
    kv_bytes_per_seq,
    kv_bytes_per_token,
    layer_caches,
    layer_params,
    naive_kv_bytes_per_token,
    num_kv_heads_per_gpu,
    param_counts,
)
from kvplan.plan.sizing import size
from kvplan.specs import kv_dtype_info

GIB = 2**30


def test_llama_3_1_8b_kv_bytes_per_token(catalog):
    # config.json: 32 layers, 8 KV heads, head_dim 128; bf16 = 2 bytes.
    # 2 (K and V) x 32 x 8 x 128 x 2 = 131_072 bytes per token.
    assert kv_bytes_per_token(catalog.model("llama-3.1-8b"), "bf16") == 131_072


def test_llama_2_70b_textbook_vs_gqa(catalog):
    # Llama-2-70B config: 80 layers, hidden 8192, 64 heads, 8 KV heads, head_dim 128.
    # Batch 32 x 8192 tokens = 262_144 tokens.
    # GQA:      2 x 80 x 8 x 128 x 2 B = 327_680 B/token  -> 85_899_345_920 B (80 GiB)
    # textbook: 2 x 80 x 8192 x 2 B   = 2_621_440 B/token -> 687_194_767_360 B (640 GiB)
    # (The brief's 40 GiB / 320 GiB drop the K-and-V factor 2; the 8x ratio is the same.)
    model = catalog.model("llama-2-70b")
    result = size(Deployment(model, engine("exact")), [8192] * 32)
    assert result.kv_bytes == 85_899_345_920 == 80 * GIB
    assert result.naive_kv_bytes == 687_194_767_360 == 640 * GIB
    naive = size(Deployment(model, engine("naive")), [8192] * 32)
    assert naive.kv_bytes == 687_194_767_360


def test_deepseek_v3_latent_per_token(catalog):
    # MLA: (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x 2 B = 70_272 (no x2, no heads).
    assert kv_bytes_per_token(catalog.model("deepseek-v3"), "bf16") == 70_272


def test_gemma_2_9b_windows_honoured(catalog):
    # 42 layers alternate local (window 4096) / global; 8 KV heads x 256 x 2 (K,V) x 2 B = 8192 B
    # per layer-token. At 8192 tokens: 21 global x 8192 + 21 local x 4096 tokens
    # = 8192 x (21 x 8192 + 21 x 4096) = 2_113_929_216 bytes.
    model = catalog.model("gemma-2-9b")
    result = size(Deployment(model, engine("exact")), [8192])
    assert result.kv_bytes == 2_113_929_216
    # Without a hybrid allocator every layer reserves 8192 tokens: 8192 x 42 x 8192.
    assert result.full_reservation_kv_bytes == 8192 * 42 * 8192


def test_mistral_7b_window_caps_at_4096(catalog):
    # Mistral-7B-v0.1: 32 layers, 8 KV heads, 128 dims, sliding_window 4096 on every layer.
    # At 32k: 2 x 8 x 128 x 2 B x 32 layers x 4096 tokens = 536_870_912 (8x less than 32k full).
    model = catalog.model("mistral-7b-v0.1")
    result = size(Deployment(model, engine("exact")), [32768])
    assert result.kv_bytes == 536_870_912
    assert result.full_reservation_kv_bytes == 8 * 536_870_912


def test_falcon_7b_multi_query(catalog):
    # Falcon-7B: multi_query true -> 1 KV head, head_dim 4544/71 = 64, 32 layers.
    # 2 x 1 x 64 x 2 B x 32 = 8192 bytes per token (MHA reading: 71x more).
    model = catalog.model("falcon-7b")
    assert kv_bytes_per_token(model, "bf16") == 8192
    assert naive_kv_bytes_per_token(model, "bf16") == 2 * 32 * 4544 * 2


def test_chunked_layer_keeps_current_chunk():
    cache = ChunkedCache(token_bytes=10, chunk_tokens=8)
    # L = 8 -> a full chunk of 8; L = 9 -> 1 token of the new chunk; L = 20 -> 20 - 16 = 4.
    assert [cache.tokens_kept(n) for n in (1, 8, 9, 20)] == [1, 8, 1, 4]


def test_sliding_layer_keeps_window():
    cache = SlidingCache(token_bytes=10, window_tokens=6)
    assert [cache.tokens_kept(n) for n in (1, 6, 7, 100)] == [1, 6, 6, 6]


def test_vllm_blocks_round_up_per_layer_and_sequence():
    # 4 layers, 2 KV heads x 64 dims x 2 (K,V) x 2 B = 512 B per layer-token.
    # Sequences of 1 and 17 tokens in 16-token blocks: 1 + 2 = 3 blocks per layer.
    # 3 blocks x 16 tokens x 512 B x 4 layers = 98_304 B (exact: 18 tokens x 512 x 4 = 36_864).
    model = make_model()
    vllm = size(Deployment(model, engine("vllm")), [1, 17])
    exact = size(Deployment(model, engine("exact")), [1, 17])
    assert vllm.kv_bytes == 98_304
    assert exact.kv_bytes == 36_864


def test_vllm_charges_sliding_layers_window_plus_a_step():
    # vLLM's SlidingWindowSpec charges a request ⌈min(W − 1 + max_num_batched_tokens, L) / B⌉ + 1
    # blocks: a prefill chunk of up to max_num_batched_tokens sits in the cache beside the
    # window, and the window rarely starts on a block boundary.
    # Window 6 over 4-token blocks, 512 B per token-layer, L = 100:
    #   max_num_batched_tokens 2048 (vLLM's small-GPU default): ⌈min(2053, 100)/4⌉ + 1 = 26 blocks
    #   max_num_batched_tokens 4: ⌈min(9, 100)/4⌉ + 1 = 4 blocks.
    model = make_model(layers={"pattern": ["sliding"], "sliding_window": 6}, num_layers=1)

    def charged(step: int | None) -> int:
        settings = EngineSettings(tokens_per_block=4, max_num_batched_tokens=step)
        return size(Deployment(model, engine("vllm"), settings=settings), [100]).kv_bytes

    assert charged(None) == 26 * 4 * 512
    assert charged(4) == 4 * 4 * 512


def _blocks(tokens: int) -> EngineSettings:
    return EngineSettings(tokens_per_block=tokens)


def test_mla_block_size_follows_the_gpu(catalog):
    # DeepSeek-V3 in vLLM 0.11: FlashMLA on Hopper (compute capability 9.0) pages 64 tokens,
    # CUTLASS MLA on Blackwell (10.0) 128, Triton MLA elsewhere 16. 100 tokens of 70,272 B:
    # Hopper ⌈100/64⌉ = 2 blocks = 128 tokens; Blackwell 1 block = 128; A100 7 x 16 = 112.
    model = catalog.model("deepseek-v3")
    deployment = Deployment(model, engine("vllm"))
    for sku, tokens in (("h100-sxm", 128), ("b200", 128), ("a100-80gb", 112)):
        result = size(deployment, [100], catalog.sku(sku))
        assert result.kv_bytes == tokens * 70_272, sku
    assert size(deployment, [100]).kv_bytes == 128 * 70_272  # no GPU: Hopper's page


def test_tp_replicates_kv_heads_beyond_their_count():
    # 2 KV heads: tp 2 -> 1 head per GPU; tp 8 -> still 1 (replicated), so 8 heads in total.
    assert num_kv_heads_per_gpu(2, 2) == 1
    assert num_kv_heads_per_gpu(2, 8) == 1
    assert num_kv_heads_per_gpu(8, 4) == 2
    model = make_model()
    one = size(Deployment(model, engine("exact")), [100])
    eight = size(Deployment(model, engine("exact"), tp=8), [100])
    assert eight.kv_bytes == 4 * one.kv_bytes
    assert eight.kv_bytes_per_gpu == one.kv_bytes // 2


def test_mla_latent_whole_on_every_rank(catalog):
    model = catalog.model("deepseek-v3")
    one = size(Deployment(model, engine("exact")), [1000])
    eight = size(Deployment(model, engine("exact"), tp=8), [1000])
    assert eight.kv_bytes_per_gpu == one.kv_bytes_per_gpu
    assert eight.kv_bytes == 8 * one.kv_bytes


def test_pipeline_splits_layers():
    # 4 layers over 2 stages: each GPU holds 2 layers' KV.
    model = make_model()
    one = size(Deployment(model, engine("exact")), [64])
    two = size(Deployment(model, engine("exact"), pp=2), [64])
    assert two.kv_bytes == one.kv_bytes
    assert two.kv_bytes_per_gpu == one.kv_bytes // 2


def test_quantised_kv_metadata_counted():
    # head_dim 64: int8 row = 64 + 4 (fp32 scale per token-head) = 68 B;
    # nvfp4 row = 32 + 4 scales (one fp8 per 16) = 36 B; mxfp4 = 32 + 2 = 34 B;
    # int4 (group 64, bf16 scale + zero) = 32 + 4 = 36 B; fp8 = 64 B.
    rows = {
        name: kv_dtype_info(name).row_bytes(64)
        for name in ("int8", "nvfp4", "mxfp4", "int4", "fp8")
    }
    assert rows == {"int8": 68, "nvfp4": 36, "mxfp4": 34, "int4": 36, "fp8": 64}


def test_ragged_batch_sums_sequences():
    model = make_model()
    caches = layer_caches(model, kv_dtype_info("bf16"))
    # 512 B per layer-token x 4 layers = 2048 B per token; 1 + 100 + 1000 tokens.
    assert sum(kv_bytes_per_seq(caches, n) for n in (1, 100, 1000)) == 2048 * 1101


def test_state_layers_constant(catalog):
    model = catalog.model("qwen3-next-80b-a3b")
    short = size(Deployment(model, engine("exact")), [10])
    long = size(Deployment(model, engine("exact")), [10_000])
    assert short.kv_bytes_by_kind["state"] == long.kv_bytes_by_kind["state"] > 0


def test_qwen3_next_state_bytes(catalog):
    # Qwen3-Next-80B-A3B: 36 gated-delta-net layers; per layer and sequence (bf16):
    # conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 3 x 8192 = 24_576 elements,
    # ssm 32 heads x 128 x 128 = 524_288 elements -> (24_576 + 524_288) x 2 B = 1_097_728 B.
    model = catalog.model("qwen3-next-80b-a3b")
    result = size(Deployment(model, engine("exact")), [1])
    assert result.kv_bytes_by_kind["state"] == 36 * 1_097_728


def test_hf_engine_decompresses_mla(catalog):
    # DeepSeek-V3 in transformers: per layer-token 128 heads x (192 K + 128 V) x 2 B = 81_920 B.
    model = catalog.model("deepseek-v3")
    result = size(Deployment(model, engine("hf")), [1])
    assert result.kv_bytes == 61 * 81_920


def test_gated_and_plain_mlp_params():
    # tiny: hidden 512, 8 heads x 64, 2 KV heads, 4 layers, vocab 1000, ffn 1024, untied.
    # attention per layer: q 512x512 + k,v 2 x 512x128 + o 512x512 = 655_360
    # gated ffn: 3 x 512 x 1024 = 1_572_864; norms 2 x 512 per layer + final 512.
    # total = 1_024_000 + 4 x (655_360 + 1_572_864 + 1024) + 512 = 9_941_504
    assert param_counts(make_model()).total == 9_941_504
    plain = param_counts(make_model(mlp="plain")).total
    assert plain == 9_941_504 - 4 * 512 * 1024


def test_charges_never_shrink_as_a_request_grows():
    # A request is charged the most it holds up to its length. Window 20 over 16-token blocks:
    # vLLM's charge ⌈min(19 + 2048, L) / 16⌉ + 1 grows with L; a chunked layer (C = 8) holds
    # 1 token at L = 9 but passed 8 at L = 8, so the exact charge at 9 is 8 tokens' bytes.
    model = make_model(layers={"pattern": ["sliding"], "sliding_window": 20}, num_layers=1)
    deployment = Deployment(model, engine("vllm"))
    charges = [size(deployment, [n]).kv_bytes for n in range(1, 80)]
    assert charges == sorted(charges)
    chunked = make_model(layers={"pattern": ["chunked"], "chunk_size": 8}, num_layers=1)
    result = size(Deployment(chunked, engine("exact")), [9])
    assert result.exact_kv_bytes == 512
    assert result.kv_bytes == 8 * 512


# --- layer kinds beyond attention: indexer, KDA, Mamba-2 groups, parallel, cross, mlp ----------


def test_deepseek_v3_2_indexer_key_per_token(catalog):
    # config.json: 61 layers, kv_lora_rank 512 + qk_rope_head_dim 64, index_head_dim 128.
    # bf16: 61 x (576 x 2 B + 128 fp8 B + 1 fp32 scale 4 B) = 61 x 1_284 = 78_324 B per token.
    # fp8 KV shrinks only the latent: 61 x (576 + 132) = 43_188. The indexer key keeps its format.
    model = catalog.model("deepseek-v3.2")
    assert kv_bytes_per_token(model, "bf16") == 78_324
    assert kv_bytes_per_token(model, "fp8") == 43_188
    (cache,) = set(layer_caches(model, kv_dtype_info("bf16")))
    assert (cache.kind, cache.latent_token_bytes, cache.indexer_token_bytes) == ("mla", 1_152, 132)
    # Neither part is split by heads: every TP rank holds both, 78_324 B per token at tp 8.
    assert kv_bytes_per_token(model, "bf16", tp=8) == 78_324
    # A 10_000-token request: 78_324 x 10_000 B.
    caches = layer_caches(model, kv_dtype_info("bf16"))
    assert kv_bytes_per_seq(caches, 10_000) == 783_240_000


def test_kimi_linear_kda_state_and_mla(catalog):
    # 7 MLA layers x (512 + 64) x 2 B = 8_064 B per token; the 20 KDA layers add nothing per token.
    # KDA state per layer: conv (4 - 1) x 3 x 32 x 128 = 36_864 values x 2 B (bf16) = 73_728 B,
    # recurrent 32 heads x 128 x 128 x 4 B (fp32, vLLM kda_state_dtype) = 2_097_152 B;
    # 2_170_880 B per layer, x 20 = 43_417_600 B per sequence whatever its length.
    model = catalog.model("kimi-linear-48b-a3b")
    assert kv_bytes_per_token(model, "bf16") == 8_064
    caches = layer_caches(model, kv_dtype_info("bf16"))
    assert {c.state_bytes for c in caches if c.kind == "state"} == {2_170_880}
    assert kv_bytes_per_seq(caches, 1) == 8_064 + 43_417_600
    assert kv_bytes_per_seq(caches, 1000) == 8_064 * 1000 + 43_417_600
    # tp 4 splits channels and heads: conv 3 x 12_288 / 4 x 2 B = 18_432, recurrent
    # 8 x 128 x 128 x 4 B = 524_288.
    tp4 = layer_caches(model, kv_dtype_info("bf16"), 4)
    assert {c.state_bytes for c in tp4 if c.kind == "state"} == {542_720}


def test_mamba2_groups_replicate_across_tp(catalog):
    # Granite-4.0-H-Small: d_inner 8192, 1 group of d_state 128, 128 heads x 64, conv 4, bf16.
    # tp 1: conv 3 x (8192 + 2 x 128) x 2 = 50_688; ssm 128 x 64 x 128 x 2 = 2_097_152.
    # tp 8: the single B/C group is kept whole on every rank (vLLM extra_groups_for_head_shards):
    # conv 3 x (8192 / 8 + 2 x 128) x 2 = 7_680; ssm 16 x 64 x 128 x 2 = 262_144.
    model = catalog.model("granite-4.0-h-small")
    for tp, expected in ((1, 50_688 + 2_097_152), (8, 7_680 + 262_144)):
        caches = layer_caches(model, kv_dtype_info("bf16"), tp)
        assert {c.state_bytes for c in caches if c.kind == "state"} == {expected}
    # 4 attention layers x 2 x 8 KV heads x 128 x 2 B = 16_384 B per token.
    assert kv_bytes_per_token(model, "bf16") == 16_384


def test_falcon_h1_parallel_layer_holds_both(catalog):
    # Falcon-H1-7B, every one of 44 layers: K/V 2 x 2 KV heads x 128 x 2 B = 1_024 B per token,
    # and a Mamba-2 state of (4 - 1) x (3072 + 2 x 1 x 256) + 24 x 128 x 256 = 797_184 values
    # x 2 B = 1_594_368 B. At L = 1000: 44 x (1_024 x 1000 + 1_594_368) = 115_208_192 B.
    model = catalog.model("falcon-h1-7b")
    caches = layer_caches(model, kv_dtype_info("bf16"))
    assert {(c.kind, c.token_bytes, c.state_bytes) for c in caches} == {
        ("parallel", 1_024, 1_594_368)
    }
    assert kv_bytes_per_token(model, "bf16") == 44 * 1_024
    assert kv_bytes_per_seq(caches, 1000) == 115_208_192
    assert kv_bytes_per_seq(caches, 0) == 0


def test_cross_attention_keeps_the_image_tokens(catalog):
    # Llama-3.2-11B-Vision: 32 self-attention layers, 8 cross-attention layers; 8 KV heads x 128.
    # One token of one layer: 2 x 8 x 128 x 2 B = 4_096 B. An image is 4 tiles x (40^2 + 1) =
    # 6_404 tokens, kept by every cross layer whatever L: 8 x 6_404 x 4_096 = 209_846_272 B.
    # At L = 1000: 32 x 4_096 x 1000 + 209_846_272 = 340_918_272 B; per text token 32 x 4_096.
    model = catalog.model("llama-3.2-11b-vision")
    caches = layer_caches(model, kv_dtype_info("bf16"))
    assert kv_bytes_per_token(model, "bf16") == 131_072
    assert kv_bytes_per_seq(caches, 1) == 131_072 + 209_846_272
    assert kv_bytes_per_seq(caches, 1000) == 340_918_272
    # Two images per request double the cross part: 2 x 209_846_272 + 131_072_000.
    vision = model.vision.model_copy(update={"images_per_request": 2})
    two = layer_caches(model.model_copy(update={"vision": vision}), kv_dtype_info("bf16"))
    assert kv_bytes_per_seq(two, 1000) == 2 * 209_846_272 + 131_072_000


def test_nemotron_h_mlp_blocks_cache_nothing(catalog):
    # Nemotron-H-8B: 24 Mamba-2, 4 attention, 24 MLP blocks. Per token 4 x 2 x 8 x 128 x 2 =
    # 16_384 B. Mamba-2 state per block: conv 3 x (8192 + 2 x 8 x 128) = 30_720 values, ssm
    # 128 x 64 x 128 = 1_048_576 values; x 2 B = 2_158_592 B, x 24 = 51_806_208 B per sequence.
    model = catalog.model("nemotron-h-8b")
    caches = layer_caches(model, kv_dtype_info("bf16"))
    assert model.layer_kinds.count("mlp") == 24
    assert {c.bytes_per_seq(5000) for c in caches if c.kind == "mlp"} == {0}
    assert kv_bytes_per_token(model, "bf16") == 16_384
    assert kv_bytes_per_seq(caches, 100) == 16_384 * 100 + 51_806_208


# --- parameters of the new mixers ------------------------------------------------------------


def test_nemotron_h_8b_params_block_by_block(catalog):
    # Embedding and lm_head (untied): 2 x 131_072 x 4_096 = 1_073_741_824.
    # Mamba-2 block: in_proj 4096 x (2 x 8192 + 2 x 8 x 128 + 128) = 76_021_760, conv
    # 10_240 x 4 + 10_240 bias = 51_200, dt_bias/A_log/D 3 x 128, gated norm 8_192, out_proj
    # 8192 x 4096 = 33_554_432 -> 109_635_968; x 24 = 2_631_263_232.
    # Attention block: q and o 2 x 4096^2 + k and v 2 x 4096 x 1024 = 41_943_040; x 4.
    # MLP block (relu2, no gate): 2 x 4096 x 21_504 = 176_160_768; x 24 = 4_227_858_432.
    # One RMSNorm per block and the final one: 53 x 4096 = 217_088.
    # Total 1_073_741_824 + 2_631_263_232 + 167_772_160 + 4_227_858_432 + 217_088.
    assert param_counts(catalog.model("nemotron-h-8b")).total == 8_100_852_736


def test_falcon_h1_7b_params_layer_by_layer(catalog):
    # Attention: q 3072 x 1536, k and v 2 x 3072 x 256, o 1536 x 3072 -> 11_010_048.
    # Mamba-2: in_proj 3072 x (2 x 3072 + 2 x 256 + 24) = 20_520_960, conv 3_584 x 4 + 3_584,
    # 3 x 24, no gated norm (mamba_rms_norm false), out_proj 3072^2 -> 29_976_136.
    # SwiGLU MLP 3 x 3072 x 12_288 = 113_246_208; 2 RMSNorms 6_144.
    # 44 x (11_010_048 + 29_976_136 + 113_246_208 + 6_144) = 6_786_495_584;
    # + untied embedding and lm_head 2 x 130_048 x 3072 = 799_014_912 + final norm 3_072.
    assert param_counts(catalog.model("falcon-h1-7b")).total == 7_585_513_568


def test_kda_and_indexer_mixers(catalog):
    # KDA layer of Kimi-Linear (hidden 2304, 32 heads x 128, P = 4096): q, k, v 3 x 2304 x 4096
    # = 28_311_552; forget gate f_a 2304 x 128 + f_b 128 x 4096 = 819_200, dt_bias 4096,
    # A_log 32; beta b_proj 2304 x 32 = 73_728; convs 3 x 4096 x 4 = 49_152; output gate
    # g_a + g_b 819_200; o_norm 128; o_proj 4096 x 2304 = 9_437_184 -> 39_514_272.
    kimi = catalog.model("kimi-linear-48b-a3b")
    assert layer_params(kimi, 0).mixer == 39_514_272
    # DeepSeek-V3.2 indexer: wq_b 1536 x 64 x 128 = 12_582_912, wk 7168 x 128 = 917_504,
    # k_norm LayerNorm 2 x 128, weights_proj 7168 x 64 = 458_752 -> 13_959_424 per layer.
    v3, v32 = catalog.model("deepseek-v3"), catalog.model("deepseek-v3.2")
    assert layer_params(v32, 0).mixer - layer_params(v3, 0).mixer == 13_959_424


def test_mllama_vision_tower_params(catalog):
    # transformers MllamaVisionModel, 11B geometry (1280 wide, 5120 MLP, 560 px tiles of 14 px
    # patches = 1_601 positions with the class token, 4 tiles, 8 aspect ratios + 1 row):
    #   patch conv 3 x 14 x 14 x 1280 = 752_640; class embedding 1_280;
    #   gated positions 1 + 1_601 x 1280 + 9 x 4 x 1_601 x 1280 = 75_823_361;
    #   pre/post tile embeddings 2 x (9 x 4 x 1280 + 1) = 92_162; 2 LayerNorms 5_120;
    #   layer 4 x 1280^2 + (1280 x 5120 + 5120) + (5120 x 1280 + 1280) + 2 x 2 x 1280 = 19_672_320;
    #   32 layers 629_514_240 + 8 gated global layers 8 x 19_672_322 = 157_378_576;
    #   projector 7680 x 4096 + 4096 = 31_461_376; 8 image-token embedding rows 32_768.
    counts = param_counts(catalog.model("llama-3.2-11b-vision"))
    assert counts.vision == 895_061_523
    # The text side: Llama-3.1-8B (8_030_261_248) plus 8 cross layers, each q/k/v/o 41_943_040
    # + q/k norms 256 + 2 gates + SwiGLU 176_160_768 + 2 norms 8_192 = 218_112_258.
    assert counts.total - counts.vision == 8_030_261_248 + 8 * 218_112_258
