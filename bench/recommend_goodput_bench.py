"""How fast `recommend` answers a throughput target (--rate with SLOs) (numbers go in notes).

Usage: python bench/recommend_goodput_bench.py
Each question searches the SKUs given (None: the whole catalogue) up to 8 GPUs; prints the
wall-clock and CPU seconds, the capacities computed, the simulations run and the answer.
"""

from __future__ import annotations

import resource
import time

import kvplan
from kvplan.simulate import SimConfig, Slo, parse_distribution, poisson_workload

# (model, SKUs, rate req/s, prompt, output, TTFT s, TPOT s, requests)
QUESTIONS = [
    ("llama-3.1-8b", "h100-sxm", 10, "lognormal:mean=1024,sigma=1", "256", 1.0, 0.05, 1000),
    ("llama-3.1-8b", "h100-sxm", 20, "8000", "16", 2.0, None, 200),
    ("llama-3.1-8b", None, 5, "lognormal:mean=1024,sigma=1", "256", 1.0, 0.05, 500),
    ("llama-3.1-70b", "h100", 5, "lognormal:mean=1024,sigma=1", "256", 2.0, 0.1, 500),
]


def main() -> None:
    for model, skus, rate, prompt, output, ttft, tpot, requests in QUESTIONS:
        load = poisson_workload(
            rate,
            parse_distribution(prompt, "--prompt-tokens"),
            parse_distribution(output, "--output-tokens"),
            requests=requests,
        )
        cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        start = time.perf_counter()
        result = kvplan.recommend(
            model,
            context="8k",
            skus=skus,
            max_gpus=8,
            workload=load,
            simulation=SimConfig(slo=Slo(ttft, tpot)),
        )
        wall = time.perf_counter() - start
        cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu
        first = result.ranked[0] if result.ranked else result.closest_miss
        answer = (
            f"{first.gpus}x {first.sku} tp{first.tp} pp{first.pp} dp{first.dp}, "
            f"{first.slo_met_fraction:.1%} within SLO"
            if first
            else "—"
        )
        print(
            f"{model} on {skus or 'all SKUs'} at {rate} req/s ({requests} requests): "
            f"{wall:.2f} s wall, {cpu:.2f} s CPU; {result.search.points} points, "
            f"{result.search.capacities_evaluated} capacities, {result.search.simulations} "
            f"simulations; {'meets' if result.meets else 'miss'}: {answer}"
        )


if __name__ == "__main__":
    main()
