"""The guardrail questions of the Python API: `check` (a deployment file) and `claim`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.api.build_check import check_report, claim_report
from kvplan.api.calls import ModelRef, SkuRef, _as_deployment, _catalog, _tokens, load_sku
from kvplan.api.results_check import CheckReport, ClaimReport
from kvplan.catalog.deployments import load_deployments
from kvplan.catalog.store import Catalog
from kvplan.engine.deployment import Deployment
from kvplan.plan.guardrail import DeploymentFile, check_products, claim_sheet


def check(path: str | Path, *, catalog: Catalog | None = None, curves: bool = False) -> CheckReport:
    """Every product of a deployment file against its SKU (`kvplan check`); `.ok` is False
    when any promise is more than the hardware holds. With `curves`, each product carries
    the requests its deployment holds against context (`concurrency_by_context`)."""
    loaded = load_deployments(Path(path), DeploymentFile, _catalog(catalog))
    return check_report(check_products(loaded), curves)


def claim(
    model: ModelRef | Deployment,
    *,
    sku: SkuRef,
    context: int | str = "128k",
    batch: int = 1,
    catalog: Catalog | None = None,
    curves: bool = False,
    **deployment_options: Any,
) -> ClaimReport:
    """The bytes behind "serves `context` tokens at batch `batch`" on `sku` (`kvplan claim`);
    with `curves`, the requests the deployment holds against context."""
    planned = _as_deployment(model, catalog, deployment_options)
    sheet = claim_sheet(
        planned, load_sku(sku, catalog=catalog), _tokens(context, "--context"), batch
    )
    return claim_report(sheet, curves)
