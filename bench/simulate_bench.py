"""How long `kvplan simulate` takes for 100,000 requests: near saturation, 6x overloaded,
a closed loop and offline.

Usage: python bench/simulate_bench.py [--requests 100000] [--rate 13] [--runs 3]
       [--only rate|overloaded|closed-loop|offline ...]

Llama-3.1-8B on one H100 SXM under vLLM's engine model (paged, continuous batching, chunked
prefill, max_model_len 16k), Poisson arrivals at 13 req/s with lognormal prompts (mean 1,024
tokens, sigma 1) and outputs (mean 256, sigma 1): just under what the instance sustains on the
per-operation step model (19 req/s is overloaded there, about 13.2 req/s sustainable). The
default run prints batch mean 158.9 (peak 273), queue mean 0.4 and no preemption (69 of the
100,000 requests are longer than max_model_len and rejected). Prints the wall-clock and CPU
seconds of the simulation (the workload is
generated before the clock starts), the best of `--runs`; the target is under 10 s. On a
shared machine the CPU time is the steadier figure.

The other scenarios: `overloaded` at 6 × --rate (a preemption or an admission nearly every
step, where run-jumping helps least), `closed-loop` at 256 clients (vllm bench serve
--max-concurrency 256) and `offline` (every request at t = 0, as trtllm-bench throughput).
"""

from __future__ import annotations

import argparse
import time

from kvplan.catalog import Catalog
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.simulate import (
    SimConfig,
    offline_workload,
    parse_distribution,
    poisson_workload,
    simulate,
)

SCENARIOS = ("rate", "overloaded", "closed-loop", "offline")


def _workload(kind: str, rate: float, requests: int):
    prompt = parse_distribution("lognormal:mean=1024,sigma=1", "--prompt-tokens")
    output = parse_distribution("lognormal:mean=256,sigma=1", "--output-tokens")
    if kind == "rate":
        return poisson_workload(rate, prompt, output, requests=requests, seed=0)
    if kind == "overloaded":  # six times the rate the instance sustains (about 13 req/s)
        return poisson_workload(6 * rate, prompt, output, requests=requests, seed=0)
    if kind == "closed-loop":  # vllm bench serve --max-concurrency 256
        return offline_workload(prompt, output, requests=requests, seed=0, max_concurrency=256)
    return offline_workload(prompt, output, requests=requests, seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=13.0, help="requests per second")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=SCENARIOS, action="append", help="scenarios to run")
    args = parser.parse_args()
    catalog = Catalog()
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    sku = catalog.sku("h100-sxm")
    config = SimConfig(max_model_len=16_384)
    print(f"llama-3.1-8b on h100-sxm, {args.requests:,} requests, best of {args.runs}")
    for kind in args.only or SCENARIOS:
        workload = _workload(kind, args.rate, args.requests)
        best_wall, best_cpu, result = float("inf"), float("inf"), None
        for _ in range(args.runs):
            wall, cpu = time.perf_counter(), time.process_time()
            result = simulate(deployment, sku, workload, config)
            best_wall = min(best_wall, time.perf_counter() - wall)
            best_cpu = min(best_cpu, time.process_time() - cpu)
        assert result is not None
        print(f"{kind}: {workload.description}")
        print(
            f"  served {result.completed:,}, rejected {sum(result.rejected.values()):,}, "
            f"{result.steps:,} scheduler steps, batch mean {result.batch_mean:.1f} "
            f"(peak {result.batch_peak}), queue mean {result.queue_mean:.1f}, "
            f"preemptions {sum(result.preemptions.values()):,}, "
            f"{result.output_tokens_per_s:,.0f} output tok/s"
        )
        if result.saturation.overloaded:
            print(f"  {result.saturation.note()}")
        print(f"  simulate: {best_wall:.2f} s wall, {best_cpu:.2f} s CPU")


if __name__ == "__main__":
    main()
