"""Typed reads of one config dict, and the fields every llama-like config states alike.

`_Config` wraps the dict with the place it came from, so a missing or malformed field is a
one-line error naming the file and key, and collects the readings taken (warnings) as it goes.
"""

from __future__ import annotations

from typing import Any

import kvplan.limits as limits
from kvplan.errors import KvplanError

# torch_dtype / dtype spellings -> weight dtype names.
_TORCH_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

# Layer counts are checked as they are read: families build one entry per layer before the
# spec is validated, so `num_hidden_layers: 10**9` must never reach them.
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


class _Config:
    """One config dict plus where it came from: typed reads that fail as one-line errors."""

    def __init__(self, data: dict[str, Any], where: str, model_type: str) -> None:
        self.data = data
        self.where = where
        self.model_type = model_type
        self.warnings: list[str] = []
        self.defaulted: set[str] = set()  # keys filled from transformers defaults, not stated
        # The wrapper around a nested text_config (multimodal releases), for its other sections.
        self.outer: _Config | None = None

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def int(self, *keys: str) -> int:
        """The first of `keys` present (aliases, in order); missing or non-integer is an error."""
        for key in keys:
            if self.has(key):
                return self.positive(key, self.data[key])
        also = f" (or {', '.join(repr(k) for k in keys[1:])})" if len(keys) > 1 else ""
        raise KvplanError(
            f"{self.where}: required field {keys[0]!r}{also} is missing for model_type "
            f"{self.model_type!r}"
        )

    def int_or(self, key: str, default: int, why: str) -> int:
        """`key` if present, else `default` with a warning saying where the default comes from."""
        if self.has(key):
            return self.positive(key, self.data[key])
        self.warn(f"{key} absent: {default} used ({why})")
        return default

    def count(self, key: str, default: int) -> int:
        """An optional whole number (0 allowed: strides, offsets, counts), `default` if absent."""
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise KvplanError(
                f"{self.where}: field {key!r} is {value!r:.60}; expected a non-negative integer"
            )
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise KvplanError(
                f"{self.where}: field {key!r} is {value!r:.60}; expected true or false"
            )
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def fill_defaults(self, defaults: dict[str, Any], origin: str) -> None:
        """Fill absent keys from a transformers config class's defaults, warning for each."""
        for key, default in defaults.items():
            if not self.has(key):
                self.warn(f"{key} absent: {default} used ({origin} default)")
                self.data = {**self.data, key: default}
                self.defaulted.add(key)

    def positive(self, key: str, value: Any) -> int:
        """`value` (read from `key`) checked to be a positive integer."""
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise KvplanError(
                f"{self.where}: field {key!r} is {value!r:.60}; expected a positive integer"
            )
        if key in _LAYER_KEYS:
            limits.LAYERS.check(value, f"{self.where}: field {key!r}")
        return value


def _head_dim(c: _Config, hidden: int, num_heads: int) -> int:
    """head_dim as stated; hidden/heads only when the config gives none."""
    derived = hidden // num_heads if hidden % num_heads == 0 else None
    if not c.has("head_dim"):
        if derived is None:
            raise KvplanError(
                f"{c.where}: no head_dim and hidden_size {hidden} is not a multiple of "
                f"num_attention_heads {num_heads}"
            )
        return derived
    head_dim = c.int("head_dim")
    if head_dim != derived:
        # Gemma 2 9B: 256 stated, 3584/16 = 224. The weights are 256 wide; the config wins.
        would = derived if derived is not None else f"{hidden}/{num_heads} (not an integer)"
        how = "from the default" if "head_dim" in c.defaulted else "as stated"
        c.warn(
            f"head_dim {head_dim} used {how}; hidden_size/num_attention_heads would give {would}"
        )
    return head_dim


def _weight_dtype(c: _Config) -> str:
    """Released weight dtype from torch_dtype (or the newer `dtype`), else fp32 with a warning."""
    unknown = []
    for key in ("torch_dtype", "dtype"):
        name = c.get(key)
        if isinstance(name, str) and name in _TORCH_DTYPES:
            return _TORCH_DTYPES[name]
        if name is not None and not isinstance(name, str):  # 1e308, true, [...]: not a dtype
            raise KvplanError(f"{c.where}: {key} {name!r} is not a dtype name such as bfloat16")
        if name is not None:
            unknown.append(f"{key} {name[:40]!r} is not one of {', '.join(_TORCH_DTYPES)}")
    # A name kvplan does not know is said as such: "no torch_dtype" would hide a typo.
    why = "; ".join(unknown) or "no torch_dtype in the config"
    c.warn(f"{why}: weights read as fp32 (transformers' default)")
    return "fp32"


def _attention(
    c: _Config,
    hidden: int,
    *,
    num_heads: int | None = None,
    num_kv_heads: int | None = None,
    **flags: Any,
) -> dict:
    """Head counts and head_dim, read from the llama names unless the caller read them already."""
    if num_heads is None:
        num_heads = c.int("num_attention_heads")
    if num_kv_heads is None:
        # No num_key_value_heads means one KV head per query head (MHA), as in transformers.
        num_kv_heads = c.int("num_key_value_heads") if c.has("num_key_value_heads") else num_heads
    return {
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": _head_dim(c, hidden, num_heads),
        **flags,
    }


def _base(c: _Config, *, tie_default: bool) -> dict[str, Any]:
    """Fields every llama-like config states the same way."""
    hidden = c.int("hidden_size")
    return {
        "family": c.model_type,
        "hidden_size": hidden,
        "num_layers": c.int("num_hidden_layers"),
        "vocab_size": c.int("vocab_size"),
        "intermediate_size": c.int("intermediate_size"),
        "tie_word_embeddings": c.flag("tie_word_embeddings", tie_default),
        "max_context": c.int("max_position_embeddings"),
        "weight_dtype": _weight_dtype(c),
    }
