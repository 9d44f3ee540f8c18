"""ModelSpec: a model architecture as its public config.json states it, checked across fields."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kvplan.specs.common import (
    KV_HEAD_KINDS,
    WINDOWED_KINDS,
    Aliases,
    LayerCount,
    Name,
    Names,
    ParamCount,
    Tokens,
    TokensOrZero,
    VocabSize,
    Width,
    _Spec,
)
from kvplan.specs.dtypes import WeightDtypeName
from kvplan.specs.extensions import RopeScalingSpec, VisionTowerSpec
from kvplan.specs.sections import (
    AttentionSpec,
    LayerPlan,
    MlaSpec,
    MoeSpec,
    StateSpec,
    VisionSpec,
)


class ModelSpec(_Spec):
    """A model architecture (not a checkpoint), as its public config.json states it."""

    name: Name = Field(description="catalogue name, lower-case, e.g. llama-3.1-8b")
    aliases: Aliases = Field((), description="other names, e.g. Hugging Face repo ids")
    source: str = Field(min_length=1, description="URL of the public config.json it came from")
    family: Name = Field(description="HF model_type, e.g. llama, gemma2, deepseek_v3")
    hidden_size: Width = Field(description="residual width (d_model)")
    num_layers: LayerCount = Field(description="decoder layers (num_hidden_layers)")
    vocab_size: VocabSize = Field(description="vocabulary size (embedding rows)")
    intermediate_size: Width = Field(description="FFN width of dense layers")
    tie_word_embeddings: bool = Field(description="lm_head shares the input embedding")
    max_context: Tokens = Field(
        description="native context limit in tokens (max_position_embeddings)"
    )
    weight_dtype: WeightDtypeName = Field("bf16", description="dtype of the released weights")
    attention: AttentionSpec = Field(description="softmax attention geometry")
    mla: MlaSpec | None = Field(None, description="MLA latent geometry (mla layers)")
    moe: MoeSpec | None = Field(None, description="mixture-of-experts FFN")
    state: StateSpec | None = Field(
        None, description="recurrent state geometry (state and parallel layers)"
    )
    vision: VisionSpec | None = Field(
        None, description="image encoder whose tokens cross layers attend to (cross layers)"
    )
    vision_tower: VisionTowerSpec | None = Field(
        None,
        description="vision encoder whose tokens enter as embeddings (Gemma 3, Llama 4, "
        "Mistral 3): weights only",
    )
    rope_scaling: RopeScalingSpec | None = Field(
        None, description="RoPE scaling that extends the context past max_context"
    )
    layers: LayerPlan = Field(description="which kind each layer is")
    mlp: Literal["gated", "plain"] = Field(
        "gated", description="gated (SwiGLU/GeGLU: 3 matrices) or plain (2 matrices) FFN"
    )
    mlp_bias: bool = Field(False, description="FFN projections carry biases")
    norm: Literal["rms", "layer"] = Field(
        "rms", description="RMSNorm (weight) or LayerNorm (+bias)"
    )
    norms_per_layer: LayerCount = Field(2, description="norm modules per decoder layer")
    ffn_per_mixer_layer: bool = Field(
        True,
        description="each attention/state layer also carries the FFN; false when FFNs are "
        "layers of their own (Nemotron-H: one block per layer, FFNs are the mlp layers)",
    )
    learned_positions: TokensOrZero = Field(
        0, description="rows of a learned position embedding (GPT-2 n_positions); 0 = RoPE"
    )
    params: ParamCount | None = Field(None, description="published parameter count")
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
        for kind, section, what in (
            ("state", self.state, "state"),
            ("parallel", self.state, "state"),
            ("cross", self.vision, "vision"),
        ):
            if kind in used and section is None:
                raise ValueError(f"{kind} layers need a {what} section")
        if self.vision is not None and "cross" not in used:
            raise ValueError("a vision section is given but no layer is cross")
        if not self.ffn_per_mixer_layer and "mlp" not in used:
            raise ValueError("ffn_per_mixer_layer is false but no layer is mlp (no FFN at all)")
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

    @property
    def has_windowed_layers(self) -> bool:
        """Whether some layer keeps only part of a sequence (a sliding window or a chunk)."""
        return not WINDOWED_KINDS.isdisjoint(self.layer_kinds)

    @property
    def has_kv_head_layers(self) -> bool:
        """Whether some layer caches K and V rows per KV head (full, sliding or chunked)."""
        return not KV_HEAD_KINDS.isdisjoint(self.layer_kinds)

    @property
    def extended_context(self) -> int | None:
        """Context limit in tokens with the RoPE scaling, when it reaches past max_context."""
        if self.rope_scaling is None:
            return None
        extended = self.rope_scaling.extended_context(self.max_context)
        return extended if extended > self.max_context else None

    @property
    def context_limit(self) -> int:
        """Longest context an engine serves, in tokens: the extended limit when the RoPE
        scaling is applied (stated in the config or declared), else max_context."""
        if self.rope_scaling is not None and self.rope_scaling.applied:
            return self.extended_context or self.max_context
        return self.max_context
