"""vLLM startup logs: the lines each era prints (docs/vllm-log-lines.md), read into a Reading.

V0 (≤ 0.7, `worker.py`): "the current vLLM instance can use total_gpu_memory (…) x
gpu_memory_utilization (…) = …", "model weights take …; non_torch_memory takes …; PyTorch
activation peak memory takes …; the rest of the memory reserved for KV Cache is …",
"# GPU blocks: N". V1 (0.8 on, `gpu_worker.py`, `kv_cache_utils.py`): "Available KV cache
memory: … GiB", "GPU KV cache size: N tokens", "Maximum concurrency for L tokens per request:
C x", and from 0.19 "Free memory on device (free/total GiB) on startup. Desired GPU memory
utilization is (u, … GiB). Actual usage is … for weight, … for peak activation, … for
non-torch memory, and … for CUDAGraph memory." The arguments come from "non-default args:
{…}", the engine-config line, or a `vllm serve` command line.
"""

from __future__ import annotations

import re

from kvplan.explain import vllm_v0
from kvplan.explain.arguments import as_bool, as_fraction, as_int, command_line, dict_literal, take
from kvplan.explain.reading import (
    GIB,
    GPU,
    POOL,
    Compared,
    Reading,
    Rule,
    amount,
    count,
    gib,
    number,
    rule,
)

ENGINE = "vllm"


def _text(value: str) -> str:
    return value


def _kv_dtype(value: str) -> str | None:
    """vLLM's --kv-cache-dtype: 'auto' is the model's dtype (kvplan's default)."""
    return None if value in ("auto", "None") else value


# argument (non-default args key, flag or config field) -> (fact, converter)
ARGUMENTS = {
    "model": ("model", _text),
    "model_tag": ("model", _text),
    "positional": ("model", _text),
    "tensor_parallel_size": ("tp", as_int),
    "tp": ("tp", as_int),
    "pipeline_parallel_size": ("pp", as_int),
    "pp": ("pp", as_int),
    "data_parallel_size": ("dp", as_int),
    "dp": ("dp", as_int),
    "gpu_memory_utilization": ("utilization", as_fraction),
    "max_model_len": ("max_model_len", as_int),
    "max_seq_len": ("max_model_len", as_int),
    "block_size": ("tokens_per_block", as_int),
    "kv_cache_dtype": ("kv_dtype", _kv_dtype),
    "max_num_seqs": ("max_num_seqs", as_int),
    "max_num_batched_tokens": ("max_num_batched_tokens", as_int),
    "kv_cache_memory_bytes": ("kv_memory_bytes", as_int),
    "kv_cache_memory": ("kv_memory_bytes", as_int),
    "enable_expert_parallel": ("ep", as_bool),
    "quantization": ("quantization", _text),
    "enforce_eager": ("enforce_eager", as_bool),
}


@rule("vLLM API server version", r"vLLM API server version (\S+)")
def _version(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.version = reading.version or match.group(1)
    reading.version_basis = reading.version_basis or f"line {line}: {match.group(0)}"


@rule("LLM engine (", r"Initializing an? (V[01]) LLM engine \((v?[^)\s]+)\) with config: (.*)")
def _engine_config(match: re.Match[str], line: int, reading: Reading) -> None:
    if reading.version is None:
        reading.version = match.group(2).lstrip("v")
        reading.version_basis = f"line {line}: {match.group(1)} LLM engine ({match.group(2)})"
    fields = dict(re.findall(r"(\w+)=('[^']*'|[^,\s]+)", match.group(3)))
    take({k: v.strip("'") for k, v in fields.items()}, ARGUMENTS, reading, line)


@rule("non-default args:", r"non-default args: (\{.*\})")
def _non_default(match: re.Match[str], line: int, reading: Reading) -> None:
    take(dict_literal(match.group(1)), ARGUMENTS, reading, line)


@rule("vllm", r"(?:vllm serve|vllm\.entrypoints\.openai\.api_server)(\s.*)")
def _command(match: re.Match[str], line: int, reading: Reading) -> None:
    arguments = command_line("vllm " + match.group(1))
    take(arguments, ARGUMENTS, reading, line)


@rule("Available KV cache memory", r"Available KV cache memory:\**\s*(-?[\d.]+) GiB")
def _available(match: re.Match[str], line: int, reading: Reading) -> None:
    # Every rank prints its own and the engine takes the smallest pool (kv_cache_utils); the
    # engine model takes one budget for every pipeline stage, so the largest is given.
    reading.figure(gib(match.group(1), "available_kv_bytes", line), keep="max")
    reading.fact("era", "v1", line)


@rule(
    "GPU KV cache size",
    r"GPU KV cache size:\**\s*([\d,]+) tokens(?: \(([\d,]+) blocks x (\d+) tokens/block\))?",
)
def _tokens(match: re.Match[str], line: int, reading: Reading) -> None:
    tokens, blocks, tokens_per_block = match.groups()
    reading.figure(number(tokens, "gpu_kv_cache_tokens", line, "tokens"))
    if blocks is not None:  # llm-d's summaries add the blocks behind the tokens
        reading.figure(number(blocks, "num_gpu_blocks", line, "blocks"))
        reading.fact("tokens_per_block", int(tokens_per_block), line)


@rule(
    "Maximum concurrency for",
    r"Maximum concurrency for ([\d,]+) tokens per request:\**\s*([\d.]+)x",
)
def _concurrency(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("max_model_len", count(match.group(1)), line)
    reading.figure(number(match.group(2), "max_concurrency", line, "requests"))


@rule("blocks", r"(?:# )?(?:GPU|cuda) blocks: (\d+)|num_gpu_blocks is: (\d+)")
def _blocks(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(number(match.group(1) or match.group(2), "num_gpu_blocks", line, "blocks"))


@rule(
    "total_gpu_memory",
    r"total_gpu_memory \(([\d.]+)GiB\) x gpu_memory_utilization \(([\d.]+)\) = ([\d.]+)GiB",
)
def _v0_request(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "total_bytes", line))
    reading.fact("utilization", as_fraction(match.group(2)), line)
    reading.figure(gib(match.group(3), "requested_bytes", line))
    reading.fact("era", "v0", line)


@rule(
    "model weights take",
    r"model weights take ([\d.]+)GiB; non_torch_memory takes (-?[\d.]+)GiB; PyTorch activation "
    r"peak memory takes ([\d.]+)GiB; the rest of the memory reserved for KV Cache is (-?[\d.]+)GiB",
)
def _v0_terms(match: re.Match[str], line: int, reading: Reading) -> None:
    names = ("weights_bytes", "non_torch_bytes", "activation_bytes", "available_kv_bytes")
    for name, text in zip(names, match.groups(), strict=True):
        reading.figure(
            gib(text, name, line), keep="max" if name == "available_kv_bytes" else "first"
        )


@rule(
    "Free memory on device",
    r"Free memory on device(?: \(|:\**\s*)([\d.]+)/([\d.]+) GiB\)? on startup",
)
def _free(match: re.Match[str], line: int, reading: Reading) -> None:
    free = gib(match.group(1), "free_at_start_bytes", line)
    reading.figure(free)
    reading.figure(gib(match.group(2), "total_bytes", line))
    # the high end of its rounding: vLLM started, so its check passed on the unrounded figure
    reading.fact("free_memory_at_start_bytes", int(free.value + free.step / 2), line)
    if reading.version is None:
        reading.fact("era_since", "0.19", line)


@rule(
    "Desired GPU",
    r"Desired GPU (?:memory )?utilization(?: is \(|:\**\s*)([\d.]+)[, ]+\(?([\d.]+) GiB\)",
)
def _desired(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("utilization", as_fraction(match.group(1)), line)
    reading.figure(gib(match.group(2), "requested_bytes", line))


@rule(
    "Actual usage is",
    r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation, (-?[\d.]+) GiB "
    r"for non-torch memory(?:, and (-?[\d.]+) GiB for CUDAGraph memory)?",
)
def _actual(match: re.Match[str], line: int, reading: Reading) -> None:
    names = ("weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes")
    for name, text in zip(names, match.groups(), strict=True):
        if text is not None:
            reading.figure(gib(text, name, line))


@rule("kv cache memory in use", r"Current kv cache memory in use is ([\d.]+) GiB")
def _in_use(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "available_kv_bytes", line), keep="max")


@rule("Model loading took", r"Model loading took ([\d.]+) GiB")
def _loading(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "weights_bytes", line))


@rule("Loading model weights took", r"Loading model weights took ([\d.]+) GB")
def _loading_v0(match: re.Match[str], line: int, reading: Reading) -> None:
    # 0.6–0.7 print GiB figures labelled "GB" (float(bytes) / 2**30).
    reading.figure(amount(match.group(1), GIB, "weights_bytes", line, "GB"))


@rule("max_num_batched_tokens=", r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
def _chunked(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("max_num_batched_tokens", int(match.group(1)), line)


@rule("stored in KV cache", r"maximum number of tokens that can be stored in KV cache \((\d+)\)")
def _too_long(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(number(match.group(1), "gpu_kv_cache_tokens", line, "tokens"))


@rule("estimated maximum model length is", r"estimated maximum model length is (\d+)")
def _estimate(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(number(match.group(1), "estimated_max_model_len", line, "tokens"))


@rule("device_name=", r"device_name=([A-Za-z0-9_-]+)")
def _device(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("gpu", match.group(1).replace("_", " "), line)


RULES: tuple[Rule, ...] = (
    _version, _engine_config, _non_default, _command, _available, _tokens, _concurrency,
    _blocks, _v0_request, _v0_terms, _free, _desired, _actual, _in_use, _loading, _loading_v0,
    _chunked, _too_long, _estimate, _device, *vllm_v0.RULES,
)  # fmt: skip
# Lines only vLLM prints: a log with one of them is a vLLM log.
MARKS = (
    "vLLM", "vllm", "gpu_worker.py", "kv_cache_utils.py", "Available KV cache memory",
    "Memory profiling results", "worker.py", "Available KV Cache (GiB)", "KV cache is needed",
)  # fmt: skip


def release_by_wording(reading: Reading) -> tuple[str, str] | None:
    """(release, basis) when no version line was read: the era its wording dates it to."""
    if reading.facts.get("era_since") == "0.19":
        return "0.19.0", "wording: 'Free memory on device … on startup' is printed from 0.19"
    if reading.facts.get("era_since") == "0.11":
        return "0.11.0", "wording: llm-d's benchmark table of vLLM 0.11 figures"
    if reading.facts.get("era") == "v0":
        return "0.6.4", "wording: V0's 'total_gpu_memory … x gpu_memory_utilization' (≤ 0.7)"
    if reading.facts.get("era") == "v1":
        return "0.11.0", "wording: V1's 'Available KV cache memory' (0.8 – 0.21); 0.11 taken"
    return None


# Each logged figure and kvplan's (a capacity row's JSON): key, words, path, basis, term.
_BUDGET_TERMS = (
    ("total_bytes", "GPU memory", "budget/total_bytes", "GPU memory the runtime reports"),
    ("weights_bytes", "weights", "weights_bytes_per_gpu", "weights"),
    ("activation_bytes", "activation peak", "budget/activation_bytes", "activation peak"),
    ("non_torch_bytes", "non-torch memory", "budget/non_torch_bytes", "non-torch memory"),
    ("cudagraph_bytes", "CUDA graphs", "budget/cudagraph_bytes", "CUDA graphs"),
)
_POOL = (
    ("num_gpu_blocks", "KV blocks"),
    ("gpu_kv_cache_tokens", "KV cache tokens"),
    ("max_concurrency", "maximum concurrency"),
    ("estimated_max_model_len", "longest length that fits"),
)
COMPARED = (
    Compared(
        "free_at_start_bytes",
        "free memory at startup",
        None,
        GPU,
        "vLLM checks it against utilization × memory",
        given_as="free_memory_at_start_bytes",
    ),
    Compared(
        "requested_bytes",
        "utilization × memory",
        "budget/requested_bytes",
        GPU,
        "utilization × memory",
        in_budget=True,
    ),
    *(
        Compared(k, words, path, GPU, term, in_budget=True)
        for k, words, path, term in _BUDGET_TERMS
    ),
    Compared(
        "peak_torch_bytes",
        "peak torch memory",
        "weights_bytes_per_gpu+budget/activation_bytes",
        GPU,
        "weights and activation peak (0.6.4 prints their sum)",
        in_budget=True,
    ),
    Compared("available_kv_bytes", "KV cache memory", "kv_budget_bytes_per_gpu", GPU, "KV budget"),
    Compared(
        "needed_bytes", "KV one request needs", "startup/needed_bytes", POOL, "KV per request"
    ),
    *(Compared(key, words, f"startup/{key}", POOL, words) for key, words in _POOL),
)
# Logged free-memory readings the engine model takes as settings (figure -> declared name).
READINGS: dict[str, str] = {"total_bytes": "total_gpu_memory_bytes"}
# The terms vLLM subtracts from the requested memory, and those that add to the budget.
SUBTRACTED = ("weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes")
ADDED = ("requested_bytes", "total_bytes")
BUDGETS = ("available_kv_bytes",)  # the logged figure the pool is bought with


def kv_memory_bytes(key: str, logged: float, predicted: dict) -> float:
    """The KV budget (--kv-memory) a logged pool budget stands for: vLLM's is the budget."""
    return logged
