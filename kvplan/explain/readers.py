"""Which engine wrote a log, and its reader (one module per engine)."""

from __future__ import annotations

import re
from types import ModuleType

from kvplan.errors import KvplanError
from kvplan.explain import llamacpp, ollama, sglang, trtllm, vllm
from kvplan.explain.reading import Reading, apply

# Engine -> reader module (ENGINE, RULES, MARKS, COMPARED, BUDGET, kv_memory_bytes,
# release_by_wording), in the order a tie is broken.
READERS: dict[str, ModuleType] = {
    module.ENGINE: module for module in (vllm, sglang, trtllm, llamacpp, ollama)
}


def _marked(reader: ModuleType, lines: list[str]) -> int:
    """Lines carrying one of the engine's own marks (one alternation: a log of 100k lines
    is scanned in C, not line by line in Python)."""
    marks = re.compile("|".join(re.escape(mark) for mark in reader.MARKS))
    return len(marks.findall("\n".join(lines)))


def reader_for(lines: list[str], engine: str | None = None) -> ModuleType:
    """The reader of the engine that wrote `lines` (or of `engine` when given).

    Raises:
        KvplanError: no engine's lines in the log, or an engine with no reader.
    """
    if engine is not None:
        if engine not in READERS:
            raise KvplanError(
                f"--engine: no log reader for {engine!r} (allowed: {', '.join(READERS)})"
            )
        return READERS[engine]
    scores = {name: _marked(reader, lines) for name, reader in READERS.items()}
    if scores["ollama"]:  # ollama's runner prints llama.cpp's lines under its own
        return READERS["ollama"]
    best = max(scores, key=lambda name: scores[name])
    if scores[best] == 0:
        raise KvplanError(
            "the log has no startup line of vLLM, SGLang, TensorRT-LLM, llama.cpp or ollama "
            "that kvplan reads; give --engine NAME if it is one of them"
        )
    return READERS[best]


def read_lines(lines: list[str], reader: ModuleType) -> Reading:
    """Every fact and figure `reader` finds in `lines`."""
    return apply(reader.RULES, lines, Reading(reader.ENGINE))
