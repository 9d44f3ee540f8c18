"""KV bytes per token of catalogue entries, worked by hand from each entry's cited config.

bf16 (2 bytes), TP 1, a context inside every window: each full or sliding layer holds
2 (K and V) x num_kv_heads x head_dim elements per token, an MLA layer one latent of
kv_lora_rank + qk_rope_head_dim. A typo in a YAML's layers, heads or head_dim changes these.
"""

from __future__ import annotations

import pytest

from kvplan.engine import engine
from kvplan.kvmath import kv_bytes_per_token
from kvplan.plan.sizing import Deployment, size

CASES = [
    # name, bytes per token, arithmetic
    ("qwen3-0.6b", 114_688),  # 2 x 28 layers x 8 KV heads x 128 x 2
    ("qwen3-1.7b", 114_688),  # 2 x 28 x 8 x 128 x 2
    ("qwen3-4b", 147_456),  # 2 x 36 x 8 x 128 x 2
    ("qwen3-14b", 163_840),  # 2 x 40 x 8 x 128 x 2
    ("qwen3-coder-480b-a35b", 253_952),  # 2 x 62 x 8 x 128 x 2
    ("qwen3-coder-30b-a3b", 98_304),  # 2 x 48 x 4 x 128 x 2
    ("glm-4.5", 376_832),  # 2 x 92 x 8 x 128 x 2 (MTP layer not counted)
    ("glm-4.5-air", 188_416),  # 2 x 46 x 8 x 128 x 2
    ("minimax-m2", 253_952),  # 2 x 62 x 8 x 128 x 2
    ("mistral-large-3", 70_272),  # MLA: 61 x (512 + 64) x 2
    ("mistral-7b-v0.3", 131_072),  # 2 x 32 x 8 x 128 x 2
    ("mistral-small-3.1-24b", 163_840),  # 2 x 40 x 8 x 128 x 2
    ("mistral-small-22b", 229_376),  # 2 x 56 x 8 x 128 x 2
    ("ministral-3-3b", 106_496),  # 2 x 26 x 8 x 128 x 2
    ("phi-4", 204_800),  # 2 x 40 x 10 x 128 x 2
    ("phi-4-mini", 131_072),  # 2 x 32 x 8 x 128 x 2
    ("olmo-2-7b", 524_288),  # 2 x 32 x 32 x 128 x 2 (MHA)
    ("olmo-2-13b", 819_200),  # 2 x 40 x 40 x 128 x 2 (MHA)
    ("olmo-2-32b", 262_144),  # 2 x 64 x 8 x 128 x 2
    ("olmo-3-7b", 524_288),  # 2 x 32 x 32 x 128 x 2 (inside the 4096 window)
    ("smollm3-3b", 73_728),  # 2 x 36 x 4 x 128 x 2 (NoPE layers cache too)
    ("gemma-3-270m", 18_432),  # 2 x 18 x 1 x 256 x 2 (inside the 512 window)
    ("opt-6.7b", 524_288),  # 2 x 32 x 32 x 128 x 2
    ("opt-13b", 819_200),  # 2 x 40 x 40 x 128 x 2 = 2 x 40 x 5120 x 2
    ("opt-30b", 1_376_256),  # 2 x 48 x 56 x 128 x 2 = 2 x 48 x 7168 x 2
    ("opt-66b", 2_359_296),  # 2 x 64 x 72 x 128 x 2 = 2 x 64 x 9216 x 2
    ("opt-175b", 4_718_592),  # 2 x 96 x 96 x 128 x 2 = 2 x 96 x 12288 x 2
    ("deepseek-r1-distill-qwen-32b", 262_144),  # 2 x 64 x 8 x 128 x 2
    ("deepseek-r1-distill-qwen-7b", 57_344),  # 2 x 28 x 4 x 128 x 2
    ("deepseek-r1-distill-qwen-1.5b", 28_672),  # 2 x 28 x 2 x 128 x 2
    ("command-r-08-2024", 163_840),  # 2 x 40 x 8 x 128 x 2
    ("seed-oss-36b", 262_144),  # 2 x 64 x 8 x 128 x 2 (head_dim 128 as stated)
    ("falcon3-1b", 73_728),  # 2 x 18 x 4 x 256 x 2
    ("falcon3-3b", 90_112),  # 2 x 22 x 4 x 256 x 2
    ("falcon3-7b", 114_688),  # 2 x 28 x 4 x 256 x 2
    ("falcon3-10b", 163_840),  # 2 x 40 x 4 x 256 x 2
    ("qwen2.5-3b", 36_864),  # 2 x 36 x 2 x 128 x 2
]


@pytest.mark.parametrize(("name", "expected"), CASES, ids=[c[0] for c in CASES])
def test_kv_bytes_per_token(name, expected, catalog):
    assert kv_bytes_per_token(catalog.model(name), "bf16") == expected


def test_olmo_3_windows_three_of_four_layers(catalog):
    # 32 layers: 24 sliding (window 4096) + 8 full; 2 x 32 KV heads x 128 x 2 B = 16_384 B per
    # layer-token. At 65_536 tokens: 16_384 x (8 x 65_536 + 24 x 4_096) = 10_200_547_328 bytes
    # (a full-attention reading would hold 16_384 x 32 x 65_536 = 34_359_738_368).
    result = size(Deployment(catalog.model("olmo-3-7b"), engine("exact")), [65_536])
    assert result.kv_bytes == 10_200_547_328
    assert result.full_reservation_kv_bytes == 34_359_738_368
