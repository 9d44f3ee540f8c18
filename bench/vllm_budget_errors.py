"""kvplan's vLLM budget against public startup logs: predicted vs logged "Available KV cache
memory", per log, through the command line a user runs (`kvplan report --engine vllm`).

Usage:
    python bench/vllm_budget_errors.py                     # this checkout
    python bench/vllm_budget_errors.py --python OTHER/.venv/bin/python   # another checkout

The logs and their mapping onto catalogue models are tests/golden/vllm_memory/*.yaml and
tests/golden/vllm_budget_cases.yaml (with SKU profiles for logged nodes no shipped SKU
describes in tests/golden/vllm_budget_skus/). The tolerance is max(0.35 GiB, 3 % of the logged
figure); "over" means kvplan promised more KV than vLLM had (the dangerous direction).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
GIB = 2**30


def report_args(log: dict, case: dict) -> list[str]:
    """The `kvplan report` arguments that describe the logged deployment."""
    args = [
        "report",
        "-m",
        case["model"],
        "--sku",
        case.get("sku", log["sku"]),
        "--catalog",
        str(GOLDEN / "vllm_budget_skus"),
        "--tp",
        str(log["tp"]),
        "--pp",
        str(log["pp"]),
        "--utilization",
        str(log["gpu_memory_utilization"]),
        "--vllm-version",
        log["vllm_version"],
        "--context",
        str(log["max_model_len"]),
        "--format",
        "json",
    ]
    for option, key in (
        ("--max-num-seqs", "max_num_seqs"),
        ("--max-num-batched-tokens", "max_num_batched_tokens"),
    ):
        if log.get(key):
            args += [option, str(log[key])]
    if case.get("weight_dtype"):
        args += ["--weight-dtype", case["weight_dtype"]]
    if str(log["kv_cache_dtype"]).startswith("fp8"):
        args += ["--kv-dtype", "fp8"]
    return args


def predicted_gib(python: str, args: list[str]) -> float:
    """kvplan's KV budget per GPU in GiB for one logged deployment."""
    done = subprocess.run(
        [python, "-m", "kvplan.cli", *args], capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr.strip())
    (row,) = json.loads(done.stdout)
    return row["kv_budget_bytes_per_gpu"] / GIB


def rows(python: str) -> list[dict]:
    """One row per mapped log: logged and predicted GiB, error, tolerance, split."""
    cases = yaml.safe_load((GOLDEN / "vllm_budget_cases.yaml").read_text())["cases"]
    out = []
    for name, case in cases.items():
        log = yaml.safe_load((GOLDEN / "vllm_memory" / f"{name}.yaml").read_text())
        logged = case.get("expected_gib", log["memory_gib"]["available_kv"])
        if not case.get("model") or logged is None:
            continue
        try:
            predicted = predicted_gib(python, report_args(log, case))
        except RuntimeError as error:  # an older kvplan may lack the SKU or the option
            print(f"{name}: {error}", file=sys.stderr)
            continue
        tolerance = max(0.35, 0.03 * abs(logged))
        out.append(
            {
                "log": name,
                "split": case["split"],
                "logged_gib": logged,
                "predicted_gib": round(predicted, 2),
                "error_gib": round(predicted - logged, 2),
                "tolerance_gib": round(tolerance, 2),
                "within": abs(predicted - logged) <= tolerance,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter with kvplan")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    table = rows(args.python)
    if args.json:
        print(json.dumps(table, indent=2))
        return
    print(f"{'log':44} {'split':5} {'logged':>7} {'kvplan':>7} {'error':>6} {'tol':>5}  ok")
    for r in table:
        mark = "yes" if r["within"] else ("OVER" if r["error_gib"] > 0 else "under")
        print(
            f"{r['log']:44} {r['split']:5} {r['logged_gib']:7.2f} {r['predicted_gib']:7.2f} "
            f"{r['error_gib']:+6.2f} {r['tolerance_gib']:5.2f}  {mark}"
        )
    for split in ("fit", "test"):
        chosen = [r for r in table if r["split"] == split]
        good = sum(r["within"] for r in chosen)
        print(f"{split}: {good} of {len(chosen)} within max(0.35 GiB, 3 %)")


if __name__ == "__main__":
    main()
