"""Frozen, strict pydantic models for the catalogue: models, GPU SKUs, layer plans, dtypes.

Every field carries a description with its unit; the JSON Schema that
`kvplan schema models|skus` prints is built from these classes.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kvplan.errors import KvplanError

# --- dtypes -----------------------------------------------------------------


@dataclass(frozen=True)
class DtypeInfo:
    """Storage cost of a number format: bits per element plus quantisation metadata.

    A group of `group_elements` values shares `metadata_bits` of scales/zero points.
    `group_elements == 0` means one group per token-head row (vLLM's per-token-head scales);
    `metadata_bits == 0` means per-tensor scales only (negligible, not counted).
    """

    name: str
    bits: int
    group_elements: int = 0
    metadata_bits: int = 0
    description: str = ""

    def row_bytes(self, elements: int) -> int:
        """Bytes of one row of `elements` values (one token of one KV head), metadata included."""
        groups = 1 if self.group_elements == 0 else -(-elements // self.group_elements)
        total_bits = elements * self.bits + (
            groups * self.metadata_bits if self.metadata_bits else 0
        )
        return -(-total_bits // 8)

    @property
    def is_quantised(self) -> bool:
        return self.bits < 16


KV_DTYPES: dict[str, DtypeInfo] = {
    d.name: d
    for d in (
        DtypeInfo("fp32", 32, description="IEEE float32"),
        DtypeInfo("bf16", 16, description="bfloat16 (vLLM 'auto' for bf16 models)"),
        DtypeInfo("fp16", 16, description="IEEE float16"),
        DtypeInfo("fp8_e4m3", 8, description="FP8 E4M3 with per-tensor scales (vLLM 'fp8')"),
        DtypeInfo("fp8_e5m2", 8, description="FP8 E5M2 with per-tensor scales"),
        # vLLM int8_per_token_head: one fp32 scale per token per KV head, carved from the page.
        DtypeInfo("int8", 8, 0, 32, "int8 + one fp32 scale per token per head"),
        # transformers QuantizedCache defaults (nbits=4, q_group_size=64): bf16 scale + zero.
        DtypeInfo("int4", 4, 64, 32, "int4 + bf16 scale and zero point per 64 values"),
        DtypeInfo("nvfp4", 4, 16, 8, "FP4 E2M1 + one fp8 E4M3 scale per 16 values"),
        DtypeInfo("mxfp4", 4, 32, 8, "FP4 E2M1 + one E8M0 scale per 32 values (OCP MX)"),
    )
}

WEIGHT_DTYPES: dict[str, DtypeInfo] = {
    d.name: d
    for d in (
        DtypeInfo("fp32", 32, description="IEEE float32"),
        DtypeInfo("bf16", 16, description="bfloat16"),
        DtypeInfo("fp16", 16, description="IEEE float16"),
        DtypeInfo("fp8", 8, description="FP8 with per-tensor or per-channel scales (negligible)"),
        # DeepSeek-V3 checkpoint: one fp32 scale per 128x128 block.
        DtypeInfo("fp8_block", 8, 128 * 128, 32, "FP8 + one fp32 scale per 128x128 block"),
        DtypeInfo("int8", 8, description="int8 with per-channel scales (negligible)"),
        # GPTQ/AWQ group 128: an fp16 scale and a packed 4-bit zero point per group.
        DtypeInfo("int4", 4, 128, 20, "int4, group 128: fp16 scale + 4-bit zero"),
        DtypeInfo("nvfp4", 4, 16, 8, "FP4 E2M1 + one fp8 scale per 16 values"),
        DtypeInfo("mxfp4", 4, 32, 8, "FP4 E2M1 + one E8M0 scale per 32 values"),
    )
}

# Spellings users type; mapped once, here, onto the canonical names above.
KV_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
}


WEIGHT_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
}


def _dtype_info(
    table: dict[str, DtypeInfo], aliases: dict[str, str], name: str, what: str
) -> DtypeInfo:
    canonical = aliases.get(name.lower(), name.lower())
    if canonical in table:
        return table[canonical]
    close = difflib.get_close_matches(name.lower(), [*table, *aliases], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise KvplanError(f"{what}: unknown dtype {name!r}{hint} (allowed: {', '.join(table)})")


def kv_dtype_info(name: str) -> DtypeInfo:
    """The KV dtype called `name` (aliases such as 'fp8' and 'bfloat16' accepted)."""
    return _dtype_info(KV_DTYPES, KV_DTYPE_ALIASES, name, "kv dtype")


def weight_dtype_info(name: str) -> DtypeInfo:
    """The weight dtype called `name`."""
    return _dtype_info(WEIGHT_DTYPES, WEIGHT_DTYPE_ALIASES, name, "weight dtype")


KvDtypeName = Literal[
    "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "nvfp4", "mxfp4"
]
WeightDtypeName = Literal[
    "fp32", "bf16", "fp16", "fp8", "fp8_block", "int8", "int4", "nvfp4", "mxfp4"
]

# --- layer kinds ------------------------------------------------------------

LayerKind = Literal["full", "sliding", "chunked", "mla", "state", "shared"]
LAYER_KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "mla", "state", "shared")

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")

PositiveInt = Annotated[int, Field(gt=0)]
# YAML gives lists; tuples keep the specs hashable and frozen. Lax only on the container.
Names = Annotated[tuple[str, ...], Field(strict=False)]
Kinds = Annotated[tuple[LayerKind, ...], Field(strict=False)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class _Spec(BaseModel):
    model_config = _STRICT


class AttentionSpec(_Spec):
    """Softmax attention geometry, exactly as the public config states it."""

    num_heads: PositiveInt = Field(description="query heads (config num_attention_heads)")
    num_kv_heads: PositiveInt = Field(
        description="key/value heads (num_key_value_heads; 1 = MQA, = num_heads for MHA)"
    )
    head_dim: PositiveInt = Field(
        description="elements per head, as the config states it (never assumed hidden/heads)"
    )
    qkv_bias: bool = Field(False, description="q/k/v projections carry biases (Qwen2, GPT-2)")
    o_bias: bool = Field(False, description="output projection carries a bias")
    qk_norm: bool = Field(False, description="per-head RMSNorm on q and k (Qwen3, Gemma 3)")
    output_gate: bool = Field(
        False, description="q projection doubled for a sigmoid output gate (Qwen3-Next)"
    )
    sinks: bool = Field(False, description="one learned attention-sink logit per head (GPT-OSS)")

    @model_validator(mode="after")
    def _heads_divide(self) -> AttentionSpec:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}"
            )
        return self


class MlaSpec(_Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): one compressed latent per token per layer."""

    kv_lora_rank: PositiveInt = Field(description="latent width cached per token (512 for V3)")
    qk_rope_head_dim: PositiveInt = Field(description="decoupled RoPE key width cached per token")
    qk_nope_head_dim: PositiveInt = Field(description="per-head non-RoPE q/k width")
    v_head_dim: PositiveInt = Field(description="per-head value width")
    q_lora_rank: PositiveInt | None = Field(
        None, description="query low-rank width; null = plain q projection (V2-Lite)"
    )


class MoeSpec(_Spec):
    """Mixture-of-experts feed-forward layers."""

    num_experts: PositiveInt = Field(description="routed experts per MoE layer")
    experts_per_token: PositiveInt = Field(description="routed experts each token activates")
    expert_intermediate_size: PositiveInt = Field(description="FFN width of one routed expert")
    num_shared_experts: NonNegativeInt = Field(0, description="always-on shared experts")
    shared_expert_intermediate_size: PositiveInt | None = Field(
        None, description="FFN width of one shared expert; null = expert_intermediate_size"
    )
    shared_expert_gate: bool = Field(
        False, description="sigmoid gate on the shared expert (Qwen2-MoE)"
    )
    dense_layers: NonNegativeInt = Field(
        0, description="leading layers with a dense FFN (DeepSeek first_k_dense_replace)"
    )
    layer_step: PositiveInt = Field(1, description="every layer_step-th layer is MoE")
    layer_offset: NonNegativeInt = Field(0, description="first MoE layer index within the step")
    dense_intermediate_size: PositiveInt | None = Field(
        None, description="FFN width of non-MoE layers; null = intermediate_size"
    )
    router_bias: bool = Field(False, description="router carries a bias (GPT-OSS)")
    expert_bias: bool = Field(False, description="expert projections carry biases (GPT-OSS)")
    expert_weight_dtype: WeightDtypeName | None = Field(
        None, description="dtype of routed-expert weights when it differs (GPT-OSS: mxfp4)"
    )

    @model_validator(mode="after")
    def _topk(self) -> MoeSpec:
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token {self.experts_per_token} exceeds num_experts {self.num_experts}"
            )
        return self


class StateSpec(_Spec):
    """Constant-size recurrent state of linear-attention / SSM layers (one per sequence).

    State elements per sequence per layer: conv (conv_kernel - 1) x conv_channels plus
    ssm ssm_heads x ssm_head_dim x ssm_state_size; both split over TP by channels/heads.
    """

    kind: Literal["mamba1", "mamba2", "gated_delta_net"] = Field(description="recurrence type")
    conv_kernel: PositiveInt = Field(
        description="causal conv width (d_conv / linear_conv_kernel_dim)"
    )
    conv_channels: PositiveInt = Field(description="channels of the conv state")
    ssm_heads: PositiveInt = Field(
        description="heads of the SSM/delta-rule state (mamba1: d_inner)"
    )
    ssm_head_dim: PositiveInt = Field(description="rows of each head's state (mamba1: 1)")
    ssm_state_size: PositiveInt = Field(description="columns of each head's state (d_state / Dv)")
    # Parameter counting only (projections of the recurrent block).
    inner_size: PositiveInt = Field(description="inner width (mamba d_inner; GDN Hv x Dv)")
    num_key_heads: NonNegativeInt = Field(0, description="GDN key heads (Hk)")
    key_head_dim: NonNegativeInt = Field(0, description="GDN key head dim (Dk)")
    dt_rank: NonNegativeInt = Field(0, description="mamba1 dt_rank")
    num_groups: NonNegativeInt = Field(0, description="mamba2 n_groups")

    def elements_per_seq(self, tp: int = 1) -> int:
        """State elements per sequence of one layer on one TP rank."""
        conv = (self.conv_kernel - 1) * -(-self.conv_channels // tp)
        ssm = -(-self.ssm_heads // tp) * self.ssm_head_dim * self.ssm_state_size
        return conv + ssm


class LayerPlan(_Spec):
    """Which kind each layer is: a repeating `pattern` or an explicit `kinds` list."""

    pattern: Kinds | None = Field(
        None, description="repeated (and cut) to num_layers, e.g. [sliding, full] for Gemma 2"
    )
    kinds: Kinds | None = Field(
        None, description="one kind per layer; length must equal num_layers"
    )
    sliding_window: PositiveInt | None = Field(
        None, description="tokens a sliding layer keeps (required when any layer is sliding)"
    )
    chunk_size: PositiveInt | None = Field(
        None, description="tokens per attention chunk (required for chunked layers)"
    )

    @model_validator(mode="after")
    def _one_form(self) -> LayerPlan:
        if (self.pattern is None) == (self.kinds is None):
            raise ValueError("give exactly one of pattern or kinds")
        used = set(self.pattern or self.kinds or ())
        if not used:
            raise ValueError("the layer plan is empty")
        if "sliding" in used and self.sliding_window is None:
            raise ValueError("sliding layers need sliding_window (tokens)")
        if "chunked" in used and self.chunk_size is None:
            raise ValueError("chunked layers need chunk_size (tokens)")
        return self

    def expand(self, num_layers: int) -> tuple[str, ...]:
        """The kind of every layer, in order."""
        if self.kinds is not None:
            return tuple(self.kinds)
        pattern = self.pattern or ()
        reps = -(-num_layers // len(pattern))
        return tuple((pattern * reps)[:num_layers])


class ModelSpec(_Spec):
    """A model architecture (not a checkpoint), as its public config.json states it."""

    name: str = Field(min_length=1, description="catalogue name, lower-case, e.g. llama-3.1-8b")
    aliases: Names = Field((), description="other names, e.g. Hugging Face repo ids")
    source: str = Field(min_length=1, description="URL of the public config.json it came from")
    family: str = Field(min_length=1, description="HF model_type, e.g. llama, gemma2, deepseek_v3")
    hidden_size: PositiveInt = Field(description="residual width (d_model)")
    num_layers: PositiveInt = Field(description="decoder layers (num_hidden_layers)")
    vocab_size: PositiveInt = Field(description="vocabulary size (embedding rows)")
    intermediate_size: PositiveInt = Field(description="FFN width of dense layers")
    tie_word_embeddings: bool = Field(description="lm_head shares the input embedding")
    max_context: PositiveInt = Field(description="native context limit in tokens")
    weight_dtype: WeightDtypeName = Field("bf16", description="dtype of the released weights")
    attention: AttentionSpec = Field(description="softmax attention geometry")
    mla: MlaSpec | None = Field(None, description="MLA latent geometry (mla layers)")
    moe: MoeSpec | None = Field(None, description="mixture-of-experts FFN")
    state: StateSpec | None = Field(None, description="recurrent state geometry (state layers)")
    layers: LayerPlan = Field(description="which kind each layer is")
    mlp: Literal["gated", "plain"] = Field(
        "gated", description="gated (SwiGLU/GeGLU: 3 matrices) or plain (2 matrices) FFN"
    )
    mlp_bias: bool = Field(False, description="FFN projections carry biases")
    norm: Literal["rms", "layer"] = Field(
        "rms", description="RMSNorm (weight) or LayerNorm (+bias)"
    )
    norms_per_layer: PositiveInt = Field(2, description="norm modules per decoder layer")
    learned_positions: NonNegativeInt = Field(
        0, description="rows of a learned position embedding (GPT-2 n_positions); 0 = RoPE"
    )
    params: PositiveInt | None = Field(None, description="published parameter count")
    params_source: str | None = Field(None, description="where the published count is stated")
    notes: Names = Field((), description="readings taken of an ambiguous config")

    @model_validator(mode="after")
    def _plan_fits(self) -> ModelSpec:
        plan = self.layers
        if plan.kinds is not None and len(plan.kinds) != self.num_layers:
            raise ValueError(
                f"layers.kinds has {len(plan.kinds)} entries but num_layers is {self.num_layers}"
            )
        if plan.pattern is not None and len(plan.pattern) > self.num_layers:
            raise ValueError(
                f"layers.pattern has {len(plan.pattern)} entries, more than num_layers "
                f"{self.num_layers}"
            )
        used = set(plan.expand(self.num_layers))
        if "mla" in used and self.mla is None:
            raise ValueError("mla layers need an mla section")
        if self.mla is not None and "mla" not in used:
            raise ValueError("an mla section is given but no layer is mla")
        if "state" in used and self.state is None:
            raise ValueError("state layers need a state section")
        for field, value in (
            ("sliding_window", plan.sliding_window),
            ("chunk_size", plan.chunk_size),
        ):
            if value is not None and value > self.max_context:
                raise ValueError(
                    f"layers.{field} {value} is larger than max_context {self.max_context}"
                )
        if self.moe is not None and self.moe.dense_layers > self.num_layers:
            raise ValueError(f"moe.dense_layers {self.moe.dense_layers} exceeds num_layers")
        return self

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """The kind of every layer, expanded from the plan."""
        return self.layers.expand(self.num_layers)


class SkuSpec(_Spec):
    """A GPU/accelerator SKU, from its public datasheet."""

    name: str = Field(min_length=1, description="catalogue name, e.g. h100-sxm")
    aliases: Names = Field(
        (), description="other names, incl. the device name torch/nvidia-smi reports"
    )
    vendor: Literal["nvidia", "amd", "intel", "google", "aws", "other"] = Field(
        description="vendor"
    )
    family: str = Field(min_length=1, description="product family for --sku filters, e.g. h100")
    compute_capability: str | None = Field(
        None,
        pattern=r"^([0-9]{1,2}\.[0-9]|gfx[0-9a-f]{3,4})$",
        description="NVIDIA compute capability (9.0 = Hopper) or AMD gfx target (gfx942): "
        "engines pick kernels, hence block sizes, by it",
    )
    memory_bytes: PositiveInt = Field(description="device memory in bytes, exact")
    memory_basis: str = Field(
        min_length=1,
        description="how memory_bytes was derived: datasheet GB (10^9) or GiB, or nvidia-smi total",
    )
    runtime_memory_bytes: PositiveInt | None = Field(
        None,
        description="device memory in bytes as the CUDA/ROCm runtime reports it "
        "(torch.cuda.mem_get_info() total; what vLLM multiplies by gpu_memory_utilization); "
        "below the nvidia-smi total. null: memory_bytes is used",
    )
    runtime_memory_basis: str | None = Field(
        None,
        description="where runtime_memory_bytes comes from: a public log line, or the rule used",
    )
    memory_type: str = Field(min_length=1, description="HBM3, HBM3e, GDDR6, ...")
    bandwidth_bytes_per_s: PositiveInt = Field(description="datasheet memory bandwidth, bytes/s")
    peak_flop_per_s: dict[str, PositiveInt] = Field(
        description="dense (not sparse) peak FLOP/s per dtype: bf16, fp16, fp8, int8, fp4, tf32, "
        "fp32, fp64"
    )
    interconnect: str | None = Field(None, description="GPU-to-GPU link, e.g. NVLink 4 900 GB/s")
    interconnect_bytes_per_s: PositiveInt | None = Field(
        None,
        description="GPU-to-GPU bandwidth in one direction, bytes/s (half the datasheet's "
        "bidirectional NVLink figure); what moves KV between instances. null: not stated",
    )
    host_link_bytes_per_s: PositiveInt | None = Field(
        None,
        description="GPU-to-host bandwidth in one direction, bytes/s (half the datasheet's "
        "bidirectional PCIe or C2C figure); what swaps KV to CPU memory. null: not stated",
    )
    max_gpus_per_node: PositiveInt = Field(8, description="largest TP degree in one node")
    sm_count: PositiveInt | None = Field(None, description="SMs / compute units")
    l2_bytes: PositiveInt | None = Field(None, description="last-level on-chip cache, bytes")
    source: str = Field(min_length=1, description="datasheet URL")
    notes: Names = Field((), description="caveats, conversions")

    @model_validator(mode="after")
    def _flop_dtypes(self) -> SkuSpec:
        allowed = {"bf16", "fp16", "fp8", "int8", "fp4", "tf32", "fp32", "fp64"}
        unknown = set(self.peak_flop_per_s) - allowed
        if unknown:
            raise ValueError(
                f"peak_flop_per_s has unknown dtype(s) {sorted(unknown)}; "
                f"allowed: {sorted(allowed)}"
            )
        if (self.runtime_memory_bytes is None) != (self.runtime_memory_basis is None):
            raise ValueError("give runtime_memory_bytes together with runtime_memory_basis")
        if self.runtime_memory_bytes is not None and self.runtime_memory_bytes > self.memory_bytes:
            raise ValueError(
                f"runtime_memory_bytes {self.runtime_memory_bytes} exceeds memory_bytes "
                f"{self.memory_bytes}"
            )
        return self
