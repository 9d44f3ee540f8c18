"""TensorRT-LLM startup logs (`[TensorRT-LLM][INFO]` lines of the KV cache manager).

0.5: "Using N tokens in paged KV cache." (before the rounding to blocks); 0.8: "Allocate N
bytes for k/v cache."; 0.9 on: "Memory usage when calculating max tokens in paged kv cache:
total: … GiB, available: … GiB", "Number of blocks in KV cache primary pool: N", "Number of
tokens per block: P.", "[MemUsageChange] Allocated … GiB for max tokens in paged KV cache
(T)."; 1.x: "Max KV cache blocks per sequence: B [window size=W], tokens per block=P,
primary blocks=N, …". `trtllm-bench` prints the model, version and settings after the log.
"""

from __future__ import annotations

import re

from kvplan.explain.arguments import as_int
from kvplan.explain.reading import (
    GPU,
    MIB,
    POOL,
    Compared,
    Logged,
    Reading,
    Rule,
    amount,
    gib,
    number,
    rule,
)

ENGINE = "trtllm"


@rule("TensorRT-LLM", r"TensorRT-LLM [Vv]ersion:?\s+v?(\d+\.\d+\.\d+\S*)")
def _version(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.version = reading.version or match.group(1)
    reading.version_basis = reading.version_basis or f"line {line}: {match.group(0).strip()}"


@rule("Loaded engine size", r"Loaded engine size: (\d+) MiB")
def _engine(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(amount(match.group(1), MIB, "weights_bytes", line))


@rule("calculating max tokens", r"total: ([\d.]+) GiB, available: ([\d.]+) GiB")
def _memory(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "total_bytes", line))
    reading.figure(gib(match.group(2), "available_bytes", line))


@rule("primary pool", r"Number of blocks in KV cache primary pool: (\d+)")
def _blocks(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(number(match.group(1), "primary_blocks", line, "blocks"))


@rule("pages per sequence", r"Max KV cache pages per sequence: (\d+)")
def _pages(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(number(match.group(1), "max_blocks_per_sequence", line, "blocks"))


@rule(
    "blocks per sequence",
    r"Max KV cache blocks per sequence: (\d+) \[window size=(\d+)\], tokens per block=(\d+), "
    r"primary blocks=(\d+)",
)
def _blocks_1x(match: re.Match[str], line: int, reading: Reading) -> None:
    per_sequence, window, tokens, primary = match.groups()
    reading.figure(number(per_sequence, "max_blocks_per_sequence", line, "blocks"))
    reading.fact("max_model_len", int(window), line)
    reading.fact("tokens_per_block", int(tokens), line)
    reading.figure(number(primary, "primary_blocks", line, "blocks"))
    reading.fact("release_since", "1.0", line)


@rule("tokens per block:", r"Number of tokens per block: (\d+)")
def _tokens_per_block(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("tokens_per_block", int(match.group(1)), line)


@rule(
    "for max tokens in paged KV cache",
    r"Allocated ([\d.]+) GiB for max tokens in paged KV cache \((\d+)\)",
)
def _allocated(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "allocated_bytes", line))
    reading.figure(number(match.group(2), "max_tokens", line, "tokens"))


@rule("tokens in paged KV cache", r"Using (\d+) tokens in paged KV cache")
def _tokens_05(match: re.Match[str], line: int, reading: Reading) -> None:
    logged = number(match.group(1), "max_tokens_before_block_rounding", line, "tokens")
    reading.figure(logged)
    reading.fact("release_until", "0.8", line)


@rule("bytes for k/v cache", r"Allocate (\d+) bytes for k/v cache")
def _bytes_08(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(Logged("kv_budget_bytes", int(match.group(1)), "bytes", 1.0,
                          f"{match.group(1)} bytes", line))  # fmt: skip


@rule(
    ":",
    r"^\s*(Model|Max Sequence Length|KV Cache Dtype|KV Memory Percentage|Quantization):\s+(\S+)",
)
def _bench(match: re.Match[str], line: int, reading: Reading) -> None:
    key, value = match.groups()
    if key == "Model":
        reading.fact("model", value, line)
    elif key == "Max Sequence Length":
        reading.fact("max_model_len", as_int(value), line)
    elif key == "Quantization":
        reading.fact("quantization", value, line)
    elif key == "KV Cache Dtype":
        reading.fact("kv_dtype", {"FP8": "fp8"}.get(value), line)
    elif value.endswith("%"):
        reading.fact("utilization", float(value[:-1]) / 100, line)


RULES: tuple[Rule, ...] = (
    _version, _engine, _memory, _blocks, _pages, _blocks_1x, _tokens_per_block, _allocated,
    _tokens_05, _bytes_08, _bench,
)  # fmt: skip
MARKS = ("[TensorRT-LLM]", "TensorRT-LLM")

COMPARED = (
    Compared("total_bytes", "GPU memory", "startup/total_bytes", GPU, "GPU memory the runtime "
             "reports"),
    Compared("weights_bytes", "engine (weights)", "weights_bytes_per_gpu", GPU, "weights",
             in_budget=True),
    Compared("available_bytes", "free memory for the pool", "startup/available_bytes", GPU,
             "free memory (weights, activations, runtime buffers)"),
    Compared("kv_budget_bytes", "KV budget", "kv_budget_bytes_per_gpu", GPU, "KV budget"),
    Compared("primary_blocks", "primary blocks", "startup/primary_blocks", POOL, "blocks"),
    Compared("max_blocks_per_sequence", "blocks per sequence", "startup/max_blocks_per_sequence",
             POOL, "blocks per sequence"),
    Compared("max_tokens", "max tokens", "startup/max_tokens", POOL, "tokens"),
    Compared("max_tokens_before_block_rounding", "tokens before block rounding",
             "startup/max_tokens_before_block_rounding", POOL, "tokens"),
    Compared("allocated_bytes", "pool bytes", "startup/allocated_bytes", POOL, "pool bytes"),
)  # fmt: skip
# The logged figure the pool is bought with: free memory (× the fraction), else the pool.
# Logged free-memory readings the engine model takes as settings (figure -> declared name).
READINGS: dict[str, str] = {
    "total_bytes": "total_gpu_memory_bytes",
    "available_bytes": "available_memory_bytes",
}
BUDGETS = ("available_bytes", "kv_budget_bytes", "allocated_bytes")


def kv_memory_bytes(key: str, logged: float, predicted: dict) -> float:
    """The KV budget a logged figure stands for: free memory × kvplan's fraction (the engine
    model's default for the release, or the logged one), or the pool itself."""
    if key == "available_bytes":
        return logged * predicted["budget"]["utilization"]
    return logged


def release_by_wording(reading: Reading) -> tuple[str, str] | None:
    if reading.facts.get("release_since") == "1.0":
        return "1.0", "wording: 'Max KV cache blocks per sequence … [window size=…]' (1.x)"
    if reading.facts.get("release_until") == "0.8":
        return "0.5.0", "wording: 'Using N tokens in paged KV cache' (0.5 – 0.8)"
    if "available_bytes" in reading.figures:
        return "0.12.0", "wording: 'Memory usage when calculating max tokens' (0.9 – 0.x)"
    return None
