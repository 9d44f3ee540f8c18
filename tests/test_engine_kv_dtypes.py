"""Each engine stores only the KV dtypes its own option accepts; the rest are refused (exit 2).

The accepted lists below are read from each engine's public source or docs, not from kvplan:

- vLLM --kv-cache-dtype (config/cache.py CacheDType; docs.vllm.ai/en/v0.9.0/api/vllm/config.html
  lists auto, fp8, fp8_e4m3, fp8_e5m2). "auto" is the model's dtype (fp32, bf16, fp16).
  int8_per_token_head is in 0.26's Triton backend (docs.vllm.ai/en/v0.26.0/api/vllm/v1/
  attention/backends/triton_attn/ supported_kv_cache_dtypes).
- SGLang --kv-cache-dtype: auto, fp8_e4m3, fp8_e5m2 (docs/advanced_features/quantized_kv_cache.md).
- TensorRT-LLM KvCacheConfig.dtype: auto, fp8, nvfp4 (docs "FP8 KV Cache", "NVFP4 KV Cache").
- llama.cpp -ctk/-ctv: common/arg.cpp kv_cache_types: f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1.
- ollama OLLAMA_KV_CACHE_TYPE: f16, q8_0, q4_0 (docs/faq.md).
"""

from __future__ import annotations

import json

import pytest
from gguf_files import write_gguf
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import EngineSettings, engine
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.specs import KV_DTYPES

runner = CliRunner()

ACCEPTED = {
    "vllm": {"fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"},
    "sglang": {"fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"},
    "trtllm": {"fp32", "bf16", "fp16", "fp8_e4m3", "nvfp4"},
    "llama.cpp": {"fp32", "fp16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"},
    "ollama": {"fp16", "q8_0", "q4_0"},
}


def size(*args: str):
    return runner.invoke(app, ["size", "llama-3.1-8b", "-f", "json", *args])


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_every_engine_accepts_exactly_its_own_list(catalog, name):
    model = catalog.model("llama-3.1-8b")
    profile = engine(name)
    # llama.cpp and ollama quantise V only with flash attention (-fa, OLLAMA_FLASH_ATTENTION).
    settings = EngineSettings(flash_attention=True)
    for kv_dtype in KV_DTYPES:
        if kv_dtype in ACCEPTED[name]:
            Deployment(model, profile, kv_dtype=kv_dtype, settings=settings)
        else:
            with pytest.raises(KvplanError, match=f"does not store KV as {kv_dtype}; accepted"):
                Deployment(model, profile, kv_dtype=kv_dtype, settings=settings)


@pytest.mark.parametrize(
    ("name", "kv_dtype"),
    [("vllm", "int4"), ("vllm", "int8"), ("vllm", "nvfp4"), ("vllm", "mxfp4"),
     ("sglang", "int8"), ("trtllm", "int8"), ("trtllm", "fp8_e5m2"), ("ollama", "q5_1")],
)  # fmt: skip
def test_refused_kv_dtype_is_one_line_naming_option_value_and_list(name, kv_dtype):
    result = size("-e", name, "--kv-dtype", kv_dtype)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --kv-dtype: ") and f"as {kv_dtype}; accepted: " in line
    listed = set(line.split("accepted: ")[1].split(", "))
    assert listed == ACCEPTED[name]


def test_vllm_int8_per_token_head_from_0_26(catalog):
    # 0.16's CacheDType has no int8 (docs.vllm.ai/en/v0.16.0/api/vllm/config/cache/); 0.26's
    # Triton backend lists int8_per_token_head.
    assert size("-e", "vllm", "--vllm-version", "0.16", "--kv-dtype", "int8").exit_code == 2
    result = size("-e", "vllm", "--vllm-version", "0.26", "--kv-dtype", "int8")
    assert result.exit_code == 0, result.output
    model = catalog.model("llama-3.1-8b")
    deployment = Deployment(
        model, engine("vllm"), kv_dtype="int8", settings=EngineSettings(version="0.26")
    )
    command = deployment.engine.launch_command(deployment, catalog.sku("h100-sxm"), 8192)
    assert "--kv-cache-dtype int8_per_token_head" in command


def test_llama_cpp_v_dtype_is_checked_against_the_same_list():
    result = size("-e", "llama.cpp", "--kv-dtype", "q8_0", "--v-dtype", "int8", "--flash-attn")
    assert result.exit_code == 2
    assert "--v-dtype: llama.cpp (-ctk/-ctv) does not store KV as int8" in result.stderr


@pytest.mark.parametrize("name", ["exact", "hf", "naive"])
def test_analytic_profiles_accept_every_kv_dtype(catalog, name):
    model = catalog.model("llama-3.1-8b")
    for kv_dtype in KV_DTYPES:
        Deployment(model, engine(name), kv_dtype=kv_dtype)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_search_offers_only_accepted_kv_dtypes(catalog, name):
    model, profile = catalog.model("llama-3.1-8b"), engine(name)
    for sku in ("h100-sxm", "a100-80gb", "b200"):
        offered = profile.search_choices(model, catalog.sku(sku)).kv_dtypes
        assert offered and set(offered) <= ACCEPTED[name]


# --- llama.cpp -ctv: V in its own type, in the physics and in the engine's charge ------------


def qwen2_0_5b(path):
    """Qwen/Qwen2-0.5B's attention geometry (HF config.json): 24 layers, 2 KV heads of 64
    (hidden 896 / 14 heads), 32k context; tiny tensors."""
    return write_gguf(
        path,
        "qwen2",
        {
            "{arch}.block_count": 24,
            "{arch}.context_length": 32768,
            "{arch}.embedding_length": 896,
            "{arch}.feed_forward_length": 4864,
            "{arch}.attention.head_count": 14,
            "{arch}.attention.head_count_kv": 2,
            "{arch}.vocab_size": 151936,
        },
    )


# One token, one layer: 2 heads x 64 values of K plus the same of V, ggml blocks of 32 values
# (ggml-common.h): q8_0 34 B, q5_1 24 B, q4_0 and iq4_nl 18 B per block, 2 blocks per row.
# q8_0 K + q4_0 V: 24 x 2 x 2 x (34 + 18) = 4,992 B per token; 32,768 tokens: 163,577,856 B.
# q5_1 K + iq4_nl V: 24 x 2 x 2 x (24 + 18) = 4,032 B per token; 32,768 tokens: 132,120,576 B.
@pytest.mark.parametrize(
    ("k_type", "v_type", "per_token"), [("q8_0", "q4_0", 4_992), ("q5_1", "iq4_nl", 4_032)]
)
def test_llama_cpp_v_dtype_sizes_the_physics_and_the_charge_alike(
    tmp_path, k_type, v_type, per_token
):
    path = str(qwen2_0_5b(tmp_path / "qwen2.gguf"))
    result = runner.invoke(
        app,
        ["size", path, "-e", "llama.cpp", "-c", "32k", "--kv-dtype", k_type,
         "--v-dtype", v_type, "--flash-attn", "-f", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["kv_bytes_per_token"] == per_token
    assert record["exact_kv_bytes"] == record["kv_bytes"] == per_token * 32_768
    assert record["kv_bytes_by_kind"] == {"full": per_token * 32_768}
    assert f"K cache {k_type} (-ctk), V cache {v_type} (-ctv)" in record["notes"]


@pytest.mark.parametrize("name", ["vllm", "sglang", "trtllm", "ollama", "naive"])
def test_engines_with_one_kv_type_refuse_a_different_v_dtype(name):
    result = size("-e", name, "--kv-dtype", "fp16", "--v-dtype", "q4_0", "--flash-attn")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: --v-dtype: {name} stores K and V in one type")


# --- --cudagraph-memory: the help states the default kvplan really takes ---------------------


# vLLM ≥ 0.20 subtracts its CUDA-graph estimate (envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
# defaults to 1 from 0.20); kvplan's rule: 0.45 GiB + 16.5 MiB per layer of the largest stage.
# Llama-3.1-8B, 32 layers: round(0.45 x 2^30) + 32 x 16.5 x 2^20 = 483,183,821 + 553,648,128
# = 1,036,831,949 B (0.97 GiB); at pp 2, 16 layers: 483,183,821 + 276,824,064 = 760,007,885 B.
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--vllm-version", "0.20"), 1_036_831_949),
        (("--vllm-version", "0.20", "--pp", "2"), 760_007_885),
        (("--vllm-version", "0.19"), 0),
        (("--vllm-version", "0.20", "--cudagraph-memory", "1GiB"), 2**30),
        (("-e", "sglang"), 0),
    ],
)
def test_cudagraph_default_is_what_the_help_says(args, expected):
    result = size("--sku", "h100-sxm", *args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["budget"]["cudagraph_bytes"] == expected


def test_cudagraph_help_states_the_estimate_not_zero():
    result = runner.invoke(app, ["size", "--help"], env={"COLUMNS": "400"})
    text = " ".join(result.stdout.split())
    option = text.split("--cudagraph-memory", 1)[1].split("--no-hybrid-allocator", 1)[0]
    assert "default 0" not in option
    assert "vLLM ≥ 0.20 estimates it, 0.45 GiB + 16.5 MiB per layer" in option
    assert "0.97 GiB for 32 layers" in option


@pytest.mark.parametrize(
    ("engine_name", "kv_dtypes", "refused"),
    [("vllm", ["int4"], "int4"), ("trtllm", ["fp8", "fp8_e5m2"], "fp8_e5m2")],
)
def test_recommend_refuses_a_kv_dtype_the_engine_does_not_store(engine_name, kv_dtypes, refused):
    args = ["recommend", "llama-3.1-8b", "-c", "8k", "--concurrency", "8", "--sku", "h100-sxm"]
    args += ["-e", engine_name, *(part for k in kv_dtypes for part in ("--kv-dtype", k))]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert f"--kv-dtype: {engine_name}" in line and f"does not store KV as {refused}; " in line
    assert set(line.split("accepted: ")[1].split(", ")) == ACCEPTED[engine_name]
