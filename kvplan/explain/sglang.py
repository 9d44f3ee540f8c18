"""SGLang startup logs (`model_runner.py`, `memory_pool.py`), read into a Reading.

"Load weight begin. avail mem=… GB" (free memory before loading), "Load weight end. …, avail
mem=… GB, mem usage=… GB" (after loading; the weights), "KV Cache is allocated. [dtype: …,]
#tokens: N, K size: … GB, V size: … GB" (MLA: "KV size: … GB"), "Memory pool end. avail mem=…
GB". SGLang's "GB" are GiB (bytes / (1 << 30)). Arguments: "server_args=ServerArgs(…)" or a
`sglang.launch_server` command line. `#tokens` is printed since 0.4.3.post4 and `dtype:` in
0.5.5 – 0.5.7, which dates a log without a version line.
"""

from __future__ import annotations

import re

from kvplan.engine.sglang import DTYPE_FIELD_RELEASE, TOKENS_FIELD_RELEASE
from kvplan.explain.arguments import as_fraction, as_int, command_line, repr_fields, take
from kvplan.explain.reading import GPU, POOL, Compared, Logged, Reading, Rule, gib, number, rule

ENGINE = "sglang"


def _kv_dtype(value: str) -> str | None:
    return None if value in ("auto", "None") else value


def _text(value: str) -> str:
    return value


ARGUMENTS = {
    "model_path": ("model", _text),
    "model": ("model", _text),
    "tp_size": ("tp", as_int),
    "tp": ("tp", as_int),
    "dp_size": ("dp", as_int),
    "dp": ("dp", as_int),
    "mem_fraction_static": ("utilization", as_fraction),
    "context_length": ("max_model_len", as_int),
    "page_size": ("tokens_per_block", as_int),
    "kv_cache_dtype": ("kv_dtype", _kv_dtype),
    "max_total_tokens": ("max_kv_tokens", as_int),
    "max_running_requests": ("max_num_seqs", as_int),
    "quantization": ("quantization", _text),
}


@rule("ServerArgs(", r"ServerArgs\((.*)")
def _server_args(match: re.Match[str], line: int, reading: Reading) -> None:
    take(repr_fields(match.group(1)), ARGUMENTS, reading, line)


@rule("sglang", r"sglang(?:\.launch_server| serve)(\s.*)")
def _command(match: re.Match[str], line: int, reading: Reading) -> None:
    take(command_line("sglang " + match.group(1)), ARGUMENTS, reading, line)


@rule("sglang", r"(?:sglang|SGLang)[ =]+v?(\d+\.\d+\.\d+(?:\.post\d+)?)")
def _version(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.version = reading.version or match.group(1)
    reading.version_basis = reading.version_basis or f"line {line}: {match.group(0)}"


@rule("Init torch distributed ends", r"Init torch distributed ends\. mem usage=([\d.]+) GB")
def _distributed(match: re.Match[str], line: int, reading: Reading) -> None:
    # memory in use once NCCL is up: the CUDA context and NCCL's buffers
    reading.figure(gib(match.group(1), "distributed_bytes", line, "GB"))


@rule("Load weight begin", r"Load weight begin\. avail mem=([\d.]+) GB")
def _before(match: re.Match[str], line: int, reading: Reading) -> None:
    # SGLang reduces the ranks' readings with a distributed MIN (sgl-project/sglang#34053)
    reading.figure(gib(match.group(1), "avail_bytes_before_weights", line, "GB"), keep="min")


@rule("Load weight end", r"Load weight end\..*avail mem=([\d.]+) GB, mem usage=([\d.]+) GB")
def _after(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "avail_bytes_after_weights", line, "GB"), keep="min")
    reading.figure(gib(match.group(2), "weights_bytes", line, "GB"))
    quant = re.search(r"quant=(\w+)", match.string)  # "Load weight end. quant=fp8, …"
    if quant:
        reading.fact("quantization", quant.group(1), line)


@rule(
    "KV Cache is allocated",
    r"KV Cache is allocated\.(?: dtype: ([\w.]+),)? #tokens: (\d+), "
    r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)",
)
def _pool(match: re.Match[str], line: int, reading: Reading) -> None:
    dtype, tokens, k_size, v_size, kv_size = match.groups()
    if "max_total_num_tokens" in reading.figures:
        return  # a draft model's pool follows the target's: the first is the target's
    reading.figure(number(tokens, "max_total_num_tokens", line, "tokens"))
    if kv_size is not None:
        reading.figure(gib(kv_size, "kv_size_bytes", line, "GB"))
    else:
        k, v = gib(k_size, "k_size_bytes", line, "GB"), gib(v_size, "v_size_bytes", line, "GB")
        reading.figure(k)
        reading.figure(v)
        text = f"{k.text} + {v.text}"
        reading.figure(Logged("kv_size_bytes", k.value + v.value, "bytes", 2 * k.step, text, line))
    reading.fact("printed_dtype", dtype is not None, line)


@rule("Memory pool end", r"Memory pool end\. avail mem=([\d.]+) GB")
def _pool_end(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.figure(gib(match.group(1), "avail_bytes_after_pool", line, "GB"))


RULES: tuple[Rule, ...] = (
    _server_args, _command, _version, _distributed, _before, _after, _pool, _pool_end,
)  # fmt: skip
MARKS = ("sglang", "SGLang", "ServerArgs(", "KV Cache is allocated", "Memory pool end")

COMPARED = (
    Compared(
        "distributed_bytes",
        "memory in use after NCCL init",
        "budget/non_torch_bytes",
        GPU,
        "CUDA context and NCCL",
        in_budget=True,
    ),
    Compared("avail_bytes_before_weights", "free memory before loading",
             "startup/avail_bytes_before_weights", GPU, "free memory before loading (CUDA "
             "context, NCCL)", in_budget=True),
    Compared("avail_bytes_after_weights", "free memory after loading",
             "startup/avail_bytes_after_weights", GPU, "free memory after loading (weights, "
             "the loader's overhead)", in_budget=True),
    Compared("weights_bytes", "weights", "weights_bytes_per_gpu", GPU, "weights", in_budget=True),
    Compared("kv_size_bytes", "KV pool", "kv_budget_bytes_per_gpu", GPU, "KV budget"),
    Compared("k_size_bytes", "K pool", "startup/k_size_bytes", POOL, "K pool"),
    Compared("v_size_bytes", "V pool", "startup/v_size_bytes", POOL, "V pool"),
    Compared("max_total_num_tokens", "#tokens", "startup/max_total_num_tokens", POOL, "tokens"),
    Compared("avail_bytes_after_pool", "free memory after the pool",
             "startup/avail_bytes_after_pool", GPU, "free memory after the pool"),
)  # fmt: skip
# Logged free-memory readings the engine model takes as settings (figure -> declared name).
READINGS: dict[str, str] = {
    "avail_bytes_before_weights": "avail_mem_before_load_bytes",
    "avail_bytes_after_weights": "avail_mem_after_load_bytes",
}
BUDGETS = ("kv_size_bytes",)  # the logged figure the pool is bought with


def kv_memory_bytes(key: str, logged: float, predicted: dict) -> float:
    """SGLang's pool bytes are its budget (rows × row bytes, as kvplan's fixed budget)."""
    return logged


def _release_text(release: tuple[int, ...]) -> str:
    """(0, 4, 3, 3) -> '0.4.3.post3'."""
    text = ".".join(str(part) for part in release[:3])
    return text + (f".post{release[3]}" if len(release) > 3 else "")


def release_by_wording(reading: Reading) -> tuple[str, str] | None:
    """The release the KV line's wording dates the log to (the engine model's own table of
    when each field appeared: kvplan.engine.sglang)."""
    if reading.facts.get("printed_dtype"):
        since = _release_text(DTYPE_FIELD_RELEASE)
        return since, f"wording: 'KV Cache is allocated. dtype: …' ({since} on)"
    if "max_total_num_tokens" in reading.figures:
        since = _release_text(TOKENS_FIELD_RELEASE)
        return None, f"wording: '#tokens' ({since} on); kvplan's default release taken"
    return None
