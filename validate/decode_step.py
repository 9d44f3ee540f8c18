"""One decode step over the verified layers: q, preallocated buffers, a fixed split count.

Imports the Triton kernels, so ``TRITON_INTERPRET`` must be settled before this module is
imported (``kvplan.validate.harness`` does it). Shapes use ``kvplan.kernels``' names.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvplan.kernels import paged_decode, paged_decode_mla
from kvplan.kernels.config import default_num_splits
from kvplan.kernels.decode_kernels import UPCAST
from kvplan.validate.memory import TORCH_DTYPES, AllocatedPools
from kvplan.validate.verify_plan import VerifyPlan

# Per-tensor fp8 scales as vLLM defaults them (k_scale = v_scale = 1.0): the unit-normal
# fill is well inside e4m3's ±448 and e5m2's ±57344.
KV_SCALE = 1.0


def kernels_interpreted() -> bool:
    """Whether the kernels were decorated under TRITON_INTERPRET=1 (CPU tensors work)."""
    return UPCAST


@dataclass
class DecodeStep:
    """Everything the kernel needs for one step, allocated once outside any timed region."""

    plan: VerifyPlan
    pools_: AllocatedPools
    q: torch.Tensor  # [B, Hq, Dk] in the q dtype
    out: torch.Tensor  # [B, Hq, Dv]
    mid_o: torch.Tensor | None  # [B, Hq, S, Dv] fp32 when S > 1
    mid_lse: torch.Tensor | None  # [B, Hq, S] fp32 when S > 1
    num_splits: int
    kv_scale: float = KV_SCALE

    @property
    def workspace_bytes(self) -> int:
        """Bytes of q, out and the split buffers."""
        tensors = (self.q, self.out, self.mid_o, self.mid_lse)
        return sum(t.nbytes for t in tensors if t is not None)

    def pools(self, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(K pool, V pool) of one verified layer; V is None for an MLA latent."""
        cache = self.pools_.cache
        return cache.k_pools[layer], (None if self.plan.is_mla else cache.v_pools[layer])

    def run_layer(
        self,
        layer: int,
        *,
        q: torch.Tensor | None = None,
        block_table: torch.Tensor | None = None,
        seq_lens: torch.Tensor | None = None,
        fresh_buffers: bool = False,
    ) -> torch.Tensor:
        """Decode one layer; by default the whole batch into the preallocated buffers."""
        plan = self.plan
        q = self.q if q is None else q
        table = self.pools_.block_table if block_table is None else block_table
        lens = self.pools_.seq_lens if seq_lens is None else seq_lens
        buffers = (
            {"out": None, "mid_o": None, "mid_lse": None}
            if fresh_buffers
            else {"out": self.out, "mid_o": self.mid_o, "mid_lse": self.mid_lse}
        )
        k_pool, v_pool = self.pools(layer)
        # max_seq_len given so the wrapper never syncs the host to read seq_lens.
        common = {"num_splits": self.num_splits, "max_seq_len": max(plan.lengths), **buffers}
        if plan.is_mla:
            return paged_decode_mla(
                q,
                k_pool,
                table,
                lens,
                qk_rope_head_dim=plan.rope_dim,
                sm_scale=plan.sm_scale,
                kv_scale=self.kv_scale,
                **common,
            )
        return paged_decode(
            q,
            k_pool,
            v_pool,
            table,
            lens,
            sm_scale=plan.sm_scale,
            k_scale=self.kv_scale,
            v_scale=self.kv_scale,
            **common,
        )

    def run_all_layers(self) -> None:
        """One decode step: every verified layer in turn, each reading its own pool."""
        for layer in range(self.plan.layers_verified):
            self.run_layer(layer)


def choose_splits(plan: VerifyPlan, device: torch.device) -> int:
    """S for the whole run: the kernel's own rule with this device's SM count (132 off-GPU)."""
    return default_num_splits(
        plan.batch,
        plan.num_heads_per_gpu,
        plan.num_kv_heads_per_gpu,
        plan.head_dim_k,
        max(plan.lengths),
        plan.tokens_per_block,
        device,
    )


def build_step(plan: VerifyPlan, pools: AllocatedPools, seed: int) -> DecodeStep:
    """q filled unit-normal, buffers preallocated, S chosen once and then fixed.

    S comes from the kernel's own rule (``choose_num_splits`` with this device's SM count)
    and is logged in the record, so the bytes formula (partials included) is deterministic.
    """
    device = pools.block_table.device
    dtype = TORCH_DTYPES[plan.q_dtype]
    generator = torch.Generator(device=device).manual_seed(seed + 1)
    shape = (plan.batch, plan.num_heads_per_gpu, plan.head_dim_k)
    q = torch.randn(shape, generator=generator, device=device, dtype=torch.float32).to(dtype)
    num_splits = choose_splits(plan, device)
    out_shape = (plan.batch, plan.num_heads_per_gpu, plan.head_dim_v)
    out = torch.full(out_shape, float("nan"), device=device, dtype=dtype)  # unwritten = NaN
    mid_o = mid_lse = None
    if num_splits > 1:
        mid_o = torch.empty((*out_shape[:2], num_splits, plan.head_dim_v), device=device)
        mid_lse = torch.empty((*out_shape[:2], num_splits), device=device)
    return DecodeStep(plan, pools, q, out, mid_o, mid_lse, num_splits)
