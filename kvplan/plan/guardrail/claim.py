"""`kvplan claim`: the bytes behind "serves context L at batch B" on one SKU.

No arithmetic of its own beyond adding terms up: every byte comes from `sizing` and
`capacity`, so the sheet's verdict and its "free" line are the ones `size` prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.plan.capacity import Capacity
from kvplan.plan.sizing import SizeResult, size
from kvplan.specs import SkuSpec


@dataclass(frozen=True)
class ClaimSheet:
    """The bytes behind "serves context L at batch B": per request, per batch, per GPU.

    `size` holds the KV and weights (engine rounding included) and, on the SKU, the engine's
    capacity (budget, pool, verdict); the totals below only add their terms up.
    """

    size: SizeResult
    capacity: Capacity

    @property
    def kv_bytes_per_request_per_gpu(self) -> int:
        return self.size.kv_bytes_per_request_per_gpu

    @property
    def memory_bytes(self) -> int:
        """Device memory the engine sees on one GPU (runtime-visible where known)."""
        return self.capacity.budget.total_bytes

    @property
    def headroom_bytes_per_gpu(self) -> int:
        """The (1 − utilization) share of memory the engine leaves untouched (exact: 0)."""
        return self.memory_bytes - self.capacity.budget.requested_bytes

    @property
    def weights_bytes_per_gpu(self) -> int:
        """Weights on the binding GPU as the engine loads them (the figure `report` shows)."""
        return self.size.weights_bytes_per_gpu

    @property
    def reserve_bytes_per_gpu(self) -> int:
        """Everything the engine keeps out of the KV pool besides weights: memory − weights −
        KV budget, which is the unused share + activation + non-torch + CUDA graphs (with a
        fixed KV budget, whatever the engine leaves)."""
        return self.memory_bytes - self.weights_bytes_per_gpu - self.capacity.budget.kv_bytes

    @property
    def total_bytes_per_gpu(self) -> int:
        """Weights + the batch's KV + the engine's reserve, on the binding GPU."""
        kv = self.size.kv_bytes_per_gpu
        return self.weights_bytes_per_gpu + kv + self.reserve_bytes_per_gpu

    @property
    def free_bytes_per_gpu(self) -> int:
        """Memory left after the total: the KV budget left after the batch, as `size` says it;
        negative: short by that much."""
        free = self.size.free_bytes_per_gpu
        assert free is not None  # a SKU was given
        return free

    @property
    def fits(self) -> bool:
        """The engine's verdict for the whole batch (the one every command gives)."""
        return self.capacity.fits

    @property
    def verdict(self) -> str:
        """The verdict in words, as `size` and `report` print it."""
        return self.capacity.verdict

    @property
    def within_native_limit(self) -> bool:
        """The claimed context is within the model's limit, extended when its RoPE scaling
        is applied (memory aside)."""
        return self.size.context <= self.size.deployment.model.context_limit


def claim_sheet(
    deployment: Deployment, sku: SkuSpec, context_tokens: int, batch: int
) -> ClaimSheet:
    """The claim sheet of `batch` requests of `context_tokens` each on `sku`."""
    result = size(deployment, Batch.uniform(context_tokens, batch), sku)
    assert result.capacity is not None  # a SKU was given
    return ClaimSheet(result, result.capacity)
