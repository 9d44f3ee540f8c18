"""Derived numbers shown beside catalogue entries (`kvplan models`, `kvplan show`)."""

from __future__ import annotations

from dataclasses import dataclass

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
