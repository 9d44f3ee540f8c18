"""The decode kernel against the float64 reference, on a sample of layers and sequences.

Tolerances are those of tests/kernels/test_decode.py, which explains them: max |kernel −
reference| over max(max |reference|, 1) on unit-normal inputs, where the reference reads the
same stored (already rounded, fp8 included) K and V, so only the kernel's rounding counts:
fp32 1e-5, fp16 2e-3, bf16 1e-2 (the q dtype's; fp8 KV dequantisation is exact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kvplan.kernels import paged_decode_reference
from kvplan.validate.memory import AllocatedPools
from kvplan.validate.verify_plan import VerifyPlan

if TYPE_CHECKING:  # imported for real only once TRITON_INTERPRET is settled (harness)
    from kvplan.validate.decode_step import DecodeStep

TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}
MAX_SEQUENCES = 4
# The reference holds, per sequence, K and V repeated over the query heads in float64:
# about L · (Hq + 2 · Hkv) · (Dk + Dv) · 8 · 2 bytes. Sequences longer than this budget
# allows are checked over their first tokens (whole pages), and the record says so.
REFERENCE_SCRATCH_BYTES = {"cuda": 12 * 2**30, "cpu": 2**30}


@dataclass(frozen=True)
class NumericsResult:
    """What was compared and how far apart the kernel and the reference were."""

    layers_checked: tuple[int, ...]
    sequences_checked: tuple[int, ...]
    tokens_checked: tuple[int, ...]
    """tokens of each checked sequence that were compared (≤ its length)."""
    max_error: float
    tolerance: float
    all_outputs_finite: bool
    """the timed runs' outputs over the whole batch held no NaN (no poisoned read)."""

    @property
    def passed(self) -> bool:
        return self.max_error <= self.tolerance and self.all_outputs_finite


def reference_scratch_bytes_per_token(plan: VerifyPlan) -> int:
    """Float64 bytes the reference holds per token of one sequence (see the budget above)."""
    heads = plan.num_heads_per_gpu + 2 * plan.num_kv_heads_per_gpu
    return heads * (plan.head_dim_k + plan.head_dim_v) * 8 * 2


def tokens_checked_max(plan: VerifyPlan, device_type: str, scratch_bytes: int | None = None) -> int:
    """Longest prefix of one sequence the reference compares, in whole pages.

    Args:
        plan: the verify plan.
        device_type: cuda or cpu (their default scratch budgets differ).
        scratch_bytes: a smaller budget, e.g. what a full device leaves free.
    """
    budget = REFERENCE_SCRATCH_BYTES["cuda" if device_type == "cuda" else "cpu"]
    if scratch_bytes is not None:
        budget = min(budget, scratch_bytes)
    tokens = budget // reference_scratch_bytes_per_token(plan)
    return max(plan.tokens_per_block, tokens // plan.tokens_per_block * plan.tokens_per_block)


def sample_sequences(lengths: tuple[int, ...]) -> tuple[int, ...]:
    """Every sequence of a small batch; else first, last, shortest and longest."""
    if len(lengths) <= MAX_SEQUENCES:
        return tuple(range(len(lengths)))
    picks = [0, len(lengths) - 1, lengths.index(min(lengths)), lengths.index(max(lengths))]
    return tuple(sorted(set(picks)))[:MAX_SEQUENCES]


def sample_layers(layers: int) -> tuple[int, ...]:
    """The first and last verified layer (distinct pools, distinct pages)."""
    return tuple(sorted({0, layers - 1}))


def check_numerics(
    plan: VerifyPlan,
    pools: AllocatedPools,
    step: DecodeStep,
    device_type: str,
    scratch_bytes: int | None = None,
) -> NumericsResult:
    """Run the kernel and the reference on the sample; return the largest error.

    The kernel runs with the same split count S as the timed steps, on the sampled rows of
    the block table (lengths capped by ``tokens_checked_max`` within `scratch_bytes`).
    """
    rows = sample_sequences(plan.lengths)
    cap = tokens_checked_max(plan, device_type, scratch_bytes)
    index = torch.tensor(rows, dtype=torch.long, device=step.q.device)
    lens = torch.clamp(pools.seq_lens.index_select(0, index), max=cap).contiguous()
    table = pools.block_table.index_select(0, index).contiguous()
    q = step.q.index_select(0, index).contiguous()
    worst = 0.0
    layers = sample_layers(plan.layers_verified)
    for layer in layers:
        got = step.run_layer(layer, q=q, block_table=table, seq_lens=lens, fresh_buffers=True)
        k_pool, v_pool = step.pools(layer)
        want = paged_decode_reference(
            q,
            k_pool,
            v_pool,
            table,
            lens,
            sm_scale=plan.sm_scale,
            k_scale=step.kv_scale,
            v_scale=step.kv_scale,
            rope_dim=plan.rope_dim,
        )
        got64 = got.to(torch.float64)
        if not torch.isfinite(got64).all():
            worst = float("inf")
            continue
        error = ((got64 - want).abs().max() / want.abs().max().clamp(min=1.0)).item()
        worst = max(worst, error)
    return NumericsResult(
        layers_checked=layers,
        sequences_checked=rows,
        tokens_checked=tuple(int(n) for n in lens.tolist()),
        max_error=worst,
        tolerance=TOLERANCE[plan.q_dtype],
        all_outputs_finite=True,
    )
