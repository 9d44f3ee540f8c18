"""Simulator results → typed records: the numbers of `kvplan simulate` and `kvplan pools`.

The simulator's objects stay below the API: the report renders these records, so a table,
its notes and its JSON read the same fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.api.results_simulate import (
    KvMemorySplit,
    KvReservedSplit,
    LatencyPercentiles,
    LayoutGoodputRecord,
    PoolChoiceRecord,
    PoolsRun,
    PoolTry,
    RateTry,
    SimulationRun,
    TimelinePoint,
)
from kvplan.simulate.pools import PREFILL_REJECTED
from kvplan.simulate.results import result_fields

if TYPE_CHECKING:
    from kvplan.simulate import Latency, SimulationResult
    from kvplan.simulate.metrics import MemorySplit
    from kvplan.simulate.pools import LayoutGoodput, PoolChoice, PoolsResult

# The pool's parts, in the order a split lists them (MemorySplit.values()).
MEMORY_KEYS = ("token_states", "partial_blocks", "reserved_unused", "fragmentation", "free")


def _latency(latency: Latency) -> LatencyPercentiles:
    return LatencyPercentiles(
        mean=latency.mean_s, p50=latency.p50_s, p90=latency.p90_s, p99=latency.p99_s
    )


def _split(split: MemorySplit | tuple[float, ...]) -> dict[str, int]:
    values = split.values() if not isinstance(split, tuple) else split
    return {f"{key}_bytes": round(value) for key, value in zip(MEMORY_KEYS, values, strict=True)}


def _reserved_split(split: MemorySplit) -> KvReservedSplit:
    """The memory taken from the pool as the PagedAttention paper splits it (Fig. 2)."""
    return KvReservedSplit(
        token_states_bytes=round(split.token_bytes),
        reserved_bytes=round(split.reserved_later_used_bytes),
        internal_fragmentation_bytes=round(split.internal_fragmentation_bytes),
        external_fragmentation_bytes=round(split.fragmentation_bytes),
    )


def simulation_run(result: SimulationResult) -> SimulationRun:
    """One run of `kvplan simulate`, units in every key."""
    view, config = result.view, result.view.config
    slo = config.slo
    return SimulationRun(
        label=result.label,
        **result_fields(result),
        router=config.router,
        max_model_len=view.max_model_len,
        max_num_seqs=view.max_num_seqs,
        max_num_batched_tokens=view.max_num_batched_tokens,
        tokens_per_block=view.charge.tokens_per_block,
        kv_blocks=view.num_blocks,
        kv_block_unit=view.capacity.layout.unit,
        kv_bytes_per_block=round(view.bytes_per_block),
        kv_pool_bytes=round(view.pool_bytes),
        kv_capacity_tokens=view.capacity_tokens,
        kv_bytes_factor=config.kv_bytes_factor,
        step_time_factor=config.step_time_factor,
        kv_window_tokens=config.kv_window_tokens,
        kv_sink_tokens=config.kv_sink_tokens,
        step_times=config.step_table.source if config.step_table else "step-model",
        bandwidth_fraction=config.efficiency.bandwidth_fraction,
        compute_fraction=config.efficiency.compute_fraction,
        workload=result.workload.description,
        workload_kind=result.workload.kind,
        concurrency=result.workload.max_concurrency,
        arrival_window_s=result.saturation.window_s,
        offered_requests_per_s=result.saturation.offered_requests_per_s,
        overloaded=result.saturation.overloaded,
        backlog_growth_requests=result.saturation.backlog_growth_requests,
        sustainable_requests_per_s=result.saturation.sustainable_requests_per_s,
        requests=len(result.workload.requests),
        requests_completed=result.completed,
        requests_rejected=dict(result.rejected),
        makespan_s=result.makespan_s,
        throughput_requests_per_s=result.throughput_requests_per_s,
        output_tokens_per_s=result.output_tokens_per_s,
        ttft_s=_latency(result.ttft),
        tpot_s=_latency(result.tpot),
        itl_s=_latency(result.itl),
        e2e_s=_latency(result.e2e),
        slo_ttft_s=slo.ttft_s,
        slo_tpot_s=slo.tpot_s,
        slo_met_fraction=result.slo_met_fraction,
        goodput_requests_per_s=result.goodput_requests_per_s,
        batch_mean=result.batch_mean,
        batch_peak=result.batch_peak,
        steps=result.steps,
        preemptions=dict(result.preemptions),
        recomputed_tokens=result.recomputed_tokens,
        swapped_bytes=round(result.swapped_bytes),
        padded_prompt_tokens=result.padded_prompt_tokens,
        padded_decode_tokens=result.padded_decode_tokens,
        prefill_tokens=result.prefill_tokens,
        decode_tokens=result.decode_tokens,
        output_tokens=result.output_tokens,
        queue_mean=result.queue_mean,
        queue_peak=result.queue_peak,
        requests_in_system_mean=result.requests_in_system_mean,
        running_mean=result.running_mean,
        kv_memory_mean=KvMemorySplit(**_split(result.memory_mean)),
        kv_reserved_split_mean=_reserved_split(result.memory_mean),
        kv_utilization_fraction=result.kv_utilization_fraction,
        timeline=[
            TimelinePoint(t_s=t, queue=queue, running=running, **_split(split))
            for t, queue, running, split in result.timeline
        ],
        notes=list(result.notes),
    )


def _choice(choice: PoolChoice) -> PoolChoiceRecord:
    return PoolChoiceRecord(
        tp=choice.tp,
        pp=choice.pp,
        instances=choice.instances,
        gpus=choice.gpus,
        ttft_s=choice.ttft_s,
        tpot_s=choice.tpot_s,
        met=choice.instances is not None,
        slo_met_fraction=choice.slo_met_fraction,
        requests_rejected=dict(choice.rejected),
        requests_rejected_here={k: n for k, n in choice.rejected.items() if k != PREFILL_REJECTED},
        tried=[PoolTry(tp=tp, instances=n, met=met) for tp, n, met in choice.tried],
    )


def _per_gpu(requests_per_s: float, gpus: int | None) -> float | None:
    """Requests/s per GPU of what a setup itself returns."""
    return requests_per_s / gpus if gpus else None


def pools_run(label: str, result: PoolsResult) -> PoolsRun:
    """One workload of `kvplan pools`."""
    disaggregated = result.disaggregated_gpus
    return PoolsRun(
        label=label,
        workload=result.workload.description,
        requests=len(result.workload.requests),
        requests_served=result.served,
        requests_rejected=result.rejected,
        offered_requests_per_s=result.offered_requests_per_s,
        arrival_window_s=result.workload.arrival_window_s,
        slo_ttft_s=result.slo.ttft_s,
        slo_tpot_s=result.slo.tpot_s,
        slo_percentile=result.percentile,
        link_bytes_per_s=result.link_bytes_per_s,
        kv_transfer_mean_s=result.transfer_mean_s,
        kv_transfer_percentile_s=result.transfer_percentile_s,
        prefill=_choice(result.prefill),
        decode=_choice(result.decode),
        colocated=_choice(result.colocated),
        ratio=result.ratio,
        disaggregated_gpus=disaggregated,
        disaggregated_requests_per_s_per_gpu=_per_gpu(result.offered_requests_per_s, disaggregated),
        colocated_gpus=result.colocated.gpus,
        colocated_requests_served=result.colocated_served,
        colocated_requests_per_s_per_gpu=_per_gpu(
            result.colocated_requests_per_s, result.colocated.gpus
        ),
        goodput=[_goodput(found) for found in result.goodput],
        notes=list(result.notes),
    )


def _goodput(found: LayoutGoodput) -> LayoutGoodputRecord:
    return LayoutGoodputRecord(
        layout=found.layout,
        split=found.split,
        gpus=found.gpus,
        goodput_requests_per_s=found.requests_per_s,
        goodput_requests_per_s_per_gpu=found.requests_per_s_per_gpu,
        slo_met_fraction=found.slo_met_fraction,
        capped=found.capped,
        tried=[RateTry(requests_per_s=r, slo_met_fraction=f) for r, f in found.tried],
    )
