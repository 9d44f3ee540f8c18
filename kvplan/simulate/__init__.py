"""Discrete-event simulation of serving instances over kvplan's engine model and roofline.

    from kvplan.simulate import SimConfig, Slo, goodput, poisson_workload, simulate

`simulate(deployment, sku, workload, config)` runs one configuration and returns a
`SimulationResult`; `goodput(deployment, sku, workload, slo)` is the single figure an
optimiser can maximise: requests per second that meet both latency targets. Whether a run
meets its SLO at a percentile is `SimulationResult.meets_slo(percentile)` (rejected requests
are misses; `slo_met_count` and `meets_percentile` are its two steps, which `pools` uses too),
and `kv_refusal` says why a deployment leaves no KV memory before anything is simulated.
Workloads come from `poisson_workload`, `offline_workload` (all at t = 0, or a closed loop
with `max_concurrency`) or `read_trace`, and `Workload.capped` limits any of them to N in
flight; `pools` sizes disaggregated prefill/decode pools.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engine.deployment import Deployment
from kvplan.simulate.cluster import run_instances
from kvplan.simulate.config import SimConfig, Slo
from kvplan.simulate.distributions import TokenDistribution, parse_distribution
from kvplan.simulate.durations import parse_seconds
from kvplan.simulate.engine_view import InstanceModel, instance_model, kv_refusal
from kvplan.simulate.results import (
    Latency,
    RequestRecord,
    SimulationResult,
    meets_percentile,
    slo_met_count,
    summarize,
)
from kvplan.simulate.trace import read_trace
from kvplan.simulate.workload import RequestSpec, Workload, offline_workload, poisson_workload
from kvplan.specs import SkuSpec

__all__ = [
    "InstanceModel",
    "Latency",
    "RequestRecord",
    "RequestSpec",
    "SimConfig",
    "SimulationResult",
    "Slo",
    "TokenDistribution",
    "Workload",
    "goodput",
    "instance_model",
    "kv_refusal",
    "meets_percentile",
    "offline_workload",
    "parse_distribution",
    "parse_seconds",
    "poisson_workload",
    "read_trace",
    "simulate",
    "slo_met_count",
]


def simulate(
    deployment: Deployment, sku: SkuSpec, workload: Workload, config: SimConfig | None = None
) -> SimulationResult:
    """Serve `workload` with `deployment` on `sku`: config.instances × dp instances.

    Raises:
        KvplanError: the deployment leaves no KV memory on `sku`, or a bad option.
    """
    config = config or SimConfig()
    if config.trtllm_bench and config.trtllm_bench_lengths is None and workload.requests:
        count = len(workload.requests)
        prompt = sum(r.prompt_tokens for r in workload.requests) / count
        output = sum(r.output_tokens for r in workload.requests) / count
        longest = max(r.prompt_tokens for r in workload.requests)
        config = replace(config, trtllm_bench_lengths=(prompt, output, longest))
    view = instance_model(deployment, sku, config)
    count = config.instances * deployment.dp
    runs = run_instances(view, count, config.router, workload)
    return summarize(config.label, view, workload, runs)


def goodput(
    deployment: Deployment,
    sku: SkuSpec,
    workload: Workload,
    slo: Slo,
    config: SimConfig | None = None,
) -> float:
    """Requests per second that meet every target of `slo` (TTFT and TPOT), serving `workload`.

    The share of the workload's requests with TTFT ≤ slo.ttft_s and TPOT ≤ slo.tpot_s times
    the rate served over the arrival window (the offered rate, or the sustainable one when the
    deployment falls behind); offline and closed-loop workloads count over the makespan.
    Rejected requests count as missed. Divide by
    `deployment.gpus` (× config.instances) for goodput per GPU.
    """
    result = simulate(deployment, sku, workload, replace(config or SimConfig(), slo=slo))
    return result.goodput_requests_per_s or 0.0
