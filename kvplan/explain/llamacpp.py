"""llama.cpp startup logs (llama-server, llama-cli and the libraries that embed it).

"build: 6100 (…)" or "main: build = 1234" (the release); "general.name" (the model);
"Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9" (the GPU); the context lines
"n_ctx = …", "n_seq_max = …", "n_batch", "n_ubatch", "flash_attn", "kv_unified"; the KV lines
"CUDA0 KV buffer size = … MiB", "KV self size = … MiB, K (f16): … MiB, V (f16): … MiB" (to
b5700) or "llama_kv_cache: size = … MiB (N cells, L layers, s/S seqs), K (f16): …, V (f16):
…" (later); "offloaded N/M layers to GPU"; and the command line. Every figure follows from
the cells, so all are compared from the GPU and settings (there is no budget to buy with).
"""

from __future__ import annotations

import re

from kvplan.explain.arguments import as_bool, as_int, command_line, take
from kvplan.explain.reading import GPU, MIB, Compared, Logged, Reading, Rule, amount, number, rule

ENGINE = "llama.cpp"


def _text(value: str) -> str:
    return value


def _flash(value: str) -> bool | None:
    return {"auto": None, "enabled": True, "disabled": False}.get(value, as_bool(value))


ARGUMENTS = {
    "m": ("model", _text),
    "model": ("model", _text),
    "c": ("context_size_tokens", as_int),
    "ctx_size": ("context_size_tokens", as_int),
    "np": ("parallel", as_int),
    "parallel": ("parallel", as_int),
    "ngl": ("gpu_layers", as_int),
    "n_gpu_layers": ("gpu_layers", as_int),
    "gpu_layers": ("gpu_layers", as_int),
    "ctk": ("kv_dtype", _text),
    "cache_type_k": ("kv_dtype", _text),
    "ctv": ("v_dtype", _text),
    "cache_type_v": ("v_dtype", _text),
    "fa": ("flash_attention", _flash),
    "flash_attn": ("flash_attention", _flash),
    "ub": ("ubatch_tokens", as_int),
    "ubatch_size": ("ubatch_tokens", as_int),
    "b": ("batch_tokens", as_int),
    "batch_size": ("batch_tokens", as_int),
    "kv_unified": ("kv_unified", as_bool),
    "swa_full": ("swa_full", as_bool),
}
CONTEXT = {
    "n_ctx": ("context_size_tokens", as_int),
    "n_seq_max": ("parallel", as_int),
    "n_batch": ("batch_tokens", as_int),
    "n_ubatch": ("ubatch_tokens", as_int),
    "flash_attn": ("flash_attention", _flash),
    "kv_unified": ("kv_unified", as_bool),
}


@rule("build", r"(?:^|\s)(?:main: )?build(?::| =) (\d{1,6})\b")
def _build(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.version = reading.version or f"b{match.group(1)}"
    reading.version_basis = reading.version_basis or f"line {line}: {match.group(0).strip()}"


@rule("general.name", r"general\.name\s+(?:str\s+)?=\s+(.+?)\s*$")
def _name(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("model", match.group(1), line)


@rule("Device 0:", r"Device 0: (.+?), compute capability")
def _device(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("gpu", match.group(1), line)


@rule(
    " = ",
    r"(llama_context|llama_new_context_with_model|llama_init_from_model):\s+(\w+)\s+= (\S+)",
)
def _context(match: re.Match[str], line: int, reading: Reading) -> None:
    prefix, key, value = match.groups()
    reading.fact("prefix", prefix, line)  # the function's name dates the build
    per_seq, total = as_int(value), reading.facts.get("context_size_tokens")
    if key == "n_ctx_per_seq" and per_seq and total and total % per_seq == 0:
        reading.fact("parallel", total // per_seq, line)  # n_ctx_per_seq = n_ctx / n_seq_max
    if key in CONTEXT:
        fact, convert = CONTEXT[key]
        reading.fact(fact, convert(value), line)


@rule("KV buffer size", r"(\w+) KV buffer size =\s+([\d.]+) MiB")
def _buffer(match: re.Match[str], line: int, reading: Reading) -> None:
    device, size = match.groups()
    old = reading.figures.get(f"buffer_{device}_bytes")
    logged = amount(size, MIB, f"buffer_{device}_bytes", line)
    if old is not None:  # an iSWA cache prints one buffer per sub-cache: their sum
        logged = Logged(logged.name, old.value + logged.value, "bytes", logged.step,
                        f"{old.text} + {logged.text}", old.line)  # fmt: skip
    reading.figure(logged, keep="last")


@rule(
    "size",
    r"(?:KV self size|kv self size|llama_kv_cache(?:_unified)?: size)\s*=\s*([\d.]+) Mi?B(.*)",
)
def _self_size(match: re.Match[str], line: int, reading: Reading) -> None:
    total, rest = match.groups()
    named = re.search(r"(llama_new_context_with_model|llama_init_from_model|llama_init_from_file)",
                      match.string)  # fmt: skip
    if named:
        reading.fact("prefix", named.group(1), line)
    reading.figure(amount(total, MIB, "kv_bytes", line))
    cells = re.search(r"\(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/\s*(\d+) seqs\)", rest)
    if cells:
        reading.figure(number(cells.group(1), "cells", line, "tokens"))
    parts = re.search(r"K \((\w+)\):\s+([\d.]+) MiB, V \((\w+)\):\s+([\d.]+) MiB", rest)
    if parts:
        reading.fact("kv_dtype", parts.group(1), line)
        reading.fact("v_dtype", parts.group(3), line)
        _flash_from_v_type(parts.group(3), line, reading)
        reading.figure(amount(parts.group(2), MIB, "k_bytes", line))
        reading.figure(amount(parts.group(4), MIB, "v_bytes", line))


# V cache types llama.cpp stores without quantisation; any other needs flash attention
# ("V cache quantization requires flash_attn"), so a log that shows one ran with it.
_PLAIN_V_TYPES = ("f16", "f32", "bf16")


def _flash_from_v_type(v_type: str, line: int, reading: Reading) -> None:
    if v_type not in _PLAIN_V_TYPES:
        reading.fact("flash_attention", True, line)


@rule(
    "kv_size =",
    r"kv_size = (\d+), offload = \d, type_k = '(\w+)', type_v = '(\w+)', n_layer = (\d+)",
)
def _kv_size(match: re.Match[str], line: int, reading: Reading) -> None:
    cells, type_k, type_v, _ = match.groups()
    reading.figure(number(cells, "cells", line, "tokens"))
    # this era's cache is one stream of n_ctx cells: kv_size is -c when no n_ctx line says it
    reading.fact("context_size_tokens", as_int(cells), line)
    reading.fact("kv_dtype", type_k, line)
    reading.fact("v_dtype", type_v, line)
    _flash_from_v_type(type_v, line, reading)


@rule("layers to GPU", r"offloaded (\d+)/(\d+) layers to GPU")
def _offload(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.fact("gpu_layers", int(match.group(1)), line)


@rule("llama-", r"(?:llama-server|llama-cli|llama-bench)(\s.*)")
def _command(match: re.Match[str], line: int, reading: Reading) -> None:
    take(command_line("llama " + match.group(1)), ARGUMENTS, reading, line)


RULES: tuple[Rule, ...] = (
    _build, _name, _device, _context, _buffer, _self_size, _kv_size, _offload, _command,
)  # fmt: skip
MARKS = (
    "llama_kv_cache", "llama_new_context_with_model", "llama_context:", "llm_load_print_meta",
    "print_info:", "llama_init_from", "llama_model_load", "ggml_cuda_init", "llama-server",
)  # fmt: skip
COMPARED = (
    Compared("kv_bytes", "KV cache", "startup/kv_bytes", GPU, "cells × layers × row bytes"),
    Compared("k_bytes", "K", "startup/k_bytes", GPU, "K rows"),
    Compared("v_bytes", "V", "startup/v_bytes", GPU, "V rows"),
    Compared("buffer_CUDA0_bytes", "CUDA0 KV buffer", "startup/buffer_bytes/CUDA0", GPU,
             "layers on the GPU (-ngl)"),
    Compared("buffer_CPU_bytes", "CPU KV buffer", "startup/buffer_bytes/CPU", GPU,
             "layers in host memory (-ngl)"),
    Compared("buffer_CUDA_Host_bytes", "host KV buffer (pinned)", "startup/buffer_bytes/CPU",
             GPU, "layers in host memory (-ngl)"),
    Compared("buffer_Metal_bytes", "Metal KV buffer", "startup/buffer_bytes/Metal", GPU,
             "layers on the GPU (-ngl)"),
    Compared("cells", "cells", "startup/caches/0/cells", GPU, "cells per stream"),
)  # fmt: skip
# Logged free-memory readings the engine model takes as settings (figure -> declared name).
READINGS: dict[str, str] = {}
BUDGETS: tuple[str, ...] = ()  # llama.cpp allocates cells, not a memory budget


def kv_memory_bytes(key: str, logged: float, predicted: dict) -> float:
    return logged


# The function that prints the context lines dates a build: llama_init_from_file (2023),
# llama_new_context_with_model (to b4500), llama_init_from_model (b4500 – b5600),
# llama_context (b5600 on).
_BY_PREFIX = {
    "llama_init_from_file": "b1000",
    "llama_new_context_with_model": "b4000",
    "llama_init_from_model": "b4600",
    "llama_context": "b6000",
}


def release_by_wording(reading: Reading) -> tuple[str, str] | None:
    prefix = reading.facts.get("prefix")
    if prefix in _BY_PREFIX:
        return _BY_PREFIX[prefix], f"wording: the '{prefix}' lines date the build"
    if "cells" in reading.figures:
        return "b6000", "wording: 'llama_kv_cache: size = … (N cells, …)' (b5700 on)"
    return None
