"""Typed results of `recommend --pareto` (kvplan.api.pareto): the frontier, exact.

Rows carry seconds and tokens/s as floats (nothing rounded) and bytes as integers; the report
layer renders these records and nothing else, so its table and its JSON cannot disagree.
"""

from __future__ import annotations

from kvplan.api.results import Result


class ParetoRow(Result):
    """One point on the frontier: a deployment at a batch, timed by the speed model."""

    sku: str
    gpus: int
    tp: int
    pp: int
    weight_dtype: str
    kv_dtype: str
    batch: int  # requests in flight, the launch's max_num_seqs
    max_batch: int  # the most requests of prompt + output tokens its KV pool holds
    max_num_batched_tokens: int  # the prefill chunk
    kv_bytes_per_token: int  # whole model, every GPU of the instance
    kv_bytes_per_token_per_gpu: int
    decode_step_s: float  # one decode step of the batch
    prefill_s: float  # one prompt's prefill
    request_s: float  # one request's life in the steady state
    tokens_per_s_per_user: float
    output_tokens_per_s_per_gpu: float


class ParetoReport(Result):
    """`kvplan recommend --pareto`: the frontier of output tokens/s per GPU against tokens/s
    per user for one workload, fastest per user first, and what the sweep covered."""

    model: str
    engine: str
    engine_version: str | None
    prompt_tokens: int
    output_tokens: int
    context_tokens: int
    speed_model: str  # which step times: the shipped model, or a calibration file
    frontier: list[ParetoRow]
    points_swept: int  # (deployment, batch) points timed
    configurations: int  # (SKU, tp, weight dtype, KV dtype) of the space
    refused: int  # configurations the engine refuses, or whose KV holds no request
    searched: dict[str, list[int | str]]  # values per dimension; weights "released" as shipped
    notes: list[str]
