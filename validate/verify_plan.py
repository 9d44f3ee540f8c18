"""One GPU's share of a verify plan: the verified layers, the batch, every predicted byte count.

The predicted pool is what kvplan's engine profile says the batch holds on one GPU for the
verified layers, plus the one reserved "null" page per layer that the allocator keeps, as
vLLM keeps its null block (vllm/v1/core/block_pool.py: block 0 is never handed to a request;
block-table padding points at it). Built by ``kvplan.validate.plan.build_plan``. Dimension
names (B, Hq, Hkv, D, P, S) are those of ``kvplan.kernels``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.kvmath import ceil_div
from kvplan.specs import ModelSpec, kv_dtype_info

NULL_PAGES_PER_LAYER = 1
BLOCK_TABLE_ENTRY_BYTES = 4  # int32 page ids
SEQ_LEN_BYTES = 4  # int32
PARTIAL_BYTES = 4  # fp32 split-K partial outputs and log-sum-exp


@dataclass(frozen=True)
class VerifyPlan:
    """One GPU's (one TP rank's) share of a plan, restricted to the verified layers."""

    model: ModelSpec
    engine: str
    kv_dtype: str
    """canonical kvplan KV dtype name (bf16, fp8_e4m3, ...)."""
    q_dtype: str
    """activation dtype of q and the output: bf16, except fp16/fp32 for fp16/fp32 KV."""
    tp: int
    lengths: tuple[int, ...]
    """tokens of each sequence in the batch."""
    tokens_per_block: int
    """P, tokens per page, from the engine profile on the plan's GPU (vLLM 16; MLA by GPU: 64
    on Hopper, 128 on Blackwell; or --block-size)."""
    layers_verified: int
    kind: str
    """full or mla."""
    num_heads_per_gpu: int
    """Hq on one TP rank."""
    num_kv_heads_per_gpu: int
    """Hkv on one TP rank (1 for MLA: the latent is not split by heads)."""
    head_dim_k: int
    """K width: head_dim, or kv_lora_rank + qk_rope_head_dim for MLA."""
    head_dim_v: int
    """V width: head_dim, or kv_lora_rank for MLA."""
    rope_dim: int
    """MLA only: the latent's trailing rope columns (not part of V)."""
    sm_scale: float
    element_bytes: int
    """bytes per stored KV element (1 for fp8)."""
    token_bytes_per_layer: int
    """kvplan's bytes of one token in one layer on one GPU (K and V, or the MLA latent)."""
    predicted_blocks_per_layer: int
    """Σ_b blocks the engine holds for the batch, plus the null page."""
    predicted_kv_bytes: int
    """the engine formula's bytes for the batch, verified layers, one GPU."""
    predicted_null_page_bytes: int
    """one null page per verified layer: P · token bytes."""
    plan_kv_bytes_per_gpu: int
    """the engine formula for every layer of the model (kvplan size's kv_bytes_per_gpu)."""
    page_note: str | None = None
    """which page the engine takes on the plan's GPU and why (MLA backends), else None."""

    @property
    def batch(self) -> int:
        return len(self.lengths)

    @property
    def model_layers(self) -> int:
        return self.model.num_layers

    @property
    def is_mla(self) -> bool:
        return self.kind == "mla"

    @property
    def predicted_pool_bytes(self) -> int:
        """What the allocator must take for the verified layers: KV plus null pages."""
        return self.predicted_kv_bytes + self.predicted_null_page_bytes

    @property
    def predicted_pool_bytes_per_layer(self) -> int:
        return self.predicted_pool_bytes // self.layers_verified

    @property
    def whole_model_factor(self) -> float:
        """model layers / verified layers: multiply verified figures by this for the model."""
        return self.model_layers / self.layers_verified

    @property
    def scaling_statement(self) -> str:
        """The sentence that says plainly what was verified and how it scales."""
        if self.layers_verified == self.model_layers:
            return f"verified all {self.model_layers} layers; figures are whole-model"
        return (
            f"verified {self.layers_verified} of {self.model_layers} layers; "
            f"whole-model figures are ×{_factor_text(self.whole_model_factor)}"
        )

    @property
    def kv_bytes_read_per_layer(self) -> int:
        """KV bytes one decode step reads in one layer: exact tokens, not whole pages."""
        return sum(self.lengths) * self.token_bytes_per_layer

    @property
    def q_bytes_per_layer(self) -> int:
        return self.batch * self.num_heads_per_gpu * self.head_dim_k * _q_element_bytes(self)

    @property
    def out_bytes_per_layer(self) -> int:
        return self.batch * self.num_heads_per_gpu * self.head_dim_v * _q_element_bytes(self)

    @property
    def block_table_bytes_per_layer(self) -> int:
        """The ⌈L_b / P⌉ block-table entries the kernel reads, plus seq_lens."""
        entries = sum(ceil_div(n, self.tokens_per_block) for n in self.lengths)
        return entries * BLOCK_TABLE_ENTRY_BYTES + self.batch * SEQ_LEN_BYTES

    def partial_bytes_per_layer(self, num_splits: int) -> int:
        """Split-K partials written then read back: 2 · B · Hq · S · (Dv + 1) · 4; 0 at S = 1."""
        if num_splits <= 1:
            return 0
        return (
            2
            * self.batch
            * self.num_heads_per_gpu
            * num_splits
            * (self.head_dim_v + 1)
            * PARTIAL_BYTES
        )

    def step_buffer_bytes(self, num_splits: int) -> int:
        """Device bytes of one step's q, out, block table and split buffers (mid_o, mid_lse)."""
        return (
            self.q_bytes_per_layer
            + self.out_bytes_per_layer
            + self.block_table_bytes_per_layer
            + self.partial_bytes_per_layer(num_splits) // 2
        )

    @property
    def kv_bytes_per_token_whole_model(self) -> int:
        """KV bytes one token costs on this GPU over every layer of the model."""
        return self.token_bytes_per_layer * self.model_layers


def _q_element_bytes(plan: VerifyPlan) -> int:
    return kv_dtype_info(plan.q_dtype).bits // 8


def _factor_text(factor: float) -> str:
    return f"{factor:g}" if factor == int(factor) else f"{factor:.3g}"
