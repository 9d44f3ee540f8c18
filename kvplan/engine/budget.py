"""One GPU's KV budget: device memory, the engine's share of it, and every term subtracted.

Two shapes cover the engines kvplan follows:

- `subtract_terms`: the engine's share is ⌊total · utilization⌋, and the weights and the
  engine's reserve terms come out of it (vLLM, llama.cpp, the analytic profiles);
- `fraction_of_free`: the engine takes `utilization` of the memory *free* at one point
  (SGLang: before weights load; TensorRT-LLM: after the engine loads), and what was loaded
  before that point stays outside the fraction.

Terms are keyword-only: a budget has several byte terms side by side, and a term passed in the
wrong place would still type-check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kvplan.errors import SettingError

if TYPE_CHECKING:
    from kvplan.specs import SkuSpec


class BudgetOverrides(Protocol):
    """The settings that replace a budget term (None: the engine's estimate), in bytes."""

    @property
    def kv_memory_bytes(self) -> int | None: ...  # a fixed KV budget per GPU

    @property
    def activation_bytes(self) -> int | None: ...

    @property
    def non_torch_bytes(self) -> int | None: ...

    @property
    def cudagraph_bytes(self) -> int | None: ...


@dataclass(frozen=True, kw_only=True)
class Budget:
    """One GPU's KV budget and the terms it is made of, in bytes.

    `kv_bytes = requested − weights − activation − non_torch − cudagraph` unless `fixed` (a
    user-given KV budget), where `requested = ⌊total · utilization⌋`. An engine that takes a
    fraction of the memory *free* at some point sets `fraction_of_bytes` to that free memory:
    then `requested = ⌊fraction_of_bytes · utilization⌋ + (total − fraction_of_bytes)`.
    `kv_bytes` may be negative: the plan does not fit. `uncertainty_bytes` is the band the
    estimate terms carry (± that much KV).
    """

    total_bytes: int  # device memory as the engine sees it
    total_basis: str  # where total_bytes comes from (runtime-visible, or the datasheet)
    utilization: float  # a fraction in (0, 1]
    weights_bytes: int
    activation_bytes: int = 0
    non_torch_bytes: int = 0
    cudagraph_bytes: int = 0
    fixed: bool = False
    kv_bytes: int
    uncertainty_bytes: int = 0
    fraction_of_bytes: int | None = None  # the free memory utilization applies to; None: total

    @property
    def requested_bytes(self) -> int:
        """The engine's share of memory: ⌊total · utilization⌋ (or of the free memory, above)."""
        if self.fraction_of_bytes is None:
            return int(self.total_bytes * self.utilization)
        base = self.fraction_of_bytes
        return int(base * self.utilization) + self.total_bytes - base

    @property
    def weights_fit(self) -> bool:
        """The weights fit the engine's share (with a fixed KV budget: the device)."""
        return self.weights_bytes <= (self.total_bytes if self.fixed else self.requested_bytes)

    @property
    def overcommit_bytes(self) -> int:
        """Bytes a fixed KV budget and the weights need beyond the device (0 when they fit;
        a computed budget never overcommits: it is what is left)."""
        if not self.fixed:
            return 0
        return max(0, self.weights_bytes + self.kv_bytes - self.total_bytes)


# (activation, non_torch, cudagraph, uncertainty) bytes an engine estimates for its reserve.
Estimate = Callable[[], tuple[int, int, int, int]]


def subtract_terms(
    *,
    total_bytes: int,
    total_basis: str,
    utilization: float,
    weights_bytes: int,
    settings: BudgetOverrides,
    estimate: Estimate | None = None,
) -> Budget:
    """A budget as ⌊total · utilization⌋ minus weights and the engine's reserve terms.

    `estimate()` gives the engine's (activation, non_torch, cudagraph, uncertainty) bytes;
    user overrides in `settings` replace each term, and a fixed KV budget
    (`settings.kv_memory_bytes`) replaces them all.
    """
    activation, non_torch, cudagraph, uncertainty = estimate() if estimate else (0, 0, 0, 0)
    if settings.kv_memory_bytes is not None:
        fixed = settings.kv_memory_bytes
        if fixed > total_bytes:
            # vLLM's --kv-cache-memory cannot allocate more than the device has.
            raise SettingError(
                "kv_memory_bytes",
                f"{fixed:,} bytes is more than the GPU's {total_bytes:,} bytes of device memory",
            )
        return Budget(
            total_bytes=total_bytes,
            total_basis=total_basis,
            utilization=utilization,
            weights_bytes=weights_bytes,
            fixed=True,
            kv_bytes=fixed,
        )
    activation = _override(settings.activation_bytes, activation)
    non_torch = _override(settings.non_torch_bytes, non_torch)
    cudagraph = _override(settings.cudagraph_bytes, cudagraph)
    kv = int(total_bytes * utilization) - weights_bytes - activation - non_torch - cudagraph
    return Budget(
        total_bytes=total_bytes,
        total_basis=total_basis,
        utilization=utilization,
        weights_bytes=weights_bytes,
        activation_bytes=activation,
        non_torch_bytes=non_torch,
        cudagraph_bytes=cudagraph,
        kv_bytes=kv,
        uncertainty_bytes=uncertainty,
    )


def fraction_of_free(
    *,
    total_bytes: int,
    total_basis: str,
    utilization: float,
    weights_bytes: int,
    free_bytes: int,
    settings: BudgetOverrides,
    activation_bytes: int = 0,
    non_torch_bytes: int = 0,
    cudagraph_bytes: int = 0,
    uncertainty_bytes: int = 0,
) -> Budget:
    """A budget where the engine takes `utilization` of `free_bytes`, memory free at one point.

    The terms are what the engine counts outside that fraction;
    `kv = ⌊free · utilization⌋ + (total − free) − weights − terms`. User overrides replace a
    term, and a fixed KV budget (`settings.kv_memory_bytes`) replaces it all.
    """
    budget = subtract_terms(
        total_bytes=total_bytes,
        total_basis=total_basis,
        utilization=utilization,
        weights_bytes=weights_bytes,
        settings=settings,
        estimate=lambda: (activation_bytes, non_torch_bytes, cudagraph_bytes, uncertainty_bytes),
    )
    if budget.fixed:
        return budget
    budget = dataclasses.replace(budget, fraction_of_bytes=free_bytes)
    reserved = budget.activation_bytes + budget.non_torch_bytes + budget.cudagraph_bytes
    return dataclasses.replace(budget, kv_bytes=budget.requested_bytes - weights_bytes - reserved)


def device_memory(sku: SkuSpec, logged_bytes: int | None = None) -> tuple[int, str]:
    """Memory an engine sees on `sku` in bytes and where the figure comes from.

    Engines size their pools from what the runtime reports (`torch.cuda.mem_get_info()`
    total), a few hundred MiB below the datasheet/nvidia-smi figure; the datasheet figure is
    the fallback for a SKU without a runtime figure, and says so. `logged_bytes`, the total
    an engine's log states (the total_gpu_memory setting), replaces both.
    """
    if logged_bytes is not None:
        if logged_bytes <= 0:
            raise SettingError("total_gpu_memory_bytes", "0 bytes: a GPU has some memory")
        return logged_bytes, "the engine's logged total (total_gpu_memory)"
    if sku.runtime_memory_bytes is not None:
        return sku.runtime_memory_bytes, "runtime-visible memory (" + (
            sku.runtime_memory_basis or "catalogue"
        ) + ")"
    return sku.memory_bytes, "datasheet memory: no runtime-visible figure in the catalogue"


def _override(given: int | None, default: int) -> int:
    return default if given is None else given
