"""Product guardrails: promised context × concurrency against what a SKU holds (`check`), and
the bytes behind a long-context claim (`claim`), as frozen results; rendering is `report`'s.
"""

from kvplan.plan.guardrail.claim import ClaimSheet, claim_sheet
from kvplan.plan.guardrail.evaluate import (
    GuardrailResult,
    ProductCheck,
    check_product,
    check_products,
    product_deployment,
)
from kvplan.plan.guardrail.products import DeploymentFile, ProductSpec

__all__ = [
    "ClaimSheet",
    "DeploymentFile",
    "GuardrailResult",
    "ProductCheck",
    "ProductSpec",
    "check_product",
    "check_products",
    "claim_sheet",
    "product_deployment",
]
