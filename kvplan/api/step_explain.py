"""`--explain`: where a step's time goes, operation by operation (kvplan.perf.step_model)."""

from __future__ import annotations

from kvplan.api.results import Result
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from kvplan.perf.estimates import batched_step
from kvplan.specs import SkuSpec


class StepOperation(Result):
    """One operation's seconds in the explained step, and its share of the step."""

    operation: str  # qkv_proj, out_proj, mlp, ..., engine_overhead (step_model.OPERATIONS)
    seconds: float
    share_fraction: float  # of step_s, 0 to 1


class StepExplanation(Result):
    """One step of one replica, decoding `decode_batch` sequences of `context_tokens` tokens
    and prefilling `prefill_tokens` prompt tokens, split into its operations."""

    model: str
    sku: str
    engine: str
    tp: int
    pp: int
    dp: int
    ep: bool
    decode_batch: int
    context_tokens: int
    prefill_tokens: int
    step_s: float
    # The test-split median |error| of throughput as a fraction; None: not fitted.
    band_fraction: float | None
    operations: list[StepOperation]
    constants: str  # the constants file the step was timed with


def explain_step(
    deployment: Deployment,
    sku: SkuSpec,
    decode_batch: int,
    context_tokens: int,
    prefill_tokens: int = 0,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> StepExplanation:
    """The step model's parts for one step (a prefill of `prefill_tokens` as one fresh chunk)."""
    decode = Batch.uniform(context_tokens, decode_batch) if decode_batch else None
    chunks = [(0, prefill_tokens)] if prefill_tokens else []
    step = batched_step(deployment, sku, decode, chunks, efficiency=efficiency)
    band = efficiency.band("output_tokens_per_s")
    return StepExplanation(
        model=deployment.model.name,
        sku=sku.name,
        engine=deployment.engine.name,
        tp=deployment.tp,
        pp=deployment.pp,
        dp=deployment.dp,
        ep=deployment.ep,
        decode_batch=decode_batch,
        context_tokens=context_tokens,
        prefill_tokens=prefill_tokens,
        step_s=step.step_s,
        band_fraction=band.median_fraction if band else None,
        operations=[
            StepOperation(operation=name, seconds=s, share_fraction=s / step.step_s)
            for name, s in step.parts_s.items()
            if s > 0
        ],
        constants=efficiency.resolved_constants.origin,
    )
