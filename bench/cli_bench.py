"""Cold-start and whole-catalogue report timings of the kvplan CLI (numbers go in notes/docs).

Usage: python bench/cli_bench.py [--runs 7]
Each command runs in a fresh interpreter (cold start, as a user types it); the median and
the spread of wall-clock times are printed, and whether torch/triton/numpy were imported.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "size llama-3.1-70b 128k x 8 on h100-sxm": [
        "size",
        "llama-3.1-70b",
        "--context",
        "128k",
        "--batch",
        "8",
        "--sku",
        "h100-sxm",
    ],
    "models": ["models"],
    "report all models x all SKUs x TP 1-8 (json)": [
        "report",
        "--model",
        "all",
        "--format",
        "json",
    ],
}

PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['kvplan'] + sys.argv[1:]\n"
    "try:\n    runpy.run_module('kvplan.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
    "print('HEAVY=' + ','.join(m for m in ('torch', 'triton', 'numpy') if m in sys.modules),"
    " file=sys.stderr)\n"
)


def time_command(args: list[str], runs: int) -> tuple[list[float], str]:
    """Wall-clock seconds of `runs` cold runs, and the heavy modules the last one imported."""
    times, heavy = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
        )
        times.append(time.perf_counter() - start)
        heavy = done.stderr.strip().splitlines()[-1].removeprefix("HEAVY=")
    return times, heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    print(f"{'command':<48} {'median s':>9} {'min s':>7} {'max s':>7}  heavy imports")
    for label, args in COMMANDS.items():
        times, heavy = time_command(args, runs)
        print(
            f"{label:<48} {statistics.median(times):>9.3f} {min(times):>7.3f} "
            f"{max(times):>7.3f}  {heavy or 'none'}"
        )


if __name__ == "__main__":
    main()
