"""llama.cpp rules read from its source that no golden log covers: which architectures keep a
sliding-window cache, and how -c / -np become cells per stream, by build.

Expected values are worked from llama.cpp's code (cited beside each test), not from kvplan.
"""

from __future__ import annotations

import re

import pytest

from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.engine.llamacpp_cells import CellRules
from kvplan.plan.capacity import Capacity

LLAMA_CPP = ENGINES["llama.cpp"]


def _lines(catalog, model: str, build: str, n_ctx: int, n_seq: int = 1, **settings) -> list[str]:
    deployment = Deployment(
        catalog.model(model),
        LLAMA_CPP,
        settings=EngineSettings(
            version=build, context_size_tokens=n_ctx, parallel=n_seq, **settings
        ),
    )
    return Capacity(deployment, catalog.sku("h100-sxm"), 1, n_ctx // n_seq).log_lines()


def _total_mib(lines: list[str]) -> float:
    return sum(float(m) for m in re.findall(r"size = +([0-9.]+) MiB \(", "\n".join(lines)))


# llama-model.cpp load_hparams: phi3 reads sliding_window and then sets swa_type NONE ("Phi SWA
# is currently disabled", PR #13676); `llama` (Mistral-7B-v0.1's GGUF architecture) and
# `starcoder2` never read the key. So one non-SWA cache of -c cells on every layer:
# phi-3-mini-4k: 32 layers x 32 KV heads x 96 x 2 B x 2 (K, V) = 384 KiB a cell; x 4096 = 1536 MiB.
# mistral-7b-v0.1: 32 x 8 x 128 x 2 B x 2 = 128 KiB a cell; x 16384 = 2048 MiB.
# starcoder2-3b: 30 x 2 x 128 x 2 B x 2 = 30 KiB a cell; x 8192 = 240 MiB.
@pytest.mark.parametrize(
    ("model", "n_ctx", "mib"),
    [("phi-3-mini-4k", 4096, 1536.0), ("mistral-7b-v0.1", 16384, 2048.0),
     ("starcoder2-3b", 8192, 240.0)],
)  # fmt: skip
@pytest.mark.parametrize("build", ["b5000", "b5500", "b6100", "b7900"])
def test_windows_llama_cpp_never_keeps(model, n_ctx, mib, build, catalog):
    lines = _lines(catalog, model, build, n_ctx, flash_attention=True)
    assert not any("SWA KV cache" in line for line in lines), lines
    assert f"KV self size  = {mib:7.2f} MiB" in lines[-1] or _total_mib(lines) == mib, lines


def test_ignored_window_is_a_note(catalog):
    deployment = Deployment(
        catalog.model("phi-3-mini-4k"),
        LLAMA_CPP,
        settings=EngineSettings(context_size_tokens=4096),
    )
    notes = LLAMA_CPP.notes(deployment, catalog.sku("h100-sxm"))
    assert any("Phi SWA is currently disabled" in note for note in notes), notes


# OLMo 3 shares llama.cpp's olmo2 architecture; PR #16015 (September 2025) gave it
# swa_type STANDARD with set_swa_pattern(4). olmo-3-7b: 32 layers (8 full, 24 sliding at 4096),
# 32 KV heads x 128 x 2 B x 2 = 16 KiB a layer-cell. At -c 16384 -fa on:
# before: 32 x 16384 x 16 KiB = 8192 MiB; after: full 8 x 16384 x 16 KiB = 2048 MiB, sliding
# 24 x pad256(4096 + 512 = 4608) x 16 KiB = 1728 MiB -> 3776 MiB.
@pytest.mark.parametrize(("build", "mib"), [("b6400", 8192.0), ("b6600", 3776.0)])
def test_olmo3_window_from_its_build(build, mib, catalog):
    lines = _lines(catalog, "olmo-3-7b", build, 16384, flash_attention=True)
    assert _total_mib(lines) == mib, lines


# Gemma 2 keeps its window from b5440 (PR #13194: LLAMA_SWA_TYPE_STANDARD, pattern 2).
# gemma-2-9b: 42 layers, 8 KV heads x 256 x 2 B x 2 = 8 KiB a layer-cell; -c 16384 -fa on:
# full 21 x 16384 x 8 KiB = 2688 MiB, sliding 21 x pad256(4096 + 512) x 8 KiB = 756 MiB.
def test_gemma2_keeps_its_window(catalog):
    lines = _lines(catalog, "gemma-2-9b", "b7900", 16384, flash_attention=True)
    assert any("SWA KV cache, size = 4608 cells" in line for line in lines), lines
    assert _total_mib(lines) == 2688.0 + 756.0, lines


# llama-model.cpp create_memory, b5940 – b6969 without --kv-unified (read at the llama.cpp
# ollama vendored on 2025-08-14 and at b6840): n_ctx_per_stream = (n_ctx + n_seq_max - 1) /
# n_seq_max, then GGML_PAD(n_ctx_per_stream, padding), padding 256 with flash attention and
# 32 without (llama_kv_cache::get_padding), 1 from PR #16812 (b6860). From b6970 (PR #17046,
# llama-context.cpp): n_ctx = GGML_PAD(n_ctx, 256); n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256).
# -c 4096 -np 3: ceil(4096 / 3) = 1366.
@pytest.mark.parametrize(
    ("build", "flash", "unified", "cells"),
    [
        (5900, True, False, 4096),  # before streams: one buffer, pad256(4096)
        (6100, True, False, 1536),  # pad256(1366)
        (6100, False, False, 1376),  # pad32(1366)
        (6100, True, True, 4096),  # --kv-unified: one stream of pad256(4096)
        (6900, True, False, 1366),  # no padding: ceil alone
        (7000, True, False, 1536),  # pad256(4096 / 3 = 1365)
    ],
)
def test_cells_per_stream_by_build(build, flash, unified, cells):
    rules = CellRules(build, flash_attention=flash, unified=unified, swa_full=False)
    assert rules.cells_per_stream(4096, 3) == cells


def test_slot_tokens_follow_the_rounded_cells(catalog):
    # b6100 -fa on -c 4096 -np 3: 3 streams of 1536 cells; a slot holds 1536 tokens.
    # qwen2.5-3b: 36 x 2 x 128 x 2 B x 2 = 36 KiB a cell; 3 x 1536 x 36 KiB = 162 MiB.
    lines = _lines(catalog, "qwen2.5-3b", "b6100", 4096, 3, flash_attention=True)
    assert "(  1536 cells,  36 layers,  3/3 seqs)" in lines[-1], lines
    assert _total_mib(lines) == 162.0


# ollama fs/ggml/ggml.go KV.OllamaEngineRequired() read at each tag: qwen3 joins at v0.12.0
# (2025-09-18), qwen3moe at v0.12.2; v0.12.5 ran qwen3 on the llama runner (ollama#12556,
# reverted in v0.12.6); gemma3 from v0.6.0; from v0.30.0 (ollama#16031) llama-server runs
# every GGUF model, so no Go engine at all.
@pytest.mark.parametrize(
    ("model", "release", "go_engine"),
    [
        ("qwen3-8b", "0.11.10", False),
        ("qwen3-8b", "0.12.0", True),
        ("qwen3-8b", "0.12.5", False),
        ("qwen3-8b", "0.13.0", True),
        ("qwen3-30b-a3b", "0.12.1", False),
        ("qwen3-30b-a3b", "0.12.2", True),
        ("gemma-3-27b", "0.5.13", False),
        ("gemma-3-27b", "0.6.0", True),
        ("gemma-3-27b", "0.30.0", False),
        ("deepseek-v3", "0.12.11", False),
        ("deepseek-v3", "0.13.0", True),
        ("llama-3.1-8b", "0.13.0", False),
    ],
)
def test_ollama_go_engine_by_release(model, release, go_engine, catalog):
    deployment = Deployment(
        catalog.model(model), ENGINES["ollama"], settings=EngineSettings(version=release)
    )
    caveat = ENGINES["ollama"].caveat(deployment)
    assert (caveat is not None) == go_engine, caveat
    if go_engine:
        assert f"at {release} (fs/ggml/ggml.go OllamaEngineRequired)" in caveat


def test_ollama_from_0_30_runs_llama_server_of_its_pinned_build(catalog):
    # v0.30.0 LLAMA_CPP_VERSION: b9452 (llama-server built by FetchContent).
    deployment = Deployment(
        catalog.model("qwen3-8b"), ENGINES["ollama"], settings=EngineSettings(version="0.30.0")
    )
    assert ENGINES["ollama"].build_of(deployment) == 9452


# allenai/OLMoE-1B-7B-0924 config.json (the fields a public planner fixture quotes from it):
# OlmoeForCausalLM, 16 layers, hidden 2048, 16/16 heads, 64 experts top-8 of width 1024.
OLMOE_CONFIG = {
    "architectures": ["OlmoeForCausalLM"], "model_type": "olmoe", "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 1024, "num_hidden_layers": 16,
    "num_attention_heads": 16, "num_key_value_heads": 16, "num_experts": 64,
    "num_experts_per_tok": 8, "vocab_size": 50304, "tie_word_embeddings": False,
    "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
}  # fmt: skip


def _olmoe_allocation_mib(model) -> float:
    deployment = Deployment(model, LLAMA_CPP, settings=EngineSettings(context_size_tokens=4096))
    fixed = LLAMA_CPP.plan(deployment).fixed
    return (fixed.k_bytes + fixed.v_bytes) / 2**20


# llama.cpp serves OLMoE (LLM_ARCH_OLMOE: a plain KV cache, no window). -c 4096:
# 16 layers x 16 KV heads x 128 x 2 B x 2 (K, V) x 4096 cells = 512 MiB.
def test_olmoe_from_its_hf_config():
    from kvplan.catalog.hf import spec_from_hf_config

    spec, _ = spec_from_hf_config(OLMOE_CONFIG, name="olmoe-1b-7b", source="test")
    assert (spec.moe.num_experts, spec.moe.experts_per_token) == (64, 8)
    assert spec.moe.expert_intermediate_size == 1024
    assert _olmoe_allocation_mib(spec) == 512.0


def test_olmoe_from_a_gguf_header(tmp_path):
    from gguf_files import write_gguf

    from kvplan.catalog.gguf import read_gguf

    # convert_hf_to_gguf OlmoeModel: feed_forward_length = intermediate_size, expert_count,
    # expert_used_count (llama-arch.cpp LLM_ARCH_OLMOE keys).
    path = write_gguf(tmp_path / "olmoe.gguf", "olmoe", {
        "{arch}.block_count": 16, "{arch}.context_length": 4096,
        "{arch}.embedding_length": 2048, "{arch}.feed_forward_length": 1024,
        "{arch}.attention.head_count": 16, "{arch}.attention.head_count_kv": 16,
        "{arch}.expert_count": 64, "{arch}.expert_used_count": 8, "{arch}.vocab_size": 50304,
    })  # fmt: skip
    spec, _ = read_gguf(path)
    assert (spec.moe.num_experts, spec.moe.expert_intermediate_size) == (64, 1024)
    assert _olmoe_allocation_mib(spec) == 512.0


# llama-model.cpp create_memory returns no memory for LLM_ARCH_BERT / NOMIC_BERT / … : an
# encoder has no KV cache, so the refusal says that instead of "not supported".
def test_bert_family_refusal_says_there_is_no_cache(tmp_path):
    from gguf_files import write_gguf

    from kvplan.catalog.gguf import read_gguf
    from kvplan.catalog.hf import spec_from_hf_config
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match=r"model_type 'bert' is an encoder-only .* no KV cache"):
        spec_from_hf_config({"model_type": "bert", "hidden_size": 768}, name="b", source="cfg")
    path = write_gguf(tmp_path / "nomic.gguf", "nomic-bert", {"{arch}.block_count": 12})
    with pytest.raises(KvplanError, match=r"'nomic-bert' is an encoder-only .* no cache to size"):
        read_gguf(path)


# llama-context.cpp: n_batch = min(n_ctx, -b) (causal models), n_ubatch = min(n_batch, -ub);
# defaults -b 2048 (common.h), -ub 512.
@pytest.mark.parametrize(
    ("n_ctx", "batch", "ubatch", "physical"),
    [(16384, None, None, 512), (16384, 256, None, 256), (256, None, None, 256),
     (16384, 2048, 128, 128), (16384, 4096, 1024, 1024)],
)  # fmt: skip
def test_physical_batch_is_the_least_of_c_b_ub(n_ctx, batch, ubatch, physical):
    from kvplan.engine.llamacpp_cells import physical_batch_tokens

    assert physical_batch_tokens(n_ctx, batch, ubatch) == physical


# -b 256 shrinks n_ubatch to 256, so Gemma 2's SWA cache keeps pad256(4096 + 256) = 4352 cells
# (21 sliding layers x 4352 x 8 KiB = 714 MiB, beside 2688 MiB of full layers), and the
# compute buffer is reserved for 256 tokens: logits 256000 x 256 x 4 B + 8 MiB of kvplan's
# margin = 258 MiB (512 tokens: 508 MiB).
def test_logical_batch_caps_the_physical_one(catalog):
    lines = _lines(catalog, "gemma-2-9b", "b7900", 16384, flash_attention=True, batch_tokens=256)
    assert any("SWA KV cache, size = 4352 cells" in line for line in lines), lines
    assert _total_mib(lines) == 2688.0 + 714.0, lines
    for batch, mib in ((256, 258), (None, 508)):
        deployment = Deployment(
            catalog.model("gemma-2-9b"),
            LLAMA_CPP,
            settings=EngineSettings(context_size_tokens=16384, batch_tokens=batch),
        )
        budget = LLAMA_CPP.budget(deployment, catalog.sku("h100-sxm"), 16384)
        assert budget.activation_bytes == mib * 2**20, budget
        command = LLAMA_CPP.launch_command(deployment, catalog.sku("h100-sxm"), 16384)
        assert ("-b 256" in command) == (batch == 256), command


# An OLMo 3 GGUF is architecture olmo2 with a window and no pattern key; llama-model.cpp
# LLM_ARCH_OLMO2 sets set_swa_pattern(4): layers 3, 7, … full, the rest sliding (not all
# sliding, as a window without a pattern reads for other architectures).
def test_olmo3_gguf_slides_three_layers_in_four(tmp_path):
    from gguf_files import write_gguf

    from kvplan.catalog.gguf import read_gguf

    path = write_gguf(tmp_path / "olmo3.gguf", "olmo2", {
        "{arch}.block_count": 8, "{arch}.context_length": 65536,
        "{arch}.embedding_length": 512, "{arch}.feed_forward_length": 1024,
        "{arch}.attention.head_count": 4, "{arch}.attention.sliding_window": 4096,
        "{arch}.vocab_size": 1000,
    })  # fmt: skip
    spec, _ = read_gguf(path)
    assert spec.layer_kinds == ("sliding",) * 3 + ("full",) + ("sliding",) * 3 + ("full",)
