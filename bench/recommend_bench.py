"""How fast `recommend` searches the whole SKU catalogue for one model (numbers go in notes).

Usage: python bench/recommend_bench.py [--runs 5]
For each question the search runs in-process over every SKU (catalogue already loaded, as
after the first query), and once as a cold CLI run (a fresh interpreter, as a user types it).
Prints the median wall-clock time and the CPU time (what the search costs on a quiet
machine; the development machine is shared, so wall time swings with its load), the points of
the space, the capacities computed and the points the cost bound skipped. The last questions
meet nothing, so every point is evaluated: the worst case.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from kvplan.catalog import Catalog
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.plan.recommend import ConcurrencyTarget, SearchSpace, recommend

# (model, context tokens, concurrency): typical questions, then ones nothing in 64 GPUs meets.
QUESTIONS = [
    ("llama-3.1-70b", 32_768, 64),
    ("llama-3.1-8b", 131_072, 32),
    ("qwen3-30b-a3b", 32_768, 256),
    ("deepseek-v3", 32_768, 64),
    ("gemma-2-9b", 8192, 100),
    ("llama-3.1-405b", 131_072, 5000),
    ("kimi-k2", 131_072, 100_000),
]


def in_process(catalog: Catalog, model: str, context: int, concurrency: int, runs: int):
    """(wall, CPU) seconds of `runs` searches over every SKU, and the last result."""
    base = Deployment(catalog.model(model), engine("vllm"))
    space = SearchSpace(tuple(catalog.skus()))
    walls, cpus, result = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = recommend(base, ConcurrencyTarget(context, concurrency), space)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return walls, cpus, result


def cold_cli(model: str, context: int, concurrency: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one `kvplan recommend … -f json` in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    args = ["recommend", model, "-c", str(context), "-n", str(concurrency), "-f", "json"]
    subprocess.run([sys.executable, "-m", "kvplan.cli", *args], capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    catalog = Catalog()
    skus = len(catalog.skus())
    print(f"recommend over all {skus} SKUs, up to 64 GPUs, vLLM (in process: median of {runs})")
    for model, context, concurrency in QUESTIONS:
        walls, cpus, result = in_process(catalog, model, context, concurrency, runs)
        assert result is not None
        stats = result.stats
        verdict = "meets" if result.chosen else "nothing meets"
        cli_wall, cli_cpu = cold_cli(model, context, concurrency)
        print(
            f"  {model:15} {concurrency:>7,} x {context:>7,}: in process "
            f"{statistics.median(walls) * 1000:5.0f} ms wall, "
            f"{statistics.median(cpus) * 1000:5.0f} ms CPU; cold CLI {cli_wall:.2f} s wall, "
            f"{cli_cpu:.2f} s CPU; {stats.points:,} points, {stats.evaluated:,} capacities, "
            f"{stats.beyond_bound:,} skipped by the cost bound; {verdict}"
        )


if __name__ == "__main__":
    main()
