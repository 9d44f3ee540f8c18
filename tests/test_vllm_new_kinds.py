"""vLLM's pages for the newer layer kinds, derived by hand from the public configs.

Each expected figure follows vLLM's spec classes (v1/kv_cache_interface.py): a Falcon-H1 layer
registers an attention spec and a Mamba spec; mllama's cross-attention layers keep the
request's encoder tokens (CrossAttentionSpec); DeepSeek-V3.2's fp8 latent is "fp8_ds_mla".
"""

from __future__ import annotations

from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.plan.sizing import size


def test_falcon_h1_pages_attention_and_state_per_layer(catalog):
    # Falcon-H1-7B: 44 layers, each with attention (2 KV heads x 128 x 2 (K,V) x 2 B = 1,024 B
    # per token) and a Mamba-2 state of 1,594,368 B. vLLM raises the attention block so one
    # page holds a state: 16 x ceil(1,594,368 / (16 x 1,024)) = 16 x 98 = 1,568 tokens; the
    # state page is padded to 1,568 x 1,024 = 1,605,632 B. 44 attention + 44 state specs: two
    # groups of 44 sharing a block id of 44 x 1,605,632 = 70,647,808 B. A request of 8,192
    # tokens: ceil(8,192 / 1,568) = 6 attention blocks + 1 state block = 7 blocks.
    result = size(Deployment(catalog.model("falcon-h1-7b"), engine("vllm")), [8192])
    assert result.layout.tokens_per_block == 1568
    assert result.kv_bytes == 7 * 44 * 1_605_632


def test_mllama_cross_layers_keep_the_images_tokens(catalog):
    # Llama-3.2-11B-Vision: 40 layers, 8 of them cross-attention over one image's 6,404
    # encoder tokens; 8 KV heads x 128 x 2 x 2 B = 4,096 B per token per layer. Groups: the
    # 32 self-attention layers in 4 groups of 8, the 8 cross layers in one; a block id costs
    # 16 x 4,096 x 8 = 524,288 B. At 8,192 text tokens: 4 x ceil(8,192 / 16) = 2,048 blocks
    # + ceil(6,404 / 16) = 401 cross blocks = 2,449 blocks.
    result = size(Deployment(catalog.model("llama-3.2-11b-vision"), engine("vllm")), [8192])
    assert result.kv_bytes == 2_449 * 524_288
    # Per text token only the 32 self-attention layers grow: 32 x 4,096 = 131,072 B.
    assert result.kv_bytes_per_token == 131_072
    assert any("only up to 0.10.2" in note for note in result.notes)


def test_deepseek_v32_fp8_latent_is_fp8_ds_mla(catalog):
    # vLLM stores sparse MLA's fp8 latent as 656 B (512 fp8 + 4 fp32 scales + 64 bf16 rope)
    # and the indexer key as 128 fp8 + a 4-byte scale: 61 x (656 + 132) = 48,068 B per token;
    # the exact (dense fp8) reading is 61 x (576 + 132) = 43,188 B. 8,192 tokens fill 128
    # FlashMLA blocks of 64 on a Hopper GPU.
    deployment = Deployment(catalog.model("deepseek-v3.2"), engine("vllm"), kv_dtype="fp8")
    result = size(deployment, [8192], catalog.sku("h100-sxm"))
    assert result.kv_bytes == 8192 * 61 * (656 + 132)
    assert result.exact_kv_bytes == 8192 * 61 * (576 + 132)
