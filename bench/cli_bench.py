"""Cold-start and whole-catalogue report timings of the kvplan CLI (numbers go in notes/docs).

Usage: python bench/cli_bench.py [--runs 7]

Each command runs in a fresh interpreter (cold start, as a user types it) and is timed by its
subprocess wall-clock time; the best of `--runs` runs is the figure (the least disturbed by
other load on the machine), printed with the median and the peak resident memory. The first
row is a minimal typer + rich app that parses two options and prints one table: the floor any
typer CLI pays on this machine and interpreter. `size` is given as a multiple of that floor,
measured in the same run so that both see the same machine load. Whether torch, triton or
numpy were imported is printed for each kvplan command.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

# The floor: what typer, rich and the interpreter cost before any kvplan code runs.
MINIMAL_APP = """
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False)


@app.command()
def main(
    model: str,
    context: Annotated[str, typer.Option(help="context")] = "8k",
    batch: Annotated[int, typer.Option(help="sequences")] = 1,
) -> None:
    table = Table("model", "context", "batch")
    table.add_row(model, context, str(batch))
    Console().print(table)


app()
"""

SIZE = ["size", "llama-3.1-70b", "--context", "128k", "--batch", "8", "--tp", "8"]
COMMANDS = {
    "size llama-3.1-70b 128k x 8, tp 8, h100-sxm": [*SIZE, "--sku", "h100-sxm"],
    "size --help": ["size", "--help"],
    "models": ["models"],
    "report --model all -f json": ["report", "--model", "all", "-f", "json"],
}

PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['kvplan'] + sys.argv[1:]\n"
    "try:\n    runpy.run_module('kvplan.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
    "print('HEAVY=' + ','.join(m for m in ('torch', 'triton', 'numpy') if m in sys.modules),"
    " file=sys.stderr)\n"
)
# kvplan's console script sets PYDANTIC_DISABLE_PLUGINS (no plugin scan at start-up); the floor
# gets the same. Bytecode is cached, as after `pip install` (which compiles it): without the
# cache every run recompiles kvplan's sources while typer, rich and pydantic load theirs.
ENV = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__", "COLUMNS": "120"}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)


def _run(argv: list[str]) -> tuple[float, int, str]:
    """Wall-clock seconds, peak resident kB and stderr of one cold run of `argv`."""
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=ENV)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest yet
        elapsed = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        text = stderr.read().decode()
    if child.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[2:])}: exit {child.returncode}\n{text}")
    return elapsed, usage.ru_maxrss, text


def time_command(argv: list[str], runs: int) -> tuple[list[float], int, str]:
    """Seconds of `runs` cold runs, the peak kB, and the heavy modules the last run imported."""
    times, peak, heavy = [], 0, ""
    _run(argv)  # warm-up, untimed: writes the bytecode cache and fills the page cache
    for _ in range(runs):
        elapsed, peak, stderr = _run(argv)
        times.append(elapsed)
        lines = [line for line in stderr.splitlines() if line.startswith("HEAVY=")]
        heavy = lines[-1].removeprefix("HEAVY=") if lines else "-"
    return times, peak, heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; best of {runs} runs")
    print(f"{'command':<44} {'best s':>7} {'median s':>9} {'peak MB':>8}  heavy imports")
    rows = {"minimal typer + rich app, one table": [sys.executable, "-c", MINIMAL_APP, "x"]}
    rows |= {label: [sys.executable, "-c", PROBE, *args] for label, args in COMMANDS.items()}
    best = {}
    for label, argv in rows.items():
        times, peak, heavy = time_command(argv, runs)
        best[label] = min(times)
        print(
            f"{label:<44} {min(times):>7.3f} {statistics.median(times):>9.3f} "
            f"{peak / 1024:>8.0f}  {heavy or 'none'}"
        )
    floor, size = (best[label] for label in list(rows)[:2])
    print(f"size / minimal app: {size / floor:.2f}x (target: at most 1.5x)")


if __name__ == "__main__":
    main()
