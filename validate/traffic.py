"""Bytes one decode step moves: the unique bytes of the problem and the bytes the kernel issues.

The kernel (``kvplan.kernels.decode_kernels``) runs one program per (sequence, KV head, block
of BLOCK_H query heads, split). Each program loads its split's K and V for its KV head, so a
KV head whose G query heads need ⌈G / BLOCK_H⌉ programs is read that many times:

- GQA with G ≤ BLOCK_H (Llama-3.1-8B: G 4, BLOCK_H 16): once;
- MQA with many heads (Falcon-7B: G 71, BLOCK_H 64): ⌈71 / 64⌉ = 2 times;
- MLA (DeepSeek-V3 at TP 1: 128 query heads on one latent, BLOCK_H 16 for the 576-wide
  latent): ⌈128 / 16⌉ = 8 times.

Sibling programs run at nearly the same time, so most re-reads hit L2: the issued bytes are an
upper bound on DRAM traffic and the unique bytes a lower bound. Each split program also loads
q for its heads again, and its share of the block table and seq_lens per program. Dimension
names are those of ``kvplan.kernels``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.kernels.splits import heads_per_program
from kvplan.kvmath import ceil_div
from kvplan.validate.verify_plan import BLOCK_TABLE_ENTRY_BYTES, SEQ_LEN_BYTES, VerifyPlan


@dataclass(frozen=True)
class StepTraffic:
    """Bytes per decode step in one layer, unique and as issued by the kernel."""

    heads_per_program: int
    """BLOCK_H."""
    head_blocks: int
    """⌈G / BLOCK_H⌉: programs per KV head per split, i.e. how often each KV byte is read."""
    num_splits: int
    programs: int
    """stage-1 programs: B · Hkv · head_blocks · S."""
    kv_unique_bytes: int
    """Σ_b L_b · bytes per token: every KV byte once."""
    kv_issued_bytes: int
    """kv_unique · head_blocks."""
    q_unique_bytes: int
    q_issued_bytes: int
    """q is loaded by every split: q_unique · S."""
    out_bytes: int
    table_unique_bytes: int
    """the ⌈L_b / P⌉ block-table entries and seq_lens, once."""
    table_issued_bytes: int
    """entries read by every (KV head, head block), seq_lens by every program."""
    partial_bytes: int
    """split-K partials, written by stage 1 and read by stage 2; 0 at S = 1."""

    @property
    def unique_bytes(self) -> int:
        """What the step must move: KV, q, out, block table and seq_lens, each once."""
        return self.kv_unique_bytes + self.q_unique_bytes + self.out_bytes + self.table_unique_bytes

    @property
    def issued_bytes(self) -> int:
        """What the kernel's loads and stores ask for, re-reads and partials included."""
        return (
            self.kv_issued_bytes
            + self.q_issued_bytes
            + self.out_bytes
            + self.table_issued_bytes
            + self.partial_bytes
        )

    @property
    def reread_factor(self) -> float:
        """issued KV bytes / unique KV bytes (= head_blocks)."""
        return self.kv_issued_bytes / self.kv_unique_bytes if self.kv_unique_bytes else 1.0

    def as_record(self) -> dict[str, Any]:
        return {
            "heads_per_program": self.heads_per_program,
            "head_blocks_per_kv_head": self.head_blocks,
            "kv_reread_factor": self.reread_factor,
            "num_splits": self.num_splits,
            "programs": self.programs,
            "kv_unique_bytes": self.kv_unique_bytes,
            "kv_issued_bytes": self.kv_issued_bytes,
            "q_unique_bytes": self.q_unique_bytes,
            "q_issued_bytes": self.q_issued_bytes,
            "out_bytes": self.out_bytes,
            "table_unique_bytes": self.table_unique_bytes,
            "table_issued_bytes": self.table_issued_bytes,
            "split_partial_bytes": self.partial_bytes,
            "unique_bytes": self.unique_bytes,
            "issued_bytes": self.issued_bytes,
        }


def step_traffic(plan: VerifyPlan, num_splits: int) -> StepTraffic:
    """Per-layer bytes of one decode step of `plan` with S = `num_splits`."""
    group_size = plan.num_heads_per_gpu // plan.num_kv_heads_per_gpu
    block_h = heads_per_program(group_size, plan.head_dim_k)
    head_blocks = ceil_div(group_size, block_h)
    readers = plan.num_kv_heads_per_gpu * head_blocks  # programs per sequence per split
    entries = sum(ceil_div(n, plan.tokens_per_block) for n in plan.lengths)
    return StepTraffic(
        heads_per_program=block_h,
        head_blocks=head_blocks,
        num_splits=num_splits,
        programs=plan.batch * readers * num_splits,
        kv_unique_bytes=plan.kv_bytes_read_per_layer,
        kv_issued_bytes=plan.kv_bytes_read_per_layer * head_blocks,
        q_unique_bytes=plan.q_bytes_per_layer,
        q_issued_bytes=plan.q_bytes_per_layer * num_splits,
        out_bytes=plan.out_bytes_per_layer,
        table_unique_bytes=plan.block_table_bytes_per_layer,
        table_issued_bytes=readers
        * (entries * BLOCK_TABLE_ENTRY_BYTES + plan.batch * num_splits * SEQ_LEN_BYTES),
        partial_bytes=plan.partial_bytes_per_layer(num_splits),
    )
