"""Derived numbers shown beside catalogue entries (`kvplan models`, `kvplan show`)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.kvmath import kv_bytes_per_token, param_counts
from kvplan.specs import ModelSpec


@dataclass(frozen=True)
class ModelFacts:
    kv_bytes_per_token_bf16: int  # whole model, TP 1, context within every window
    params: int  # computed from the architecture
    active_params: int  # what one token reads (MoE: routed-to experts only)


def model_facts(model: ModelSpec) -> ModelFacts:
    """KV bytes per token in bf16 and computed parameter counts of `model`."""
    counts = param_counts(model)
    return ModelFacts(kv_bytes_per_token(model, "bf16"), counts.total, counts.active)


def models_matching(
    models: list[ModelSpec],
    pattern: str | None = None,
    family: str | None = None,
    min_context_tokens: int | None = None,
) -> list[ModelSpec]:
    """The models of `models` that pass every filter given (None: no filter).

    Args:
        models: the catalogue's models.
        pattern: a shell-style pattern (`llama-3*`) matched against the name and every alias,
            any case; without `*`, `?` or `[` it matches any name or alias holding it.
        family: the model family (`kvplan show NAME` → family), any case.
        min_context_tokens: the least native context a model must have, in tokens.

    Raises:
        KvplanError: a family no model of `models` has (with the close matches).
    """
    from fnmatch import fnmatchcase

    if family is not None:
        families = sorted({m.family for m in models})
        if family.lower() not in {f.lower() for f in families}:
            close = difflib.get_close_matches(family.lower(), families, n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise KvplanError(
                f"--family: no model of family {family!r} ({hint}families: {', '.join(families)})"
            )
    glob = pattern is not None and any(c in pattern for c in "*?[")
    wanted = (pattern or "").lower()

    def named(model: ModelSpec) -> bool:
        labels = [label.lower() for label in (model.name, *model.aliases)]
        if glob:
            return any(fnmatchcase(label, wanted) for label in labels)
        return any(wanted in label for label in labels)

    return [
        m
        for m in models
        if (pattern is None or named(m))
        and (family is None or m.family.lower() == family.lower())
        and (min_context_tokens is None or m.max_context >= min_context_tokens)
    ]
