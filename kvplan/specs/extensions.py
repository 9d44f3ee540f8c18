"""What a model carries beside its layers: the RoPE scaling that extends its context, and a
vision tower whose tokens enter as embeddings (weights only)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import kvplan.limits as limits
from kvplan.specs.common import PositiveInt, _Spec

RopeType = Literal["yarn", "dynamic", "linear", "llama3", "longrope"]


class RopeScalingSpec(_Spec):
    """RoPE scaling: how far past its native limit a model's positions reach.

    vLLM's rule (vllm/config/model.py `_get_and_verify_max_len`, 0.6-0.19): yarn serves
    original_max_position_embeddings × factor; dynamic and linear serve
    max_position_embeddings × factor; llama3 and longrope are already inside
    max_position_embeddings (Llama 3.1: 131,072 = 16 × its 8,192 pre-training length).
    """

    rope_type: RopeType = Field(description="rope_scaling.rope_type (or .type) of the config")
    factor: float = Field(
        ge=1,
        le=limits.ROPE_FACTOR.maximum,
        allow_inf_nan=False,
        description="rope_scaling.factor: the length multiplier",
    )
    original_max_context: PositiveInt | None = Field(
        None,
        description="original_max_position_embeddings in tokens: the length the factor "
        "multiplies (yarn); null = max_context",
    )
    applied: bool = Field(
        description="true: engines run with it (config.json states it, or the deployment "
        "declares it: vLLM --hf-overrides, kvplan --rope-scaling); false: the model card "
        "recommends it and the config omits it, so serving past max_context needs a "
        "declaration"
    )
    source: str | None = Field(
        None, description="URL that states it when config.json does not (the model card)"
    )

    def extended_context(self, max_context: int) -> int:
        """Context limit in tokens with this scaling (vLLM's derived max_model_len)."""
        if self.rope_type in ("llama3", "longrope"):
            return max_context
        base = self.original_max_context if self.rope_type == "yarn" else None
        return max(int((base or max_context) * self.factor), max_context)

    def label(self) -> str:
        """`yarn ×4 over 32,768` as reports print it."""
        factor = f"{self.factor:g}"
        over = f" over {self.original_max_context:,}" if self.original_max_context else ""
        return f"{self.rope_type} ×{factor}{over}"


class VisionTowerSpec(_Spec):
    """The vision encoder and projector of a multimodal checkpoint whose image tokens enter the
    text stream as embeddings (Gemma 3, Llama 4, Mistral 3): weights only, no KV.

    Counted in weights beside the text model; vLLM splits its matrices over TP ranks by
    default (`--mm-encoder-tp-mode weights`, vllm/config/multimodal.py).
    """

    model_type: str = Field(
        min_length=1, description="vision_config.model_type, e.g. siglip_vision_model"
    )
    params: PositiveInt = Field(
        description="parameters of the vision tower plus the multimodal projector"
    )
    basis: str = Field(
        min_length=1,
        description="how params was counted (the vision_config arithmetic, or safetensors)",
    )
    num_layers: PositiveInt | None = Field(
        None, description="encoder layers (vision_config num_hidden_layers); None: not read"
    )
    hidden_size: PositiveInt | None = Field(
        None, description="encoder width (vision_config hidden_size); None: not read"
    )
