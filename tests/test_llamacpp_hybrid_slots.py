"""llama.cpp's KV cache for hybrid (attention + recurrent) models with several slots, by build.

ggml-org/llama.cpp `src/llama-model.cpp` `create_memory` gave the hybrid memory
`attn_kv_size = cparams.n_ctx` with `unified = cparams.kv_unified` from PR #15050 ("memory :
handle kv_unified for hybrid models", 2025-08-03): without --kv-unified a stream per slot,
each of n_ctx cells. PR #19559 ("memory : fix kv cache size for hybrid models", 2026-02-12:
"We were incorrectly allocating `-np` times more KV cache for hybrid models") passes
`cparams.n_ctx_seq`. Builds are approximate (the PRs' merge dates).
"""

from __future__ import annotations

import pytest

from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.plan.capacity import Capacity

MIB = 2**20


def _kv_line(catalog, build: str, unified: bool = False) -> str:
    settings = EngineSettings(
        version=build,
        context_size_tokens=16384,
        parallel=4,
        flash_attention=True,
        kv_unified=unified or None,
    )
    model = catalog.model("granite-4.0-h-tiny")
    deployment = Deployment(model, ENGINES["llama.cpp"], kv_dtype="f16", settings=settings)
    lines = Capacity(deployment, catalog.sku("rtx-4090"), 1, 4096).log_lines()
    return next(line for line in lines if line.startswith("llama_kv_cache: size ="))


@pytest.mark.parametrize(
    ("build", "cells"),
    [
        ("b6000", 4096),  # before PR #15050: ceil(16384 / 4) cells a stream
        ("b7000", 16384),  # PR #15050 - #19559: every stream holds all n_ctx cells
        ("b8100", 4096),  # after PR #19559
    ],
)
def test_cells_per_stream_of_a_hybrid_model(catalog, build, cells):
    # Granite-4.0-H-Tiny: 4 attention layers of 4 KV heads x 128, f16: K and V 1,024 B each
    # per cell and layer; 4 streams (-np 4, no --kv-unified).
    model = catalog.model("granite-4.0-h-tiny")
    row = model.attention.num_kv_heads * model.attention.head_dim * 2
    layers = sum(kind == "full" for kind in model.layer_kinds)
    total_mib = cells * 4 * layers * 2 * row / MIB
    line = _kv_line(catalog, build)
    assert f"{cells:>6} cells,   {layers} layers,  4/4 seqs" in line
    assert line.startswith(f"llama_kv_cache: size = {total_mib:>7.2f} MiB")


def test_unified_cache_is_one_stream_of_n_ctx(catalog):
    # --kv-unified: one stream of 16,384 cells in every build.
    assert "16384 cells" in _kv_line(catalog, "b7000", unified=True)
