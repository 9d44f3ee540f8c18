"""The family table: config `model_type` -> the function that reads that family's config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvplan.catalog.hf.dense import (
    _cohere,
    _falcon,
    _gemma,
    _gemma2,
    _gemma3_text,
    _llama,
    _mistral,
    _olmo2,
    _olmo3,
    _phi3,
    _qwen2,
    _qwen3,
    _seed_oss,
    _smollm3,
    _starcoder2,
)
from kvplan.catalog.hf.fields import _Config
from kvplan.catalog.hf.hybrid import _jamba, _kimi_linear, _qwen3_5, _qwen3_next
from kvplan.catalog.hf.learned import _gpt2, _opt
from kvplan.catalog.hf.moe import (
    _deepseek,
    _glm4_moe,
    _gpt_oss,
    _llama4,
    _minimax_m2,
    _mixtral,
    _olmoe,
    _qwen2_moe,
    _qwen3_moe,
)
from kvplan.catalog.hf.ssm import _falcon_h1, _granite_hybrid, _nemotron_h
from kvplan.catalog.hf.vision import _mllama

_FAMILIES: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mistral3": _mistral,  # multimodal wrapper (Mistral Small 3.1, Ministral 3): text_config
    "ministral3": _mistral,  # Ministral 3 text model: Mistral layers, tied embeddings as stated
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_next": _qwen3_next,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3": _gemma3_text,  # multimodal wrapper: read from text_config
    "gemma3_text": _gemma3_text,
    "phi3": _phi3,
    "falcon": _falcon,
    "gpt2": _gpt2,
    "opt": _opt,
    "olmo2": _olmo2,
    "olmo3": _olmo3,
    "olmoe": _olmoe,
    "smollm3": _smollm3,
    "seed_oss": _seed_oss,
    "glm4_moe": _glm4_moe,
    "minimax_m2": _minimax_m2,
    "starcoder2": _starcoder2,
    "cohere": _cohere,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "kimi_k2": _deepseek,  # Kimi K2 ships DeepseekV3ForCausalLM with its own model_type
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,  # multimodal wrapper: read from text_config
    "llama4_text": _llama4,
    "jamba": _jamba,
    "deepseek_v32": _deepseek,  # DeepSeek-V3.2: V3 + the sparse-attention indexer
    "kimi_linear": _kimi_linear,
    "qwen3_5": _qwen3_5,  # multimodal wrapper: read from text_config
    "qwen3_5_text": _qwen3_5,
    "qwen3_5_moe": _qwen3_5,  # multimodal wrapper: read from text_config
    "qwen3_5_moe_text": _qwen3_5,
    "nemotron_h": _nemotron_h,
    "granitemoehybrid": _granite_hybrid,
    "falcon_h1": _falcon_h1,
    "mllama": _mllama,  # multimodal wrapper: text_config + vision_config
    # Qwen2 decoders with multimodal RoPE (mrope splits the rotary dims; KV as Qwen2) and a
    # vision tower: text fields at the top level as published, or in a text_config.
    "qwen2_vl": _qwen2,
    "qwen2_5_vl": _qwen2,
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_FAMILIES))

# Encoder-only families: no engine kvplan models keeps a KV cache for them (llama.cpp's
# llama-model.cpp create_memory returns no memory for LLM_ARCH_BERT, NOMIC_BERT, JINA_BERT_V2/V3,
# NEO_BERT, MODERN_BERT), so there is nothing to size. HF model_type and GGUF spellings.
ENCODER_FAMILIES = frozenset(
    {
        "bert", "roberta", "xlm-roberta", "nomic_bert", "nomic-bert", "jina-bert-v2",
        "jina-bert-v3", "modernbert", "modern-bert", "neobert", "neo-bert",
    }
)  # fmt: skip
ENCODER_REFUSAL = (
    "is an encoder-only (BERT-family) model: llama.cpp serves it for embeddings with no KV "
    "cache (llama-model.cpp create_memory allocates none), so there is no cache to size"
)

# Wrappers whose language model lives in a nested text_config.
_NESTED_TEXT = ("gemma3", "llama4", "mistral3", "qwen3_5", "qwen3_5_moe", "mllama")
# Wrappers whose text fields sit at the top level (as published) or in a text_config (as
# transformers >= 4.53 saves them).
_TOP_OR_NESTED_TEXT = ("qwen2_vl", "qwen2_5_vl")
