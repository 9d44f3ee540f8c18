"""Pool contents for verify: unit-normal K and V, and NaN wherever no token lives.

The NaNs are the guard the kernel tests use: a read the kernel should not make (block-table
padding, tokens past L) turns the output into NaN instead of passing silently.
"""

from __future__ import annotations

import torch

from kvplan.validate.memory import AllocatedPools
from kvplan.validate.verify_plan import VerifyPlan


def fill_pools(pools: AllocatedPools, plan: VerifyPlan, seed: int) -> None:
    """Random unit-normal KV in every page; NaN in the null page and the tails of last pages."""
    cache = pools.cache
    device = cache.k_pools[0].device
    generator = torch.Generator(device=device).manual_seed(seed)
    for buffer in cache.buffers:  # one per layer: K and V (or the MLA latent) together
        _fill_normal(buffer, generator)
    pages, slots = _poisoned_slots(pools, plan)
    for pool in (*cache.k_pools, *cache.v_pools):
        _write_nan(pool, pages.to(device), slots.to(device))


# fp8 has no normal_(): draw in fp32 a slab at a time so the temporary stays small.
_FILL_CHUNK_ELEMENTS = 64 * 2**20


def _fill_normal(pool: torch.Tensor, generator: torch.Generator) -> None:
    if pool.element_size() > 1:
        pool.normal_(generator=generator)
        return
    flat = pool.view(-1)
    for start in range(0, flat.numel(), _FILL_CHUNK_ELEMENTS):
        stop = min(start + _FILL_CHUNK_ELEMENTS, flat.numel())
        values = torch.randn(
            stop - start, generator=generator, device=pool.device, dtype=torch.float32
        )
        flat[start:stop] = values.to(pool.dtype)


def _poisoned_slots(pools: AllocatedPools, plan: VerifyPlan) -> tuple[torch.Tensor, torch.Tensor]:
    """(page, slot) pairs that hold no token: the whole null page and last-page tails."""
    block = plan.tokens_per_block
    pages = [pools.null_page] * block
    slots = list(range(block))
    for seq_id, tokens in enumerate(plan.lengths):
        last = pools.cache.blocks(seq_id)[-1]
        tail = range(tokens % block, block) if tokens % block else range(0)
        pages += [last] * len(tail)
        slots += list(tail)
    return torch.tensor(pages, dtype=torch.long), torch.tensor(slots, dtype=torch.long)


def _write_nan(pool: torch.Tensor, pages: torch.Tensor, slots: torch.Tensor) -> None:
    nan = torch.full((), float("nan")).to(pool.dtype)
    if pool.element_size() == 1:
        # index_put is not implemented for fp8; write the NaN bit pattern through a byte view.
        pool.view(torch.uint8)[pages, slots] = int(nan.view(torch.uint8))
    else:
        pool[pages, slots] = nan.to(pool.device)
