"""Tiny spec factories with defaults (`make_model(num_kv_heads=8)` style) and pinned pools."""

from __future__ import annotations

from typing import Any

from kvplan.engine import EngineSettings
from kvplan.engine.budget import device_memory
from kvplan.specs import ModelSpec, SkuSpec


def make_model(**overrides: Any) -> ModelSpec:
    """A small valid model; keyword arguments replace fields (attention/layers as dicts)."""
    attention = {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64}
    attention |= overrides.pop("attention", {})
    fields: dict[str, Any] = {
        "name": "tiny",
        "source": "test factory",
        "family": "llama",
        "hidden_size": 512,
        "num_layers": 4,
        "vocab_size": 1000,
        "intermediate_size": 1024,
        "tie_word_embeddings": False,
        "max_context": 4096,
        "attention": attention,
        "layers": {"pattern": ["full"]},
    }
    fields |= overrides
    return ModelSpec.model_validate(fields)


def pinned_pool(sku: SkuSpec, **settings: Any) -> EngineSettings:
    """Engine settings whose pool size a logged token count pins (--max-total-tokens and the
    like): the whole device is the fixed KV budget, so only the token cap binds."""
    return EngineSettings(kv_memory_bytes=device_memory(sku)[0], **settings)
