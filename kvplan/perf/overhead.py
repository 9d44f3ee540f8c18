"""A serving engine's per-step cost outside the GPU kernels: scheduling, input preparation,
sampling metadata, output processing; and each kernel's fixed cost (launch, ramp-up, drain).

By engine and release: vLLM before 0.8 (V0) schedules and processes outputs synchronously
each step, V1 overlaps most of it (blog.vllm.ai/2025/01/27/v1-alpha-release.html); SGLang's
overlap scheduler and TensorRT-LLM's C++ executor hide more. Without CUDA graphs every kernel
launch is paid on the host. The figures are constants (kvplan/perf/constants.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.engine.deployment import Deployment
from kvplan.engine.resolved import resolve
from kvplan.perf.constants import PerfConstants

FITTED_ENGINES = ("vllm", "sglang", "trtllm")


def engine_key(deployment: Deployment) -> str:
    """The constants' key for the deployment's engine and release: vllm-v0, vllm, sglang,
    trtllm, or other (the analytic profiles, llama.cpp, ollama)."""
    name = deployment.engine.name
    if name == "vllm" and getattr(resolve(deployment).release, "era", "") == "v0":
        return "vllm-v0"
    return name if name in FITTED_ENGINES else "other"


@dataclass(frozen=True)
class Overhead:
    """Seconds a step spends outside its kernels' work: fixed + per sequence + per kernel."""

    step_s: float
    per_sequence_s: float
    per_kernel_s: float

    def seconds(self, sequences: int, kernels: int) -> float:
        """The overhead of one step of `sequences` sequences launching `kernels` kernels."""
        return self.step_s + self.per_sequence_s * sequences + self.per_kernel_s * kernels


@lru_cache(maxsize=4096)  # one per deployment; a report asks once per SKU row
def engine_overhead(
    deployment: Deployment, constants: PerfConstants, cuda_graphs: bool = True
) -> Overhead:
    """The deployment's engine overhead under `constants`; without CUDA graphs (`cuda_graphs`
    False, or the deployment's `cuda_graphs` setting off) each kernel launch costs more."""
    key = engine_key(deployment)
    per_kernel = constants.value("kernel_overhead_s")
    if not cuda_graphs or deployment.settings.cuda_graphs is False:
        per_kernel *= constants.value("eager_overhead_factor")
    return Overhead(
        constants.engine_value("engine_step_overhead_s", key),
        constants.engine_value("engine_sequence_overhead_s", key),
        per_kernel,
    )
