"""Weights from safetensors headers of local checkpoints written by the safetensors package:
bytes per dtype equal the tensors written (quantised formats' scales and zero points
included), and each tensor is held on TP ranks as vLLM's parallel layers hold it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from kvplan.catalog import Catalog
from kvplan.catalog.checkpoint import tensor_role
from kvplan.catalog.resolve import resolve_model
from kvplan.catalog.tensor_headers import read_header
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from tests.test_hub import CONFIG, llama_tensors, nbytes

EXACT = engine("exact")


def write_model(folder, config, tensors, shards=1):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"))
        return
    names = sorted(tensors)
    weight_map = {}
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::shards]}
        save_file(part, str(folder / shard))
        weight_map |= dict.fromkeys(part, shard)
    index = {"metadata": {"total_size": nbytes(tensors)}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))


def deployment(resolved, tp=1, pp=1):
    return Deployment(resolved.spec, EXACT, tp=tp, pp=pp, checkpoint=resolved.checkpoint)


def test_sharded_local_checkpoint_bytes_are_the_written_tensors(tmp_path):
    tensors = llama_tensors(2)
    write_model(tmp_path / "m", CONFIG, tensors, shards=3)
    resolved = resolve_model(Catalog(), str(tmp_path / "m"))
    weights = deployment(resolved).weights()
    assert weights.total_bytes == nbytes(tensors) == 213_632
    assert weights.checkpoint.num_tensors == len(tensors)


def test_pipeline_stages_hold_their_layers(tmp_path):
    tensors = llama_tensors(2)
    write_model(tmp_path / "m", CONFIG, tensors)
    weights = deployment(resolve_model(Catalog(), str(tmp_path / "m")), pp=2).weights()
    first = sum(t.nbytes for n, t in tensors.items() if "layers.0." in n or "embed" in n)
    last = nbytes(tensors) - first
    stages = [s.sharded_bytes + s.replicated_bytes for s in weights.stages]
    assert stages == [first, last]


def awq_tensors() -> dict[str, np.ndarray]:
    """One AWQ-quantised layer (AutoAWQ GEMM layout, group 128) of a 256-wide model."""
    tensors = {"model.embed_tokens.weight": np.zeros((512, 256), np.float16)}
    tensors["lm_head.weight"] = np.zeros((512, 256), np.float16)
    tensors["model.norm.weight"] = np.zeros(256, np.float16)
    p = "model.layers.0."
    for name, (rows, cols) in {
        "self_attn.q_proj": (256, 256),
        "self_attn.k_proj": (256, 128),
        "self_attn.v_proj": (256, 128),
        "self_attn.o_proj": (256, 256),
        "mlp.gate_proj": (256, 512),
        "mlp.up_proj": (256, 512),
        "mlp.down_proj": (512, 256),
    }.items():  # (in, out): qweight [in, out/8] int32, scales [in/128, out] fp16, qzeros
        tensors[p + name + ".qweight"] = np.zeros((rows, cols // 8), np.int32)
        tensors[p + name + ".scales"] = np.zeros((rows // 128, cols), np.float16)
        tensors[p + name + ".qzeros"] = np.zeros((rows // 128, cols // 8), np.int32)
    tensors[p + "input_layernorm.weight"] = np.zeros(256, np.float16)
    tensors[p + "post_attention_layernorm.weight"] = np.zeros(256, np.float16)
    return tensors


def test_awq_checkpoint_counts_packed_weights_scales_and_zeros(tmp_path):
    config = {
        **CONFIG,
        "hidden_size": 256,
        "num_hidden_layers": 1,
        "head_dim": 64,
        "intermediate_size": 512,
        "vocab_size": 512,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
    }
    tensors = awq_tensors()
    write_model(tmp_path / "m", config, tensors)
    resolved = resolve_model(Catalog(), str(tmp_path / "m"))
    assert resolved.spec.weight_dtype == "awq"
    checkpoint = resolved.checkpoint
    by_dtype = dict(checkpoint.bytes_by_dtype)
    int32 = sum(t.nbytes for t in tensors.values() if t.dtype == np.int32)
    fp16 = sum(t.nbytes for t in tensors.values() if t.dtype == np.float16)
    assert by_dtype == {"I32": int32, "F16": fp16}
    # q, o: 256·256 4-bit weights = 32 KiB packed, 2·256·2 B scales, 2·256/8·4 B zeros ...
    assert deployment(resolved).weights().total_bytes == int32 + fp16


def test_fp8_block_checkpoint_counts_block_scales(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch

    weight = torch.zeros((256, 384), dtype=torch.float8_e4m3fn)
    # One fp32 scale per 128x128 block: ceil(256/128) x ceil(384/128) = 2 x 3.
    tensors = {
        "model.layers.0.mlp.down_proj.weight": weight,
        "model.layers.0.mlp.down_proj.weight_scale_inv": torch.zeros((2, 3)),
        "model.layers.0.input_layernorm.weight": torch.zeros(384, dtype=torch.bfloat16),
    }
    save_torch(tensors, str(tmp_path / "model.safetensors"))
    headers = {h.name: h for h in read_header(tmp_path / "model.safetensors")}
    assert headers["model.layers.0.mlp.down_proj.weight"].dtype == "F8_E4M3"
    assert headers["model.layers.0.mlp.down_proj.weight"].nbytes == 256 * 384
    assert headers["model.layers.0.mlp.down_proj.weight_scale_inv"].nbytes == 2 * 3 * 4
    assert headers["model.layers.0.input_layernorm.weight"].nbytes == 384 * 2


@pytest.mark.parametrize(
    ("name", "numel", "role"),
    [
        ("model.layers.3.self_attn.q_proj.weight", 10, ("split", 3)),
        ("model.layers.3.self_attn.k_proj.weight", 10, ("kv", 3)),
        ("model.layers.3.self_attn.o_proj.bias", 10, ("replicated", 3)),
        ("model.layers.3.mlp.experts.7.up_proj.weight", 10, ("expert", 3)),
        ("model.layers.3.mlp.shared_experts.up_proj.weight", 10, ("split", 3)),
        ("model.layers.3.mlp.gate.weight", 10, ("replicated", 3)),
        ("model.layers.3.mlp.gate.e_score_correction_bias", 10, ("replicated", 3)),
        ("model.layers.3.self_attn.kv_a_proj_with_mqa.weight", 10, ("replicated", 3)),
        ("model.layers.3.self_attn.kv_b_proj.weight", 10, ("split", 3)),
        ("model.layers.3.self_attn.q_proj.input_scale", 1, ("replicated", 3)),
        ("model.layers.61.mlp.experts.0.up_proj.weight", 10, ("unloaded", 61)),
        ("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight", 10, ("vision", -1)),
        ("multi_modal_projector.linear_1.weight", 10, ("vision", -1)),
        ("language_model.model.embed_tokens.weight", 10, ("split", -1)),
        ("language_model.lm_head.weight", 10, ("split", -2)),
        ("model.norm.weight", 10, ("replicated", -2)),
        ("transformer.h.0.ln_1.weight", 10, ("replicated", 0)),
        ("transformer.wpe.weight", 10, ("replicated", -1)),
    ],
)
def test_tensor_roles_follow_vllm_parallel_layers(name, numel, role):
    assert tensor_role(name, numel, num_layers=61) == role


def test_kv_projections_replicate_past_one_head_per_rank(tmp_path):
    tensors = llama_tensors(2)
    write_model(tmp_path / "m", CONFIG, tensors)
    resolved = resolve_model(Catalog(), str(tmp_path / "m"))
    kv = sum(t.nbytes for n, t in tensors.items() if "k_proj" in n or "v_proj" in n)
    norms = sum(t.nbytes for n, t in tensors.items() if "norm" in n)
    rest = nbytes(tensors) - kv - norms
    # tp 4 over 2 KV heads: each rank keeps one whole head of k and v (1/2, not 1/4).
    assert deployment(resolved, tp=4).weights().per_gpu_bytes == rest // 4 + kv // 2 + norms


def test_not_a_safetensors_file_is_one_line(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(KvplanError, match=r"model.safetensors: not a safetensors file"):
        read_header(tmp_path / "model.safetensors")
