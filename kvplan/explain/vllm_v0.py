"""vLLM lines of the V0 releases and of summaries that quote vLLM's figures.

0.6.4 prints one line, "Memory profiling results: total_gpu_memory=…GiB initial_memory_usage=…
peak_torch_memory=… non_torch_memory=… kv_cache_size=…GiB gpu_memory_utilization=0.90"; 0.6.5
one figure a line ("total_gpu_memory     79.22GiB", "model weights take   14.96GiB", …,
"available_kv_cache_memory    53.29GiB"). V1's "…GiB KV cache is needed, which is larger than
the available KV cache memory (… GiB)" is the error when one request does not fit. llm-d's
benchmark tables quote vLLM's figures as "| Model | Status | Model Weight (GiB) | Peak
Activation (GiB) | Non-torch Memory (GiB) | CUDAGraph Memory (GiB) | Available KV Cache (GiB) |
TP Size | Max Model Len |" rows.
"""

from __future__ import annotations

import re

from kvplan.explain.arguments import as_fraction, as_int
from kvplan.explain.reading import Reading, Rule, gib, rule

_PROFILE_064 = {
    "total_gpu_memory": "total_bytes",
    "peak_torch_memory": "peak_torch_bytes",
    "non_torch_memory": "non_torch_bytes",
    "kv_cache_size": "available_kv_bytes",
}
_PROFILE_065 = {
    "total_gpu_memory": "total_bytes",
    "the current vLLM instance can use": "requested_bytes",
    "model weights take": "weights_bytes",
    "non_torch_memory": "non_torch_bytes",
    "PyTorch activation peak memory": "activation_bytes",
    "available_kv_cache_memory": "available_kv_bytes",
}
# llm-d table columns (header words) -> figure or fact
_TABLE = {
    "Model Weight (GiB)": "weights_bytes",
    "Peak Activation (GiB)": "activation_bytes",
    "Non-torch Memory (GiB)": "non_torch_bytes",
    "CUDAGraph Memory (GiB)": "cudagraph_bytes",
    "Available KV Cache (GiB)": "available_kv_bytes",
}


@rule("Memory profiling results:", r"Memory profiling results: (total_gpu_memory=.*)")
def _profile_064(match: re.Match[str], line: int, reading: Reading) -> None:
    for key, value in re.findall(r"(\w+)=(-?[\d.]+)(?:GiB)?", match.group(1)):
        if key in _PROFILE_064:
            reading.figure(gib(value, _PROFILE_064[key], line), keep="max")
        elif key == "gpu_memory_utilization":
            reading.fact("utilization", as_fraction(value), line)
    reading.fact("era", "v0", line)


@rule("worker.py", r"worker\.py:\d+\] (total_gpu_memory|the current vLLM instance can use|model "
      r"weights take|non_torch_memory|PyTorch activation peak memory|available_kv_cache_memory|"
      r"gpu_memory_utilization)\s+(-?[\d.]+)(GiB)?\s*$")  # fmt: skip
def _profile_065(match: re.Match[str], line: int, reading: Reading) -> None:
    key, value, unit = match.groups()
    if key == "gpu_memory_utilization":
        reading.fact("utilization", as_fraction(value), line)
    elif unit:
        reading.figure(gib(value, _PROFILE_065[key], line), keep="max")
    reading.fact("era", "v0", line)


@rule(
    "KV cache is needed",
    r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory "
    r"\(([\d.]+) GiB\)",
)
def _needed(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "needed_bytes", line))
    reading.figure(gib(match.group(2), "available_kv_bytes", line), keep="max")
    reading.fact("era", "v1", line)


@rule("|", r"^\|(.*)\|\s*$")
def _table(match: re.Match[str], line: int, reading: Reading) -> None:
    cells = [cell.strip() for cell in match.group(1).split("|")]
    if "Available KV Cache (GiB)" in cells:
        reading.facts["table_columns"] = cells
        return
    columns = reading.facts.get("table_columns")
    if not columns or len(cells) != len(columns) or cells[1] not in ("SUCCESS", "FAILED"):
        return
    row = dict(zip(columns, cells, strict=True))
    reading.fact("model", re.sub(r"\s*\(TP=\d+\)$", "", row["Model"]), line)
    reading.fact("tp", as_int(row.get("TP Size")), line)
    reading.fact("max_model_len", as_int(row.get("Max Model Len")), line)
    for column, name in _TABLE.items():
        value = row.get(column, "")
        if re.fullmatch(r"-?\d+(\.\d+)?", value):
            reading.figure(gib(value, name, line))
    reading.fact("era_since", "0.11", line)


RULES: tuple[Rule, ...] = (_profile_064, _profile_065, _needed, _table)
