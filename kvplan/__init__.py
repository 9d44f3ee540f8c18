"""kvplan: exact KV-cache sizing, per-GPU capacity and on-device verification.

`import kvplan` is cheap: the Python API (`kvplan.size`, `kvplan.report`, `kvplan.load_model`,
… — see kvplan.api and docs/api.md) loads on first use.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# The names kvplan.api exports (its __all__; a test checks each is defined there). Listed here
# so that looking up any other name, such as a submodule during `from kvplan import limits`,
# never loads the API.
API_NAMES = frozenset(
    {
        "BudgetTerms",
        "CapacityRow",
        "CheckReport",
        "ClaimReport",
        "KvplanWarning",
        "ProductResult",
        "RecommendCandidate",
        "RecommendReport",
        "RefusedRow",
        "Result",
        "SizeReport",
        "WeightsBreakdown",
        "capacity",
        "check",
        "claim",
        "deployment",
        "load_model",
        "load_sku",
        "models",
        "recommend",
        "report",
        "resolve",
        "size",
        "skus",
    }
)


def __getattr__(name: str) -> Any:
    # Lazy: the CLI imports this package on every start and must not pay for the API.
    if name not in API_NAMES:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    return getattr(import_module("kvplan.api"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *API_NAMES])
