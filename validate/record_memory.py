"""The record's memory section: predicted blocks and bytes against what was measured, and where.

Measured numbers come from the allocator (its block count) and, on CUDA, from the device and
PyTorch's caching allocator (``kvplan.validate.device_memory``); predicted ones from kvplan's
engine formula (``kvplan.validate.plan``). The CUDA byte terms are judged against the planned
bytes replayed through the caching allocator's rules (``kvplan.validate.memory_check``).
"""

from __future__ import annotations

from typing import Any

from kvplan.validate.memory import CPU_POOL_CAP_BYTES, AllocatedPools, FitCheck
from kvplan.validate.verify_plan import VerifyPlan

BLOCKS_SOURCE = (
    "kvplan.kernels.PagedKVCache: the pages it hands out for the batch (asked on the meta "
    "device before allocating) plus the null page it keeps"
)
CPU_BYTES_NOTE = (
    "pool bytes are not measured on CPU: there is no device allocator to ask, and a host "
    "tensor's size is its shape × element size, the prediction itself; the blocks are measured"
)
MEMORY_RULE_CUDA = (
    "exact, no tolerance: blocks == predicted; requested bytes == predicted; allocated, "
    "reserved and driver-used bytes == the caching allocator's rules replayed over the "
    "predicted request sizes"
)
MEMORY_RULE_CPU = "exact: blocks == predicted (bytes not measured on CPU)"


def memory_section(
    plan: VerifyPlan, fit: FitCheck | None, pools: AllocatedPools, device_type: str
) -> dict[str, Any]:
    """Predicted against measured blocks and bytes, and the fit against free device memory
    (None with --capacity, where the capacity section says whether the pool fits)."""
    blocks = pools.cache.num_blocks
    blocks_passed = blocks == plan.predicted_blocks_per_layer
    check = pools.device_check
    allocated = None if check is None else check.measurement.allocated_bytes
    section: dict[str, Any] = {
        "predicted_pool_bytes": plan.predicted_pool_bytes,
        "predicted_kv_bytes": plan.predicted_kv_bytes,
        "predicted_null_page_bytes": plan.predicted_null_page_bytes,
        "predicted_pool_bytes_per_layer": plan.predicted_pool_bytes_per_layer,
        "predicted_pool_bytes_whole_model": plan.predicted_pool_bytes_per_layer * plan.model_layers,
        "predicted_blocks_per_layer": plan.predicted_blocks_per_layer,
        "plan_kv_bytes_per_gpu_whole_model": plan.plan_kv_bytes_per_gpu,
        "token_bytes_per_layer": plan.token_bytes_per_layer,
        "allocator_blocks_per_layer": blocks,
        "allocator_blocks_source": BLOCKS_SOURCE,
        "blocks_passed": blocks_passed,
        "pool_allocations": plan.layers_verified,
        "measured_pool_bytes": allocated,
        "difference_bytes": None if allocated is None else allocated - plan.predicted_pool_bytes,
        "explained_bytes": None
        if check is None
        else check.replay.allocated_bytes - plan.predicted_pool_bytes,
        "device": None if check is None else check.as_record(),
        "measurement": "device: see memory.device.terms[*].source"
        if check is not None
        else CPU_BYTES_NOTE,
        "rule": MEMORY_RULE_CUDA if device_type == "cuda" else MEMORY_RULE_CPU,
        "fit": None if fit is None else fit_section(fit),
        "passed": blocks_passed and (check is None or check.passed),
    }
    return section


def fit_section(fit: FitCheck) -> dict[str, Any]:
    memory = fit.device_memory
    return {
        "required_bytes": fit.required_bytes,
        "workspace_bytes": fit.workspace_bytes,
        "available_bytes": fit.available_bytes,
        "fits": fit.fits,
        "device_total_bytes": memory.total_bytes if memory else None,
        "device_free_bytes": memory.free_bytes if memory else None,
        "torch_reserved_bytes": memory.torch_reserved_bytes if memory else None,
        "non_torch_bytes": memory.non_torch_bytes if memory else None,
        "cpu_cap_bytes": None if memory else CPU_POOL_CAP_BYTES,
    }
