"""kvplan's speed predictions against public measurements: per case, and per split and metric.

Usage:
    python bench/speed_errors.py                       # this checkout, every case
    python bench/speed_errors.py --python OTHER/.venv/bin/python   # another checkout
    python bench/speed_errors.py --fit                 # fit the constants on the fit split,
                                                       # write them and the test-split bands
    python bench/speed_errors.py --json FILE           # also write every row as JSON

The cases are tests/golden/speed_cases/*.yaml (format: each file's header and the notes in
tests/golden/speed_cases); bench/speed_predict.py says how each workload kind is predicted.
Per case and metric: predicted, measured, predicted / measured and |ln(ratio)|; per split and
metric family (throughput, latency, itl, ttft): the median and worst |ln ratio| and how many
throughputs are over-predicted by more than 15 %.

--fit changes only the constants named in FITTED below, by a coordinate search over
multiplicative steps on the mean |ln ratio| of the fit split (each case weighted once, its
metrics averaged), then writes kvplan/perf/constants.yaml with the new values and the
test-split bands. scipy is not a dependency; 13 constants and a few dozen cases do not need it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "golden" / "speed_cases"
CONSTANTS = ROOT / "kvplan" / "perf" / "constants.yaml"
sys.path.insert(0, str(ROOT / "bench"))

FAMILIES = {
    "throughput": (
        "output_tokens_per_s",
        "output_tokens_per_s_per_gpu",
        "total_tokens_per_s",
        "requests_per_s",
    ),
    "latency": ("latency_s",),
    "itl": ("itl_ms_mean", "itl_ms_median", "tpot_ms_mean", "tpot_ms_median"),
    "ttft": ("ttft_ms_mean", "ttft_ms_median", "ttft_ms"),
    "tail": ("ttft_ms_p99", "tpot_ms_p99", "itl_ms_p99"),
}
# Which band each family's figures carry (kvplan.perf.constants.BAND_METRICS).
BAND_OF = {
    "throughput": "output_tokens_per_s",
    "latency": "latency_s",
    "itl": "itl_ms",
    "ttft": "ttft_ms",
}
FITTED = (
    "gemm_bandwidth_fraction",
    "attention_decode_bandwidth_fraction",
    "attention_decode_fixed_tokens",
    "gemm_compute_fraction",
    "grouped_gemm_bandwidth_fraction",
    "collective_bandwidth_fraction",
    "collective_latency_s",
    "elementwise_bandwidth_fraction",
    "engine_sequence_overhead_s.vllm",
    "engine_step_overhead_s.trtllm",
    "engine_step_overhead_s.vllm",
    "engine_sequence_overhead_s.trtllm",
    "kernel_overhead_s",
)
FIT_SOURCE = "fitted on the fit split of tests/golden/speed_cases, bench/speed_errors.py --fit"
FIT_REQUESTS_CAP = 400  # offline requests per case while fitting (the final table uses 1000)


def family_of(metric: str) -> str:
    return next(f for f, metrics in FAMILIES.items() if metric in metrics)


def load_cases(paths: list[Path] | None = None) -> list[tuple[dict, dict]]:
    """(case, source) for every case of `paths` (default: every file), in name order."""
    found = []
    for path in sorted(paths if paths is not None else CASES.glob("*.yaml")):
        source = yaml.safe_load(path.read_text())
        for case in source["cases"]:
            found.append((case, {k: v for k, v in source.items() if k != "cases"}))
    return found


def predictions(cases, python: str | None, requests_cap: int | None = None) -> list[dict]:
    """One prediction per case, in-process or through another checkout's interpreter."""
    items = [{"case": c, "source": s, "requests_cap": requests_cap} for c, s in cases]
    if python is None:
        from speed_predict import predict

        out = []
        for item in items:
            try:
                out.append(predict(item["case"], item["source"], requests_cap))
            except Exception as error:
                out.append({"values": {}, "method": "failed", "error": str(error)[:300]})
        return out
    text = "".join(json.dumps(item) + "\n" for item in items)
    done = subprocess.run(
        [python, str(ROOT / "bench" / "speed_predict.py")],
        input=text,
        capture_output=True,
        text=True,
        cwd="/tmp",
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def rows_of(cases, predicted) -> list[dict]:
    rows = []
    for (case, _), answer in zip(cases, predicted, strict=True):
        if answer["method"] == "skipped":
            print(f"skipped {case['id']}: {answer['error']}", file=sys.stderr)
            continue
        for metric, measured in case["measured"].items():
            if metric not in answer["values"] and answer["method"] != "failed":
                continue
            value = answer["values"].get(metric)
            ratio = value / measured if value else None
            rows.append(
                {
                    "id": case["id"],
                    "split": case["split"],
                    "metric": metric,
                    "family": family_of(metric),
                    "measured": measured,
                    "predicted": value,
                    "ratio": ratio,
                    "abs_log_ratio": abs(math.log(ratio)) if ratio else None,
                    "method": answer["method"],
                    "error": answer.get("error"),
                }
            )
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per split × family: cases, median and worst |ln ratio|, throughput over-predictions."""
    out = []
    for split in ("fit", "test"):
        for family in FAMILIES:
            errors = [
                r["abs_log_ratio"]
                for r in rows
                if r["split"] == split and r["family"] == family and r["abs_log_ratio"] is not None
            ]
            failed = sum(
                1
                for r in rows
                if r["split"] == split and r["family"] == family and r["abs_log_ratio"] is None
            )
            if not errors and not failed:
                continue
            over = sum(
                1
                for r in rows
                if r["split"] == split
                and r["family"] == family
                and r["ratio"]
                and r["ratio"] > 1.15
            )
            out.append(
                {
                    "split": split,
                    "family": family,
                    "cases": len(errors),
                    "failed": failed,
                    "median_abs_log_ratio": statistics.median(errors) if errors else None,
                    "worst_abs_log_ratio": max(errors) if errors else None,
                    "over_15_percent": over,
                }
            )
    return out


def print_rows(rows: list[dict], sums: list[dict]) -> None:
    print(
        f"{'case':<62} {'split':<5} {'metric':<28} {'measured':>10} {'predicted':>10} "
        f"{'ratio':>6} {'|ln r|':>6}  method"
    )
    for r in rows:
        pred = f"{r['predicted']:10.4g}" if r["predicted"] else f"{'-':>10}"
        ratio = f"{r['ratio']:6.3f}" if r["ratio"] else f"{'-':>6}"
        err = f"{r['abs_log_ratio']:6.3f}" if r["abs_log_ratio"] is not None else f"{'-':>6}"
        tail = r["method"] + (f" ({r['error']})" if r["error"] else "")
        print(
            f"{r['id'][:62]:<62} {r['split']:<5} {r['metric']:<28} {r['measured']:10.4g} "
            f"{pred} {ratio} {err}  {tail}"
        )
    print()
    print(
        f"{'split':<5} {'family':<10} {'cases':>5} {'failed':>6} {'median':>7} {'worst':>7} "
        f"{'>+15%':>5}"
    )
    for s in sums:
        med = (
            f"{s['median_abs_log_ratio']:7.3f}"
            if s["median_abs_log_ratio"] is not None
            else "      -"
        )
        worst = (
            f"{s['worst_abs_log_ratio']:7.3f}"
            if s["worst_abs_log_ratio"] is not None
            else "      -"
        )
        print(
            f"{s['split']:<5} {s['family']:<10} {s['cases']:>5} {s['failed']:>6} {med} {worst} "
            f"{s['over_15_percent']:>5}"
        )


# --- the fit ------------------------------------------------------------------------


def _objective(cases, requests_cap) -> float:
    """Mean over fit cases of the mean |ln ratio| of each case's metrics (failed: ln 3)."""
    rows = rows_of(cases, predictions(cases, None, requests_cap))
    per_case: dict[str, list[float]] = {}
    for r in rows:
        per_case.setdefault(r["id"], []).append(
            r["abs_log_ratio"] if r["abs_log_ratio"] is not None else math.log(3)
        )
    return statistics.fmean(statistics.fmean(v) for v in per_case.values())


def _set(name: str, value: float) -> None:
    from kvplan.perf import step_model
    from kvplan.perf.constants import shipped_constants

    shipped_constants().values[name] = value
    step_model._MODELS.clear()  # built models hold the old rates


def fit(cases, rounds: int = 3) -> dict[str, float]:
    """Coordinate search: each constant × or ÷ a step, kept when the objective falls."""
    from kvplan.perf.constants import shipped_constants

    values = shipped_constants().values
    fit_cases = [(c, s) for c, s in cases if c["split"] == "fit"]
    best = _objective(fit_cases, FIT_REQUESTS_CAP)
    print(f"fit: {len(fit_cases)} cases, start {best:.4f}", file=sys.stderr)
    for step in (1.5, 1.2, 1.1)[:rounds]:
        for name in FITTED:
            for factor in (step, 1 / step):
                old = values[name]
                new = old * factor
                if name.split(".")[0].endswith("_fraction"):
                    new = min(new, 1.0)
                if new == old:
                    continue
                _set(name, new)
                score = _objective(fit_cases, FIT_REQUESTS_CAP)
                if score < best - 1e-4:
                    best = score
                    print(f"  {name}: {old:.6g} -> {new:.6g}  {best:.4f}", file=sys.stderr)
                    break
                _set(name, old)
    return {name: values[name] for name in FITTED}


def _yaml_float(value: float) -> str:
    """`value` as YAML 1.1 reads a float: with a dot in the mantissa (1.0e-05, not 1e-05)."""
    text = f"{value:.6g}"
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exponent}" if exponent else mantissa


def write_constants(fitted: dict[str, float], sums: list[dict]) -> None:
    """Rewrite constants.yaml's fitted values and bands, leaving its comments and order."""
    lines = CONSTANTS.read_text().splitlines()
    out, current = [], None
    for line in lines:
        stripped = line.strip()
        if line.startswith("  ") and not line.startswith("    ") and stripped.endswith(":"):
            current = stripped[:-1]
        if current in fitted and stripped.startswith("value:"):
            line = f"    value: {_yaml_float(fitted[current])}"
        if line.startswith("bands:"):
            break
        out.append(line)
    out.append("bands:")
    for s in sums:
        if s["split"] != "test" or s["median_abs_log_ratio"] is None or s["family"] not in BAND_OF:
            continue
        out += [
            f"  {BAND_OF[s['family']]}:",
            f"    median_abs_log_ratio: {s['median_abs_log_ratio']:.4f}",
            f"    worst_abs_log_ratio: {s['worst_abs_log_ratio']:.4f}",
            f"    cases: {s['cases']}",
            f'    source: "test split of tests/golden/speed_cases after the fit, '
            f'bench/speed_errors.py --fit ({time.strftime("%Y-%m-%d")})"',
        ]
    CONSTANTS.write_text("\n".join(out) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="another checkout's interpreter")
    parser.add_argument("--fit", action="store_true", help="fit the constants on the fit split")
    parser.add_argument("--json", type=Path, help="also write the rows and summary here")
    parser.add_argument(
        "--rounds", type=int, default=3, help="--fit: search rounds (× 1.5, 1.2, 1.1)"
    )
    args = parser.parse_args()
    cases = load_cases()
    if args.fit:
        if args.python:
            parser.error("--fit fits this checkout's constants; drop --python")
        fitted = fit(cases, args.rounds)
    rows = rows_of(cases, predictions(cases, args.python))
    sums = summary(rows)
    print_rows(rows, sums)
    if args.fit:
        write_constants(fitted, sums)
        print(f"\nwrote {CONSTANTS.relative_to(ROOT)}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": sums}, indent=1) + "\n")


if __name__ == "__main__":
    main()
