"""Typed results of the Python API: what each command computes, before any rounding.

Every field is exact (bytes and tokens are integers) and named with its unit, as in the CLI's
`--format json` output, which is each result's `model_dump()` plus the sentences the report
layer writes around it. A result holds every number any format shows (the table, its notes,
the startup lines, the HTML page's charts): the report layer renders these records and
nothing else, so a table and its JSON cannot disagree.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# What a pool's blocks are (engine.pages.PageUnit, spelled here so that reading a result does
# not load the engines; a test holds the two equal).
BlockUnit = Literal["page", "byte", "slot"]


class Result(BaseModel):
    """A frozen result."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ContextPoint(Result):
    """Requests of `context_tokens` tokens that fit at once, the deployment planned afresh
    for that context (what `kvplan report --context` would say)."""

    context_tokens: int
    max_concurrency: int


def _unsampled(curve: list[ContextPoint] | None) -> bool:
    """A capacity curve is sampled only on request (the HTML page's charts): the dump leaves
    `concurrency_by_context` out when it was not asked for."""
    return curve is None


class FormulaFactor(Result):
    """One named factor of a layer kind's bytes per token (or per sequence, for state)."""

    label: str
    value: int


class TokensKept(Result):
    """`count` sequences each keeping `tokens` tokens in one layer of the kind."""

    tokens: int
    count: int


class FormulaTerm(Result):
    """One layer kind's share of the KV formula with the model's numbers, whole deployment:
    Π factors × tokens kept × sequences × layers × TP ranks = `kv_bytes`."""

    kind: str
    layers: int
    factors: list[FormulaFactor]
    tokens_kept: list[TokensKept]
    window_tokens: int | None  # the sliding window or the chunk, for those kinds
    kv_bytes: int


class BudgetTerms(Result):
    """One GPU's KV budget term by term, in bytes: total · utilization − weights − reserve."""

    total_bytes: int
    total_basis: str
    utilization: float
    requested_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    fixed_kv_memory: bool


class Sequences(Result):
    """`count` sequences of `tokens` tokens each."""

    tokens: int
    count: int


class WeightsPerGpu(Result):
    """How the binding GPU holds its weights, in bytes."""

    split_bytes: int
    routed_expert_bytes: int
    replicated_bytes: int
    total_bytes: int


class WeightsBreakdown(Result):
    """Where the weight bytes come from (computed, or a checkpoint's safetensors headers)."""

    basis: str
    checkpoint: str | None
    scaled_to_index_total: bool
    total_bytes: int
    vision_bytes: int
    per_gpu: WeightsPerGpu
    bytes_by_dtype: dict[str, int] | None = None
    bytes_by_role: dict[str, int] | None = None
    tensors: int | None = None


class SizeReport(Result):
    """`kvplan size`: the exact KV bytes beside the engine's charge; weights; the fit on a SKU."""

    model: str
    engine: str
    context: int
    batch: int
    sequences: list[Sequences]
    kv_dtype: str
    weight_dtype: str
    tp: int
    pp: int
    dp: int
    ep: bool
    gpus: int
    tokens_per_block: int
    exact_kv_bytes: int
    exact_kv_bytes_per_gpu: int
    kv_bytes: int
    kv_bytes_per_gpu: int
    kv_bytes_per_token: int  # the physics: one token in every layer that keeps tokens
    kv_bytes_per_token_per_gpu: int  # the physics, binding GPU
    # What the engine's pool stores for one token, binding GPU (hf: MLA decompressed; naive:
    # the textbook 2·layers·hidden; SGLang: a slot in every layer, cross-attention included).
    engine_kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request: int
    kv_bytes_per_request_per_gpu: int
    kv_bytes_by_kind: dict[str, int]
    naive_kv_bytes: int
    full_reservation_kv_bytes: int | None
    weights_bytes: int  # the checkpoint's, whole deployment
    weights_bytes_per_gpu: int  # as the engine loads them on --sku; without one, the checkpoint's
    checkpoint_weights_bytes_per_gpu: int
    params: int
    active_params: int
    published_params: int | None
    max_context: int
    extended_context: int | None
    context_limit: int
    rope_scaling: dict[str, Any] | None
    weights: WeightsBreakdown
    layers: dict[str, int]
    num_heads: int  # query heads; fewer KV heads (or MLA) is where the textbook formula errs
    num_kv_heads: int
    formula_terms: list[FormulaTerm]
    engine_summary: str  # how the engine charges a request (--explain)
    kv_block_unit: BlockUnit  # what the engine charges a request in: pages, bytes or slots
    # On a SKU (None without one): the engine's budget and verdict, the same as `report`'s.
    sku: str | None = None
    memory_bytes: int | None = None
    kv_budget_bytes_per_gpu: int | None = None
    kv_budget_uncertainty_bytes: int | None = None
    budget: BudgetTerms | None = None
    free_bytes: int | None = None
    max_concurrency: int | None = None
    max_context_tokens: int | None = None
    fits: bool | None = None
    verdict: str | None = None
    # Why the figures may not be the engine's own (ollama's Go engine models), else None.
    engine_caveat: str | None = None
    notes: list[str]


class CapacityRow(Result):
    """One row of `kvplan report`: a model on a SKU at a TP degree, per GPU and per deployment."""

    model: str
    sku: str
    engine: str
    tp: int
    pp: int
    dp: int
    ep: bool
    gpus: int
    nodes: int  # nodes one replica spans (tp · pp over the SKU's GPUs per node)
    kv_dtype: str
    batch: int
    context: int
    memory_bytes: int
    weights_bytes_per_gpu: int
    kv_budget_bytes_per_gpu: int
    kv_budget_uncertainty_bytes: int
    budget: BudgetTerms
    tokens_per_block: int
    kv_blocks: int
    kv_block_unit: BlockUnit  # what kv_blocks counts: token pages, bytes or llama.cpp slots
    kv_bytes_per_block_per_gpu: int  # one of them on the binding GPU
    kv_bytes_per_request_per_gpu: int
    kv_capacity_tokens: int
    max_context_tokens: int
    context_limit: int  # the model's limit as served (its native one, or the RoPE-extended)
    native_limit_binds: bool
    max_concurrency: int
    fitting_batch: int
    kv_bytes_per_token_per_gpu: int  # the physics, binding GPU
    engine_kv_bytes_per_token_per_gpu: int  # what the engine's pool stores per token
    decode_batch: int
    decode_context_tokens: int  # the context the decode figures are computed at (0: none)
    decode_tokens_per_s: float | None
    # The test-split median |error| of throughput as a fraction (0.12 = ±12 %); None: not fitted.
    decode_tokens_per_s_band_fraction: float | None
    decode_step_s: float | None
    verdict: str
    log_lines: list[str]
    # Every number the log lines print, exact, by the engine's own names (vLLM: num_gpu_blocks,
    # the float max_concurrency, needed_bytes, estimated_max_model_len; docs/engines.md).
    startup: dict[str, Any]
    notes: list[str]
    # The requests held against context, sampled when asked (`report(..., curves=True)`).
    concurrency_by_context: list[ContextPoint] | None = Field(None, exclude_if=_unsampled)


class RefusedRow(Result):
    """A row of `kvplan report` that the engine refuses to start (its TP degree): the
    combination and the engine's reason, no figures."""

    model: str
    sku: str
    engine: str
    tp: int
    pp: int
    kv_dtype: str
    batch: int
    context: int
    verdict: str  # "refused: " + refused
    refused: str  # the engine's reason


class ProductResult(Result):
    """One product of a `kvplan check` file: its promise against what its SKU holds."""

    name: str
    model: str
    sku: str
    tp: int
    pp: int
    dp: int
    ep: bool
    engine: str
    kv_dtype: str
    promised_context: int
    promised_concurrency: int
    supported_concurrency: int
    supported_context_at_promised_concurrency: int
    kv_bytes_per_request_per_gpu: int
    kv_bytes_needed_per_gpu: int
    kv_budget_bytes_per_gpu: int
    kv_budget_uncertainty_bytes: int  # the band of the engine terms kvplan estimates (±)
    # requests of the promised context held with the budget at its band's low end (None: no
    # band, or the promise fails)
    supported_concurrency_at_band_low_end: int | None
    weights_bytes_per_gpu: int
    memory_bytes: int
    budget: BudgetTerms
    weights_fit: bool  # the weights fit the engine's share (a fixed KV budget: the device)
    overcommit_bytes: int  # a fixed KV pool and the weights beyond the device (else 0)
    native_limit_binds: bool  # the longest context is the model's limit, not memory's
    beyond_limit: str | None  # the promised context past the model's limit, as a sentence
    extended_context: int | None  # the RoPE scaling's reach past the native limit
    rope_scaling: dict[str, Any] | None
    ok: bool
    # ok with the estimated KV budget, not at the low end of its band (budget − uncertainty)
    within_estimate_band: bool
    failure: str | None
    notes: list[str]
    concurrency_by_context: list[ContextPoint] | None = Field(None, exclude_if=_unsampled)


class CheckReport(Result):
    """Every product of a deployment file, checked; `ok` when every promise holds."""

    path: str  # the deployment file
    ok: bool
    products: list[ProductResult]


class EngineReserve(Result):
    """What the engine keeps out of the KV pool besides weights, per GPU, in bytes."""

    utilization: float
    headroom_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int


class ClaimReport(Result):
    """`kvplan claim`: the bytes behind "serves context L at batch B" on a SKU."""

    model: str
    sku: str
    engine: str
    tp: int
    pp: int
    gpus: int
    kv_dtype: str
    weight_dtype: str
    context: int
    batch: int
    native_context_limit: int
    kv_bytes_per_token: int  # the physics: one token in every layer that keeps tokens
    kv_bytes_per_token_per_gpu: int  # the physics, binding GPU
    # What the engine's pool stores for one token, binding GPU (hf: MLA decompressed; naive:
    # the textbook 2·layers·hidden; SGLang: a slot in every layer, cross-attention included).
    engine_kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request: int
    kv_bytes_per_request_per_gpu: int
    kv_bytes_batch: int
    kv_bytes_batch_per_gpu: int
    weights_bytes: int  # the checkpoint's, whole deployment
    weights_bytes_per_gpu: int  # as the engine loads them (RoPE table, MXFP4 padding)
    checkpoint_weights_bytes_per_gpu: int
    engine_reserve_bytes_per_gpu: int
    engine_reserve: EngineReserve
    total_bytes_per_gpu: int
    memory_bytes: int
    free_bytes_per_gpu: int
    fits: bool
    verdict: str
    within_native_limit: bool
    max_context_tokens_at_batch: int
    max_concurrency_at_context: int
    kv_budget_bytes_per_gpu: int
    kv_budget_uncertainty_bytes: int
    budget: BudgetTerms
    formula_terms: list[FormulaTerm]
    notes: list[str]
    concurrency_by_context: list[ContextPoint] | None = Field(None, exclude_if=_unsampled)


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
    notes: list[str]


def dump(result: Result) -> dict[str, Any]:
    """A result as the JSON the CLI prints: exact integers, nested records as dicts."""
    return result.model_dump(mode="json")
