"""The one rule for a context past the model's limit: a failed verdict, in every command.

vLLM derives max_model_len from the config (max_position_embeddings, times the RoPE scaling
factor when one is applied: yarn over original_max_position_embeddings) and refuses a longer
one: "User-specified max_model_len (…) is greater than the derived max_model_len (…). To allow
overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", warning that RoPE
positions past it "lead to nan" (vllm/config/model.py `_get_and_verify_max_len`,
vllm-project/vllm 0052a5b8). The physics-only engines (exact, hf, naive) follow the same rule:
the model was not trained past that length, so a plan there has no answer worth giving.
"""

from __future__ import annotations

from kvplan.specs import ModelSpec


def limit_name(model: ModelSpec) -> str:
    """'native', or 'extended' when an applied RoPE scaling sets the limit."""
    return "native" if model.context_limit == model.max_context else "extended"


def beyond_limit(model: ModelSpec, context_tokens: int) -> str | None:
    """The verdict for `context_tokens` past the model's limit ('exceeds the native limit of
    131,072 tokens'), or None within it."""
    if context_tokens <= model.context_limit:
        return None
    return f"exceeds the {limit_name(model)} limit of {model.context_limit:,} tokens"


def beyond_limit_sentence(model: ModelSpec, context_tokens: int) -> str | None:
    """The same verdict as a sentence naming the model and the context ('context 204,800
    exceeds llama-3.1-8b's native limit of 131,072 tokens'), or None within it."""
    if beyond_limit(model, context_tokens) is None:
        return None
    return (
        f"context {context_tokens:,} exceeds {model.name}'s {limit_name(model)} limit of "
        f"{model.context_limit:,} tokens"
    )
