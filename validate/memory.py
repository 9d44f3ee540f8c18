"""The memory side of verify: the fit check, the pool allocation and what the device says it took.

The pool is one allocation per verified layer (K and V together, ``[2, N, P, Hkv, D]``, as
vLLM lays them out; MLA: the latent), sized by the allocator's own block count. Two things
are measured:

- blocks: the pages the allocator (``kvplan.kernels.PagedKVCache``) hands out for the batch,
  plus its null page, against kvplan's engine formula (every device);
- bytes (CUDA): the device's and the caching allocator's account of the allocation
  (``kvplan.validate.device_memory``), checked term by term against the planned bytes
  replayed through the allocator's rules (``kvplan.validate.memory_check``). A CPU has no
  device allocator to ask: there the bytes are not measured, and the record says so.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch

from kvplan.errors import KvplanError
from kvplan.kernels import PagedKVCache
from kvplan.kernels.errors import KernelError
from kvplan.units import GIB, MIB
from kvplan.validate import device_memory
from kvplan.validate.allocator_rules import replay
from kvplan.validate.memory_check import DeviceMemoryCheck, check_device_memory
from kvplan.validate.plan import max_layers_within
from kvplan.validate.verify_plan import VerifyPlan

TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
}
# CPU runs go through the Triton interpreter on host memory: a pool past this is a mistake.
CPU_POOL_CAP_BYTES = 2 * GIB
# Left free beyond the estimate: cuBLAS/Triton workspaces, kernel launch scratch.
CUDA_FIT_MARGIN_BYTES = 512 * MIB
NULL_SEQ_ID = -1  # the allocator's sequence that owns the null page when it keeps none itself
ALLOC_CONF_VARIABLE = "PYTORCH_CUDA_ALLOC_CONF"


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
    """the pool's replayed segments (CUDA) or its bytes (CPU), + workspace."""
    workspace_bytes: int
    available_bytes: int
    """free device memory (CUDA) or the CPU cap."""
    device_memory: DeviceMemory | None

    @property
    def fits(self) -> bool:
        return self.required_bytes <= self.available_bytes


def planned_allocations(plan: VerifyPlan) -> list[int]:
    """The bytes kvplan predicts for each pool allocation: one per verified layer."""
    return [plan.predicted_pool_bytes_per_layer] * plan.layers_verified


def check_allocator_settings() -> None:
    """verify replays the caching allocator's default rules: refuse settings that change them.

    Raises:
        KvplanError: PYTORCH_CUDA_ALLOC_CONF is set.
    """
    settings = os.environ.get(ALLOC_CONF_VARIABLE)
    if settings:
        raise KvplanError(
            f"{ALLOC_CONF_VARIABLE}={settings!r}: verify explains every byte by the caching "
            "allocator's default rules, which this setting changes; unset it for verify"
        )


def device_memory_now(device: torch.device) -> DeviceMemory:
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
        memory = device_memory_now(device)
        segments = replay(planned_allocations(plan)).reserved_bytes
        workspace = workspace_bytes + (segments - predicted) + CUDA_FIT_MARGIN_BYTES
        fit = FitCheck(predicted + workspace, workspace, memory.free_bytes, memory)
        where = (
            f" + {_gib(workspace)} workspace and segment rounding, but only "
            f"{_gib(memory.free_bytes)} are free of {_gib(memory.total_bytes)} "
            f"({_gib(memory.non_torch_bytes)} held by the CUDA context and other processes)"
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
    """The KV pools of the verified layers: exactly one ``torch.empty`` per layer.

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
    null_page: int
    """the page no sequence owns; block-table padding points at it."""
    block_table: torch.Tensor
    """[B, max_blocks] int32, padded with the null page."""
    seq_lens: torch.Tensor
    """[B] int32."""
    device_check: DeviceMemoryCheck | None
    """the device's account against the replayed plan (CUDA); None on CPU."""


def _out_of_memory(plan_bytes: int, device: torch.device) -> KvplanError:
    # Called outside the except block: the traceback (and the half-built pools its frames
    # hold) is gone, so the memory really returns before free memory is read.
    gc.collect()
    torch.cuda.empty_cache()
    free_bytes, _ = torch.cuda.mem_get_info(device)
    return KvplanError(
        f"CUDA out of memory allocating the KV pool: predicted {_gib(plan_bytes)}, "
        f"{_gib(free_bytes)} free after freeing everything; use a smaller --layers, "
        "--context or --batch"
    )


def allocate_and_measure(plan: VerifyPlan, device: torch.device, seed: int) -> AllocatedPools:
    """Allocate the pools, measure what they took, and register the batch's sequences.

    Raises:
        KvplanError: CUDA ran out of memory (everything freed first) or the allocator
            refused the batch.
    """
    num_blocks = allocator_blocks(plan)
    check = None
    out_of_memory = False
    try:
        if device.type == "cuda":
            cache, measurement = device_memory.measure(
                device,
                lambda: allocate_pools(plan, device, num_blocks, seed),
                lambda made: [buffer.data_ptr() for buffer in made.buffers],
            )
            check = check_device_memory(planned_allocations(plan), measurement)
        else:
            cache = allocate_pools(plan, device, num_blocks, seed)
    except torch.cuda.OutOfMemoryError:
        out_of_memory = True
    if out_of_memory:
        raise _out_of_memory(plan.predicted_pool_bytes, device)
    try:
        null_page = _reserve_null_page(cache)
        for seq_id, tokens in enumerate(plan.lengths):
            cache.allocate(seq_id, tokens)
    except KernelError as error:
        raise KvplanError(f"allocator refused the batch: {error}") from None
    seq_ids = list(range(plan.batch))
    return AllocatedPools(
        cache=cache,
        null_page=null_page,
        block_table=cache.block_table(seq_ids, pad_value=null_page),
        seq_lens=cache.seq_lens(seq_ids),
        device_check=check,
    )


def _reserve_null_page(cache: PagedKVCache) -> int:
    """The page kept out of every sequence (vLLM's null block).

    An allocator that already keeps page 0 back shows it as one block missing from the
    free list; otherwise the first page it hands out is taken for the purpose.
    """
    if cache.stats().blocks_free < cache.num_blocks:
        return 0
    return cache.allocate(NULL_SEQ_ID, 1)[0]
