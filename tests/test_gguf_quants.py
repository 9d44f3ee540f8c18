"""GGUF file types as weight dtypes: ggml's block sizes, llama-quantize's per-tensor mix, the
bytes they give, and `recommend` searching them for llama.cpp and ollama."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from factories import make_model
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine.gguf_mix import MixFacts, tensor_types, use_more_bits
from kvplan.engine.gguf_quantised import gguf_tensor_list, mix_facts, quantised_checkpoint
from kvplan.kvmath import param_counts
from kvplan.specs import weight_dtype_info
from kvplan.specs.gguf_types import ggml_bits_per_weight, ggml_block

runner = CliRunner()

FP16 = 2  # ggml_half: the d (scale) and dmin/m (min) fields
QK_K = 256  # weights of a K-quant or IQ4_XS super-block
K_SCALE_SIZE = 12  # Q4_K/Q5_K: 8 six-bit scales and 8 six-bit mins packed in 12 bytes

# Block layouts of ggml/src/ggml-common.h (ggml-org/llama.cpp): (weights, bytes) summed from
# each struct's fields.
PUBLISHED_BLOCKS = {
    "Q4_0": (32, FP16 + 32 // 2),  # d, qs[16]
    "Q4_1": (32, 2 * FP16 + 32 // 2),  # d, m, qs[16]
    "Q5_0": (32, FP16 + 4 + 32 // 2),  # d, qh[4], qs[16]
    "Q5_1": (32, 2 * FP16 + 4 + 32 // 2),  # d, m, qh[4], qs[16]
    "Q8_0": (32, FP16 + 32),  # d, qs[32] int8
    "IQ4_NL": (32, FP16 + 32 // 2),  # d, qs[16]
    "MXFP4": (32, 1 + 32 // 2),  # e (E8M0), qs[16]
    "Q2_K": (QK_K, QK_K // 16 + QK_K // 4 + 2 * FP16),  # scales, qs, d, dmin
    "Q3_K": (QK_K, QK_K // 8 + QK_K // 4 + 12 + FP16),  # hmask, qs, scales[12], d
    "Q4_K": (QK_K, 2 * FP16 + K_SCALE_SIZE + QK_K // 2),  # d, dmin, scales, qs
    "Q5_K": (QK_K, 2 * FP16 + K_SCALE_SIZE + QK_K // 8 + QK_K // 2),  # + qh
    "Q6_K": (QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + FP16),  # ql, qh, scales int8, d
    "IQ4_XS": (QK_K, FP16 + 2 + QK_K // 64 + QK_K // 2),  # d, scales_h, scales_l, qs
}


@pytest.mark.parametrize(("ggml_type", "layout"), sorted(PUBLISHED_BLOCKS.items()))
def test_block_sizes_are_ggmls_published_layouts(ggml_type, layout):
    weights, block_bytes = layout
    assert ggml_block(ggml_type) == layout
    assert ggml_bits_per_weight(ggml_type) == block_bytes * 8 / weights


def test_bits_per_weight_of_the_types_people_run():
    # Q4_K: 144 B per 256 = 4.5; Q6_K: 210 per 256 = 6.5625; Q8_0: 34 per 32 = 8.5; IQ4_XS:
    # 136 per 256 = 4.25; Q4_0: 18 per 32 = 4.5; Q5_K: 176 per 256 = 5.5.
    expected = {"Q4_K": 4.5, "Q6_K": 6.5625, "Q8_0": 8.5, "IQ4_XS": 4.25, "Q4_0": 4.5, "Q5_K": 5.5}
    assert {t: ggml_bits_per_weight(t) for t in expected} == expected


@pytest.mark.parametrize(
    ("name", "canonical", "row_bytes"),
    [("Q4_K_M", "q4_k_m", 144), ("q4_k", "q4_k_m", 144), ("IQ4_XS", "iq4_xs", 136),
     ("Q8_0", "q8_0", 8 * 34), ("Q6_K", "q6_k", 210)],
)  # fmt: skip
def test_file_types_are_weight_dtypes(name, canonical, row_bytes):
    # A row of 256 weights in the file type's default ggml type (Q8_0: 8 blocks of 34 B).
    dtype = weight_dtype_info(name)
    assert dtype.name == canonical
    assert dtype.row_bytes(256) == row_bytes


def test_use_more_bits_picks_the_ends_and_every_third_layer():
    # 16 layers: 16 // 8 = 2, 7 · 16 // 8 = 14; (i - 2) % 3 == 2 at 4, 7, 10, 13.
    assert [i for i in range(16) if use_more_bits(i, 16)] == [0, 1, 4, 7, 10, 13, 14, 15]


def small_model(**overrides):
    """16 layers, hidden 256, 4 query heads and 1 KV head of 64 (GQA 4), FFN 512, vocab 1024."""
    fields = {
        "hidden_size": 256,
        "num_layers": 16,
        "vocab_size": 1024,
        "intermediate_size": 512,
        "attention": {"num_heads": 4, "num_kv_heads": 1, "head_dim": 64},
    }
    return make_model(**(fields | overrides))


def test_tensor_list_is_the_converters():
    # ggml dimensions, row first: attn_q [hidden, 4·64], attn_k/v [hidden, 64], attn_output
    # [256, hidden], ffn_gate/up [hidden, 512], ffn_down [512, hidden]; two RMSNorms of 256
    # per layer (attn_norm, ffn_norm); llama.cpp's order: tensors outside the blocks first,
    # then by block and name.
    tensors = gguf_tensor_list(small_model())
    assert [(t.name, t.shape) for t in tensors[:12]] == [
        ("output.weight", (256, 1024)),
        ("output_norm.weight", (256,)),
        ("token_embd.weight", (256, 1024)),
        ("blk.0.attn_k.weight", (256, 64)),
        ("blk.0.attn_norm.weight", (256,)),
        ("blk.0.attn_output.weight", (256, 256)),
        ("blk.0.attn_q.weight", (256, 256)),
        ("blk.0.attn_v.weight", (256, 64)),
        ("blk.0.ffn_down.weight", (512, 256)),
        ("blk.0.ffn_gate.weight", (256, 512)),
        ("blk.0.ffn_norm.weight", (256,)),
        ("blk.0.ffn_up.weight", (256, 512)),
    ]
    assert len(tensors) == 3 + 16 * 9
    assert sum(math.prod(t.shape) for t in tensors) == param_counts(small_model()).total


def types_of(model, file_type, facts=None):
    tensors = gguf_tensor_list(model)
    types = tensor_types(tensors, file_type, facts or mix_facts(model))
    return dict(zip((t.name for t in tensors), types, strict=True))


MORE_BITS = {0, 1, 4, 7, 10, 13, 14, 15}  # use_more_bits(i, 16), worked above


def test_q4_k_m_mix_of_the_small_model():
    types = types_of(small_model(), "q4_k_m")
    expected = {"output.weight": "Q6_K", "output_norm.weight": "F32", "token_embd.weight": "Q4_K"}
    for i in range(16):
        more = "Q6_K" if i in MORE_BITS else "Q4_K"
        expected |= {
            f"blk.{i}.attn_k.weight": "Q4_K",
            f"blk.{i}.attn_norm.weight": "F32",
            f"blk.{i}.attn_output.weight": "Q4_K",
            f"blk.{i}.attn_q.weight": "Q4_K",
            f"blk.{i}.attn_v.weight": more,
            f"blk.{i}.ffn_down.weight": more,
            f"blk.{i}.ffn_gate.weight": "Q4_K",
            f"blk.{i}.ffn_norm.weight": "F32",
            f"blk.{i}.ffn_up.weight": "Q4_K",
        }
    assert types == expected


def test_iq4_xs_mix_gives_attn_v_and_the_first_ffn_down_q5_k():
    # GQA 4/1 = 4 ≥ 4: every attn_v Q5_K; ffn_down of layers below 16 // 8 = 2: Q5_K.
    types = types_of(small_model(), "iq4_xs")
    assert {types[f"blk.{i}.attn_v.weight"] for i in range(16)} == {"Q5_K"}
    assert [types[f"blk.{i}.ffn_down.weight"] for i in range(4)] == ["Q5_K", "Q5_K"] + [
        "IQ4_XS"
    ] * 2
    assert types["output.weight"] == "Q6_K" and types["token_embd.weight"] == "IQ4_XS"


def test_rows_that_are_not_whole_blocks_fall_back():
    # hidden 320 is not a multiple of 256: Q4_K rows fall back to Q5_0 (320 = 10 × 32); the
    # output goes to Q8_0 (its rows are not Q4_K blocks); attn_v of layer 0 would be Q6_K and
    # falls back to Q8_0; ffn_down's rows are 512 wide and keep Q6_K.
    attention = {"num_heads": 5, "num_kv_heads": 1, "head_dim": 64}
    model = small_model(hidden_size=320, attention=attention)
    types = types_of(model, "q4_k_m")
    assert types["blk.1.attn_q.weight"] == "Q5_0"
    assert types["output.weight"] == "Q8_0"
    assert types["blk.0.attn_v.weight"] == "Q8_0"
    assert types["blk.0.ffn_down.weight"] == "Q6_K"


def test_tied_embeddings_take_the_output_type():
    types = types_of(small_model(tie_word_embeddings=True), "q4_k_m")
    assert "output.weight" not in types and types["token_embd.weight"] == "Q6_K"


def moe_model(num_experts):
    return small_model(
        moe={"num_experts": num_experts, "experts_per_token": 2, "expert_intermediate_size": 256}
    )


def test_eight_expert_models_keep_attention_in_more_bits():
    # Mixtral's rule: attn_v and attn_k Q8_0, attn_output Q5_K in Q4_K_M; routed experts take
    # their layer from the name (every layer's ffn_down_exps on MORE_BITS layers is Q6_K).
    types = types_of(moe_model(8), "q4_k_m")
    assert types["blk.3.attn_v.weight"] == types["blk.3.attn_k.weight"] == "Q8_0"
    assert types["blk.3.attn_output.weight"] == "Q5_K"
    assert types["blk.4.ffn_down_exps.weight"] == "Q6_K"
    assert types["blk.5.ffn_down_exps.weight"] == "Q4_K"
    assert types["blk.5.ffn_gate_inp.weight"] == "F32"  # the router is never quantised


def test_mxfp4_moe_quantises_experts_to_mxfp4_and_the_rest_to_q8_0():
    types = types_of(moe_model(16), "mxfp4_moe")
    assert types["blk.0.ffn_up_exps.weight"] == types["blk.0.ffn_down_exps.weight"] == "MXFP4"
    assert types["blk.0.attn_q.weight"] == types["output.weight"] == "Q8_0"
    assert types["token_embd.weight"] == "Q8_0"


def test_falcon_keeps_its_output_in_q8_0():
    types = types_of(small_model(), "q4_k_m", MixFacts(num_layers=16, falcon=True))
    assert types["output.weight"] == "Q8_0"


def test_llama_3_1_8b_q4_k_m_matches_a_published_file(catalog):
    # mozilla-ai/llamafile#516 loads Meta-Llama-3.1-8B-Instruct Q4_K_M: "type f32: 66 tensors,
    # type q4_K: 193 tensors, type q6_K: 33 tensors". kvplan writes no rope_freqs (64 f32
    # values), so 65 f32 tensors here.
    model = catalog.model("llama-3.1-8b")
    counts = Counter(types_of(model, "q4_k_m").values())
    assert counts == {"Q4_K": 193, "Q6_K": 33, "F32": 65}
    # Q4_K: token_embd 4096 × 128256 + 32 × (attn_q, attn_output 4096² each; attn_k
    # 4096 × 1024; ffn_gate, ffn_up 4096 × 14336 each) + attn_v and ffn_down on the 16 layers
    # use_more_bits leaves = 6,498,025,472 weights × 144/256 = 3,655,139,328 B; Q6_K: output
    # + 16 attn_v + 16 ffn_down = 1,531,969,536 × 210/256 = 1,256,693,760 B; F32: 65 norms
    # of 4096 × 4 B = 1,064,960 B.
    checkpoint = quantised_checkpoint(model, "q4_k_m")
    assert dict(checkpoint.bytes_by_dtype) == {
        "Q4_K": 3_655_139_328,
        "Q6_K": 1_256_693_760,
        "F32": 1_064_960,
    }


def run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


QUESTION = ("recommend", "qwen3-30b-a3b", "--sku", "rtx-4090", "--context", "32k")


def test_recommend_puts_qwen3_30b_a3b_on_one_rtx_4090_with_llama_cpp():
    # 4 requests of 32,768 tokens: 131,072 cells × 48 layers × 4 KV heads × 128 × 2 (K, V)
    # × 2 B = 12 GiB of f16 KV, which with any ≥ 4.25-bpw weights (30.5 B params ≥ 15.1 GiB)
    # overflows the 4090's 23.99 GiB: the KV is quantised. q8_0 (34 B per 32) makes it
    # 6.375 GiB, which 10 % headroom turns into a budget of 7.08 GiB: weights of at most
    # 23.99 − 7.08 − 0.3 (compute buffers) = 16.6 GiB. Q4_K_M keeps half the ffn_down_exps
    # (4.83 B weights) in Q6_K: ≥ (30.5e9 × 4.5 + 4.83e9 × 2.0625) / 8 B = 17.1 GiB, too much;
    # IQ4_XS is the precise type that fits.
    result = run(*QUESTION, "--engine", "llama.cpp", "--concurrency", "4", "-f", "json")
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)["ranked"][0]
    assert (first["sku"], first["gpus"]) == ("rtx-4090", 1)
    assert (first["weight_dtype"], first["kv_dtype"]) == ("iq4_xs", "q8_0")
    assert first["launch_command"].startswith(
        "llama-server -m <Qwen3-30B-A3B-IQ4_XS.gguf> -c 131072 -np 4 -ctk q8_0 -ctv q8_0 "
    )


def test_recommend_with_ollama_quantises_kv_only_with_flash_attention():
    # ollama stores f16 KV unless OLLAMA_FLASH_ATTENTION=1: 12 GiB of KV and any weights do
    # not fit one 4090, so two; with flash attention, one, as llama.cpp.
    plain = run(*QUESTION, "--engine", "ollama", "--concurrency", "4", "-f", "json")
    assert plain.exit_code == 0, plain.output
    first = json.loads(plain.stdout)["ranked"][0]
    assert first["gpus"] == 2 and first["kv_dtype"] == "fp16"
    flash = run(*QUESTION, "--engine", "ollama", "--flash-attn", "-n", "4", "-f", "json")
    assert flash.exit_code == 0, flash.output
    first = json.loads(flash.stdout)["ranked"][0]
    assert first["gpus"] == 1
    assert (
        "OLLAMA_KV_CACHE_TYPE=q8_0 OLLAMA_FLASH_ATTENTION=1 ollama serve" in first["launch_command"]
    )
    assert "FROM <Qwen3-30B-A3B-IQ4_XS.gguf>" in first["launch_command"]


def test_recommend_weight_dtype_fixes_the_file_type():
    # Q4_K_M with q8_0 KV does not fit (worked above): with Q4_K_M asked for, the KV is q4_0.
    args = ("--engine", "llama.cpp", "-n", "4", "--weight-dtype", "Q4_K_M", "-f", "json")
    result = run(*QUESTION, *args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["search"]["searched"]["weights"] == ["q4_k_m"]
    first = payload["ranked"][0]
    assert (first["gpus"], first["weight_dtype"], first["kv_dtype"]) == (1, "q4_k_m", "q4_0")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--weight-dtype", "q4_km"), "unknown dtype 'q4_km'; did you mean 'q4_k_m'?"),
        (("--weight-dtype", "q4_k_m", "--no-quantization"), "--weight-dtype: --no-quantization"),
    ],
)
def test_bad_weight_dtype_is_one_line_and_exit_2(args, message):
    result = run(*QUESTION, "--engine", "llama.cpp", *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line


SEARCHED_ORDER = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "iq4_xs")


def test_every_catalogue_model_is_whole_and_ordered_by_bits(catalog):
    # The converter's tensors hold every parameter kvmath counts (the image encoder is a
    # separate mmproj file), and fewer bits per weight never give more bytes.
    for model in catalog.models():
        counts = param_counts(model)
        tensors = gguf_tensor_list(model)
        assert sum(math.prod(t.shape) for t in tensors) == counts.total - counts.vision, model.name
        sizes = [quantised_checkpoint(model, f).total_bytes for f in SEARCHED_ORDER]
        assert sizes == sorted(sizes, reverse=True), model.name


def q4_k_m_file(path):
    """A GGUF file laid out as llama-quantize's Q4_K_M makes it for `small_model()`, written
    with the gguf package: Q6_K output, attn_v and ffn_down Q6_K on MORE_BITS layers, the
    other matrices Q4_K, norms F32 (each row whole blocks: Q4_K 144 B, Q6_K 210 B per 256)."""
    import gguf
    import numpy as np
    from gguf_files import write_gguf

    q4k, q6k = gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K

    def matrix(rows, row, kind):
        return np.zeros((rows, row // 256 * (144 if kind == q4k else 210)), np.uint8), kind

    def norm():
        return np.zeros(256, np.float32), None

    tensors = {
        "token_embd.weight": matrix(1024, 256, q4k),
        "output.weight": matrix(1024, 256, q6k),
        "output_norm.weight": norm(),
    }
    for i in range(16):
        more = q6k if i in MORE_BITS else q4k
        tensors |= {
            f"blk.{i}.attn_norm.weight": norm(),
            f"blk.{i}.attn_q.weight": matrix(256, 256, q4k),
            f"blk.{i}.attn_k.weight": matrix(64, 256, q4k),
            f"blk.{i}.attn_v.weight": matrix(64, 256, more),
            f"blk.{i}.attn_output.weight": matrix(256, 256, q4k),
            f"blk.{i}.ffn_norm.weight": norm(),
            f"blk.{i}.ffn_gate.weight": matrix(512, 256, q4k),
            f"blk.{i}.ffn_up.weight": matrix(512, 256, q4k),
            f"blk.{i}.ffn_down.weight": matrix(256, 512, more),
        }
    metadata = {
        "{arch}.block_count": 16, "{arch}.context_length": 4096, "{arch}.embedding_length": 256,
        "{arch}.feed_forward_length": 512, "{arch}.attention.head_count": 4,
        "{arch}.attention.head_count_kv": 1, "{arch}.vocab_size": 1024,
    }  # fmt: skip
    return write_gguf(path, "llama", metadata, tensors)


def weights_of(*args):
    result = run("size", *args, "--engine", "llama.cpp", "-f", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["weights"]


def test_a_gguf_file_is_exact_and_its_mix_is_the_one_kvplan_computes(tmp_path):
    # Q4_K: token_embd 1024 × 144 = 147,456; per layer attn_q 256 × 144, attn_k 64 × 144,
    # attn_output 256 × 144, ffn_gate and ffn_up 512 × 144 = 230,400 × 16 layers; attn_v
    # 9,216 and ffn_down 256 × 2 × 144 = 73,728 on the 8 other layers: 4,497,408 B. Q6_K:
    # output 1024 × 210 = 215,040 + 8 × (64 × 210 + 256 × 2 × 210) = 1,182,720 B. F32: 33
    # norms of 256 × 4 B = 33,792 B.
    path = q4_k_m_file(tmp_path / "small-Q4_K_M.gguf")
    exact = weights_of(str(path))
    assert exact["bytes_by_dtype"] == {"Q4_K": 4_497_408, "Q6_K": 1_182_720, "F32": 33_792}
    computed = weights_of(str(path), "--weight-dtype", "Q4_K_M")
    assert computed["bytes_by_dtype"] == exact["bytes_by_dtype"]
    assert computed["total_bytes"] == exact["total_bytes"] == 5_713_920
