"""`vision_config` of wrappers whose image tokens enter as embeddings (Gemma 3, Llama 4,
Mistral 3, Qwen2-VL, Qwen2.5-VL): parameters of the vision tower and projector.

The text model's KV and weights come from `text_config`; the vision tower adds weights only.
Each tower is a ViT whose layers differ in three switches (biases, gated MLP, LayerNorm vs
RMSNorm); what differs around them (patch and position embeddings, adapters, the projector
into the text model) is one small function per tower type and per wrapper, read the way
transformers builds the module (file named in each function).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvplan.catalog.hf.fields import _Config


def _vit_layer_params(hidden: int, inner: int, *, bias: bool, gated: bool, layer_norm: bool) -> int:
    """One ViT encoder layer: q, k, v, o projections, the MLP and two norms."""
    attention = 4 * hidden * hidden + (4 * hidden if bias else 0)
    # A gated MLP has two input projections (gate, up), each with its own bias.
    inputs = 2 if gated else 1
    mlp = (inputs + 1) * hidden * inner + ((inputs * inner + hidden) if bias else 0)
    norms = 2 * (2 * hidden if layer_norm else hidden)
    return attention + mlp + norms


def _siglip(v: _Config) -> int:
    """SigLIP (transformers models/siglip/modeling_siglip.py SiglipVisionTransformer)."""
    hidden = v.int_or("hidden_size", 768, "SiglipVisionConfig default")
    inner = v.int_or("intermediate_size", 3072, "SiglipVisionConfig default")
    layers = v.int_or("num_hidden_layers", 12, "SiglipVisionConfig default")
    channels = v.int_or("num_channels", 3, "SiglipVisionConfig default")
    patch = v.int_or("patch_size", 16, "SiglipVisionConfig default")
    image = v.int_or("image_size", 224, "SiglipVisionConfig default")
    params = channels * patch * patch * hidden + hidden  # patch Conv2d with bias
    params += (image // patch) ** 2 * hidden  # learned position embedding
    params += layers * _vit_layer_params(hidden, inner, bias=True, gated=False, layer_norm=True)
    params += 2 * hidden  # post_layernorm
    if v.flag("vision_use_head", True):
        # MultiheadAttentionPoolingHead: probe, in/out projections, LayerNorm, MLP.
        params += hidden + 4 * hidden * hidden + 4 * hidden + 2 * hidden
        params += 2 * hidden * inner + inner + hidden
    return params


def _llama4_vision(v: _Config) -> int:
    """Llama 4 (transformers models/llama4/modeling_llama4.py Llama4VisionModel + adapter)."""
    hidden = v.int("hidden_size")
    inner = v.int("intermediate_size")
    channels = v.int_or("num_channels", 3, "Llama4VisionConfig default")
    patch, image = v.int("patch_size"), v.int("image_size")
    ratio = v.get("pixel_shuffle_ratio", 0.5)
    params = hidden + ((image // patch) ** 2 + 1) * hidden  # class + position embeddings
    params += channels * patch * patch * hidden  # patch embedding: a linear without bias
    params += 4 * hidden  # layernorm_pre, layernorm_post
    params += v.int("num_hidden_layers") * _vit_layer_params(
        hidden, inner, bias=True, gated=False, layer_norm=True
    )
    # vision_adapter: pixel shuffle folds 1/ratio² patches into one, then a 2-layer MLP.
    shuffled = int(hidden / (ratio * ratio))
    adapter_in, adapter_out = v.int("projector_input_dim"), v.int("projector_output_dim")
    return params + shuffled * adapter_in + adapter_in * adapter_out


def _pixtral(v: _Config) -> int:
    """Pixtral (transformers models/pixtral/modeling_pixtral.py PixtralVisionModel): RoPE, no
    position table, RMSNorm, gated MLP, no biases."""
    hidden, inner = v.int("hidden_size"), v.int("intermediate_size")
    channels = v.int_or("num_channels", 3, "PixtralVisionConfig default")
    patch = v.int("patch_size")
    params = channels * patch * patch * hidden + hidden  # patch_conv (no bias), ln_pre
    return params + v.int("num_hidden_layers") * _vit_layer_params(
        hidden, inner, bias=False, gated=True, layer_norm=False
    )


def _qwen_patch_embed(v: _Config, width: int) -> int:
    """Qwen2-VL / Qwen2.5-VL patch embedding: a Conv3d over temporal x spatial patches, no bias."""
    channels = v.int_or("in_chans", v.int_or("in_channels", 3, "default"), "default")
    patch = v.int_or("patch_size", 14, "Qwen2VLVisionConfig default")
    temporal = v.int_or("temporal_patch_size", 2, "Qwen2VLVisionConfig default")
    return channels * temporal * patch * patch * width


def _qwen_merger(v: _Config, width: int, out: int, *, layer_norm: bool) -> int:
    """PatchMerger: a norm over the tower width, then two biased linears over merge² patches
    folded into one (width·merge² → width·merge² → the text width)."""
    merge = v.int_or("spatial_merge_size", 2, "Qwen2VLVisionConfig default")
    folded = width * merge * merge
    norm = 2 * width if layer_norm else width
    return norm + folded * folded + folded + folded * out + out


def _qwen2_5_vision(v: _Config) -> int:
    """Qwen2.5-VL (transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py
    Qwen2_5_VisionTransformerPretrainedModel): RMSNorm, gated MLP with biases, biased qkv/proj,
    and the patch merger into out_hidden_size (the text width)."""
    width, inner = v.int("hidden_size"), v.int("intermediate_size")
    layer = _vit_layer_params(width, inner, bias=True, gated=True, layer_norm=False)
    merger = _qwen_merger(v, width, v.int("out_hidden_size"), layer_norm=False)
    return _qwen_patch_embed(v, width) + v.int("depth") * layer + merger


def _qwen2_vision(v: _Config) -> int:
    """Qwen2-VL (transformers models/qwen2_vl/modeling_qwen2_vl.py
    Qwen2VisionTransformerPretrainedModel): LayerNorm, a plain MLP of embed_dim x mlp_ratio
    with biases, and the patch merger into hidden_size (there, the text width)."""
    width = v.int_or("embed_dim", 1280, "Qwen2VLVisionConfig default")
    ratio = v.get("mlp_ratio", 4)
    inner = int(width * ratio)
    layer = _vit_layer_params(width, inner, bias=True, gated=False, layer_norm=True)
    merger = _qwen_merger(v, width, v.int("hidden_size"), layer_norm=True)
    return _qwen_patch_embed(v, width) + v.int("depth") * layer + merger


def _merged_in_tower(top: _Config, v: _Config, text_hidden: int) -> int:
    """Qwen2-VL and Qwen2.5-VL project inside the tower (its merger): nothing beside it."""
    return 0


def _gemma3_projector(top: _Config, v: _Config, text_hidden: int) -> int:
    """Gemma3MultiModalProjector: soft-embedding RMSNorm and one projection matrix."""
    vision_hidden = v.int("hidden_size")
    return vision_hidden + vision_hidden * text_hidden


def _llama4_projector(top: _Config, v: _Config, text_hidden: int) -> int:
    """Llama4MultiModalProjector: one linear from vision_output_dim to the text width."""
    bias = v.flag("multi_modal_projector_bias", False)
    return v.int("vision_output_dim") * text_hidden + (text_hidden if bias else 0)


def _mistral3_projector(top: _Config, v: _Config, text_hidden: int) -> int:
    """Mistral3MultiModalProjector: RMSNorm, patch merger, two linears."""
    vision_hidden = v.int("hidden_size")
    merge = top.int_or("spatial_merge_size", 2, "Mistral3Config default")
    bias = top.flag("multimodal_projector_bias", False)
    params = vision_hidden + merge * merge * vision_hidden * vision_hidden
    params += vision_hidden * text_hidden + text_hidden * text_hidden
    return params + (2 * text_hidden if bias else 0)


_TOWERS: dict[str, Callable[[_Config], int]] = {
    "siglip_vision_model": _siglip,
    "llama4_vision_model": _llama4_vision,
    "pixtral": _pixtral,
    "qwen2_5_vl": _qwen2_5_vision,
    "qwen2_vl": _qwen2_vision,
}
_PROJECTORS: dict[str, Callable[[_Config, _Config, int], int]] = {
    "gemma3": _gemma3_projector,
    "llama4": _llama4_projector,
    "mistral3": _mistral3_projector,
    "qwen2_5_vl": _merged_in_tower,
    "qwen2_vl": _merged_in_tower,
}


def _vision_tower(top: _Config, text_hidden: int) -> dict[str, Any] | None:
    """The vision_tower section of a spec from a wrapper config `top`, or None without one."""
    stated = top.get("vision_config")
    if not isinstance(stated, dict):
        return None
    # Qwen2-VL's published vision_config names no model_type: its wrapper's is meant.
    model_type = stated.get("model_type") or top.model_type
    v = _Config(stated, f"{top.where} vision_config", str(model_type))
    tower, projector = _TOWERS.get(str(model_type)), _PROJECTORS.get(top.model_type)
    if tower is None or projector is None:
        top.warn(
            f"vision_config model_type {model_type!r} under {top.model_type!r} not counted: "
            "weights are the text model's only (a checkpoint's safetensors headers count it)"
        )
        return None
    params = tower(v) + projector(top, v, text_hidden)
    top.warnings += v.warnings
    return {
        "model_type": str(model_type),
        "params": params,
        "basis": f"{model_type} vision_config and the {top.model_type} projector, counted "
        "as transformers builds them",
    }
