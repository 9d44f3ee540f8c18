"""Typed results of `kvplan simulate` and `kvplan pools` (see kvplan.api.results)."""

from __future__ import annotations

from kvplan.api.results import BlockUnit, Result

# `float | int`: a figure the simulator may give as a whole number keeps it (JSON "3", not "3.0").
Number = float | int


class LatencyPercentiles(Result):
    """One latency over the served requests, seconds (None: no request measured it)."""

    mean: Number | None
    p50: Number | None
    p90: Number | None
    p99: Number | None


class KvMemorySplit(Result):
    """One instance's KV pool split into what holds it, bytes (rounded to whole bytes)."""

    token_states_bytes: int
    partial_blocks_bytes: int  # the unused tail of each request's last block
    reserved_unused_bytes: int  # reserved ahead (contiguous allocators), not yet written
    fragmentation_bytes: int  # free, but in pieces no request can use
    free_bytes: int


class KvReservedSplit(Result):
    """The KV taken from one instance's pool as the PagedAttention paper splits it (its
    Fig. 2), time-averaged bytes: token states, reserved for tokens still to come, internal
    fragmentation (reserved but never used, and partly filled blocks), external."""

    token_states_bytes: int
    reserved_bytes: int
    internal_fragmentation_bytes: int
    external_fragmentation_bytes: int


class TimelinePoint(Result):
    """The queue, the running requests and one instance's pool split at `t_s` seconds."""

    t_s: Number
    queue: int
    running: int
    token_states_bytes: int
    partial_blocks_bytes: int
    reserved_unused_bytes: int
    fragmentation_bytes: int
    free_bytes: int


class SimulationRun(Result):
    """One run of `kvplan simulate` (docs/commands/simulate.md): the deployment, the engine's
    pool, the workload and every figure the table shows."""

    label: str  # "" for a single run; "as given" and the --vs options side by side
    model: str
    sku: str
    engine: str
    kv_dtype: str
    tp: int
    pp: int
    instances: int
    scheduler: str
    allocator: str
    placement: str  # first-fit or buddy: where a reservation goes
    chunked_prefill: bool
    preemption: str
    router: str
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    tokens_per_block: int
    kv_blocks: int
    kv_block_unit: BlockUnit  # what kv_blocks counts: token pages, bytes or llama.cpp slots
    kv_bytes_per_block: int
    kv_pool_bytes: int  # one instance's pool
    kv_capacity_tokens: int
    kv_bytes_factor: Number
    step_time_factor: Number
    kv_window_tokens: int | None
    kv_sink_tokens: int | None
    step_times: str  # "step-model", or the step-time table's source
    bandwidth_fraction: Number | None  # an override; None: the step model's fitted fractions
    compute_fraction: Number | None
    workload: str
    workload_kind: str  # rate, concurrency (closed loop) or offline
    concurrency: int | None  # the closed loop's cap on requests in flight
    arrival_window_s: Number | None  # 0 to the last arrival; None: all sent at t = 0
    offered_requests_per_s: Number | None  # requests ÷ arrival_window_s
    overloaded: bool
    backlog_growth_requests: int  # over the arrival window's second half
    sustainable_requests_per_s: Number | None  # estimated when overloaded
    requests: int
    requests_completed: int
    requests_rejected: dict[str, int]  # reason -> requests
    makespan_s: Number
    throughput_requests_per_s: Number
    output_tokens_per_s: Number
    ttft_s: LatencyPercentiles
    tpot_s: LatencyPercentiles
    itl_s: LatencyPercentiles
    e2e_s: LatencyPercentiles
    slo_ttft_s: Number | None
    slo_tpot_s: Number | None
    slo_met_fraction: Number | None
    goodput_requests_per_s: Number | None
    batch_mean: Number
    batch_peak: int
    steps: int
    preemptions: dict[str, int]  # kind -> preemptions
    recomputed_tokens: int
    swapped_bytes: int
    padded_prompt_tokens: int
    padded_decode_tokens: int
    prefill_tokens: int
    decode_tokens: int
    output_tokens: int
    queue_mean: Number
    queue_peak: int
    requests_in_system_mean: Number
    running_mean: Number  # requests prefilling or decoding, time-averaged over the makespan
    kv_memory_mean: KvMemorySplit  # time-averaged, one instance
    kv_reserved_split_mean: KvReservedSplit  # the same, as the PagedAttention paper splits it
    kv_utilization_fraction: Number | None  # token states of the KV taken (not of the pool)
    timeline: list[TimelinePoint]
    notes: list[str]


class PoolTry(Result):
    """One instance count a pool's search simulated, and whether it met the target."""

    tp: int
    instances: int
    met: bool


class PoolChoiceRecord(Result):
    """One pool of `kvplan pools`: the fewest instances meeting its target (None: none)."""

    tp: int
    pp: int
    instances: int | None
    gpus: int | None
    ttft_s: Number | None  # at the SLO percentile, for the count found (or the largest tried)
    tpot_s: Number | None
    met: bool
    slo_met_fraction: Number | None
    requests_rejected: dict[str, int]  # reason -> requests, this pool
    # Of those, the ones this pool rejected itself (the decode pool also lists, as missed,
    # what the prefill pool rejected before them).
    requests_rejected_here: dict[str, int]
    tried: list[PoolTry]


class RateTry(Result):
    """One rate a goodput search simulated a layout at, and the attainment there."""

    requests_per_s: Number
    slo_met_fraction: Number


class LayoutGoodputRecord(Result):
    """The highest rate one layout of `kvplan pools --goodput` serves with at least the SLO
    percentile of requests meeting both targets (DistServe's goodput), and per GPU."""

    layout: str  # colocated or disaggregated
    split: str  # "3 × tp 1" colocated, "2P1D" disaggregated
    gpus: int
    goodput_requests_per_s: Number  # 0: not met even at 1/1024 of the workload's rate
    goodput_requests_per_s_per_gpu: Number
    slo_met_fraction: Number  # the attainment at that rate
    capped: bool  # still met at 1024 × the workload's rate: a lower bound
    tried: list[RateTry]


class PoolsRun(Result):
    """One workload of `kvplan pools` (docs/commands/pools.md): prefill and decode pools
    against colocated instances."""

    label: str
    workload: str
    requests: int
    requests_served: int
    requests_rejected: int
    offered_requests_per_s: Number
    arrival_window_s: Number | None  # None: an offline workload, every request sent at t = 0
    slo_ttft_s: Number | None
    slo_tpot_s: Number | None
    slo_percentile: int
    link_bytes_per_s: Number
    kv_transfer_mean_s: Number
    kv_transfer_percentile_s: Number
    prefill: PoolChoiceRecord
    decode: PoolChoiceRecord
    colocated: PoolChoiceRecord
    ratio: str | None  # "2P1D": prefill and decode instances
    disaggregated_gpus: int | None
    disaggregated_requests_per_s_per_gpu: Number | None
    colocated_gpus: int | None
    colocated_requests_served: int
    colocated_requests_per_s_per_gpu: Number | None
    # With --goodput: the colocated and the disaggregated layout above, each at the highest
    # rate it serves; else empty.
    goodput: list[LayoutGoodputRecord]
    notes: list[str]
