"""The registry of engine profiles: one line per engine, and the lookup by name."""

from __future__ import annotations

import difflib

from kvplan.engine.analytic import EXACT, HF, NAIVE
from kvplan.engine.base import EngineProfile
from kvplan.engine.llamacpp import LLAMA_CPP
from kvplan.engine.ollama import OLLAMA
from kvplan.engine.sglang import SGLANG
from kvplan.engine.trtllm import TRTLLM
from kvplan.engine.vllm import VLLM
from kvplan.errors import SettingError

ENGINES: dict[str, EngineProfile] = {
    e.name: e for e in (VLLM, SGLANG, TRTLLM, LLAMA_CPP, OLLAMA, EXACT, HF, NAIVE)
}
# Other spellings of engine names people type.
ENGINE_ALIASES = {
    "llamacpp": "llama.cpp",
    "llama-cpp": "llama.cpp",
    "llama_cpp": "llama.cpp",
    "llama-server": "llama.cpp",
    "tensorrt-llm": "trtllm",
    "tensorrt_llm": "trtllm",
    "trt-llm": "trtllm",
}
# The engine every command uses unless told otherwise: what most deployments run.
DEFAULT_ENGINE = "vllm"


def engine(name: str) -> EngineProfile:
    """The engine profile called `name` (any case)."""
    found = ENGINES.get(ENGINE_ALIASES.get(name.lower(), name.lower()))
    if found is not None:
        return found
    close = difflib.get_close_matches(name.lower(), list(ENGINES), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise SettingError("engine", f"unknown engine {name!r}{hint} (allowed: {', '.join(ENGINES)})")
