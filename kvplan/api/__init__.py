"""kvplan's Python API: the same typed results the command line renders.

    import kvplan
    spec = kvplan.load_model("meta-llama/Llama-3.1-8B")
    r = kvplan.size(spec, context="128k", batch=8, sku="h100-sxm")
    r.model_dump()

See docs/api.md. Each name loads its own module on first use, so that a command imports the
question it asks and no other (`kvplan size` never loads the recommend search).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from kvplan import API_NAMES

if TYPE_CHECKING:
    from kvplan.api.calls import (
        KvplanWarning,
        capacity,
        check,
        claim,
        deployment,
        load_model,
        load_sku,
        models,
        report,
        resolve,
        size,
        skus,
    )
    from kvplan.api.recommendation import recommend
    from kvplan.api.results import (
        BudgetTerms,
        CapacityRow,
        CheckReport,
        ClaimReport,
        ProductResult,
        RecommendCandidate,
        RecommendReport,
        RefusedRow,
        Result,
        SizeReport,
        WeightsBreakdown,
    )

# kvplan.API_NAMES lists these names once, so `import kvplan` can serve them lazily.
__all__ = sorted(API_NAMES)
# The module of kvplan.api that defines each name: the typed results, the recommend search, and
# every other question.
_RESULTS = frozenset(name for name in API_NAMES if name[0].isupper()) - {"KvplanWarning"}
HOMES = {name: "results" if name in _RESULTS else "calls" for name in API_NAMES} | {
    "recommend": "recommendation"
}


def __getattr__(name: str) -> Any:
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kvplan.api' has no attribute {name!r}")
    value = getattr(import_module(f"kvplan.api.{home}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *API_NAMES])
