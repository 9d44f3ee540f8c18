"""The one term that accounts for a pool kvplan does not reproduce from a log.

A pool (blocks, tokens, pool bytes) follows from the budget it is bought with and the model's
bytes per token. Where kvplan's pool differs from the logged one, one of three facts is not in
the log, and the term names it:

- the log prints no budget: kvplan's predicted budget buys the pool, and the free memory the
  engine measured is the term;
- the log prints one budget but the deployment has several ranks, and the logged pool is
  smaller than that budget buys: the engines size one pool for every rank from the smallest
  rank's memory (vLLM's get_kv_cache_configs takes the minimum of the workers' blocks; SGLang's
  get_available_gpu_memory reduces the ranks' free memory with a min), so the smaller rank's
  budget is the term;
- the log prints the pool's bytes beside its tokens, and they imply other bytes per token than
  the model's: the cache is another model's (the checkpoint named is not the one run).

Otherwise the difference is a rule the engine model lacks.
"""

from __future__ import annotations

from typing import Any

from kvplan.explain.reading import Reading

NO_BUDGET = "the KV budget (the log prints none)"
ONE_RANK = "the budget of the rank that bounds the pool"
BYTES_PER_TOKEN = "KV bytes per token"
MISSING_RULE = "the pool from the logged budget differs: a rule the engine model lacks"
# the budget from the logged terms with the SKU's memory for the total (kvplan.explain.arithmetic)
NO_TOTAL = "GPU memory the runtime reports (the log prints none)"
CANNOT_KNOW = (NO_BUDGET, ONE_RANK, BYTES_PER_TOKEN, NO_TOTAL)

# The logged figures that give the pool's bytes ('a+b' for a sum) and its tokens.
_POOL_SIZE = (
    ("allocated_bytes", "max_tokens"),  # TensorRT-LLM: "Allocated X GiB for max tokens (N)"
    ("k_size_bytes+v_size_bytes", "max_total_num_tokens"),  # SGLang: "#tokens: N, K size: …"
)
# Bytes per token the log implies that differ from the model's by more than this fraction are
# another geometry (SGLang's pool has one padding row per page; rounding adds the rest).
_GEOMETRY_FRACTION = 0.02


def logged_bytes_per_token(reading: Reading) -> tuple[float, float] | None:
    """(bytes per token, half its rounding) that the log's pool bytes and tokens imply; None
    when the log does not print both."""
    for size, tokens in _POOL_SIZE:
        parts = [reading.figures.get(key) for key in size.split("+")]
        count = reading.figures.get(tokens)
        if count is None or not count.value or any(part is None for part in parts):
            continue
        total = sum(part.value for part in parts if part is not None)
        rounding = sum(part.step / 2 for part in parts if part is not None)
        return total / count.value, rounding / count.value
    return None


def pool_term(
    reading: Reading, predicted: dict[str, Any], budget_printed: bool, smaller: bool
) -> str:
    """The term of a pool row that differs: `budget_printed` whether the pool was bought with
    a logged budget, `smaller` whether the logged pool is smaller than kvplan's."""
    if not budget_printed:
        return f"{NO_BUDGET}: kvplan's predicted budget buys this pool (kv_memory_bytes gives it)"
    implied = logged_bytes_per_token(reading)
    model_bytes = predicted.get("kv_bytes_per_token_per_gpu")
    if implied is not None and model_bytes:
        per_token, rounding = implied
        if abs(per_token - model_bytes) > rounding + _GEOMETRY_FRACTION * model_bytes:
            return (
                f"{BYTES_PER_TOKEN}: the log's pool holds {per_token:,.0f} B per token, "
                f"{predicted.get('model')}'s cache {model_bytes:,} B (another model's cache: "
                "give --model)"
            )
    ranks = int(predicted.get("tp") or 1) * int(predicted.get("pp") or 1)
    if ranks > 1 and smaller and not reading.ranks:
        return (
            f"{ONE_RANK}: the log prints one budget of {ranks} ranks, and the engine sizes "
            "every rank's pool by the smallest"
        )
    return MISSING_RULE


def cannot_know(terms: list[str | None]) -> list[str]:
    """The facts the log lacks that `terms` name, each once, in order."""
    named = [head for term in terms for head in CANNOT_KNOW if term and term.startswith(head)]
    return list(dict.fromkeys(named))
