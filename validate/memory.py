"""The memory side of verify: fit check, pool allocation and its measured bytes, pool filling.

Measured bytes: on CUDA the ``torch.cuda.memory_allocated`` delta around the pool
allocation, which counts live tensor blocks rounded up to 512 bytes by PyTorch's caching
allocator (so predicted ≤ measured ≤ predicted + 511 B per pool tensor); on CPU the sum of
the pool tensors' ``nbytes``, which must equal the prediction exactly.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

import torch

from kvplan.errors import KvplanError
from kvplan.kernels import PagedKVCache
from kvplan.kernels.errors import KernelError
from kvplan.units import GIB, MIB
from kvplan.validate.plan import VerifyPlan, max_layers_within

TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
}
# CPU runs go through the Triton interpreter on host memory: a pool past this is a mistake.
CPU_POOL_CAP_BYTES = 2 * GIB
# PyTorch's caching allocator rounds every block up to a multiple of 512 bytes.
CUDA_ALLOCATION_ROUNDING_BYTES = 512
# Large CUDA blocks live in segments rounded up to 2 MiB: slack the fit check must allow.
CUDA_SEGMENT_BYTES = 2 * MIB
# Left free beyond the estimate: cuBLAS/Triton workspaces, kernel launch scratch.
CUDA_FIT_MARGIN_BYTES = 512 * MIB
NULL_SEQ_ID = -1  # the allocator's sequence that owns the null page when it keeps none itself


@dataclass(frozen=True)
class DeviceMemory:
    """Device memory at the fit check, in bytes; the CUDA context shown apart."""

    total_bytes: int
    free_bytes: int
    torch_reserved_bytes: int
    non_torch_bytes: int
    """(total − free) − torch reserved: CUDA context, libraries, other processes."""


@dataclass(frozen=True)
class FitCheck:
    """Predicted pool + workspace against what the device has free."""

    required_bytes: int
    """predicted pool + workspace."""
    workspace_bytes: int
    available_bytes: int
    """free device memory (CUDA) or the CPU cap."""
    device_memory: DeviceMemory | None

    @property
    def fits(self) -> bool:
        return self.required_bytes <= self.available_bytes


def pool_tensors(plan: VerifyPlan) -> int:
    """Tensors the pool is made of: K and V per layer, or one MLA latent per layer."""
    return plan.layers_verified * (1 if plan.is_mla else 2)


def allocation_tolerance_bytes(plan: VerifyPlan, device_type: str) -> int:
    """How far measured may exceed predicted: the allocator's rounding, per pool tensor."""
    if device_type != "cuda":
        return 0
    return pool_tensors(plan) * (CUDA_ALLOCATION_ROUNDING_BYTES - 1)


def device_memory(device: torch.device) -> DeviceMemory:
    """Free and total memory from the driver (cudaMemGetInfo), split as vLLM's MemorySnapshot."""
    torch.cuda.init()  # the context must exist before free memory means anything
    free_bytes, total_bytes = torch.cuda.mem_get_info(device)
    reserved = torch.cuda.memory_reserved(device)
    return DeviceMemory(total_bytes, free_bytes, reserved, total_bytes - free_bytes - reserved)


def check_fit(plan: VerifyPlan, device: torch.device, workspace_bytes: int) -> FitCheck:
    """Whether the predicted pool fits, decided before anything is allocated.

    Raises:
        KvplanError: it does not fit; the line gives predicted vs available and the
            --layers that would fit.
    """
    predicted = plan.predicted_pool_bytes
    if device.type == "cuda":
        memory = device_memory(device)
        workspace = (
            workspace_bytes + pool_tensors(plan) * CUDA_SEGMENT_BYTES + CUDA_FIT_MARGIN_BYTES
        )
        fit = FitCheck(predicted + workspace, workspace, memory.free_bytes, memory)
        where = (
            f" + {_gib(workspace)} workspace, but only {_gib(memory.free_bytes)} are free of "
            f"{_gib(memory.total_bytes)} ({_gib(memory.non_torch_bytes)} held by the CUDA "
            "context and other processes)"
        )
        layer_budget = memory.free_bytes - workspace
    else:
        fit = FitCheck(predicted, 0, CPU_POOL_CAP_BYTES, None)
        where = f", over the {_gib(CPU_POOL_CAP_BYTES)} cap of a CPU run"
        layer_budget = CPU_POOL_CAP_BYTES
    if fit.fits:
        return fit
    fewer = max_layers_within(plan, layer_budget)
    hint = (
        f"try --layers {fewer}"
        if 0 < fewer < plan.layers_verified
        else "use a smaller --context, --batch or --layers"
    )
    raise KvplanError(
        f"the plan does not fit: {plan.layers_verified} layers need {_gib(predicted)} of KV "
        f"pool (predicted){where}; {hint}"
    )


def _gib(value: int) -> str:
    return f"{value / GIB:,.2f} GiB"


def allocate_pools(
    plan: VerifyPlan, device: torch.device, num_blocks: int, seed: int
) -> PagedKVCache:
    """The KV pools of the verified layers: exactly one ``torch.empty`` per pool tensor.

    The free list is shuffled (by `seed`), so sequences get scattered pages as in a
    long-running server rather than one contiguous run each.
    """
    return PagedKVCache(
        num_layers=plan.layers_verified,
        num_blocks=num_blocks,
        tokens_per_block=plan.tokens_per_block,
        num_kv_heads=plan.num_kv_heads_per_gpu,
        head_dim=plan.head_dim_k,
        dtype=TORCH_DTYPES[plan.kv_dtype],
        device=device,
        is_mla=plan.is_mla,
        shuffle_seed=seed,
    )


def allocator_blocks(plan: VerifyPlan) -> int:
    """Pages per layer the allocator itself needs for the batch plus a null page.

    Asked of the allocator on the meta device (no memory), so the pool is sized by the
    allocator's own rule, not by kvplan's formula that it is checked against.
    """
    generous = sum(n // plan.tokens_per_block + 1 for n in plan.lengths) + 1
    probe = PagedKVCache(
        num_layers=1,
        num_blocks=generous,
        tokens_per_block=plan.tokens_per_block,
        num_kv_heads=plan.num_kv_heads_per_gpu,
        head_dim=plan.head_dim_k,
        dtype=TORCH_DTYPES[plan.kv_dtype],
        device="meta",
        is_mla=plan.is_mla,
    )
    reserved = generous - probe.stats().blocks_free  # an allocator that keeps a null page
    for seq_id, tokens in enumerate(plan.lengths):
        probe.allocate(seq_id, tokens)
    return probe.stats().blocks_used + max(reserved, 1)


@dataclass
class AllocatedPools:
    """The pools, the batch's block table and what the allocation measured."""

    cache: PagedKVCache
    measured_bytes: int
    measurement: str
    """how measured_bytes was obtained, in words."""
    null_page: int
    """the page no sequence owns; block-table padding points at it."""
    block_table: torch.Tensor
    """[B, max_blocks] int32, padded with the null page."""
    seq_lens: torch.Tensor
    """[B] int32."""
    allocator_formula_bytes: int
    """the allocator's own pool_bytes() for its tensors."""


def allocate_and_measure(plan: VerifyPlan, device: torch.device, seed: int) -> AllocatedPools:
    """Allocate the pools, measure the bytes taken, and register the batch's sequences.

    Raises:
        KvplanError: CUDA ran out of memory (everything freed first) or the allocator
            refused the batch.
    """
    num_blocks = allocator_blocks(plan)
    cache = None
    out_of_memory = False
    try:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            before = torch.cuda.memory_allocated(device)
            cache = allocate_pools(plan, device, num_blocks, seed)
            measured = torch.cuda.memory_allocated(device) - before
            how = "torch.cuda.memory_allocated delta around the pool allocation"
        else:
            cache = allocate_pools(plan, device, num_blocks, seed)
            measured = cache.tensor_bytes()
            how = "sum of the pool tensors' nbytes (CPU: no allocator to ask)"
    except torch.cuda.OutOfMemoryError:
        out_of_memory = True
    if out_of_memory or cache is None:
        # Outside the except block: the traceback (and the half-built pools its frames
        # hold) is gone, so the memory really returns before free memory is read.
        cache = None
        gc.collect()
        torch.cuda.empty_cache()
        free_bytes, _ = torch.cuda.mem_get_info(device)
        raise KvplanError(
            f"CUDA out of memory allocating the KV pool: predicted "
            f"{_gib(plan.predicted_pool_bytes)}, {_gib(free_bytes)} free after freeing "
            "everything; use a smaller --layers, --context or --batch"
        )
    try:
        null_page = _reserve_null_page(cache)
        for seq_id, tokens in enumerate(plan.lengths):
            cache.allocate(seq_id, tokens)
    except KernelError as error:
        raise KvplanError(f"allocator refused the batch: {error}") from None
    seq_ids = list(range(plan.batch))
    return AllocatedPools(
        cache=cache,
        measured_bytes=measured,
        measurement=how,
        null_page=null_page,
        block_table=cache.block_table(seq_ids, pad_value=null_page),
        seq_lens=cache.seq_lens(seq_ids),
        allocator_formula_bytes=cache.formula_bytes(),
    )


def _reserve_null_page(cache: PagedKVCache) -> int:
    """The page kept out of every sequence (vLLM's null block).

    An allocator that already keeps page 0 back shows it as one block missing from the
    free list; otherwise the first page it hands out is taken for the purpose.
    """
    if cache.stats().blocks_free < cache.num_blocks:
        return 0
    return cache.allocate(NULL_SEQ_ID, 1)[0]


def fill_pools(pools: AllocatedPools, plan: VerifyPlan, seed: int) -> None:
    """Random unit-normal KV in every page; NaN in the null page and the tails of last pages.

    The NaNs are the guard the kernel tests use: a read the kernel should not make (block
    table padding, tokens past L) turns the output into NaN instead of passing silently.
    """
    cache = pools.cache
    device = cache.k_pools[0].device
    generator = torch.Generator(device=device).manual_seed(seed)
    for pool in (*cache.k_pools, *cache.v_pools):
        _fill_normal(pool, generator)
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
