"""Sections of a model spec: attention, MLA (and its indexer), MoE, recurrent state, vision,
and the layer plan. Each is a strict frozen pydantic model whose fields carry units."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kvplan.specs.common import Kinds, NonNegativeInt, PositiveInt, _Spec
from kvplan.specs.dtypes import WeightDtypeName


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


class IndexerSpec(_Spec):
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2): one key per token per layer.

    The indexer scores every past token with `num_heads` small query heads against one cached
    key of `head_dim` values, and MLA then attends to the `topk_tokens` best. The keys are a
    second per-token cache beside the latent, stored as fp8 with one fp32 scale per 128 values
    (DeepSeek's inference/model.py `k_cache` + `k_scale_cache`; vLLM's DeepseekV32IndexerCache
    page is block × (128 + 4) bytes), whatever dtype the latent uses.
    """

    num_heads: PositiveInt = Field(description="indexer query heads (index_n_heads)")
    head_dim: PositiveInt = Field(
        description="width of the indexer key cached per token, in values (index_head_dim)"
    )
    topk_tokens: PositiveInt = Field(
        description="tokens each query attends to after selection, in tokens (index_topk)"
    )


class MlaSpec(_Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): one compressed latent per token per layer."""

    kv_lora_rank: PositiveInt = Field(description="latent width cached per token (512 for V3)")
    qk_rope_head_dim: PositiveInt = Field(description="decoupled RoPE key width cached per token")
    qk_nope_head_dim: PositiveInt = Field(description="per-head non-RoPE q/k width")
    v_head_dim: PositiveInt = Field(description="per-head value width")
    q_lora_rank: PositiveInt | None = Field(
        None, description="query low-rank width; null = plain q projection (V2-Lite)"
    )
    indexer: IndexerSpec | None = Field(
        None,
        description="sparse-attention indexer in every mla layer (DeepSeek-V3.2); its key "
        "cache adds head_dim fp8 bytes + one fp32 scale per 128 values per token",
    )

    @model_validator(mode="after")
    def _indexer_needs_q_lora(self) -> MlaSpec:
        if self.indexer is not None and self.q_lora_rank is None:
            raise ValueError("mla.indexer needs q_lora_rank (its queries project from it)")
        return self


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
    ssm ssm_heads x ssm_head_dim x ssm_state_size; both split over TP by channels/heads
    (Mamba-2's B/C groups are replicated when tp does not divide num_groups, as in vLLM).
    """

    kind: Literal["mamba1", "mamba2", "gated_delta_net", "kda"] = Field(
        description="recurrence type (kda: Kimi Delta Attention, per-channel forget gates)"
    )
    conv_kernel: PositiveInt = Field(
        description="causal conv width (d_conv / linear_conv_kernel_dim / short_conv_kernel_size)"
    )
    conv_channels: PositiveInt = Field(
        description="channels of the conv state (mamba2: inner + 2 x groups x state; "
        "GDN/KDA: q, k and v widths together)"
    )
    ssm_heads: PositiveInt = Field(
        description="heads of the SSM/delta-rule state (mamba1: d_inner)"
    )
    ssm_head_dim: PositiveInt = Field(description="rows of each head's state (mamba1: 1)")
    ssm_state_size: PositiveInt = Field(description="columns of each head's state (d_state / Dv)")
    ssm_state_dtype: Literal["activation", "fp32"] = Field(
        "activation",
        description="dtype of the ssm part: the activation dtype, or fp32 whatever the model "
        "dtype (KDA: vLLM kda_state_dtype keeps the recurrent state in float32)",
    )
    # Parameter counting only (projections of the recurrent block).
    inner_size: PositiveInt = Field(description="inner width (mamba d_inner; GDN/KDA Hv x Dv)")
    num_key_heads: NonNegativeInt = Field(0, description="GDN/KDA key heads (Hk)")
    key_head_dim: NonNegativeInt = Field(0, description="GDN/KDA key head dim (Dk)")
    dt_rank: NonNegativeInt = Field(0, description="mamba1 dt_rank")
    num_groups: NonNegativeInt = Field(0, description="mamba2 n_groups (B/C groups)")
    gated_norm: bool = Field(
        True,
        description="mamba2: a gated RMSNorm (inner_size weights) before out_proj; false for "
        "Falcon-H1 (mamba_rms_norm false)",
    )

    @model_validator(mode="after")
    def _conv_channels_add_up(self) -> StateSpec:
        if self.kind == "mamba2":
            expected = self.inner_size + 2 * self.num_groups * self.ssm_state_size
            parts = "inner_size + 2 x num_groups x ssm_state_size"
        elif self.kind in ("gated_delta_net", "kda"):
            expected = self.inner_size + 2 * self.num_key_heads * self.key_head_dim
            parts = "inner_size + 2 x num_key_heads x key_head_dim"
        else:
            return self
        if self.conv_channels != expected:
            raise ValueError(
                f"{self.kind} conv_channels {self.conv_channels} is not {parts} = {expected}"
            )
        return self

    def conv_elements_per_seq(self, tp: int = 1) -> int:
        """Conv-state elements per sequence of one layer on one TP rank."""
        groups = 2 * self.num_groups * self.ssm_state_size  # mamba2 B and C; 0 otherwise
        per_rank = -(-(self.conv_channels - groups) // tp)
        if self.num_groups:
            # vLLM extra_groups_for_head_shards: each rank keeps whole groups (1 when n_groups 1).
            per_rank += 2 * self.ssm_state_size * -(-self.num_groups // tp)
        return (self.conv_kernel - 1) * per_rank

    def ssm_elements_per_seq(self, tp: int = 1) -> int:
        """Recurrent-state elements per sequence of one layer on one TP rank."""
        return -(-self.ssm_heads // tp) * self.ssm_head_dim * self.ssm_state_size

    def elements_per_seq(self, tp: int = 1) -> int:
        """State elements per sequence of one layer on one TP rank."""
        return self.conv_elements_per_seq(tp) + self.ssm_elements_per_seq(tp)


class VisionSpec(_Spec):
    """The image encoder whose output tokens `cross` layers attend to (Llama-3.2-Vision).

    Only its weights and its token count matter here: a request's images become
    tokens_per_image tokens each, which every cross-attention layer keeps as K and V for the
    whole request, however long the text grows.
    """

    kind: Literal["mllama"] = Field(
        description="encoder architecture (mllama: tiled ViT with a gated global encoder)"
    )
    hidden_size: PositiveInt = Field(description="encoder width (vision_config hidden_size)")
    num_layers: PositiveInt = Field(description="local encoder layers (num_hidden_layers)")
    num_global_layers: NonNegativeInt = Field(
        0, description="gated global encoder layers after the local ones (num_global_layers)"
    )
    intermediate_size: PositiveInt = Field(description="encoder MLP width")
    image_size: PositiveInt = Field(description="tile side in pixels (image_size)")
    patch_size: PositiveInt = Field(description="patch side in pixels (patch_size)")
    num_channels: PositiveInt = Field(3, description="input channels (num_channels)")
    max_num_tiles: PositiveInt = Field(description="tiles per image (max_num_tiles)")
    num_aspect_ratios: PositiveInt = Field(
        description="tile layouts (len(supported_aspect_ratios)); embeddings have one more row"
    )
    output_dim: PositiveInt = Field(
        description="width the projector reads (vision_output_dim: final + intermediate layers)"
    )
    images_per_request: PositiveInt = Field(
        1,
        description="images one request carries, each cross-attended as tokens_per_image "
        "tokens (default 1: Llama 3.2 Vision is trained with one image per prompt)",
    )

    @property
    def tokens_per_image(self) -> int:
        """Encoder tokens per image: max_num_tiles x (patches per tile + 1 class token)."""
        return self.max_num_tiles * ((self.image_size // self.patch_size) ** 2 + 1)


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
