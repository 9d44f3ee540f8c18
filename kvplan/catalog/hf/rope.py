"""`rope_scaling` (or transformers 5's `rope_parameters`): the context extension a config states.

Only the scalings that move the context limit past max_position_embeddings under vLLM's rule
(vllm/config/model.py `_get_and_verify_max_len`: yarn → original × factor, dynamic → max ×
factor) change the limit; llama3 and longrope are recorded as stated (their factor is already
inside max_position_embeddings). A linear factor in a config is read as already inside
max_position_embeddings too, with a warning: Gemma 3 states linear ×8 for its global layers
beside max_position_embeddings 131,072, which its model card gives as the context (128k).
"""

from __future__ import annotations

from typing import Any

import kvplan.limits as limits
from kvplan.catalog.hf.fields import _Config
from kvplan.errors import KvplanError

_TYPES = {"yarn": "yarn", "dynamic": "dynamic", "llama3": "llama3", "longrope": "longrope"}
_ALIASES = {"su": "longrope"}  # Phi-3's early name for longrope
_NO_SCALING = (None, "default", "mrope")  # Qwen2-VL's mrope only splits the rotary sections


def _rope_scaling(c: _Config) -> dict[str, Any] | None:
    """The rope_scaling section of a spec from `c`, or None when it states no extension."""
    key = "rope_scaling" if c.has("rope_scaling") else "rope_parameters"
    stated = c.get(key)
    if not isinstance(stated, dict):
        return None
    rope_type = stated.get("rope_type", stated.get("type"))
    rope_type = _ALIASES.get(rope_type, rope_type)
    if rope_type in _NO_SCALING:
        return None
    factor = stated.get("factor")
    # `not 1 <= factor` also catches NaN; Infinity and 1e308 are above the stated maximum.
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor >= 1:
        raise KvplanError(f"{c.where}: field '{key}.factor' is {factor!r}; expected a number >= 1")
    if factor > limits.ROPE_FACTOR.maximum:
        raise KvplanError(
            f"{c.where}: field '{key}.factor' is {factor!r}: above kvplan's limit of "
            f"{limits.ROPE_FACTOR.maximum:,} ({limits.ROPE_FACTOR.why})"
        )
    if rope_type == "linear":
        c.warn(
            f"{key} linear ×{factor:g} read as already inside max_position_embeddings "
            f"{c.get('max_position_embeddings')} (no extension)"
        )
        return None
    if rope_type not in _TYPES:
        c.warn(f"{key} type {rope_type!r} not understood: no context extension read")
        return None
    original = stated.get("original_max_position_embeddings")
    if original is not None:
        original = c.positive(f"{key}.original_max_position_embeddings", original)
    return {
        "rope_type": _TYPES[rope_type],
        "factor": float(factor),
        "original_max_context": original,
        "applied": True,
    }
