"""A GGUF file's weights are exact: its tensor table's bytes, by ggml type and by role."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
from gguf_files import write_gguf
from typer.testing import CliRunner

from kvplan.catalog.checkpoint import FIRST, LAST
from kvplan.catalog.gguf_weights import gguf_tensor_role
from kvplan.cli import app

Q8, Q4 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0


def _q(rows: int, values: int, block_bytes: int) -> np.ndarray:
    """`rows` rows of `values` quantised values: values / 32 blocks of `block_bytes` each."""
    return np.zeros((rows, values // 32 * block_bytes), np.uint8)


def tiny_llama(path):
    """2 blocks, hidden 64, 4 heads and 2 KV heads of 16, MLP 128, vocabulary 10.

    Bytes (ggml-common.h: q8_0 34 B and q4_0 18 B per 32 values; f16 2 B, f32 4 B):
    token_embd f16 10 x 64 = 1,280; output q8_0 10 x 2 x 34 = 680; output_norm f32 256.
    Per block: attn_q, attn_output q8_0 64 x 2 x 34 = 4,352 each; attn_k, attn_v q8_0
    32 x 2 x 34 = 2,176 each; ffn_gate, ffn_up q4_0 128 x 2 x 18 = 4,608 each; ffn_down q4_0
    64 x 4 x 18 = 4,608; attn_norm, ffn_norm f32 256 each.
    """
    tensors = {
        "token_embd.weight": (np.zeros((10, 64), np.float16), None),
        "output.weight": (_q(10, 64, 34), Q8),
        "output_norm.weight": (np.zeros(64, np.float32), None),
    }
    for block in range(2):
        tensors |= {
            f"blk.{block}.attn_norm.weight": (np.zeros(64, np.float32), None),
            f"blk.{block}.attn_q.weight": (_q(64, 64, 34), Q8),
            f"blk.{block}.attn_k.weight": (_q(32, 64, 34), Q8),
            f"blk.{block}.attn_v.weight": (_q(32, 64, 34), Q8),
            f"blk.{block}.attn_output.weight": (_q(64, 64, 34), Q8),
            f"blk.{block}.ffn_norm.weight": (np.zeros(64, np.float32), None),
            f"blk.{block}.ffn_gate.weight": (_q(128, 64, 18), Q4),
            f"blk.{block}.ffn_up.weight": (_q(128, 64, 18), Q4),
            f"blk.{block}.ffn_down.weight": (_q(64, 128, 18), Q4),
        }
    metadata = {
        "{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 64,
        "{arch}.feed_forward_length": 128, "{arch}.attention.head_count": 4,
        "{arch}.attention.head_count_kv": 2, "{arch}.vocab_size": 10,
    }  # fmt: skip
    return write_gguf(path, "llama", metadata, tensors)


# Whole file: F16 1,280; F32 5 x 256 = 1,280; Q8_0 680 + 2 x (4,352 + 2,176 + 2,176 + 4,352)
# = 26,792; Q4_0 2 x 3 x 4,608 = 27,648; total 57,000.
# Roles: split 1,280 + 680 + 2 x (4,352 + 4,352 + 3 x 4,608) = 47,016; kv 2 x 4,352 = 8,704;
# replicated 4 x 256 + 256 = 1,280.
def size_json(path, *args):
    result = CliRunner().invoke(app, ["size", str(path), "-e", "llama.cpp", "-f", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_gguf_weights_are_exact_by_type_and_role(tmp_path):
    record = size_json(tiny_llama(tmp_path / "tiny.gguf"))
    weights = record["weights"]
    assert weights["basis"] == "GGUF tensor table" and weights["tensors"] == 21
    assert weights["bytes_by_dtype"] == {"Q4_0": 27_648, "Q8_0": 26_792, "F16": 1_280, "F32": 1_280}
    assert weights["bytes_by_role"] == {
        "split": 47_016, "kv": 8_704, "expert": 0, "replicated": 1_280, "vision": 0,
        "unloaded": 0,
    }  # fmt: skip
    assert weights["total_bytes"] == record["weights_bytes"] == 57_000
    assert record["weight_dtype"] == "Q4_0/Q8_0/F16/F32"
    # One GPU holds it all: split (k/v included) 47,016 + 8,704 + replicated 1,280.
    per_gpu = weights["per_gpu"]
    assert (per_gpu["split_bytes"], per_gpu["replicated_bytes"]) == (55_720, 1_280)
    assert per_gpu["total_bytes"] == 57_000


def test_gguf_weights_per_gpu_add_up_over_pipeline_stages(tmp_path):
    # --pp 2: stage 0 holds token_embd 1,280 and block 0 (split 22,528 + kv 4,352 = 26,880,
    # norms 512) = 28,672; stage 1 block 1 and output 680 + output_norm 256 = 28,328.
    per_gpu = size_json(tiny_llama(tmp_path / "tiny.gguf"), "--pp", "2")["weights"]["per_gpu"]
    assert (per_gpu["split_bytes"], per_gpu["replicated_bytes"]) == (28_160, 512)
    assert per_gpu["total_bytes"] == 28_672


def test_gguf_weights_row_and_explain_name_the_file_types(tmp_path):
    path = str(tiny_llama(tmp_path / "tiny.gguf"))
    table = CliRunner().invoke(app, ["size", path, "-e", "llama.cpp", "--explain"])
    assert table.exit_code == 0, table.output
    assert "weights (Q4_0/Q8_0/F16/F32)" in table.stdout
    explained = " ".join(table.output.split())
    assert "weights per GPU (GGUF tensor table) = split 54.41 KiB" in explained
    assert "replicated 1.25 KiB" in explained and "= 55.66 KiB" in explained


@pytest.mark.parametrize(
    ("name", "numel", "role"),
    [
        ("token_embd.weight", 640, ("split", FIRST)),
        ("output.weight", 640, ("split", LAST)),
        ("output_norm.weight", 64, ("replicated", LAST)),
        ("rope_freqs.weight", 32, ("replicated", FIRST)),
        ("blk.3.attn_k.weight", 2048, ("kv", 3)),
        ("blk.3.attn_v.bias", 32, ("kv", 3)),
        ("blk.3.attn_output.bias", 64, ("replicated", 3)),
        ("blk.3.ffn_gate_inp.weight", 512, ("replicated", 3)),
        ("blk.3.ffn_up_exps.weight", 4096, ("expert", 3)),
        ("blk.3.ffn_up_shexp.weight", 4096, ("split", 3)),
        ("blk.3.attn_kv_a_mqa.weight", 4096, ("replicated", 3)),
        ("blk.3.attn_kv_b.weight", 4096, ("split", 3)),
        ("blk.3.attn_q_a_norm.weight", 64, ("replicated", 3)),
        ("blk.61.attn_q.weight", 4096, ("unloaded", 61)),
    ],
)
def test_gguf_tensor_roles(name, numel, role):
    assert gguf_tensor_role(name, numel, num_layers=61) == role


def test_check_counts_a_gguf_files_exact_weights_as_size_does(tmp_path):
    # A products file may name the model by its GGUF file: check must size the file's 57,000
    # bytes of tensors (above), not weights computed from the header's geometry.
    path = tiny_llama(tmp_path / "tiny.gguf")
    products = tmp_path / "products.yaml"
    products.write_text(
        "products:\n"
        f"  - {{name: p, model: '{path}', sku: h100-sxm, engine: llama.cpp,\n"
        "     context: 1024, concurrency: 1}\n"
    )
    result = CliRunner().invoke(app, ["check", str(products), "-f", "json"])
    assert result.exit_code == 0, result.output
    (checked,) = json.loads(result.stdout)["products"]
    assert checked["weights_bytes_per_gpu"] == 57_000
