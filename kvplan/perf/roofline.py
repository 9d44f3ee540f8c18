"""Roofline estimates (DESIGN §3): a decode step from bytes read, a prefill from FLOPs.

Decode is taken as memory-bound: each step reads, on every GPU, that GPU's weights
once (MoE: only the experts the batch is routed to) and each sequence's KV once, at
a fraction of the datasheet bandwidth. Prefill is taken as compute-bound: matmul and
attention FLOPs at a fraction of the dense tensor-core peak. Nothing overlaps and no
communication is counted; docs/roofline.md gives the formulas and the limits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.kvmath import (
    ChunkedCache,
    CrossCache,
    LayerCache,
    SharedCache,
    SlidingCache,
    StateCache,
    layer_caches,
    param_counts,
)
from kvplan.specs import (
    ModelSpec,
    SkuSpec,
    is_gguf_weight_dtype,
    kv_dtype_info,
    weight_dtype_info,
)


@dataclass(frozen=True)
class Efficiency:
    """Fractions (0 < f ≤ 1) of the datasheet figures that real kernels reach."""

    # The best paged decode kernels read at ~85-90 % of spec HBM bandwidth, about what a
    # device-to-device copy reaches (FlashInfer ≈88 % on H100 SXM at bs 64 / L 1k, read off
    # Fig. 6 of flashinfer.ai/2024/02/02/introduce-flashinfer.html; FlashMLA 3000 GB/s of
    # 3.35 TB/s on H800, github.com/deepseek-ai/FlashMLA README). 0.85 is the low end of that band;
    # short contexts or tiny batches get 20-60 %, so the estimate is optimistic there.
    bandwidth_fraction: float = 0.85
    # Prefill model FLOP utilisation: an assumption, not a measurement. Large prompt GEMMs run
    # well above it, attention, norms and launch gaps below; 0.5 is a round whole-model figure.
    compute_fraction: float = 0.5

    def __post_init__(self) -> None:
        for option, value in (
            ("--bandwidth-efficiency", self.bandwidth_fraction),
            ("--compute-efficiency", self.compute_fraction),
        ):
            if not 0 < value <= 1:  # also rejects NaN
                raise KvplanError(f"{option}: {value} must be in (0, 1]; a fraction, 0.5 = 50 %")


DEFAULT_EFFICIENCY = Efficiency()


def expected_experts_touched(num_experts: int, experts_per_token: int, batch: int) -> float:
    """Expected distinct routed experts one MoE layer reads for `batch` tokens.

    With uniform, independent routing an expert is missed by one token with probability
    1 − k/E, so E · (1 − (1 − k/E)^b): exactly k at b = 1, tending to E as b grows.
    """
    return num_experts * (1 - (1 - experts_per_token / num_experts) ** batch)


# --- decode -----------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeEstimate:
    """One decode step of a batch on one replica (tp × pp GPUs), memory-bound.

    Per-GPU byte fields are the largest pipeline stage's, as in `kvplan size`;
    `bytes_read_per_step` is what sets the time: one GPU per stage, stages in turn.
    """

    batch: int
    weight_bytes_read_per_gpu: int
    kv_bytes_read_per_gpu: int
    bytes_read_per_step: int  # Σ over pp stages of one GPU's weight + KV reads
    step_s: float
    tokens_per_s: float  # batch / step_s, one replica
    kv_bytes_per_token: int  # whole model, all GPUs of the replica
    kv_bytes_per_token_per_gpu: int  # largest stage
    experts_touched_per_layer: float | None  # None for dense models
    notes: tuple[str, ...]  # assumptions the user sees next to the numbers


def decode_step(
    deployment: Deployment,
    batch: Batch,
    sku: SkuSpec,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> DecodeEstimate:
    """One decode step of one replica for the sequences of `batch`, time in seconds.

    step_s = Σ_stages (weight bytes read + KV bytes read on one GPU of the stage)
             / (bandwidth_bytes_per_s · bandwidth_fraction).
    With pp the stages run one after another for a token and no second micro-batch
    fills the bubble, so stage times add (the simplification docs/roofline.md states).
    """
    sequences = batch.size
    weights = _stage_weight_bytes_read(deployment, sequences)
    # The tokens attention visits: the engine's layout (HF keeps MLA decompressed) but no
    # block padding, since masked tail slots are not fetched, and windows honoured even
    # where the engine reserves full length (that changes allocation, not reads).
    stage_caches = stage_cache_counts(deployment)
    kv = _stage_kv_bytes_read(deployment, batch)
    bytes_per_step = sum(weights) + sum(kv)
    step_s = bytes_per_step / (sku.bandwidth_bytes_per_s * efficiency.bandwidth_fraction)
    token_bytes = [
        sum(cache.context_token_bytes * n for cache, n in c.items()) for c in stage_caches
    ]
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
    return DecodeEstimate(
        batch=sequences,
        weight_bytes_read_per_gpu=max(weights),
        kv_bytes_read_per_gpu=max(kv),
        bytes_read_per_step=bytes_per_step,
        step_s=step_s,
        tokens_per_s=sequences / step_s,
        kv_bytes_per_token=deployment.tp * sum(token_bytes),
        kv_bytes_per_token_per_gpu=max(token_bytes),
        experts_touched_per_layer=touched,
        notes=tuple(notes),
    )


def _stage_kv_bytes_read(deployment: Deployment, batch: Batch) -> list[int]:
    """KV bytes one GPU of each stage reads to attend over `batch`'s tokens."""
    return [
        sum(layers * cache.bytes_per_seq(n) * k for cache, layers in c.items() for n, k in batch)
        for c in stage_cache_counts(deployment)
    ]


@lru_cache(maxsize=4096)  # one per deployment; a report asks once per SKU row
def stage_cache_counts(deployment: Deployment) -> tuple[Counter[LayerCache], ...]:
    """Each stage's distinct caches as the engine stores them, with their layer counts.

    A handful of terms per stage instead of one per layer keeps whole-catalogue reports fast.
    """
    caches = deployment.engine.stored_caches(deployment)
    return tuple(Counter(caches[i] for i in r) for r in deployment.stage_ranges())


def weight_bytes_read(deployment: Deployment, tokens: int) -> int:
    """Weight bytes one step reads for `tokens` tokens, summed over one GPU per stage.

    What `decode_step` counts for a batch of `tokens` sequences; a prefill chunk's tokens are
    routed like decode tokens, so an MoE step touches more experts the more tokens it holds.
    """
    return sum(_stage_weight_bytes_read(deployment, tokens))


def _stage_weight_bytes_read(deployment: Deployment, batch: int) -> list[int]:
    """Weight bytes one GPU of each pipeline stage reads per decode step.

    Every weight of the stage once, except that each MoE layer reads only the expected
    touched experts: the stage's routed-expert bytes × touched / E (nearest byte). Under
    expert parallelism the expectation per GPU is the same (its E/tp experts × the same
    hit probability), so dividing by tp holds for both layouts. The whole embedding table
    counts as read (gpt-fast's "bandwidth achieved"), although a lookup gathers `batch` rows.
    """
    model = deployment.model
    weights = deployment.weights()
    moe, fraction = model.moe, 1.0
    if moe:
        fraction = expected_experts_touched(moe.num_experts, moe.experts_per_token, batch)
        fraction /= moe.num_experts
    shards = deployment.expert_shards
    return [
        int(stage.per_gpu_bytes(deployment.tp, fraction, shards) * weights.scale)
        for stage in weights.stages
    ]


# --- prefill ----------------------------------------------------------------------

# Tensor-core peak each weight dtype computes at (first one the SKU lists wins).
# fp8 / fp8_block checkpoints run fp8 GEMMs (vLLM fp8 W8A8, DeepGEMM block fp8); int8 is
# taken as W8A8. int4 (GPTQ/AWQ, group 128) is weight-only: Marlin/Machete dequantise to
# 16-bit and run bf16 MMAs, and Hopper/Blackwell have no int4 tensor cores. nvfp4/mxfp4
# use fp4 MMAs where the SKU has them, else the fp8 peak (W4A8 kernels), else bf16: the
# optimistic reading, in keeping with prefill time as a floor (W4A16 kernels such as
# Marlin run at the bf16 peak; pass dtype="bf16" for those).
COMPUTE_DTYPES: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32",),
    "bf16": ("bf16",),
    "fp16": ("fp16",),
    "fp8": ("fp8",),
    "fp8_block": ("fp8",),
    "int8": ("int8",),
    "int4": ("bf16",),
    "nvfp4": ("fp4", "fp8", "bf16"),
    "mxfp4": ("fp4", "fp8", "bf16"),
}
# GGUF file types (Q4_K_M, …): llama.cpp's CUDA backend multiplies quantised weights by q8_1
# activations with int8 tensor-core MMQ kernels on Turing and later (ggml-cuda/mmq.cu
# ggml_cuda_should_use_mmq), else dequantises to f16.
GGUF_COMPUTE_DTYPES = ("int8", "fp16", "bf16")


@dataclass(frozen=True)
class PrefillEstimate:
    """One prompt's prefill on one replica, compute-bound.

    `time_s` is a floor on time to first token at batch 1: no memory or communication
    time, no overlap, FLOPs at compute_fraction of the dense peak.
    """

    prompt_tokens: int
    dtype: str  # the SKU peak_flop_per_s key used
    matmul_flops: int  # 2 · matmul params per token · prompt_tokens
    attention_flops: int  # QKᵀ and PV over the causal prompt
    flops: int  # matmul_flops + attention_flops
    time_s: float
    notes: tuple[str, ...]


def prefill(
    deployment: Deployment,
    prompt_tokens: int,
    sku: SkuSpec,
    dtype: str | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> PrefillEstimate:
    """FLOPs and time in seconds to prefill one prompt of `prompt_tokens` tokens.

    time_s = flops / tp / (peak_flop_per_s[dtype] · compute_fraction). Each TP rank does
    1/tp of every matmul and head; pipeline stages run in turn for one prompt, so pp does
    not divide. `dtype` is a SKU peak key (bf16, fp8, ...); default: COMPUTE_DTYPES of
    the deployment's weight dtype.
    """
    if prompt_tokens < 1:
        raise KvplanError(f"--context: {prompt_tokens} must be at least 1 token")
    model = deployment.model
    weights_dtype = weight_dtype_info(deployment.weight_dtype or model.weight_dtype).name
    key = _compute_dtype(sku, dtype, weights_dtype)
    matmul_flops = 2 * matmul_params_per_token(model) * prompt_tokens
    attention_flops = causal_attention_flops(model, prompt_tokens)
    flops = matmul_flops + attention_flops
    time_s = flops / deployment.tp / (sku.peak_flop_per_s[key] * efficiency.compute_fraction)
    notes = [] if dtype or key == weights_dtype else [f"{weights_dtype} weights: {key} peak"]
    return PrefillEstimate(
        prompt_tokens, key, matmul_flops, attention_flops, flops, time_s, tuple(notes)
    )


@lru_cache(maxsize=1024)  # a simulation asks once per prefill chunk; specs are frozen
def matmul_params_per_token(model: ModelSpec) -> int:
    """Parameters one token multiplies through: active params, embedding out, lm_head in.

    The input embedding is a row gather (no FLOPs); lm_head is a matmul for every prompt
    token whether or not it is tied. MoE layers count experts_per_token experts. Norm
    weights and biases count like matrix weights (2 FLOP each; well under 0.1 %).
    """
    counts = param_counts(model)
    return counts.active - counts.embedding - counts.lm_head + model.vocab_size * model.hidden_size


def causal_attention_flops(model: ModelSpec, prompt_tokens: int) -> int:
    """FLOPs of QKᵀ and PV for one causal prompt, all layers and heads.

    Per layer 2 · num_heads · (qk width + v width) · Σ_{i=1..L} kept(i): head_dim for
    both widths in softmax attention; MLA prefill runs per head with qk_nope + qk_rope
    and v_head_dim. State layers have none beyond their params (counted as matmuls).
    """
    return sum(
        2 * width * layers * attended_tokens_sum(cache, prompt_tokens)
        for cache, width, layers in _attention_terms(model)
    )


@lru_cache(maxsize=1024)  # a simulation asks for every prefill chunk; specs are frozen
def _attention_terms(model: ModelSpec) -> tuple[tuple[LayerCache, int, int], ...]:
    """Each distinct layer cache with its qk + v width and its layer count."""
    heads, head_dim, mla = model.attention.num_heads, model.attention.head_dim, model.mla
    terms: Counter[tuple[LayerCache, int]] = Counter()
    # Cache objects only give each layer's kind and window; the KV dtype is irrelevant here.
    for cache in layer_caches(model, kv_dtype_info("bf16")):
        if cache.is_latent and mla is not None:
            width = heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
        else:
            width = heads * 2 * head_dim
        terms[(cache, width)] += 1
    return tuple((cache, width, layers) for (cache, width), layers in terms.items())


def attended_tokens_sum(cache: LayerCache, prompt_tokens: int) -> int:
    """Σ_{i=1..L} of the keys query position i attends to in this layer, closed form.

    full: L(L+1)/2. sliding W: positions up to W see all before them, later ones W.
    chunked C: L = q·C + r gives q complete chunks of C(C+1)/2 plus r(r+1)/2.
    state: 0 (no attention). shared: a shared-KV layer still attends with its own
    queries; its window is not recorded, so full length is assumed (an upper bound).
    cross: every position attends to all the request's encoder tokens, L · E.
    """
    length = prompt_tokens
    if isinstance(cache, CrossCache):
        return length * cache.encoder_tokens
    if isinstance(cache, SharedCache):
        return _triangle(length)
    if isinstance(cache, StateCache):
        return 0
    if isinstance(cache, SlidingCache):
        seen_all = min(length, cache.window_tokens)
        return _triangle(seen_all) + (length - seen_all) * cache.window_tokens
    if isinstance(cache, ChunkedCache):
        chunks, rest = divmod(length, cache.chunk_tokens)
        return chunks * _triangle(cache.chunk_tokens) + _triangle(rest)
    return _triangle(length)


def _triangle(n: int) -> int:
    return n * (n + 1) // 2


def _compute_dtype(sku: SkuSpec, dtype: str | None, weight_dtype: str) -> str:
    if dtype:
        wanted: tuple[str, ...] = (dtype,)
    elif is_gguf_weight_dtype(weight_dtype):
        wanted = GGUF_COMPUTE_DTYPES
    else:
        wanted = COMPUTE_DTYPES[weight_dtype]
    for key in wanted:
        if key in sku.peak_flop_per_s:
            return key
    has = ", ".join(sorted(sku.peak_flop_per_s)) or "none"
    asked = " or ".join(repr(k) for k in wanted)
    raise KvplanError(
        f"compute dtype: SKU {sku.name!r} lists no peak FLOP/s for {asked} (it has: {has})"
    )


def prefill_chunk_flops(model: ModelSpec, done_tokens: int, chunk_tokens: int) -> int:
    """FLOPs to prefill `chunk_tokens` more tokens of a prompt whose first `done_tokens` are cached.

    2 · matmul params per token · chunk + attention(done + chunk) − attention(done): the chunks
    of one prompt add up to `prefill()`'s FLOPs for the whole prompt, whatever the chunking.
    """
    return chunk_flops_function(model)(done_tokens, chunk_tokens)


@lru_cache(maxsize=1024)
def chunk_flops_function(model: ModelSpec) -> Callable[[int, int], int]:
    """`prefill_chunk_flops` for one model as a function of (done, chunk) tokens.

    A simulator asks for every prefill chunk it runs; looking the model up once keeps each
    call to a few integer operations.
    """
    matmul_flops_per_token = 2 * matmul_params_per_token(model)
    terms = [(2 * width * layers, cache) for cache, width, layers in _attention_terms(model)]

    def flops(done_tokens: int, chunk_tokens: int) -> int:
        end = done_tokens + chunk_tokens
        attention = sum(
            factor * (attended_tokens_sum(cache, end) - attended_tokens_sum(cache, done_tokens))
            for factor, cache in terms
        )
        return matmul_flops_per_token * chunk_tokens + attention

    return flops


# --- one scheduler step: decode tokens and prefill chunks together ----------------


@dataclass(frozen=True)
class StepRates:
    """What one replica reads and computes per second, efficiencies applied.

    A step takes max(bytes read / bytes_per_s, FLOPs / flop_per_s): the roofline. Decode alone
    is under the memory line, a long prefill under the compute line; a step that mixes them
    (chunked prefill) overlaps the decode reads with the chunk's matmuls, which is why engines
    mix them.
    """

    bytes_per_s: float  # datasheet bandwidth · bandwidth_fraction (one GPU per stage in turn)
    flop_per_s: float  # tp · dense peak of the compute dtype · compute_fraction
    dtype: str  # the SKU peak_flop_per_s key used

    def step_s(self, bytes_read: int | float, flops: int | float) -> float:
        """Seconds for a step that reads `bytes_read` bytes and computes `flops` FLOPs."""
        return max(bytes_read / self.bytes_per_s, flops / self.flop_per_s)


def step_rates(
    deployment: Deployment,
    sku: SkuSpec,
    dtype: str | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> StepRates:
    """The memory and compute rates of one replica of `deployment` on `sku`.

    The same figures `decode_step` (bandwidth) and `prefill` (tp · peak) divide by.
    """
    model = deployment.model
    weights_dtype = weight_dtype_info(deployment.weight_dtype or model.weight_dtype).name
    key = _compute_dtype(sku, dtype, weights_dtype)
    return StepRates(
        bytes_per_s=sku.bandwidth_bytes_per_s * efficiency.bandwidth_fraction,
        flop_per_s=deployment.tp * sku.peak_flop_per_s[key] * efficiency.compute_fraction,
        dtype=key,
    )


@dataclass(frozen=True)
class StepEstimate:
    """One scheduler step of one replica: decode tokens and prefill chunks in one batch."""

    decode_sequences: int
    prefill_tokens: int
    bytes_read: int  # weights once for every token, decode KV, each chunk's cached prefix
    flops: int  # matmuls of every token, attention of the chunks
    memory_s: float
    compute_s: float
    step_s: float  # max(memory_s, compute_s)


def batched_step(
    deployment: Deployment,
    sku: SkuSpec,
    decode: Batch | None,
    prefill_chunks: Sequence[tuple[int, int]] = (),
    dtype: str | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> StepEstimate:
    """Seconds for one step that decodes `decode`'s sequences and prefills `prefill_chunks`.

    Each chunk is (tokens already cached, tokens prefilled now). Bytes read: the weights once
    for all the step's tokens (`weight_bytes_read`), each decoding sequence's KV (as
    `decode_step`) and each chunk's cached prefix. FLOPs: 2 · matmul params per token for
    every token (decode tokens too) plus each chunk's attention (`prefill_chunk_flops`).
    Decode attention FLOPs are left out: a few per byte read, far under any GPU's ridge point.
    Alone, a memory-bound decode batch takes `decode_step`'s time and a compute-bound prompt
    `prefill`'s.
    """
    model = deployment.model
    sequences = decode.size if decode is not None else 0
    chunk_tokens = sum(chunk for _, chunk in prefill_chunks)
    if sequences + chunk_tokens == 0:
        raise KvplanError("a step needs at least one decode sequence or prefill token")
    rates = step_rates(deployment, sku, dtype, efficiency)
    tokens = sequences + chunk_tokens
    kv = sum(_stage_kv_bytes_read(deployment, decode)) if decode is not None else 0
    prefixes = [done for done, _ in prefill_chunks if done > 0]
    if prefixes:
        kv += sum(_stage_kv_bytes_read(deployment, Batch.of(prefixes)))
    bytes_read = weight_bytes_read(deployment, tokens) + kv
    flops = 2 * matmul_params_per_token(model) * sequences + sum(
        prefill_chunk_flops(model, done, chunk) for done, chunk in prefill_chunks
    )
    memory_s, compute_s = bytes_read / rates.bytes_per_s, flops / rates.flop_per_s
    step_s = rates.step_s(bytes_read, flops)
    return StepEstimate(sequences, chunk_tokens, bytes_read, flops, memory_s, compute_s, step_s)
