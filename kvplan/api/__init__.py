"""kvplan's Python API: the same typed results the command line renders.

    import kvplan
    spec = kvplan.load_model("meta-llama/Llama-3.1-8B")
    r = kvplan.size(spec, context="128k", batch=8, sku="h100-sxm")
    r.model_dump()

See docs/api.md.
"""

from kvplan import API_NAMES
from kvplan.api.calls import (
    KvplanWarning,
    capacity,
    check,
    claim,
    deployment,
    load_model,
    load_sku,
    models,
    recommend,
    report,
    resolve,
    size,
    skus,
)
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
