"""What the rest of kvplan asks of the step model: a decode step, a prefill, a mixed step.

Each is a record of the bytes and FLOPs involved (counted as `kvplan size` counts them) and
the time the per-operation step model gives (kvplan.perf.step_model; docs/speed-model.md),
with the test-split band of the metric it feeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.perf.constants import Band
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from kvplan.perf.flops import (
    causal_attention_flops,
    expected_experts_touched,
    matmul_params_per_token,
    prefill_chunk_flops,
)
from kvplan.perf.rates import NO_COMPUTE, stage_cache_counts
from kvplan.perf.step_model import StepShape
from kvplan.specs import SkuSpec

# --- decode -----------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeEstimate:
    """One decode step of a batch on one replica (tp × pp GPUs).

    Per-GPU byte fields are the largest pipeline stage's, as in `kvplan size`;
    `bytes_read_per_step` is what one GPU per stage reads, stages in turn.
    """

    batch: int
    context_tokens: int  # the longest sequence of the batch
    weight_bytes_read_per_gpu: int
    kv_bytes_read_per_gpu: int
    bytes_read_per_step: int  # Σ over pp stages of one GPU's weight + KV reads
    step_s: float
    tokens_per_s: float  # batch / step_s, one replica
    kv_bytes_per_token: int  # whole model, all GPUs of the replica
    kv_bytes_per_token_per_gpu: int  # largest stage
    experts_touched_per_layer: float | None  # None for dense models
    band: Band | None  # the test-split error of output tokens/s (None: not fitted)
    notes: tuple[str, ...]  # assumptions the user sees next to the numbers


def decode_step(
    deployment: Deployment,
    batch: Batch,
    sku: SkuSpec,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> DecodeEstimate:
    """One decode step of one replica for the sequences of `batch`, time in seconds.

    The time is the step model's for `batch.size` sequences reading their KV; the bytes are
    counted as before: every weight of each stage once (MoE: the expected touched experts)
    and the KV attention visits (the engine's layout, no block padding, windows honoured).
    """
    sequences = batch.size
    weights = _stage_weight_bytes_read(deployment, sequences)
    kv = _decode_kv_bytes_read(deployment, batch)
    # A SKU whose file lists no compute peak still decodes: by its reads (a note says so).
    model = efficiency.model(deployment, sku, compute_optional=True)
    step_s = model.step_s(StepShape(sequences, float(sum(kv))))
    token_bytes = _stage_token_bytes(deployment)
    moe = deployment.model.moe
    touched, notes = None, []
    if moe:
        touched = expected_experts_touched(moe.num_experts, moe.experts_per_token, sequences)
        notes.append(
            f"MoE: {touched:.2f} of {moe.num_experts} routed experts read per layer at batch "
            f"{sequences} (uniform routing)"
        )
    if deployment.pp > 1:
        notes.append(f"pp {deployment.pp}: stage times add up (no micro-batch overlap)")
    if model.rates.dtype == NO_COMPUTE:
        notes.append(f"{sku.name} lists no peak FLOP/s: decode timed by its memory traffic alone")
    return DecodeEstimate(
        batch=sequences,
        context_tokens=batch.longest,
        weight_bytes_read_per_gpu=max(weights),
        kv_bytes_read_per_gpu=max(kv),
        bytes_read_per_step=sum(weights) + sum(kv),
        step_s=step_s,
        tokens_per_s=sequences / step_s,
        kv_bytes_per_token=deployment.tp * sum(token_bytes),
        kv_bytes_per_token_per_gpu=max(token_bytes),
        experts_touched_per_layer=touched,
        band=efficiency.band("output_tokens_per_s"),
        notes=tuple(notes),
    )


# A report asks the same deployment the same questions once per SKU row: what does not
# depend on the SKU is remembered per deployment (and batch).
@lru_cache(maxsize=4096)
def _stage_token_bytes(deployment: Deployment) -> tuple[int, ...]:
    """KV bytes one context token costs one GPU of each stage."""
    return tuple(
        sum(cache.context_token_bytes * n for cache, n in c.items())
        for c in stage_cache_counts(deployment)
    )


@lru_cache(maxsize=16_384)
def _decode_kv_bytes_read(deployment: Deployment, batch: Batch) -> tuple[int, ...]:
    """`_stage_kv_bytes_read`, remembered: a report's rows share a few uniform batches (a
    simulation's ragged batches, each met once, read it directly)."""
    return _stage_kv_bytes_read(deployment, batch)


def _stage_kv_bytes_read(deployment: Deployment, batch: Batch) -> tuple[int, ...]:
    """KV bytes one GPU of each stage reads to attend over `batch`'s tokens."""
    return tuple(
        sum(layers * cache.bytes_per_seq(n) * k for cache, layers in c.items() for n, k in batch)
        for c in stage_cache_counts(deployment)
    )


def weight_bytes_read(deployment: Deployment, tokens: int) -> int:
    """Weight bytes one step reads for `tokens` tokens, summed over one GPU per stage."""
    return sum(_stage_weight_bytes_read(deployment, tokens))


@lru_cache(maxsize=16_384)
def _stage_weight_bytes_read(deployment: Deployment, batch: int) -> tuple[int, ...]:
    """Weight bytes one GPU of each pipeline stage holds and reads per decode step.

    Every weight of the stage once, except that each MoE layer reads only the expected
    touched experts: the stage's routed-expert bytes × touched / E (nearest byte). The whole
    embedding table counts (what `kvplan size` shows); the step model itself reads only the
    layers' weights and lm_head (kvplan.perf.layers).
    """
    model = deployment.model
    weights = deployment.weights()
    moe, fraction = model.moe, 1.0
    if moe:
        fraction = expected_experts_touched(moe.num_experts, moe.experts_per_token, batch)
        fraction /= moe.num_experts
    shards = deployment.expert_shards
    return tuple(
        int(stage.per_gpu_bytes(deployment.tp, fraction, shards) * weights.scale)
        for stage in weights.stages
    )


# --- prefill ----------------------------------------------------------------------


@dataclass(frozen=True)
class PrefillEstimate:
    """One prompt's prefill on one replica, alone in its step (time to first token at rest)."""

    prompt_tokens: int
    dtype: str  # the SKU peak_flop_per_s key used
    matmul_flops: int  # 2 · matmul params per token · prompt_tokens
    attention_flops: int  # QKᵀ and PV over the causal prompt
    flops: int  # matmul_flops + attention_flops
    time_s: float
    band: Band | None  # the test-split error of TTFT (None: not fitted)
    notes: tuple[str, ...]


def prefill(
    deployment: Deployment,
    prompt_tokens: int,
    sku: SkuSpec,
    dtype: str | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> PrefillEstimate:
    """FLOPs, and the step model's seconds, to prefill one prompt of `prompt_tokens` tokens
    in one step. `dtype` is a SKU peak key (bf16, fp8, ...); default: the weight dtype's."""
    if prompt_tokens < 1:
        raise KvplanError(f"--context: {prompt_tokens} must be at least 1 token")
    model = efficiency.model(deployment, sku, dtype)
    spec = deployment.model
    matmul_flops = 2 * matmul_params_per_token(spec) * prompt_tokens
    attention_flops = causal_attention_flops(spec, prompt_tokens)
    time_s = model.step_s(StepShape(0, 0.0, ((0, prompt_tokens),)))
    weights_dtype = deployment.weight_dtype or spec.weight_dtype
    key = model.rates.dtype
    notes = [] if dtype or key == weights_dtype else [f"{weights_dtype} weights: {key} peak"]
    return PrefillEstimate(
        prompt_tokens,
        key,
        matmul_flops,
        attention_flops,
        matmul_flops + attention_flops,
        time_s,
        efficiency.band("ttft_ms"),
        tuple(notes),
    )


# --- one scheduler step: decode tokens and prefill chunks together ----------------


@dataclass(frozen=True)
class StepEstimate:
    """One scheduler step of one replica: decode tokens and prefill chunks in one batch."""

    decode_sequences: int
    prefill_tokens: int
    bytes_read: int  # weights once for every token, decode KV, each chunk's cached prefix
    flops: int  # matmuls of every token, attention of the chunks
    step_s: float
    parts_s: dict[str, float]  # seconds of each operation (step_model.OPERATIONS)


def batched_step(
    deployment: Deployment,
    sku: SkuSpec,
    decode: Batch | None,
    prefill_chunks: Sequence[tuple[int, int]] = (),
    dtype: str | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> StepEstimate:
    """Seconds for one step that decodes `decode`'s sequences and prefills `prefill_chunks`.

    Each chunk is (tokens already cached, tokens prefilled now). The time and its parts are
    the step model's; bytes and FLOPs are counted as `decode_step` and `prefill` count them.
    """
    spec = deployment.model
    sequences = decode.size if decode is not None else 0
    chunk_tokens = sum(chunk for _, chunk in prefill_chunks)
    if sequences + chunk_tokens == 0:
        raise KvplanError("a step needs at least one decode sequence or prefill token")
    model = efficiency.model(deployment, sku, dtype)
    decode_kv = sum(_stage_kv_bytes_read(deployment, decode)) if decode is not None else 0
    prefixes = [done for done, _ in prefill_chunks if done > 0]
    prefix_kv = sum(_stage_kv_bytes_read(deployment, Batch.of(prefixes))) if prefixes else 0
    shape = StepShape(sequences, float(decode_kv), tuple(prefill_chunks), float(prefix_kv))
    bytes_read = weight_bytes_read(deployment, sequences + chunk_tokens) + decode_kv + prefix_kv
    flops = 2 * matmul_params_per_token(spec) * sequences + sum(
        prefill_chunk_flops(spec, done, chunk) for done, chunk in prefill_chunks
    )
    parts = model.parts(shape)
    return StepEstimate(sequences, chunk_tokens, bytes_read, flops, sum(parts.values()), parts)
