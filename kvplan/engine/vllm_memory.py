"""vLLM's memory profile: the terms it subtracts before the KV cache, estimated per GPU.

vLLM V1 (`v1/worker/gpu_worker.py` `determine_available_memory`):

    available = total · gpu_memory_utilization − weights − torch peak increase of the
                profile run − non-torch increase [− CUDA-graph estimate, ≥ 0.20]

V0 (≤ 0.7) is the same sum with its own profile run (`worker/worker.py`
`determine_num_available_blocks`). `total` is what the CUDA runtime reports
(`torch.cuda.mem_get_info()`), not the datasheet. Weights are kvplan's exact bytes; the other
terms are estimates fitted on public startup logs (tests/golden/vllm_memory, the fit and test
split in tests/test_vllm_budget_fit.py, the errors per log in docs/engines.md). Each estimate
takes the upper end of what the logs show, so a plan errs towards less KV, never more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.engine.base import Scheduler
from kvplan.engine.nodes import gpus_per_node
from kvplan.units import GIB, MIB

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.engine.vllm_version import VllmVersion
    from kvplan.specs import ModelSpec, SkuSpec

# arg_utils.py (0.6 – 0.33): `vllm serve` takes the large defaults on GPUs with ≥ 70 GiB that
# are not A100s (device total as the runtime reports it).
LARGE_GPU_BYTES = 70 * GIB
# V0 without chunked prefill batches a whole prompt: max_num_batched_tokens =
# max(max_model_len, 2048); above 32k tokens `vllm serve` turns chunked prefill on with 2048.
V0_CHUNKED_PREFILL_ABOVE_TOKENS = 32_768
V0_CHUNKED_PREFILL_BATCHED_TOKENS = 2048


@dataclass(frozen=True)
class MemoryBand:
    """The profile-run terms of a range of vLLM versions, fitted on that range's public logs.

    sampler_bytes_per_logit: the torch peak of the dummy sampler run per logit of
        max_num_seqs × vocab (fp32 logits and the sampler's sort/softmax/index copies).
    non_torch_bytes_tp1 / non_torch_bytes_tp: CUDA memory outside torch that grows while
        profiling, at TP 1 and with tensor-parallel communicators (NCCL, custom all-reduce).
    """

    first_version: tuple[int, int]
    sampler_bytes_per_logit: float
    non_torch_bytes_tp1: int
    non_torch_bytes_tp: int
    basis: str


# Fitted constants, oldest first (each the largest value the fit logs show, rounded up):
MEMORY_BANDS = (
    # V0: the profile run is one forward pass of max_num_batched_tokens, then the driver rank
    # samples the last token of max_num_seqs dummy requests with top-p/top-k (a sort of the
    # fp32 logits), as V1 0.11 does. RTX 3090, 0.6.4: non-torch 0.35 GiB.
    MemoryBand((0, 5), 39.0, round(0.36 * GIB), round(0.36 * GIB), "V0 logs (0.6.4, 0.7.2)"),
    # V1 0.8 – 0.10: A100 defaults (256 requests) show activation + non-torch ≈ 0.56 GiB.
    MemoryBand((0, 8), 16.0, round(0.15 * GIB), round(0.56 * GIB), "V1 0.8 – 0.10 logs"),
    # 0.11: llm-d's H100 sweep: 38.4 – 38.9 B per logit at 1024 requests; non-torch 0.13 –
    # 0.14 GiB at TP 1, 0.54 – 0.55 GiB at TP 2.
    MemoryBand((0, 11), 39.0, round(0.15 * GIB), round(0.56 * GIB), "0.11 logs (llm-d)"),
    # 0.12 – 0.18: no public log found; the larger of the neighbouring bands' terms.
    MemoryBand((0, 12), 39.0, round(0.27 * GIB), round(2.25 * GIB), "0.11 and 0.19 bounds"),
    # 0.19+: llm-d-planner's H100 sweep: 14.6 – 16.9 B per logit; non-torch 0.24 – 0.26 GiB at
    # TP 1 (granite 0.46), 2.07 – 2.21 GiB at TP 2 – 4.
    MemoryBand((0, 19), 17.0, round(0.27 * GIB), round(2.25 * GIB), "0.19 logs (llm-d)"),
)
# TP across nodes: vLLM turns custom all-reduce off ("Custom allreduce is disabled because this
# process group spans across nodes", 0.10.1.1) and NCCL runs the all-reduces over the network
# with its own transport buffers. The one public log (Qwen2-7B at TP 2 over two single-A100
# 40GB nodes, 0.10.1.1, tests/golden/vllm_memory) had 0.40 GiB less KV than the one-node
# estimate gives: 0.5 GiB more non-torch memory, rounded up.
CROSS_NODE_NON_TORCH_BYTES = round(0.5 * GIB)
# vLLM 0.19's printed CUDA-graph estimate grows with the layers captured: 0.71 – 0.84 GiB for
# 28 – 42 layers, 1.70 – 1.82 GiB for Llama-70B's 80; 0.45 GiB + 16.5 MiB per layer bounds all
# but one of them from above. 0.20+ subtracts it from the budget.
CUDAGRAPH_BASE_BYTES = round(0.45 * GIB)
CUDAGRAPH_BYTES_PER_LAYER = round(16.5 * MIB)
# The band shown beside a budget: the largest error on the test logs kvplan predicts within
# tolerance (−0.64 GiB, GPT-OSS-20B at TP 2 on H100s, vLLM 0.19; the largest over-prediction
# is +0.12 GiB).
ESTIMATE_BAND_BYTES = round(0.65 * GIB)


def weights_bytes(deployment: Deployment, sku: SkuSpec, version: VllmVersion) -> int:
    """Weight bytes on the binding GPU as vLLM lays them out.

    kvplan's checkpoint bytes, except MXFP4 routed experts (GPT-OSS): vLLM's MXFP4 MoE
    (`quantization/mxfp4.py`) pads each expert matrix for its kernels: the hidden side to a
    multiple of 256 (triton_kernels' swizzled layout on Hopper and later, Marlin on older
    GPUs) and the intermediate side to 64 (0.10 – 0.11 on Hopper), else 128. GPT-OSS-120B
    on an H100 (0.11) loads 64.38 GiB against 60.71 GiB of checkpoint.
    """
    weights = deployment.weights()
    rope = rope_cache_bytes(deployment.model)
    moe = deployment.model.moe
    if moe is None or (deployment.weight_dtype or moe.expert_weight_dtype) != "mxfp4":
        return weights.per_gpu_bytes + rope
    hidden = deployment.model.hidden_size
    intermediate = moe.expert_intermediate_size // (1 if deployment.ep else deployment.tp)
    hopper = _capability(sku) >= (9, 0)
    step = 64 if hopper and version.major_minor < (0, 12) else 128
    factor = _round_up(hidden, 256) * _round_up(intermediate, step) / (hidden * intermediate)
    shards, tp = deployment.expert_shards, deployment.tp
    return rope + max(
        -(-stage.sharded_bytes // tp)
        + int(stage.routed_expert_bytes * factor * weights.scale) // shards
        + stage.replicated_bytes
        for stage in weights.stages
    )


def rope_cache_bytes(model: ModelSpec) -> int:
    """vLLM's rotary cos/sin table, built at load time and counted with the weights.

    `RotaryEmbedding` precomputes one row of rotary_dim values per position up to the
    model's limit (scaled RoPE: the extended one) in the model dtype, once per GPU:
    Llama-3.1-8B 131,072 × 128 × 2 B = 32 MiB (its log shows 14.99 GiB of weights against
    14.96 GiB of checkpoint); Llama-4-Scout-Instruct's 10,485,760 positions make 2.5 GiB.
    The rotary width is the head dim (MLA: qk_rope_head_dim); a partial rotary factor, which
    the catalogue does not record, would make it smaller.
    """
    rotary_dim = model.mla.qk_rope_head_dim if model.mla else model.attention.head_dim
    positions = max(model.max_context, model.extended_context or 0)
    return positions * rotary_dim * 2


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def _capability(sku: SkuSpec) -> tuple[int, int]:
    """NVIDIA compute capability as (major, minor); (0, 0) for other vendors or unknown."""
    text = sku.compute_capability or ""
    if "." not in text:
        return (0, 0)
    major, minor = text.split(".")
    return int(major), int(minor)


def band_for(version: VllmVersion) -> MemoryBand:
    """The memory band whose logs cover `version`."""
    return [b for b in MEMORY_BANDS if b.first_version <= version.major_minor][-1]


def scheduler_defaults(
    sku: SkuSpec | None, version: VllmVersion, max_model_len: int | None
) -> Scheduler:
    """`vllm serve` defaults: max_num_batched_tokens and max_num_seqs.

    V1 (0.8+ arg_utils.py): 8192 / 1024 on GPUs with ≥ 70 GiB that are not A100s, else
    2048 / 256; without a SKU the smaller pair (the one most GPUs get). V0 batches whole
    prompts: max(max_model_len, 2048) tokens, 256 requests.
    """
    if version.era == "v0":
        length = max_model_len or 2048
        if length > V0_CHUNKED_PREFILL_ABOVE_TOKENS:
            return Scheduler(V0_CHUNKED_PREFILL_BATCHED_TOKENS, 256)
        return Scheduler(max(length, 2048), 256)
    if sku is None:
        return Scheduler(2048, 256)
    memory = sku.runtime_memory_bytes or sku.memory_bytes
    large = memory >= LARGE_GPU_BYTES and sku.family != "a100"
    return Scheduler(8192, 1024) if large else Scheduler(2048, 256)


def forward_bytes_per_token(model: ModelSpec, tp: int) -> int:
    """Peak activation bytes one token of the profile's forward pass holds (16-bit).

    The widest layer's live tensors: residual and hidden state (2 · hidden), q, k and v, and
    the MLP's gate/up output plus its activation (3 · intermediate / tp); an MoE layer keeps
    fused-MoE caches of top-k × (3 · expert width / tp + hidden). RTX 3090 logs of
    Llama-3.1-8B (0.6.4) grow 110 KB per batched token; this gives 112 KiB.
    """
    a = model.attention
    attention = 2 * model.hidden_size + (a.num_heads + 2 * a.num_kv_heads) * a.head_dim // tp
    width = attention + 3 * model.intermediate_size // tp
    moe = model.moe
    if moe is not None:
        experts = moe.experts_per_token * (3 * moe.expert_intermediate_size // tp)
        experts += moe.experts_per_token * model.hidden_size
        width = max(width, attention + experts)
    return 2 * width


def activation_bytes(
    deployment: Deployment, version: VllmVersion, scheduler: Scheduler, vision_bytes: int
) -> int:
    """The profile run's torch peak: the largest of the forward pass, the sampler and a
    cross-attended vision encoder's pass over the dummy images (`vision_bytes`, from
    `vision_profile`)."""
    model = deployment.model
    band = band_for(version)
    sampler = int(band.sampler_bytes_per_logit * scheduler.max_num_seqs * model.vocab_size)
    forward = scheduler.max_num_batched_tokens * forward_bytes_per_token(model, deployment.tp)
    return max(sampler, forward, vision_bytes)


def vision_profile(
    deployment: Deployment, version: VllmVersion, scheduler: Scheduler
) -> tuple[int, int]:
    """(dummy images, vision encoder torch peak in bytes) of vLLM's profile run; (0, 0)
    without a vision tower."""
    images = profile_images(deployment.model, version, scheduler)
    return images, vision_encoder_bytes(deployment.model, deployment.tp, images)


def vision_encoder_bytes(model: ModelSpec, tp: int, images: int) -> int:
    """Torch peak of an mllama vision encoder over `images` dummy images in vLLM's profile
    run (0 for other models; `profile_images` says how many images).

    Read from `model_executor/models/mllama.py` (vllm-project/vllm, commit 005ad95), the
    encoder runs all images at once, each as S = tiles × patches-per-tile padded to a
    multiple of 8 tokens (4 × 1608 = 6432 for Llama-3.2-Vision), with a 16-bit S × S
    attention mask per image. At the MLP of the last local layer whose input is kept for the
    projector, live are: the mask, the kept hidden states (output_dim / hidden − 1 of them),
    the residual, the norm output, and fc1's output with its activation (intermediate / tp
    wide each). Llama-3.2-11B-Vision at 128 images: 9.86 GiB of masks + 7 × 1.96 GiB +
    2 × 7.85 GiB = 39.31 GiB. The release that printed 36.63 GiB frees some of these sooner;
    the reading errs towards less KV, and `estimate_band_bytes` says how much.
    """
    vision = model.vision
    if vision is None:
        return 0
    tokens_per_image = encoder_tokens_per_image(model)
    mask = images * tokens_per_image**2 * 2
    hidden = images * tokens_per_image * vision.hidden_size * 2
    kept = vision.output_dim // vision.hidden_size - 1
    mlp = 2 * images * tokens_per_image * (vision.intermediate_size // tp) * 2
    return mask + (kept + 2) * hidden + mlp


def encoder_tokens_per_image(model: ModelSpec) -> int:
    """Tokens the vision encoder runs per image: every tile's patches and class token,
    padded to a multiple of 8 (0 without a vision tower)."""
    vision = model.vision
    if vision is None:
        return 0
    patches = _round_up((vision.image_size // vision.patch_size) ** 2 + 1, 8)
    return vision.max_num_tiles * patches


# The last release that serves mllama, on V0's encoder-decoder runner (0.10.2).
LAST_V0_ENCODER_DECODER = (0, 10)


def profile_images(model: ModelSpec, version: VllmVersion, scheduler: Scheduler) -> int:
    """Dummy images in vLLM's profile run.

    Through 0.10.x vLLM serves mllama on V0's encoder-decoder runner
    (`worker/enc_dec_model_runner.py` `profile_run`): one dummy request per max_num_seqs,
    each with the per-prompt image limit. V1's `gpu_model_runner.profile_run` instead runs
    as many items as its encoder budget holds: max(max_num_batched_tokens, tokens per item)
    // tokens per item, at most max_num_seqs × items per request
    (`v1/core/encoder_cache_manager.py` `compute_encoder_budget`); later releases would size
    a cross-attention model that way.
    """
    vision = model.vision
    if vision is None:
        return 0
    per_requests = scheduler.max_num_seqs * vision.images_per_request
    if version.major_minor <= LAST_V0_ENCODER_DECODER:
        return per_requests
    tokens = encoder_tokens_per_image(model)
    budget = max(scheduler.max_num_batched_tokens, tokens)
    return min(budget // tokens, per_requests)


def estimate_band_bytes(vision_bytes: int) -> int:
    """± KV bytes the estimated terms carry: the fitted band, plus a quarter of the vision
    encoder term `vision_bytes` (read from one source revision, not fitted on a log; the one
    public log lies 7 % below it)."""
    return ESTIMATE_BAND_BYTES + vision_bytes // 4


def non_torch_bytes(deployment: Deployment, version: VllmVersion, across_nodes: bool) -> int:
    """CUDA memory outside torch's allocator that grows during profiling (cuBLAS, NCCL),
    more when the TP group spans nodes (`across_nodes`: `spans_nodes`)."""
    band = band_for(version)
    base = band.non_torch_bytes_tp if deployment.tp > 1 else band.non_torch_bytes_tp1
    return base + (CROSS_NODE_NON_TORCH_BYTES if across_nodes else 0)


def spans_nodes(deployment: Deployment, sku: SkuSpec) -> bool:
    """Whether the TP group is larger than one node (its all-reduces cross the network): the
    gpus_per_node setting, else the SKU's max_gpus_per_node."""
    return deployment.tp > gpus_per_node(deployment.settings, sku)


def cudagraph_bytes(deployment: Deployment, version: VllmVersion) -> int:
    """The CUDA-graph estimate vLLM ≥ 0.20 subtracts (0 before: graphs use the headroom)."""
    if not version.subtracts_cudagraph_estimate:
        return 0
    return cudagraph_estimate_bytes(deployment)


def cudagraph_estimate_bytes(deployment: Deployment) -> int:
    """CUDA-graph memory of the binding stage: a base plus a share per layer captured."""
    layers = max(len(r) for r in deployment.stage_ranges())
    return CUDAGRAPH_BASE_BYTES + layers * CUDAGRAPH_BYTES_PER_LAYER
