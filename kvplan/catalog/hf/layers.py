"""Layer plans: which layers are full, sliding, chunked or state, and the window they keep."""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _Config
from kvplan.errors import KvplanError


def _full() -> dict:
    return {"pattern": ["full"]}


def _window_or_full(c: _Config, kinds: list[str], window: int | None, max_context: int) -> dict:
    """A layer plan; sliding layers whose window covers the whole context become full."""
    if "sliding" not in kinds:
        return _plan(kinds)
    if window is None:
        raise KvplanError(f"{c.where}: sliding layers but no 'sliding_window' given")
    window = c.positive("sliding_window", window)
    if window >= max_context:
        # Phi-3-mini-128k: sliding_window 262144 > max_position_embeddings 131072; it never binds.
        c.warn(
            f"sliding_window {window} >= max_position_embeddings {max_context}: "
            "it never binds, layers read as full attention"
        )
        return _plan(["full" if k == "sliding" else k for k in kinds])
    return _plan(kinds, sliding_window=window)


def _plan(kinds: list[str], **extra: Any) -> dict:
    """Compact form when every layer is the same kind, explicit kinds otherwise."""
    if len(set(kinds)) == 1:
        return {"pattern": [kinds[0]], **extra}
    return {"kinds": kinds, **extra}


_LAYER_TYPES = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "state",
    "mamba": "state",
    "attention": "full",
}


def _layer_types(c: _Config, num_layers: int) -> list[str] | None:
    """Per-layer kinds from the config's `layer_types` list, when it has one."""
    types = c.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != num_layers:
        raise KvplanError(
            f"{c.where}: layer_types must list {num_layers} entries (num_hidden_layers), "
            f"got {types!r:.80}"
        )
    unknown = sorted(
        {repr(t)[:40] for t in types if not isinstance(t, str) or t not in _LAYER_TYPES}
    )
    if unknown:
        raise KvplanError(
            f"{c.where}: layer_types has unknown value(s) {', '.join(unknown[:5])}; "
            f"known: {', '.join(sorted(_LAYER_TYPES))}"
        )
    return [_LAYER_TYPES[t] for t in types]


def _all_windowed(c: _Config, base: dict, reason: str) -> dict:
    """Plan for configs whose one `sliding_window` applies to every layer (Mistral, Phi-3, ...)."""
    n = base["num_layers"]
    kinds = _layer_types(c, n)
    if kinds is not None:
        return _window_or_full(c, kinds, c.get("sliding_window"), base["max_context"])
    if not c.has("sliding_window"):
        return _full()
    window = c.int("sliding_window")
    plan = _window_or_full(c, ["sliding"] * n, window, base["max_context"])
    if "sliding_window" in plan:
        c.warn(
            f"sliding_window {window} with no layer_types: every layer read as windowed ({reason})"
        )
    return plan
