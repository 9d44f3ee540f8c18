"""The engines by name: where each profile is defined, the other spellings people type, and
the lookup of a typed name. Names only: nothing here loads an engine module, so the settings
(which check an engine name) and the registry (which loads the profile) both read it.
"""

from __future__ import annotations

import difflib

from kvplan.errors import SettingError

# Engine name -> (module of kvplan.engine, the profile it defines). One line per engine.
PROFILES: dict[str, tuple[str, str]] = {
    "vllm": ("vllm", "VLLM"),
    "sglang": ("sglang", "SGLANG"),
    "trtllm": ("trtllm", "TRTLLM"),
    "llama.cpp": ("llamacpp", "LLAMA_CPP"),
    "ollama": ("ollama", "OLLAMA"),
    "exact": ("analytic", "EXACT"),
    "hf": ("analytic", "HF"),
    "naive": ("analytic", "NAIVE"),
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


def engine_name(name: str) -> str:
    """The engine `name` (any case, or an alias) names, as PROFILES spells it.

    Raises:
        SettingError: no engine is called `name` (with the closest name, if any).
    """
    found = ENGINE_ALIASES.get(name.lower(), name.lower())
    if found in PROFILES:
        return found
    close = difflib.get_close_matches(name.lower(), list(PROFILES), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise SettingError("engine", f"unknown engine {name!r}{hint} (allowed: {', '.join(PROFILES)})")
