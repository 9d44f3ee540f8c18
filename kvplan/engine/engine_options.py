"""The engine options of a plan, however given: CLI flags or a `kvplan check` products file.

Both name them alike (`--block-size` is `block_size:`) and both end here, so a value the CLI
refuses is refused in a file with the same rule, and a setting that changes the budget can be
given either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kvplan.limits as limits
from kvplan.engine import EngineSettings, engine
from kvplan.errors import KvplanError
from kvplan.units import parse_bytes

# Every engine option, by its name in a products file (the CLI flag with '_' for '-').
ENGINE_OPTION_NAMES = (
    "engine",
    "engine_version",
    "utilization",
    "kv_memory",
    "block_size",
    "max_num_batched_tokens",
    "max_num_seqs",
    "activation_memory",
    "non_torch_memory",
    "cudagraph_memory",
    "no_hybrid_allocator",
    "draft_layers",
    "max_kv_tokens",
    "ctx_size",
    "parallel",
    "v_dtype",
    "flash_attn",
    "kv_unified",
    "swa_full",
    "gpu_layers",
    "ubatch_size",
    "batch_size",
    "dp",
    "ep",
)
# Whole counts with a stated maximum (kvplan.limits), as the CLI's parsers check them.
_COUNTED = {
    "block_size": limits.BLOCK,
    "max_num_batched_tokens": limits.BATCHED_TOKENS,
    "max_num_seqs": limits.BATCH,
    "draft_layers": limits.LAYERS,
    "max_kv_tokens": limits.CONTEXT,
    "ctx_size": limits.CONTEXT,
    "parallel": limits.BATCH,
    "gpu_layers": limits.LAYERS,
    "ubatch_size": limits.BATCHED_TOKENS,
    "batch_size": limits.BATCHED_TOKENS,
    "dp": limits.GPUS,
}


def engine_settings(values: Mapping[str, Any]) -> tuple[str, EngineSettings, int, bool]:
    """(engine name, settings, dp, ep) from option values keyed by ENGINE_OPTION_NAMES.

    Missing keys take the CLI's defaults. Memory is bytes, or text with a unit ("4.76GiB").

    Raises:
        KvplanError: an unknown engine or version, a value out of range (the option named).
    """

    def option(name: str) -> str:
        return "--" + name.replace("_", "-")

    def memory(name: str) -> int | None:
        value = values.get(name)
        return None if value is None else parse_bytes(value, option(name))

    for name, limit in _COUNTED.items():
        value = values.get(name)
        if value is not None:
            limit.check(value, option(name))
    for name in ("engine", "engine_version", "v_dtype"):  # the engines read '' as "not given"
        if values.get(name) == "":
            raise KvplanError(f"{option(name)}: empty; leave it out for the engine's default")
    settings = EngineSettings(
        version=values.get("engine_version"),
        tokens_per_block=values.get("block_size"),
        hybrid_allocator=False if values.get("no_hybrid_allocator") else None,
        draft_layers=values.get("draft_layers") or 0,
        utilization=values.get("utilization"),
        kv_memory_bytes=memory("kv_memory"),
        activation_bytes=memory("activation_memory"),
        non_torch_bytes=memory("non_torch_memory"),
        cudagraph_bytes=memory("cudagraph_memory"),
        max_num_batched_tokens=values.get("max_num_batched_tokens"),
        max_num_seqs=values.get("max_num_seqs"),
        max_kv_tokens=values.get("max_kv_tokens"),
        context_size_tokens=values.get("ctx_size"),
        parallel=values.get("parallel"),
        v_dtype=values.get("v_dtype"),
        flash_attention=values.get("flash_attn"),
        kv_unified=values.get("kv_unified") or None,
        swa_full=bool(values.get("swa_full")),
        gpu_layers=values.get("gpu_layers"),
        ubatch_tokens=values.get("ubatch_size"),
        batch_tokens=values.get("batch_size"),
    )
    name = engine(values.get("engine") or "vllm").name
    return name, settings, values.get("dp") or 1, bool(values.get("ep"))
