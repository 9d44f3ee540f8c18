"""kvplan's Python API: the same typed results the command line renders.

    import kvplan
    spec = kvplan.load_model("meta-llama/Llama-3.1-8B")
    r = kvplan.size(spec, context="128k", batch=8, sku="h100-sxm")
    r.model_dump()

See docs/api.md.

The names below load on first use, each from the module that defines it: `kvplan size`
imports `kvplan.api` and must not load the guardrail, the recommend search or the result
records of other commands.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from kvplan import API_NAMES

if TYPE_CHECKING:
    from kvplan.api.calls import (
        KvplanWarning,
        capacity,
        deployment,
        load_model,
        load_sku,
        models,
        report,
        resolve,
        size,
        skus,
    )
    from kvplan.api.calls_check import check, claim
    from kvplan.api.calls_recommend import recommend
    from kvplan.api.results import (
        BudgetTerms,
        CapacityRow,
        RefusedRow,
        Result,
        SizeReport,
        WeightsBreakdown,
    )
    from kvplan.api.results_check import CheckReport, ClaimReport, ProductResult
    from kvplan.api.results_recommend import RecommendCandidate, RecommendReport

_RESULTS = (
    "BudgetTerms",
    "CapacityRow",
    "CheckReport",
    "ClaimReport",
    "ProductResult",
    "RecommendCandidate",
    "RecommendReport",
    "RefusedRow",
    "Result",
    "SizeReport",
    "WeightsBreakdown",
)
_CALLS = ("capacity", "deployment", "load_model", "load_sku", "models", "report", "resolve")
# name -> the module of kvplan.api that defines it
_HOMES = {
    **dict.fromkeys((*_CALLS, "size", "skus", "KvplanWarning"), "calls"),
    "check": "calls_check",
    "claim": "calls_check",
    "recommend": "calls_recommend",
    **dict.fromkeys(_RESULTS, "results"),
    **dict.fromkeys(("CheckReport", "ClaimReport", "ProductResult"), "results_check"),
    **dict.fromkeys(("RecommendCandidate", "RecommendReport"), "results_recommend"),
}

# kvplan.API_NAMES lists these names once, so `import kvplan` can serve them lazily.
__all__ = sorted(API_NAMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:  # a submodule (`from kvplan.api import results`) is imported
        raise AttributeError(f"module 'kvplan.api' has no attribute {name!r}")
    value = getattr(import_module(f"kvplan.api.{home}"), name)
    globals()[name] = value  # found once; later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *API_NAMES])
