"""The one declaration of every engine setting: what a user may set about the engine.

`EngineSettings` is the value the engine model reads; None means the engine's (and
release's) default.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import KvplanError

# Settings counted in whole units, and the option that sets each.
_COUNT_OPTIONS = {
    "tokens_per_block": "block-size",
    "max_num_batched_tokens": "max-num-batched-tokens",
    "max_num_seqs": "max-num-seqs",
    "max_kv_tokens": "max-kv-tokens",
    "context_size_tokens": "ctx-size",
    "parallel": "parallel",
    "ubatch_tokens": "ubatch-size",
}


@dataclass(frozen=True)
class EngineSettings:
    """What a user sets about the engine; None means the engine's (and version's) default.

    Units: tokens for `tokens_per_block` and `max_num_batched_tokens`, bytes for the memory
    overrides, a fraction in (0, 1] for `utilization` (vLLM gpu_memory_utilization, SGLang
    mem_fraction_static).
    """

    version: str | None = None
    tokens_per_block: int | None = None
    hybrid_allocator: bool | None = None  # False: windowed layers reserve full length
    draft_layers: int = 0  # speculative-decoding draft layers sharing the cache (EAGLE: 1)
    utilization: float | None = None
    kv_memory_bytes: int | None = None  # a fixed KV budget per GPU (vLLM --kv-cache-memory)
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_kv_tokens: int | None = None  # cap on the pool (SGLang --max-total-tokens, TRT max_tokens)
    # llama.cpp / ollama: what llama-server allocates (None: the build's default, or planned
    # from the question asked: one slot per request of --context tokens).
    context_size_tokens: int | None = None  # -c, cells over all slots
    parallel: int | None = None  # -np, slots (sequences)
    v_dtype: str | None = None  # -ctv when it differs from the K type (--kv-dtype)
    flash_attention: bool | None = None  # -fa
    kv_unified: bool | None = None  # --kv-unified: one stream for every slot
    swa_full: bool = False  # --swa-full: sliding layers keep n_ctx cells
    gpu_layers: int | None = None  # -ngl: layers offloaded to the GPU(s); the rest on the CPU
    ubatch_tokens: int | None = None  # -ub, tokens per physical batch

    def __post_init__(self) -> None:
        if self.utilization is not None and not 0 < self.utilization <= 1:
            raise KvplanError(
                f"--utilization: {self.utilization} must be in (0, 1]; a fraction, 0.9 = 90 %"
            )
        for name in ("kv_memory_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                option = name.removesuffix("_bytes").replace("_", "-")
                raise KvplanError(f"--{option}: {value} must not be negative")
        for name, option in _COUNT_OPTIONS.items():
            value = getattr(self, name)
            if value is not None and value < 1:
                raise KvplanError(f"--{option}: {value} must be at least 1")
        if self.gpu_layers is not None and self.gpu_layers < 0:
            raise KvplanError(f"--gpu-layers: {self.gpu_layers} must not be negative")
        if self.draft_layers < 0:
            raise KvplanError(f"--draft-layers: {self.draft_layers} must not be negative")
