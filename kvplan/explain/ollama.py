"""ollama server logs: its own lines around the llama.cpp runner's (kvplan.explain.llamacpp).

`msg="Listening on … (version 0.6.2)"` (the release); `msg="server config" env="map[…
OLLAMA_FLASH_ATTENTION:… OLLAMA_KV_CACHE_TYPE:… OLLAMA_NUM_PARALLEL:…]"`; `msg="starting llama
server" cmd="… runner --model … --ctx-size 8192 --batch-size 512 --n-gpu-layers 29 --parallel
4 …"` (`--ctx-size` is num_ctx × parallel); `msg="inference compute" … name="NVIDIA GeForce
RTX 4090" total="23.6 GiB"`; `msg=offload … memory.required.kv="448.0 MiB"`.
"""

from __future__ import annotations

import re

from kvplan.explain import llamacpp
from kvplan.explain.arguments import as_bool, as_int, command_line, take
from kvplan.explain.reading import GIB, GPU, MIB, Compared, Reading, Rule, amount, rule

ENGINE = "ollama"
ARGUMENTS = llamacpp.ARGUMENTS | {"n_gpu_layers": ("gpu_layers", as_int)}
ENVIRONMENT = {
    "OLLAMA_FLASH_ATTENTION": ("flash_attention", as_bool),
    "OLLAMA_KV_CACHE_TYPE": ("kv_dtype", lambda v: v or None),
    "OLLAMA_NUM_PARALLEL": ("parallel", lambda v: as_int(v) or None),
}
_SIZE_UNITS = {"GiB": GIB, "MiB": MIB, "KiB": 1024, "B": 1}


@rule("version", r"Listening on \S+ \(version (\d+\.\d+\.\d+\S*?)\)")
def _version(match: re.Match[str], line: int, reading: Reading) -> None:
    reading.version = reading.version or match.group(1)
    reading.version_basis = reading.version_basis or f"line {line}: {match.group(0)}"


@rule("server config", r'msg="server config" env="map\[(.*?)\]"')
def _config(match: re.Match[str], line: int, reading: Reading) -> None:
    pairs = dict(re.findall(r"(OLLAMA_\w+):(\S*)", match.group(1)))
    take(pairs, ENVIRONMENT, reading, line)


@rule("starting llama server", r'starting llama server" cmd="(.*?)"')
def _command(match: re.Match[str], line: int, reading: Reading) -> None:
    take(command_line(match.group(1)), ARGUMENTS, reading, line)


@rule(
    "inference compute",
    r'msg="inference compute".*?name="([^"]+)"(?: total="([\d.]+) GiB" available="([\d.]+) GiB")?',
)
def _compute(match: re.Match[str], line: int, reading: Reading) -> None:
    name, total, available = match.groups()
    reading.fact("gpu", name, line)
    if total is not None:
        reading.figure(amount(total, GIB, "total_bytes", line))
        reading.figure(amount(available, GIB, "available_at_start_bytes", line))


@rule("memory.required.kv", r'memory\.required\.kv="([\d.]+) (GiB|MiB|KiB|B)"')
def _required_kv(match: re.Match[str], line: int, reading: Reading) -> None:
    unit = _SIZE_UNITS[match.group(2)]
    reading.figure(amount(match.group(1), unit, "required_kv_bytes", line, match.group(2)))


RULES: tuple[Rule, ...] = (
    *llamacpp.RULES, _version, _config, _command, _compute, _required_kv,
)  # fmt: skip
MARKS = ("ollama", "OLLAMA_", 'msg="starting llama server"', "msg=offload")
COMPARED = (
    Compared("total_bytes", "GPU memory", "budget/total_bytes", GPU,
             "GPU memory the runtime reports"),
    Compared("available_at_start_bytes", "free memory at startup", None, GPU,
             "free memory at startup"),
    *llamacpp.COMPARED,
    Compared("required_kv_bytes", "KV ollama plans for", "startup/kv_bytes", GPU,
             "ollama's estimate of the cache (its own formula)"),
)  # fmt: skip
# Logged free-memory readings the engine model takes as settings (figure -> declared name).
READINGS: dict[str, str] = {}
BUDGETS: tuple[str, ...] = ()
kv_memory_bytes = llamacpp.kv_memory_bytes
# The vendored llama.cpp's function names date an ollama log without its version line
# (kvplan.engine.ollama's VENDORED_BUILDS): llama_new_context_with_model to 0.5 (b4000 era),
# llama_init_from_model in 0.6 (b4400), llama_context from 0.7 (b5500).
_BY_PREFIX = {
    "llama_new_context_with_model": "0.5.0",
    "llama_init_from_model": "0.6.0",
    "llama_context": "0.9.0",
}


def release_by_wording(reading: Reading) -> tuple[str, str] | None:
    prefix = reading.facts.get("prefix")
    if prefix not in _BY_PREFIX:
        return None
    return _BY_PREFIX[prefix], f"wording: the runner's '{prefix}' lines (vendored llama.cpp)"
