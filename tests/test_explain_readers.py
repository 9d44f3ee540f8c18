"""The log readers on verbatim lines of public logs (each cited): engine, release and the
engine's echo of its arguments, read as kvplan's facts."""

from __future__ import annotations

from pathlib import Path

import yaml

from kvplan.explain import read_log
from kvplan.explain.readers import read_lines, reader_for

GOLDEN = Path(__file__).parent / "golden"

# https://github.com/sgl-project/sglang/pull/13023 (description; the line as quoted there,
# up to the field the excerpt ends at)
SGLANG_SERVER_ARGS = (
    "[2025-11-11 04:27:11] server_args=ServerArgs(model_path='meta-llama/Meta-Llama-3.1-8B-"
    "Instruct', tokenizer_path='meta-llama/Meta-Llama-3.1-8B-Instruct', tokenizer_mode='auto', "
    "tokenizer_worker_num=1, skip_tokenizer_init=False, load_format='auto', "
    "model_loader_extra_config='{}', trust_remote_code=False, context_length=None, "
    "is_embedding=False, enable_multimodal=None, revision=None, model_impl='auto', "
    "host='127.0.0.1', port=30000, grpc_mode=False, skip_server_warmup=False, warmups=None, "
    "nccl_port=None, checkpoint_engine_wait_weights_before_ready=False, dtype='auto', "
    "quantization=None, quantization_param_path=None, kv_cache_dtype='auto', "
    "enable_fp32_lm_head=False, modelopt_quant=None, modelopt_checkpoint_restore_path=None, "
    "modelopt_checkpoint_save_path=None, modelopt_export_path=None, quantize_and_serve=False, "
    "mem_fraction_static=0.851, max_running_requests=None,"
)
# https://github.com/ggml-org/llama.cpp/issues/10560 (description)
LLAMA_SERVER = [
    "~/llama.cpp$ ./llama-server -m models/Mistral-Large-Instruct-2411-Q8_0.gguf --ctx-size 4096 "
    "--flash-attn --cache-type-k q8_0 --cache-type-v q8_0 --mlock --gpu-layers 1  --prio-batch 2 "
    "--threads 12  --verbose",
    "ggml_cuda_init: found 1 CUDA devices:",
    "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes",
    "build: 4202 (9f912511) with cc (Ubuntu 13.2.0-23ubuntu4) 13.2.0 for x86_64-linux-gnu",
]


def _quote(relative: str) -> list[str]:
    return yaml.safe_load((GOLDEN / relative).read_text())["quote"].splitlines()


def _read(lines: list[str]):
    """What the reader of the engine that wrote `lines` reads (no figure needed)."""
    return read_lines(lines, reader_for(lines))


def test_sglang_server_args():
    reading = _read([SGLANG_SERVER_ARGS])
    assert reading.engine == "sglang"
    assert reading.facts["model"] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert reading.facts["utilization"] == 0.851
    assert "kv_dtype" not in reading.facts  # 'auto': the model's dtype, kvplan's default
    assert reading.arguments["port"] == "30000"


def test_llama_server_command_line_gpu_and_build():
    reading = _read(LLAMA_SERVER)
    assert reading.engine == "llama.cpp"
    assert (reading.version, reading.facts["gpu"]) == ("b4202", "NVIDIA GeForce RTX 4090")
    facts = reading.facts
    assert facts["model"] == "models/Mistral-Large-Instruct-2411-Q8_0.gguf"
    assert (facts["context_size_tokens"], facts["gpu_layers"]) == (4096, 1)
    assert (facts["kv_dtype"], facts["v_dtype"], facts["flash_attention"]) == ("q8_0", "q8_0", True)


def test_ollama_runner_command_line():
    # ollama/ollama#5913: "starting llama server" cmd="… --ctx-size 2048 --batch-size 512
    # --embedding --log-disable --n-gpu-layers 48 --parallel 1 --port 36639"
    reading = _read(_quote("ollama_logs/qwen2-class-rocm-args-ollama-5913.yaml"))
    assert reading.engine == "ollama"
    facts = reading.facts
    assert (facts["context_size_tokens"], facts["gpu_layers"], facts["parallel"]) == (2048, 48, 1)
    assert facts["batch_tokens"] == 512


def test_vllm_non_default_args_and_version():
    reading, _ = read_log(_quote("vllm_memory/qwen2-7b-a100-40gb-tp2-v0.10-2nodes.yaml"))
    assert (reading.engine, reading.version) == ("vllm", "0.10.1.1")
    facts = reading.facts
    assert (facts["tp"], facts["max_model_len"], facts["utilization"]) == (2, 16384, 0.5)
    assert facts["max_num_batched_tokens"] == 2048  # "Chunked prefill is enabled with …=2048."


def test_vllm_v0_engine_config_line():
    # vllm PR 14447: "Initializing a V0 LLM engine (v0.8.3rc2.dev224+g49c0d11ec) with config:
    # model='…', … max_seq_len=8192, … tensor_parallel_size=16, …"
    reading, _ = read_log(_quote("vllm_memory/deepseek-v3-awq-rtx3090-tp16-v0.8.3.yaml"))
    assert reading.version == "0.8.3rc2.dev224+g49c0d11ec"
    assert (reading.facts["tp"], reading.facts["max_model_len"]) == (16, 8192)
    assert reading.facts["utilization"] == 0.99


def test_trtllm_bench_summary():
    reading, _ = read_log(
        _quote("trtllm_logs/llama-2-7b-fp8-h100-v0.12-perf-benchmarking-inconsistent.yaml")
    )
    assert (reading.engine, reading.version) == ("trtllm", "0.12.0.dev2024073000")
    facts = reading.facts
    assert (facts["model"], facts["kv_dtype"], facts["utilization"]) == (
        "meta-llama/Llama-2-7b-hf",
        "fp8",
        0.99,
    )
    assert (facts["max_model_len"], facts["tokens_per_block"]) == (4098, 64)


def test_llm_d_table_row():
    # llm-d's table of vLLM 0.11 figures (source in the file): model, TP, max model length
    reading, _ = read_log(_quote("vllm_memory/qwen3-32b-h100-tp2-v0.11.yaml"))
    assert (reading.facts["model"], reading.facts["tp"], reading.facts["max_model_len"]) == (
        "Qwen3-32B",
        2,
        16000,
    )
    assert reading.figures["available_kv_bytes"].value == 34.49 * 2**30


def test_weight_dtype_from_the_quantization_argument_or_the_checkpoint_name():
    from kvplan.explain.rebuild import logged_weight_dtype

    # vllm PR 14447's engine-config line: "quantization=awq_marlin"
    awq, _ = read_log(_quote("vllm_memory/deepseek-v3-awq-rtx3090-tp16-v0.8.3.yaml"))
    assert logged_weight_dtype(awq) == "awq"
    # "non-default args: {'model': '/tmp/model/Qwen3-Coder-480B-A35B-Instruct-FP8', …}"
    named, _ = read_log(_quote("vllm_logs/qwen3-coder-480b-fp8-h20-dp8-util090-error.yaml"))
    assert logged_weight_dtype(named) == "fp8"
    # trtllm-bench's summary: "Quantization:           FP8"
    bench, _ = read_log(
        _quote("trtllm_logs/llama-2-7b-fp8-h100-v0.12-perf-benchmarking-inconsistent.yaml")
    )
    assert logged_weight_dtype(bench) == "fp8"


def test_llama_cpp_kv_size_line_states_the_context_and_a_quantised_v_flash_attention():
    # llama.cpp#11337: no n_ctx or flash_attn line in the excerpt; llama.cpp refuses a q8_0 V
    # cache without flash attention, and this era's kv_size is n_ctx (one stream).
    reading = _read(_quote("llamacpp_logs/qwen2.5-32b-class-q8_0-rocm-ctx32768-issue11337.yaml"))
    facts = reading.facts
    assert (facts["context_size_tokens"], facts["flash_attention"]) == (32768, True)
    assert (facts["kv_dtype"], facts["v_dtype"]) == ("q8_0", "q8_0")


def test_an_f16_cache_says_nothing_of_flash_attention():
    reading = _read(_quote("llamacpp_logs/qwen2.5-32b-class-f16-5xmi50-ctx32768-issue12369.yaml"))
    assert reading.facts["context_size_tokens"] == 32768
    assert "flash_attention" not in reading.facts
