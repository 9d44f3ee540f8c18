"""Typed results of `kvplan recommend` (see kvplan.api.results)."""

from __future__ import annotations

from typing import Any

from kvplan.api.results import BlockUnit, Result


class RecommendLoss(Result):
    """One way an alternative is worse than the first: `kind` (gpus or price, weights, kv,
    nodes, pipeline, held, utilization, order), its value and the first's."""

    kind: str
    value: int | float | str
    first: int | float | str


class RecommendCandidate(Result):
    """One deployment `kvplan recommend` evaluated: the settings it chose, exact bytes and
    counts per GPU, requests held (all replicas), the launch command and log lines."""

    sku: str
    gpus: int
    nodes: int
    tp: int
    pp: int
    dp: int
    ep: bool
    weight_dtype: str
    kv_dtype: str
    gpu_memory_utilization: float
    kv_memory_bytes: int | None
    max_num_seqs: int
    max_num_batched_tokens: int
    tokens_per_block: int
    cost: int | float  # GPUs, or the price of an hour of all of them
    weights_bytes_per_gpu: int
    kv_budget_bytes_per_gpu: int
    kv_budget_uncertainty_bytes: int
    kv_blocks: int
    kv_blocks_within_headroom: int
    kv_block_unit: BlockUnit  # what both counts count: token pages, bytes or llama.cpp slots
    kv_bytes_per_block_per_gpu: int
    max_concurrency: int  # requests of the context the KV holds, as `report` and vLLM say
    concurrency_within_headroom: int
    meets: bool
    # Throughput targets: share of the workload's requests meeting every SLO (rejected ones
    # missed) and those requests per second of the run, as `kvplan simulate` reports them.
    slo_met_fraction: float | None = None
    goodput_requests_per_s: float | None = None
    launch_command: str | None
    log_lines: list[str]
    startup: dict[str, Any]  # the log lines' numbers, exact, as in `report`
    notes: list[str]
    loses_by: list[RecommendLoss]  # empty for the first and for misses


class SearchSummary(Result):
    """What a recommendation searched: the points of the space, what it computed and pruned,
    and the values tried per dimension (weights: "released" for the checkpoint as shipped)."""

    skus: int
    points: int
    capacities_evaluated: int
    refused_by_engine: int
    beyond_cost_bound: int
    skus_without_price: list[str]
    searched: dict[str, list[int | float | str]]
    simulations: int = 0  # throughput targets: candidates scored by a simulation run


class ThroughputTarget(Result):
    """What a throughput recommendation asked: a workload served with at least
    `slo_attainment_fraction` of its requests within the SLOs (seconds)."""

    workload: str
    requests: int
    offered_requests_per_s: float | None
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_attainment_fraction: float
    notes: list[str]  # what the simulator could not run


class RecommendReport(Result):
    """`kvplan recommend`: the deployments that meet the target, best first, or the closest
    miss; `unquantised_miss` is the closest without quantisation when the first quantises."""

    model: str
    engine: str
    engine_version: str | None
    context_tokens: int
    concurrency: int | None
    throughput: ThroughputTarget | None = None  # set instead of concurrency for --rate/--trace
    headroom_fraction: float
    rank_by: str
    meets: bool
    ranked: list[RecommendCandidate]
    closest_miss: RecommendCandidate | None
    unquantised_miss: RecommendCandidate | None
    search: SearchSummary
