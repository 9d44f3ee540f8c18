"""`verify --capacity`: the planner's KV budget, reproduced by allocation on the device.

The planner says: on SKU S, under vLLM, one GPU has
    budget = total × gpu_memory_utilization − weights − activation − non-torch [− graphs]
and holds ⌊budget / page bytes per block⌋ KV blocks. The proof holds the weights and the
activation estimate as one placeholder allocation each, allocates the predicted blocks as the
real paged pool, runs the decode kernel over every block at context L (``harness``), and then
finds the largest block count that really allocates (doubling, then bisection, with real
allocations freed between tries) within the engine's ceiling, total × utilization of the
device's own total, as vLLM computes it (``requested_memory``, vllm/v1/worker/gpu_worker.py).

The difference between that count and the prediction is split into measured terms: the
device's total against the SKU's, the non-torch memory measured against the planner's
estimate, memory torch already held, and the allocator's segment rounding.

On CUDA, used memory is the driver's (cudaMemGetInfo). A CPU has no device: there the SKU's
memory is a cap on the proof's own allocations (which are real host tensors), used memory is
what they hold, and the record says so. The CPU path is for CI, with a SKU small enough to
fit under ``CPU_POOL_CAP_BYTES``.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kvplan.engine.pool import largest_fitting
from kvplan.errors import KvplanError
from kvplan.kvmath import ceil_div
from kvplan.specs import SkuSpec
from kvplan.units import GIB
from kvplan.validate.memory import CPU_POOL_CAP_BYTES
from kvplan.validate.plan import CapacityPrediction
from kvplan.validate.verify_plan import NULL_PAGES_PER_LAYER

CUDA_USED_SOURCE = "cudaMemGetInfo: total − free (torch.cuda.mem_get_info)"
CPU_USED_SOURCE = (
    "CPU: bytes of the proof's live host allocations, against the SKU's memory as a cap "
    "(no device to ask)"
)


def capacity_lengths(num_blocks: int, tokens_per_block: int, context_tokens: int) -> list[int]:
    """Sequences of `context_tokens` tokens covering every block but the null page.

    The last sequence takes the blocks left over (fewer tokens). Example: 40 blocks of 16
    tokens at 64 tokens: 39 usable blocks, 4 per sequence, so 9 × 64 tokens and one of
    3 × 16 = 48 tokens.

    Raises:
        KvplanError: the predicted pool holds no block beyond the null page.
    """
    usable = num_blocks - NULL_PAGES_PER_LAYER
    if usable < 1:
        raise KvplanError(
            f"--capacity: the planner predicts {num_blocks} KV block(s), none beyond the null "
            "block, so no request fits"
        )
    per_sequence = ceil_div(context_tokens, tokens_per_block)
    full, rest = divmod(usable, per_sequence)
    return [context_tokens] * full + ([rest * tokens_per_block] if rest else [])


class DeviceBudget:
    """The device's memory as the proof sees it: used bytes, and allocations that may fail."""

    def __init__(self, device: torch.device, sku: SkuSpec) -> None:
        self.device = device
        self.is_cuda = device.type == "cuda"
        if self.is_cuda:
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
            free, self.total_bytes = (int(x) for x in torch.cuda.mem_get_info(device))
            self.torch_reserved_before_bytes = int(torch.cuda.memory_reserved(device))
            self.non_torch_bytes = self.total_bytes - free - self.torch_reserved_before_bytes
        else:
            if sku.memory_bytes > CPU_POOL_CAP_BYTES:
                raise KvplanError(
                    f"--capacity on CPU: {sku.name}'s {sku.memory_bytes / GIB:,.2f} GiB exceed "
                    f"the {CPU_POOL_CAP_BYTES / GIB:,.0f} GiB cap of a CPU run; use a GPU, or a "
                    "SKU YAML (--catalog) with memory_bytes under the cap"
                )
            self.total_bytes = sku.memory_bytes
            self.torch_reserved_before_bytes = 0
            self.non_torch_bytes = 0
        self._held: dict[int, int] = {}  # CPU: id -> bytes of live allocations

    @property
    def used_source(self) -> str:
        return CUDA_USED_SOURCE if self.is_cuda else CPU_USED_SOURCE

    def used_bytes(self) -> int:
        """Device memory in use now (CUDA: the driver's view; CPU: the proof's tensors)."""
        if self.is_cuda:
            torch.cuda.synchronize(self.device)
            free, total = torch.cuda.mem_get_info(self.device)
            return int(total) - int(free)
        return sum(self._held.values())

    def allocate(self, size_bytes: int) -> torch.Tensor | None:
        """One uint8 allocation of `size_bytes`, or None when the device refuses it."""
        if not self.is_cuda:
            if self.used_bytes() + size_bytes > self.total_bytes:
                return None
            tensor = torch.empty(size_bytes, dtype=torch.uint8)
            self._held[id(tensor)] = size_bytes
            return tensor
        try:
            return torch.empty(size_bytes, dtype=torch.uint8, device=self.device)
        except torch.cuda.OutOfMemoryError:
            pass
        gc.collect()  # outside the except block, so the failed attempt's frames are gone
        torch.cuda.empty_cache()
        return None

    def adopt(self, tensors: list[torch.Tensor]) -> bool:
        """Count tensors made elsewhere (the KV pool) as the proof's; False if over the cap."""
        if self.is_cuda:
            return True
        size = sum(t.nbytes for t in tensors)
        if self.used_bytes() + size > self.total_bytes:
            return False
        for tensor in tensors:
            self._held[id(tensor)] = tensor.nbytes
        return True

    def release(self, tensors: list[torch.Tensor]) -> None:
        """Forget tensors (the caller drops its references) and return cached memory."""
        for tensor in tensors:
            self._held.pop(id(tensor), None)
        tensors.clear()  # the last references: the memory goes back to the allocator now
        if self.is_cuda:
            torch.cuda.empty_cache()


@dataclass
class Placeholders:
    """The non-KV memory the planner subtracts, held as one allocation per term."""

    requested_bytes: dict[str, int]
    tensors: list[torch.Tensor] = field(default_factory=list)
    used_before_bytes: int = 0
    used_after_bytes: int = 0
    allocated: bool = False

    @property
    def rounding_bytes(self) -> int:
        """Device bytes beyond the requests (segment rounding)."""
        return self.used_after_bytes - self.used_before_bytes - sum(self.requested_bytes.values())


def hold_placeholders(budget: DeviceBudget, prediction: CapacityPrediction) -> Placeholders:
    """Allocate weights, activation (and CUDA-graph) placeholders of the planner's sizes."""
    requested = {
        "weights": prediction.weights_bytes_per_gpu,
        "activation": prediction.activation_bytes,
        "cudagraph": prediction.cudagraph_bytes,
    }
    held = Placeholders({k: v for k, v in requested.items() if v > 0})
    held.used_before_bytes = budget.used_bytes()
    for size in held.requested_bytes.values():
        tensor = budget.allocate(size)
        if tensor is None:
            budget.release(held.tensors)
            return held
        held.tensors.append(tensor)
    held.used_after_bytes = budget.used_bytes()
    held.allocated = True
    return held


@dataclass
class BlockSearch:
    """Real allocations of `layers` buffers of n blocks each, remembered by n."""

    budget: DeviceBudget
    layers: int
    page_bytes_per_layer: int
    ceiling_bytes: int
    trials: dict[int, int | None] = field(default_factory=dict)
    """n -> used bytes with the pool allocated, or None when it did not allocate."""

    def used_with(self, blocks: int) -> int | None:
        if blocks not in self.trials:
            tensors: list[torch.Tensor] = []
            used = None
            for _ in range(self.layers):
                tensor = self.budget.allocate(blocks * self.page_bytes_per_layer)
                if tensor is None:
                    break
                tensors.append(tensor)
            else:
                used = self.budget.used_bytes()
            self.budget.release(tensors)
            self.trials[blocks] = used
        return self.trials[blocks]

    def allocates(self, blocks: int) -> bool:
        return self.used_with(blocks) is not None

    def within_ceiling(self, blocks: int) -> bool:
        used = self.used_with(blocks)
        return used is not None and used <= self.ceiling_bytes


def largest_true(holds: Callable[[int], bool], start: int) -> int:
    """The largest n ≥ 0 with holds(n), for a monotone `holds`, by doubling then bisection.

    Steps of 1, 2, 4, … away from `start` (up while it holds, down while it does not)
    bracket the boundary; bisection closes it. About 2·log2(distance) calls.
    """
    start = max(start, 1)
    if holds(start):
        good, step = start, 1
        while holds(good + step):
            good += step
            step *= 2
        bad = good + step
    else:
        bad, step, good = start, 1, 0  # 0 blocks always "fit"
        while bad - step > 0:
            if holds(bad - step):
                good = bad - step
                break
            bad -= step
            step *= 2
    return largest_fitting(holds, bad - 1, lower=good)


def difference_terms(
    prediction: CapacityPrediction,
    budget: DeviceBudget,
    placeholders: Placeholders,
    kv_rounding_bytes: int,
) -> dict[str, int]:
    """Bytes by which the device leaves more (+) or less (−) for KV than the planner, by cause.

    Their sum over page bytes per block is the expected (largest − predicted) block count,
    up to the one block the floors can move it.
    """
    device_ceiling = int(budget.total_bytes * prediction.gpu_memory_utilization)
    return {
        "device_total_vs_sku": device_ceiling - prediction.ceiling_bytes,
        "non_torch_estimated_minus_measured": prediction.non_torch_bytes - budget.non_torch_bytes,
        "torch_memory_held_before": -budget.torch_reserved_before_bytes,
        "placeholder_rounding": -placeholders.rounding_bytes,
        "kv_pool_rounding": -kv_rounding_bytes,
        "planner_budget_remainder": prediction.kv_budget_bytes
        - prediction.num_blocks * prediction.page_bytes_per_block,
    }


def prediction_record(prediction: CapacityPrediction) -> dict[str, Any]:
    """The planner's side of the proof, every term in bytes, and its ceiling."""
    return {**dataclasses.asdict(prediction), "ceiling_bytes": prediction.ceiling_bytes}
