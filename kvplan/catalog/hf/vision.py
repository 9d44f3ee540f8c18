"""Llama-3.2-Vision (mllama): a text decoder with cross-attention layers over image tokens."""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _attention, _base, _Config
from kvplan.errors import KvplanError

# transformers MllamaTextConfig / MllamaVisionConfig defaults (configuration_mllama.py): short
# releases (unsloth, merges) leave most keys to them. Both default to the 11B's geometry.
_MLLAMA_TEXT_DEFAULTS = {
    "vocab_size": 128_256,
    "hidden_size": 4096,
    "num_hidden_layers": 40,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14_336,
    "max_position_embeddings": 131_072,
    "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
}
_MLLAMA_VISION_DEFAULTS = {
    "hidden_size": 1280,
    "num_hidden_layers": 32,
    "num_global_layers": 8,
    "intermediate_size": 5120,
    "vision_output_dim": 7680,
    "image_size": 448,
    "patch_size": 14,
    "num_channels": 3,
    "max_num_tiles": 4,
    "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]],
}


def _mllama(c: _Config) -> dict[str, Any]:
    c.fill_defaults(_MLLAMA_TEXT_DEFAULTS, "transformers MllamaTextConfig")
    base = _base(c, tie_default=False)
    n = base["num_layers"]
    cross = c.get("cross_attention_layers")
    if not isinstance(cross, list) or not all(isinstance(i, int) and 0 <= i < n for i in cross):
        raise KvplanError(
            f"{c.where}: cross_attention_layers must list layer indices below {n}, "
            f"got {cross!r:.80}"
        )
    vision = _vision(c)
    tokens = vision["max_num_tiles"] * ((vision["image_size"] // vision["patch_size"]) ** 2 + 1)
    c.warn(
        f"cross-attention layers {sorted(cross)} keep K/V of {tokens:,} image tokens per image "
        "(max_num_tiles x (patches + 1), as transformers pads every image to max_num_tiles); "
        "1 image per request assumed (vision.images_per_request)"
    )
    return {
        **base,
        "attention": _attention(c, base["hidden_size"]),
        "vision": vision,
        "layers": {"kinds": ["cross" if i in cross else "full" for i in range(n)]},
    }


def _vision(c: _Config) -> dict[str, Any]:
    outer = c.outer
    data = outer.get("vision_config") if outer is not None else None
    if not isinstance(data, dict):
        raise KvplanError(f"{c.where}: model_type 'mllama' needs a vision_config object")
    v = _Config(data, f"{outer.where if outer else c.where} vision_config", c.model_type)
    v.fill_defaults(_MLLAMA_VISION_DEFAULTS, "transformers MllamaVisionConfig")
    ratios = v.get("supported_aspect_ratios")
    if not isinstance(ratios, list) or not ratios:
        raise KvplanError(f"{v.where}: supported_aspect_ratios must be a non-empty list")
    c.warnings += v.warnings
    return {
        "kind": "mllama",
        "hidden_size": v.int("hidden_size"),
        "num_layers": v.int("num_hidden_layers"),
        "num_global_layers": v.count("num_global_layers", 8),
        "intermediate_size": v.int("intermediate_size"),
        "image_size": v.int("image_size"),
        "patch_size": v.int("patch_size"),
        "num_channels": v.int("num_channels"),
        "max_num_tiles": v.int("max_num_tiles"),
        "num_aspect_ratios": len(ratios),
        "output_dim": v.int("vision_output_dim"),
    }
