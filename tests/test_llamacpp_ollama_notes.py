"""What llama.cpp and ollama outputs say about the runtime behind the numbers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def invoke(*args: str) -> dict:
    result = runner.invoke(app, [*args, "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ggml/include/ggml-cuda.h (ggml-org/llama.cpp): GGML_CUDA_NAME is "ROCm" under GGML_USE_HIP,
# else "CUDA"; the KV buffers are named after the device: ROCm0 on an AMD GPU, CUDA0 on NVIDIA.
@pytest.mark.parametrize(("sku", "device"), [("mi355x", "ROCm0"), ("h100-sxm", "CUDA0")])
def test_llama_cpp_log_names_the_gpu_backend(sku, device):
    (row,) = invoke("report", "-m", "llama-3.1-8b", "-e", "llama.cpp", "--sku", sku, "-c", "8k")
    buffers = [line for line in row["log_lines"] if "KV buffer size" in line]
    assert buffers and all(line.split()[1] == device for line in buffers)
    other = "CUDA" if device.startswith("ROCm") else "ROCm"
    assert not any(other in line for line in row["log_lines"])


# ollama runs Gemma 3 with its Go engine (ollama/ollama model/models/gemma3), not llama.cpp.
def test_ollama_go_engine_models_say_the_figures_are_llama_cpps():
    record = invoke("size", "gemma-3-27b", "-e", "ollama")
    caveat = record["engine_caveat"]
    assert caveat.startswith("ollama serves gemma3 models with its own Go engine")
    assert "llama.cpp's accounting" in caveat and caveat in record["notes"]
    table = runner.invoke(app, ["size", "gemma-3-27b", "-e", "ollama"])
    assert "Go engine" in " ".join(table.output.split())
    (row,) = invoke("report", "-m", "gemma-3-27b", "-e", "ollama", "--sku", "h100-sxm", "-c", "8k")
    assert caveat in row["notes"]


@pytest.mark.parametrize(
    ("model", "engine"), [("llama-3.1-8b", "ollama"), ("gemma-3-27b", "llama.cpp")]
)
def test_no_caveat_where_the_engine_itself_is_modelled(model, engine):
    record = invoke("size", model, "-e", engine)
    assert record["engine_caveat"] is None
    assert not any("Go engine" in note for note in record["notes"])
