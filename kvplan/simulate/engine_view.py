"""What the simulator reads from the engine model for one instance (one replica).

Everything comes from the deployment's profile, as `size` and `report` get it: the budget and
pool (`Capacity`), the blocks one request is charged as it grows (`layout()`), the scheduler
limits (`scheduler()`), and the bytes a request's tokens hold and a step reads (the byte
layout of the caches as the engine stores them, `byte_layout`). Nothing is recomputed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.engine import KvLayout
from kvplan.engine.analytic import byte_layout
from kvplan.engine.deployment import Deployment
from kvplan.engine.pool import largest_fitting
from kvplan.engine.vllm import version_of
from kvplan.errors import KvplanError
from kvplan.plan.capacity import Capacity
from kvplan.simulate.allocators import reservation_tokens
from kvplan.simulate.config import SimConfig
from kvplan.simulate.growth import GrowthProfile, growth_profile
from kvplan.simulate.policies import CHUNKS_BY_DEFAULT, ENGINE_DEFAULT
from kvplan.simulate.step_cost import ModelCost, StepCost
from kvplan.simulate.step_table import TableCost
from kvplan.simulate.trtllm_bench import bench_limits
from kvplan.specs import SkuSpec

EVICTION_CAVEAT = (
    "--kv-window/--kv-sinks keep only the first S and last W tokens' KV per request: memory "
    "and step times are modelled, answer quality is not modelled (evicted tokens are no "
    "longer attended to, as in StreamingLLM)"
)


@dataclass(frozen=True)
class InstanceModel:
    """One instance's pool, charges, limits and step times, from the engine model."""

    deployment: Deployment
    sku: SkuSpec
    config: SimConfig
    capacity: Capacity
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    num_blocks: int
    bytes_per_block: float  # one block on the binding GPU, × kv_bytes_factor
    charge: GrowthProfile  # blocks one request is charged at L tokens
    token_bytes: GrowthProfile  # bytes its tokens hold at L on the binding GPU (× factor later)
    read_bytes: GrowthProfile  # bytes a decode step reads for it, summed over stages
    cost: StepCost
    reserve_tokens: Callable[[int, int], int] | None  # contiguous policies only
    # The longest request the pool holds at all (llama.cpp with -c: one slot's cells).
    request_limit_tokens: int
    host_link_bytes_per_s: float | None
    notes: tuple[str, ...]
    capacity_tokens: int  # tokens of KV the pool holds, as the engine reports it
    # A prefill batch runs as a step of its own, decodes waiting (SGLang without
    # --enable-mixed-chunk; vLLM V0 without chunked prefill); else steps are mixed.
    separate_prefill: bool = False
    # The longest prompt the engine accepts (TensorRT-LLM without chunked prefill: its
    # max_num_tokens), or None: any that fits max_model_len.
    prompt_limit_tokens: int | None = None

    @property
    def pool_bytes(self) -> float:
        return self.num_blocks * self.bytes_per_block

    @property
    def is_byte_pool(self) -> bool:
        """Whether a block is one byte (exact, hf, naive; llama.cpp without -c): requests
        take exactly their bytes, so the pool is told in tokens, not blocks."""
        return self.capacity.layout.unit == "byte"


def instance_model(deployment: Deployment, sku: SkuSpec, config: SimConfig) -> InstanceModel:
    """The instance `deployment` runs on `sku` under `config`.

    Raises:
        KvplanError: the weights leave no KV memory, or --max-model-len is out of range.
    """
    engine = deployment.engine.name
    if config.scheduler == "engine":
        config = replace(config, scheduler=ENGINE_DEFAULT.get(engine, "continuous"))
    if config.chunked_prefill is None:
        config = replace(config, chunked_prefill=CHUNKS_BY_DEFAULT.get(engine, True))
    capacity = _capacity(deployment, sku, config)
    refusal = _refusal(capacity)
    if refusal is not None:
        raise KvplanError(f"{refusal}; nothing to simulate (try a larger --tp or another --sku)")
    max_model_len = capacity.context_tokens
    layout, budget = capacity.layout, capacity.budget
    factor = config.kv_bytes_factor
    # The engine's own pool for the budget (bytes per block × factor: the budget ÷ factor).
    scaled = replace(budget, kv_bytes=int(budget.kv_bytes / factor))
    pool = deployment.engine.pool(layout, scaled)
    charge, token_bytes, read_bytes = _profiles(deployment, layout, config, max_model_len)
    scheduler, notes = capacity.scheduler, _notes(deployment, sku, config)
    capacity_tokens = deployment.engine.capacity_tokens(pool, max_model_len)
    max_num_seqs, batched_tokens = scheduler.max_num_seqs, scheduler.max_num_batched_tokens
    if config.trtllm_bench_lengths is not None:
        max_num_seqs, batched_tokens = _bench_limits(
            deployment,
            config.trtllm_bench_lengths,
            bool(config.chunked_prefill),
            capacity_tokens,
            notes,
        )
    prompt_limit = None
    if not config.chunked_prefill and batched_tokens < max_model_len:
        batched_tokens, prompt_limit = _unchunked(engine, batched_tokens, max_model_len, notes)
    return InstanceModel(
        deployment=deployment,
        sku=sku,
        config=config,
        capacity=capacity,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched_tokens,
        num_blocks=pool.num_blocks,
        bytes_per_block=layout.bytes_per_block * factor,
        charge=charge,
        token_bytes=token_bytes,
        read_bytes=read_bytes,
        cost=_cost(deployment, sku, config),
        # Reserved tokens are charged like any length: eviction caps them too.
        reserve_tokens=(
            None
            if config.allocator == "paged"
            else reservation_tokens(config.allocator, max_model_len)
        ),
        request_limit_tokens=largest_fitting(lambda n: pool.requests_at(n) > 0, max_model_len),
        host_link_bytes_per_s=config.host_link_bytes_per_s or sku.host_link_bytes_per_s,
        notes=tuple(notes),
        capacity_tokens=capacity_tokens,
        separate_prefill=_separate_prefill(deployment, config, batched_tokens, max_model_len),
        prompt_limit_tokens=prompt_limit,
    )


def _unchunked(
    engine: str, batched_tokens: int, max_model_len: int, notes: list[str]
) -> tuple[int, int | None]:
    """(max_num_batched_tokens, the longest prompt accepted or None) without chunked prefill
    when a step holds fewer tokens than max_model_len: vLLM requires the budget raised to it;
    TensorRT-LLM keeps max_num_tokens and refuses longer prompts (policies.CHUNKS_BY_DEFAULT)."""
    if engine == "trtllm":
        notes.append(
            f"chunked prefill off (TensorRT-LLM's default; --chunked-prefill turns it on): "
            f"a prompt longer than max_num_tokens {batched_tokens:,} is refused"
        )
        return batched_tokens, batched_tokens
    notes.append(
        f"chunked prefill off: max_num_batched_tokens raised to max_model_len "
        f"{max_model_len:,} so any prompt fits one step (vLLM requires it)"
    )
    return max_model_len, None


def _bench_limits(
    deployment: Deployment,
    lengths: tuple[float, float, int],
    chunked: bool,
    capacity_tokens: int,
    notes: list[str],
) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) as trtllm-bench picks them; a limit the user set
    stays (TensorRT-LLM only). Without chunked prefill trtllm-bench raises max_num_tokens to
    the longest prompt + max_batch_size (`bench/benchmark/utils/general.py` get_settings)."""
    if deployment.engine.name != "trtllm":
        raise KvplanError("--trtllm-bench: the limits trtllm-bench picks are TensorRT-LLM's")
    prompt, output, longest = lengths
    batch, tokens = bench_limits(capacity_tokens, prompt, output, pp=deployment.pp)
    if not chunked:
        tokens = max(tokens, longest + batch)
    settings = deployment.settings
    batch = settings.max_num_seqs or batch
    tokens = settings.max_num_batched_tokens or tokens
    notes.append(
        f"trtllm-bench limits for mean ISL {prompt:,.0f} / OSL {output:,.0f} over "
        f"{capacity_tokens:,} KV tokens: max_batch_size {batch:,}, max_num_tokens {tokens:,}"
    )
    return batch, tokens


def _separate_prefill(
    deployment: Deployment, config: SimConfig, batched_tokens: int, max_model_len: int
) -> bool:
    """Whether prefill batches run unmixed: SGLang's default (`scheduler.py`
    get_next_batch_to_run: a new prefill batch first, else the decode batch), and vLLM V0's
    default scheduler when no prompt is chunked (`core/scheduler.py` _schedule_default:
    prefills first, decodes only in a step without them)."""
    if config.scheduler == "sglang":
        return True
    if config.scheduler != "continuous" or deployment.engine.name != "vllm":
        return False
    return version_of(deployment).era == "v0" and batched_tokens >= max_model_len


def kv_refusal(deployment: Deployment, sku: SkuSpec, config: SimConfig) -> str | None:
    """Why `deployment` leaves no KV memory on `sku` ("llama-3.1-70b on h100-sxm (tp 1,
    pp 1): weights don't fit"), or None when `instance_model` can build its instance.

    Raises:
        KvplanError: --max-model-len is out of range.
    """
    return _refusal(_capacity(deployment, sku, config))


def _capacity(deployment: Deployment, sku: SkuSpec, config: SimConfig) -> Capacity:
    """The engine model's capacity at max_model_len (checked against the native context)."""
    model = deployment.model
    max_model_len = config.max_model_len or model.max_context
    if not 1 <= max_model_len <= model.max_context:
        raise KvplanError(
            f"--max-model-len: {max_model_len:,} must be between 1 and {model.name}'s native "
            f"context {model.max_context:,} tokens"
        )
    return Capacity(deployment, sku, context_tokens=max_model_len, efficiency=config.efficiency)


def _refusal(capacity: Capacity) -> str | None:
    if capacity.kv_usable:
        return None
    deployment = capacity.deployment
    return (
        f"{deployment.model.name} on {capacity.sku.name} (tp {deployment.tp}, "
        f"pp {deployment.pp}): {capacity.verdict}"
    )


def _profiles(
    deployment: Deployment, layout: KvLayout, config: SimConfig, max_model_len: int
) -> tuple[GrowthProfile, GrowthProfile, GrowthProfile]:
    """(blocks charged, token bytes held on the binding GPU, bytes read over all stages) as
    a request of L tokens grows; eviction caps L at sinks + window."""
    cap = config.kept_tokens_cap

    def kept(tokens: int) -> int:
        return tokens if cap is None else min(tokens, cap)

    stages = layout.stages
    stored = byte_layout(deployment.engine.stored_caches(deployment), deployment.stage_ranges())
    charge = growth_profile(
        lambda n: max(stage.blocks_per_request(kept(n)) for stage in stages),
        layout.tokens_per_block,
        max_model_len,
    )
    token_bytes = growth_profile(lambda n: stored.request_bytes(kept(n)), 1, max_model_len)
    read_bytes = growth_profile(
        lambda n: stored.request_bytes_all_stages(kept(n)), 1, max_model_len
    )
    return charge, token_bytes, read_bytes


def _cost(deployment: Deployment, sku: SkuSpec, config: SimConfig) -> StepCost:
    if config.step_table is not None:
        return TableCost(config.step_table, config.step_time_factor)
    return ModelCost(
        deployment, sku, config.efficiency, config.kv_bytes_factor, config.step_time_factor
    )


def _notes(deployment: Deployment, sku: SkuSpec, config: SimConfig) -> list[str]:
    notes = list(deployment.engine.notes(deployment, sku))
    if config.kv_window_tokens is not None:
        notes.append(EVICTION_CAVEAT)
    swaps = config.preemption == "swap" and config.scheduler != "static"
    if swaps and not (config.host_link_bytes_per_s or sku.host_link_bytes_per_s):
        raise KvplanError(
            f"--preemption swap: {sku.name} has no host_link_bytes_per_s in the catalogue; "
            "give --host-link-bandwidth (bytes/s in one direction, e.g. 64GB)"
        )
    if config.scheduler == "static" and config.preemption == "swap":
        notes.append("static batching preempts by recompute: --preemption swap is not used")
    if config.scheduler == "static":
        notes.append(
            "static batching: a batch is formed when the last one has returned, prompts are "
            "padded to the longest, every slot decodes until the longest output ends, and each "
            "request returns with its batch (request-level scheduling, as Orca describes it)"
        )
    return notes
