"""The max batch size and max num tokens `trtllm-bench throughput` picks for a workload.

TensorRT-LLM's benchmark tool does not run with the LLM API defaults: it sizes both limits
from how many requests of the dataset's mean lengths the KV cache holds
(`tensorrt_llm/bench/build/tuning.py`, `calc_engine_setting` and `finetune_setting`, as in
TensorRT-LLM 0.17–0.20):

    raw_bs    = min(kv requests, 4096) / pp
    raw_token = min(raw_bs × (1 + ISL / OSL), 32768)
    max_batch_size = max(64, 32·⌈raw_bs/32⌉) below 256, 128·⌈raw_bs/128⌉ below 1024,
                     else 256·⌈raw_bs/256⌉
    max_num_tokens = max(2048, 256·⌈raw_token/256⌉) below 4096, 512·⌈raw_token/512⌉
                     below 8192, else 1024·⌈raw_token/1024⌉

trtllm-bench estimates "kv requests" from its own rough memory figure (device memory − the
engine's bytes, × 0.95, ÷ bytes per token ÷ (ISL + OSL)); kvplan divides the engine model's
own pool (`kv_capacity_tokens`) by ISL + OSL instead, the figure trtllm-bench approximates.
"""

from __future__ import annotations

import math

BATCH_CAP = 4096  # "Cap total batch size to avoid decoder buffer size becoming too large."
TOKEN_CAP = 32768  # "Cap num tokens to avoid TRT activation buffer becoming too large."
# (below this value, round up to a multiple of this): finetune_setting's two ladders.
BATCH_STEPS = ((256, 32), (1024, 128), (math.inf, 256))
TOKEN_STEPS = ((4096, 256), (8192, 512), (math.inf, 1024))


def bench_limits(
    kv_capacity_tokens: int, input_tokens: float, output_tokens: float, pp: int = 1
) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) as trtllm-bench's finetune_setting picks them for a
    pool of `kv_capacity_tokens` and mean lengths `input_tokens`, `output_tokens`."""
    kv_requests = kv_capacity_tokens / (input_tokens + output_tokens)
    raw_bs = min(kv_requests, BATCH_CAP) / pp
    raw_token = min(raw_bs * (1 + input_tokens / output_tokens), TOKEN_CAP)
    return _rounded(raw_bs, 64, BATCH_STEPS), _rounded(raw_token, 2048, TOKEN_STEPS)


def _rounded(value: float, floor: int, steps: tuple[tuple[float, int], ...]) -> int:
    """`value` rounded up to the multiple its range asks for, at least `floor`."""
    multiple = next(step for below, step in steps if value < below)
    return max(floor, multiple * math.ceil(value / multiple))
