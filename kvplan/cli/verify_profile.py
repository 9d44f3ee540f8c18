"""`verify --profile FILE`: measure the speed model's operations, write the calibration."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kvplan.cli.common import _catalog, _model


def verify_profile(
    model: str,
    path: Path,
    sku_name: str | None,
    device_name: str | None,
    tp: int,
    output: Any,
    catalog_dirs: Any,
) -> None:
    """Time, write FILE atomically, render what was measured and what it fits to."""
    from kvplan.files import output_target, write_atomically

    output_target(path, "--profile")  # a bad path is refused before any work
    catalog = _catalog(catalog_dirs)
    spec = _model(catalog, model).spec
    target = catalog.sku(sku_name) if sku_name is not None else None
    from kvplan.validate.plan import check_device

    check_device(device_name)
    # torch, triton, numpy: the optional `verify` extra (`verify` turns an ImportError into
    # its install hint).
    from kvplan.validate.environment import collect_environment
    from kvplan.validate.harness import _load_step_module, detect_sku, resolve_device
    from kvplan.validate.profile import run_profile

    device = resolve_device(device_name)
    _load_step_module(device)  # the kernels in Triton's interpreter on CPU, compiled on CUDA
    environment = collect_environment(device)
    if target is None and device.type == "cuda":
        target = detect_sku(catalog.skus(), environment.get("gpu_name") or "")
    document = run_profile(spec, target, device, environment, tp)
    write_atomically(path, json.dumps(document, indent=2) + "\n", "--profile")
    sys.stderr.write(f"wrote {path}\n")
    _render(document, path, output)


def _render(document: dict[str, Any], path: Path, output: Any) -> None:
    from kvplan.perf.calibration import parse_calibration
    from kvplan.perf.calibration_map import fitted_values
    from kvplan.report.profile_report import render_profile

    calibration = parse_calibration(document, f"--profile {path}", str(path))
    fitted, notes = fitted_values(calibration)
    render_profile(
        {"file": str(path), "calibration": document, "fitted": fitted, "notes": notes}, output
    )
