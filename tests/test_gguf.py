"""GGUF headers written with the gguf package's writer are read back into model specs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf_files import gemma3_270m, write_gguf
from typer.testing import CliRunner

from kvplan.catalog import Catalog
from kvplan.catalog.gguf import read_gguf
from kvplan.cli import app
from kvplan.errors import KvplanError
from kvplan.kvmath import kv_bytes_per_token

Q8 = gguf.GGMLQuantizationType.Q8_0


def _llama(path, **extra):
    metadata = {
        "{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 256,
        "{arch}.feed_forward_length": 512, "{arch}.attention.head_count": [8, 8, 8, 8],
        "{arch}.attention.head_count_kv": [2, 2, 2, 2], "{arch}.vocab_size": 1000,
    } | extra  # fmt: skip
    tensors = {
        "token_embd.weight": (np.zeros((10, 64), np.float16), None),  # 640 x 2 B = 1,280 B
        "output.weight": (np.zeros((1, 68), np.uint8), Q8),  # 64 values of q8_0 = 2 x 34 B
    }
    return write_gguf(path, "llama", metadata, tensors)


def test_every_field_is_recovered(tmp_path):
    spec, weights = read_gguf(_llama(tmp_path / "tiny.gguf"))
    assert (spec.num_layers, spec.hidden_size, spec.vocab_size) == (4, 256, 1000)
    assert (spec.attention.num_heads, spec.attention.num_kv_heads) == (8, 2)
    assert spec.attention.head_dim == 256 // 8  # no key_length: n_embd / n_head
    assert (spec.intermediate_size, spec.max_context) == (512, 8192)
    assert set(spec.layer_kinds) == {"full"} and not spec.tie_word_embeddings
    assert weights.total_bytes == 1280 + 68


def test_sliding_pattern_by_architecture(tmp_path):
    spec, _ = read_gguf(gemma3_270m(tmp_path / "g.gguf"))
    # Gemma 3: layer i slides when i mod 6 < 5 -> full at 5, 11, 17.
    assert [i for i, k in enumerate(spec.layer_kinds) if k == "full"] == [5, 11, 17]
    assert spec.layers.sliding_window == 512 and spec.attention.head_dim == 256


def test_explicit_pattern_array(tmp_path):
    path = _llama(
        tmp_path / "p.gguf",
        **{
            "{arch}.attention.sliding_window": 128,
            "{arch}.attention.sliding_window_pattern": [True, False, True, False],
        },
    )
    spec, _ = read_gguf(path)
    assert spec.layer_kinds == ("sliding", "full", "sliding", "full")


def test_mla_keys(tmp_path):
    # A re-converted DeepSeek file (llama.cpp PR #12801): key_length 576 / value_length 512 are
    # the latent; the per-head sizes are key_length_mla 192 and value_length_mla 128.
    path = write_gguf(tmp_path / "ds.gguf", "deepseek2", {
        "{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 512,
        "{arch}.feed_forward_length": 1024, "{arch}.attention.head_count": 16,
        "{arch}.attention.head_count_kv": 1, "{arch}.attention.key_length": 576,
        "{arch}.attention.value_length": 512, "{arch}.attention.key_length_mla": 192,
        "{arch}.attention.value_length_mla": 128, "{arch}.attention.kv_lora_rank": 512,
        "{arch}.attention.q_lora_rank": 1536, "{arch}.rope.dimension_count": 64,
        "{arch}.vocab_size": 1000,
    })  # fmt: skip
    spec, _ = read_gguf(path)
    mla = spec.mla
    assert (mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.v_head_dim) == (
        512,
        64,
        128,
        128,
    )
    assert mla.q_lora_rank == 1536 and set(spec.layer_kinds) == {"mla"}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"NOTAGGUF" + bytes(64)), "wrong magic"),
        (
            lambda p: p.write_bytes(_llama(p.with_suffix(".x")).read_bytes()[:200]),
            "cannot read GGUF header: truncated: ",
        ),
        (
            lambda p: write_gguf(p, "rwkv7", {"{arch}.block_count": 2}),
            "general.architecture 'rwkv7'",
        ),
        (
            lambda p: write_gguf(p, "llama", {"{arch}.block_count": 2}),
            "llama.embedding_length is missing",
        ),
        (
            lambda p: _llama(p, **{"{arch}.attention.head_count_kv": [2, 0, 2, 0]}),
            "varies per layer",
        ),
        (
            lambda p: _llama(p, **{"{arch}.attention.head_count_kv": [2, 2, 2, 2, 2, 2]}),
            r"head_count_kv has 6 per-layer entries, but llama.block_count is 4",
        ),
    ],
)
def test_bad_files_give_one_line(tmp_path, make, message):
    path = tmp_path / "bad.gguf"
    make(path)
    with pytest.raises(KvplanError, match=message) as error:
        read_gguf(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)
    result = CliRunner().invoke(app, ["size", str(path), "-e", "llama.cpp"])
    assert result.exit_code == 2 and result.stdout == ""


def _header_end(data: bytes) -> int:
    """Where the tensor table of a file written by gguf_files.write_gguf ends: after the
    last tensor's offset field, 8 bytes before the padding (its one tensor is last)."""
    name = b"token_embd.weight"
    # name length (8) + name + n_dims (4) + 2 dims (16) + type (4) + offset (8)
    return data.rindex(name) + len(name) + 4 + 16 + 4 + 8


def test_a_sweep_of_cut_points_each_names_what_is_cut(tmp_path):
    data = gemma3_270m(tmp_path / "whole.gguf").read_bytes()
    header_end = _header_end(data)
    # One fp16 4 x 8 tensor: 64 bytes of data after the header padded to 32 bytes.
    data_start = -(-header_end // 32) * 32
    assert len(data) == data_start + 4 * 8 * 2
    path = tmp_path / "cut.gguf"
    for cut in [*range(0, len(data), 5), header_end - 1, header_end, len(data) - 1]:
        path.write_bytes(data[:cut])
        with pytest.raises(KvplanError) as error:
            read_gguf(path)
        line = str(error.value)
        assert "\n" not in line and line.startswith(f"{path}: ")
        if cut == 0:
            assert line.endswith("not a GGUF file (it is empty)")
        elif cut < 4:
            assert line.endswith(f"truncated: the file ends at byte {cut} inside the magic")
        elif cut < header_end:
            # What runs past the end (or, before the entries, that they cannot fit) and where.
            assert ": cannot read GGUF header: truncated" in line and f" {cut:,} " in line + " "
        else:
            assert line.endswith(
                f"truncated: the tensor data runs to byte {len(data):,}, but the file ends at "
                f"byte {cut:,}"
            )
    path.write_bytes(data[:178])
    result = CliRunner().invoke(app, ["size", str(path), "-e", "llama.cpp"])
    assert result.exit_code == 2 and result.stdout == ""
    # 24-byte preamble; key 1 general.architecture = 8 + 20 name + 4 type + 8 + 6 "gemma3"
    # ends at 70; gemma3.block_count 8 + 18 + 4 + 4 ends at 104; gemma3.context_length
    # 8 + 21 + 4 + 4 at 141; gemma3.embedding_length: 8 + 23 name + 4 type puts its uint32 at 176.
    assert result.stderr == (
        f"error: {path}: cannot read GGUF header: truncated: gemma3.embedding_length needs 4 "
        "bytes at byte 176, but the file ends at byte 178\n"
    )


def test_gguf_is_a_model_for_size_and_report(tmp_path):
    path = str(gemma3_270m(tmp_path / "gemma-3-270m.gguf"))
    sized = CliRunner().invoke(
        app, ["size", path, "-e", "llama.cpp", "--sku", "h100-sxm", "--format", "json"]
    )
    assert sized.exit_code == 0, sized.output
    reported = CliRunner().invoke(
        app,
        [
            "report",
            "-m",
            path,
            "-e",
            "llama.cpp",
            "--sku",
            "h100-sxm",
            "-c",
            "4k",
            "--format",
            "json",
        ],
    )
    assert reported.exit_code == 0, reported.output


def test_show_reads_a_gguf_file_and_a_config_folder(tmp_path):
    path = gemma3_270m(tmp_path / "gemma-3-270m.gguf")
    shown = CliRunner().invoke(app, ["show", str(path), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert (record["num_layers"], record["attention"]["num_kv_heads"]) == (18, 1)
    folder = Path(__file__).parent / "fixtures" / "hf" / "qwen3-8b"
    shown = CliRunner().invoke(app, ["show", str(folder), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    # Qwen/Qwen3-8B config.json: 36 layers, 8 KV heads of 128.
    record = json.loads(shown.stdout)
    assert (record["num_layers"], record["attention"]["num_kv_heads"]) == (36, 8)


def test_catalogue_size_does_not_import_gguf():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom kvplan.cli import app\n"
        "CliRunner().invoke(app, ['size', 'llama-3.1-8b'])\n"
        "print(','.join(m for m in ('gguf', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _moe_file(
    path, arch, *, layers, context, hidden, ff, heads, experts, vocab, extra, tensors=None
):
    """A GGUF of a MoE model with 128-wide heads: ff = (dense, expert) widths, heads = (query,
    KV), experts = (routed, active); `extra` adds `{arch}.` keys."""
    metadata = {
        "{arch}.block_count": layers, "{arch}.context_length": context,
        "{arch}.embedding_length": hidden, "{arch}.feed_forward_length": ff[0],
        "{arch}.expert_feed_forward_length": ff[1], "{arch}.attention.head_count": heads[0],
        "{arch}.attention.head_count_kv": heads[1], "{arch}.attention.key_length": 128,
        "{arch}.attention.value_length": 128, "{arch}.expert_count": experts[0],
        "{arch}.expert_used_count": experts[1], "{arch}.vocab_size": vocab,
    }  # fmt: skip
    metadata |= {"{arch}." + key: value for key, value in extra.items()}
    return write_gguf(path, arch, metadata, tensors)


def _shexp_tensors() -> dict:
    f16 = np.zeros((2, 4), np.float16)  # 8 x 2 B = 16 B each
    return {
        "token_embd.weight": (f16, None),
        "output.weight": (f16, None),
        "blk.0.ffn_up_shexp.weight": (f16, None),
    }


def test_llama4_chunked_layers_and_interleaved_moe(tmp_path):
    # Llama-4-Maverick's geometry (config.json: 48 layers, 40/8 heads of 128, experts 128 of
    # 8192, 1 active, interleave_moe_layer_step 2, intermediate_size_mlp 16384); llama.cpp:
    # 3 chunked layers of 8,192 then 1 full, MoE where (i + 1) % 2 == 0, one shared expert.
    path = _moe_file(
        tmp_path / "maverick.gguf", "llama4", layers=48, context=1048576, hidden=5120,
        ff=(16384, 8192), heads=(40, 8), experts=(128, 1), vocab=202048,
        extra={"interleave_moe_layer_step": 2}, tensors=_shexp_tensors(),
    )  # fmt: skip
    spec, weights = read_gguf(path)
    assert spec.layer_kinds[:8] == ("chunked",) * 3 + ("full",) + ("chunked",) * 3 + ("full",)
    assert spec.layer_kinds.count("full") == 12 and spec.layers.chunk_size == 8192
    moe = spec.moe
    assert (moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size) == (128, 1, 8192)
    assert (moe.layer_step, moe.layer_offset, moe.dense_intermediate_size) == (2, 1, 16384)
    assert moe.num_shared_experts == 1 and spec.intermediate_size == 8192
    assert weights.total_bytes == 3 * 16
    # The catalogue entry, read from the HF config, holds the same KV geometry.
    maverick = Catalog().model("llama-4-maverick")
    assert spec.layer_kinds == maverick.layer_kinds
    assert spec.attention == maverick.attention.model_copy(update={"qk_norm": False})


def test_command_r_reads_as_a_dense_model(tmp_path):
    # c4ai-command-r-v01 (config.json): 40 layers, 64 heads of 8192/64 = 128, no GQA, 8192
    # context, tied embeddings (llama.cpp's command-r has no output.weight).
    geometry = dict(
        block_count=40, context_length=8192, embedding_length=8192, feed_forward_length=22528,
        vocab_size=256000, **{"attention.head_count": 64, "attention.head_count_kv": 64},
    )  # fmt: skip
    metadata = {"{arch}." + key: value for key, value in geometry.items()}
    path = write_gguf(tmp_path / "command-r.gguf", "command-r", metadata)
    spec, _ = read_gguf(path)
    assert (spec.num_layers, spec.attention.num_kv_heads, spec.attention.head_dim) == (40, 64, 128)
    assert spec.tie_word_embeddings and set(spec.layer_kinds) == {"full"}
    # 2 (K, V) x 40 layers x 64 heads x 128 x 2 B = 1,310,720 B per token
    assert kv_bytes_per_token(spec, kv_dtype="f16") == 1_310_720


def test_glm4moe_leaves_the_nextn_block_out_of_the_layers(tmp_path):
    # GLM-4.5-Air (config.json): 46 layers + 1 NextN (llama.cpp block_count 47), 96/8 heads of
    # 128, 128 experts of 1408, 8 active, 1 shared, first 1 layer dense (10944).
    path = _moe_file(
        tmp_path / "air.gguf", "glm4moe", layers=47, context=131072, hidden=4096,
        ff=(10944, 1408), heads=(96, 8), experts=(128, 8), vocab=151552,
        extra={
            "expert_shared_count": 1, "leading_dense_block_count": 1, "nextn_predict_layers": 1,
        },
    )  # fmt: skip
    spec, _ = read_gguf(path)
    air = Catalog().model("glm-4.5-air")
    assert spec.num_layers == air.num_layers == 46
    assert (spec.moe.dense_layers, spec.moe.num_shared_experts) == (1, 1)
    # 2 x 46 x 8 x 128 x 2 B = 188,416 B per token, as the catalogue entry
    assert kv_bytes_per_token(spec, kv_dtype="f16") == 188_416
    assert kv_bytes_per_token(air, kv_dtype="bf16") == 188_416
    assert any("NextN" in note for note in spec.notes)
