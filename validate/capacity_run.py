"""`verify --capacity` inside a run: the prediction, the placeholders, the pool, the search.

``start_capacity`` turns the planner's prediction into the batch (every block covered by
sequences of the asked context), ``CapacityRun.hold`` allocates the placeholders before the
pool, ``adopt_pool`` measures the device with the pool in place, and ``finish_capacity``
searches the largest block count and writes the record's ``capacity`` section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kvplan.errors import KvplanError
from kvplan.specs import ModelSpec, SkuSpec
from kvplan.validate.capacity import (
    BlockSearch,
    DeviceBudget,
    Placeholders,
    capacity_lengths,
    difference_terms,
    hold_placeholders,
    largest_true,
    prediction_record,
)
from kvplan.validate.memory import AllocatedPools
from kvplan.validate.plan import CapacityPrediction, capacity_prediction
from kvplan.validate.verify_plan import VerifyPlan


@dataclass
class CapacityRun:
    """The proof's state through one verify run."""

    prediction: CapacityPrediction
    sku: SkuSpec
    lengths: list[int]
    device_name: str
    matches_sku: bool | None
    """the device is the SKU named (None on CPU: there is no device to match)."""
    notes: list[str]
    budget: DeviceBudget | None = None
    placeholders: Placeholders | None = None
    pool_used_bytes: int | None = None
    pool_allocated: bool = False
    """the predicted pool allocated (on CPU: within the SKU's memory as a cap)."""
    pool_tensors: list[torch.Tensor] = field(default_factory=list)

    @property
    def device_ceiling_bytes(self) -> int:
        """total × utilization of the device's own total, as vLLM computes requested memory."""
        assert self.budget is not None
        return int(self.budget.total_bytes * self.prediction.gpu_memory_utilization)

    def check_plan(self, plan: VerifyPlan) -> None:
        """The verify plan's pool must be the planner's blocks (two formulas, one answer)."""
        prediction = self.prediction
        planned = prediction.num_blocks * prediction.page_bytes_per_block
        if plan.predicted_blocks_per_layer != prediction.num_blocks or (
            plan.predicted_pool_bytes != planned
        ):
            raise RuntimeError(
                f"verify's pool ({plan.predicted_blocks_per_layer} blocks, "
                f"{plan.predicted_pool_bytes:,} B) disagrees with the planner's "
                f"({prediction.num_blocks} blocks, {planned:,} B)"
            )

    def hold(self, device: torch.device) -> None:
        """Measure the empty device and hold the weights/activation placeholders."""
        self.budget = DeviceBudget(device, self.sku)
        self.placeholders = hold_placeholders(self.budget, self.prediction)

    def adopt_pool(self, pools: AllocatedPools) -> bool:
        """Measure used memory with the pool in place; whether it is within the ceiling."""
        assert self.budget is not None and self.placeholders is not None
        adopted = self.budget.adopt(list(pools.cache.buffers))
        if adopted and not self.budget.is_cuda:
            self.pool_tensors = list(pools.cache.buffers)
        self.pool_allocated = adopted
        self.pool_used_bytes = self.budget.used_bytes()
        return (
            adopted
            and self.placeholders.allocated
            and self.pool_used_bytes <= self.device_ceiling_bytes
        )

    def scratch_bytes(self) -> int | None:
        """The float64 reference's budget on a full device: half of what is free."""
        if self.budget is None or not self.budget.is_cuda:
            return None
        free, _ = torch.cuda.mem_get_info(self.budget.device)
        return int(free) // 2


def start_capacity(
    model: ModelSpec,
    request: Any,
    sku: SkuSpec | None,
    detected: SkuSpec | None,
    device: torch.device,
) -> CapacityRun:
    """The prediction for `sku` and the batch that covers its every block at the context.

    Raises:
        KvplanError: no --sku, an engine other than vllm, a ragged batch.
    """
    if request.sku is None:
        raise KvplanError("--capacity: name the SKU whose plan to prove with --sku")
    assert sku is not None
    if request.engine.lower() != "vllm":
        raise KvplanError(
            f"--capacity: proves vLLM's block budget, so --engine must be vllm; got "
            f"{request.engine!r}"
        )
    if len(set(request.lengths)) != 1 or len(request.lengths) != 1:
        raise KvplanError("--capacity: give one --context; the batch is what the budget holds")
    context = request.lengths[0]
    prediction = capacity_prediction(
        model,
        sku,
        kv_dtype=request.kv_dtype,
        tp=request.tp,
        context_tokens=context,
        tokens_per_block=request.block_size,
        utilization=request.utilization,
    )
    lengths = capacity_lengths(prediction.num_blocks, prediction.tokens_per_block, context)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        matches = detected is not None and detected.name == sku.name
        what = detected.name if detected else f"{name!r}, which matches no catalogue SKU"
        notes = (
            []
            if matches
            else [
                f"the device is {what}, not {sku.name}: the planner's figures for {sku.name} "
                "were tried on it as they are; nothing is scaled"
            ]
        )
    else:
        name, matches = "cpu", None
        notes = [
            f"CPU run: {sku.name}'s {sku.memory_bytes:,} B of memory stand in for the device as "
            "a cap on the proof's own (real, host) allocations; used memory is counted, not "
            "measured by a device"
        ]
    return CapacityRun(prediction, sku, lengths, name, matches, notes)


def finish_capacity(run: CapacityRun, plan: VerifyPlan, pool_fits: bool | None) -> dict[str, Any]:
    """Search the largest block count that allocates, release everything, write the section."""
    budget, placeholders, prediction = run.budget, run.placeholders, run.prediction
    assert budget is not None and placeholders is not None
    budget.release(run.pool_tensors)
    page_per_layer = plan.tokens_per_block * plan.token_bytes_per_layer
    largest = allocatable = None
    terms: dict[str, int] = {}
    search = BlockSearch(budget, plan.layers_verified, page_per_layer, run.device_ceiling_bytes)
    if placeholders.allocated:
        largest = largest_true(search.within_ceiling, prediction.num_blocks)
        allocatable = largest_true(search.allocates, max(largest, 1))
        used_at_largest = search.used_with(largest) if largest else placeholders.used_after_bytes
        kv_rounding = (used_at_largest or 0) - placeholders.used_after_bytes
        kv_rounding -= largest * prediction.page_bytes_per_block
        terms = difference_terms(prediction, budget, placeholders, kv_rounding)
    budget.release(placeholders.tensors)
    section = {
        "prediction": prediction_record(prediction),
        "device": {
            "name": run.device_name,
            "matches_sku": run.matches_sku,
            "total_bytes": budget.total_bytes,
            "ceiling_bytes": run.device_ceiling_bytes,
            "non_torch_bytes": budget.non_torch_bytes,
            "torch_reserved_before_bytes": budget.torch_reserved_before_bytes,
            "used_source": budget.used_source,
        },
        "placeholders": {
            "requested_bytes": placeholders.requested_bytes,
            "allocated": placeholders.allocated,
            "used_before_bytes": placeholders.used_before_bytes,
            "used_after_bytes": placeholders.used_after_bytes if placeholders.allocated else None,
            "rounding_bytes": placeholders.rounding_bytes if placeholders.allocated else None,
        },
        "pool": {
            "blocks": prediction.num_blocks,
            "sequences": len(run.lengths),
            "context_tokens": prediction.context_tokens,
            "allocated": run.pool_allocated,
            "used_after_bytes": run.pool_used_bytes,
            "free_after_bytes": None
            if run.pool_used_bytes is None
            else budget.total_bytes - run.pool_used_bytes,
        },
        "fits": bool(pool_fits),
        "predicted_blocks": prediction.num_blocks,
        "largest_blocks_within_ceiling": largest,
        "largest_blocks_allocatable": allocatable,
        "blocks_difference": None if largest is None else largest - prediction.num_blocks,
        "difference_terms_bytes": terms,
        "difference_explained_blocks": sum(terms.values()) / prediction.page_bytes_per_block
        if terms
        else None,
        "search_trials": len(search.trials),
    }
    section["statement"] = _statement(section)
    return section


def _statement(section: dict[str, Any]) -> str:
    prediction, pool = section["prediction"], section["pool"]
    verdict = "fits" if section["fits"] else "does not fit"
    text = (
        f"{prediction['num_blocks']:,} blocks of {prediction['tokens_per_block']} tokens "
        f"(the planner's, for {prediction['sku']}) {verdict} within "
        f"{prediction['gpu_memory_utilization']:g} × the device's memory"
    )
    if pool["free_after_bytes"] is not None:
        text += f"; {pool['free_after_bytes']:,} B free after"
    largest = section["largest_blocks_within_ceiling"]
    if largest is not None:
        text += (
            f"; the largest count that allocates within that ceiling is {largest:,} "
            f"({section['blocks_difference']:+,} blocks; the measured terms explain "
            f"{section['difference_explained_blocks']:+,.1f})"
        )
        if section["device"]["name"] == "cpu" and section["difference_terms_bytes"]:
            text += _cpu_gap(section)
    return text


def _cpu_gap(section: dict[str, Any]) -> str:
    """What the two counts mean on a CPU, where the gap is not a planner error: memory the
    planner holds back for the engine (CUDA context, NCCL buffers) that a host process does
    not have, so the larger count is no GPU's."""
    non_torch = section["difference_terms_bytes"]["non_torch_estimated_minus_measured"]
    page = section["prediction"]["page_bytes_per_block"]
    return (
        f"; on CPU this shows that the planner's pool allocates, not how tight it is: most of "
        f"the gap is the {non_torch:,} B ({non_torch / page:,.1f} blocks) the planner keeps "
        "for the engine's non-torch memory, which a CPU run does not have"
    )
