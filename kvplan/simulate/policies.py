"""Each engine's admission and preemption rules, as hooks the continuous scheduler calls.

`Scheduling` (scheduling.py) composes a step the way vLLM V1 does: decodes first, then
ongoing chunks, then waiting requests in arrival order while the token budget and free
blocks allow, no overtaking. The engines differ in which waiting request may start and who
gives way when blocks run out; a policy answers those two questions:

- `continuous` (vLLM V1, `vllm/v1/core/sched/scheduler.py`): a request starts when its first
  chunk's blocks are free; when decodes need blocks, the newest running request is
  preempted (recompute, or swap in V0).
- `trtllm-guaranteed-no-evict` (TensorRT-LLM's default `CapacitySchedulerPolicy`,
  `tensorrt_llm/_torch/pyexecutor/scheduler.py` `GuaranteedNoEvictScheduler` and
  `cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp`): running requests reserve the
  blocks they need to completion (prompt + max output), and a waiting request starts only if
  its own blocks to completion fit in what is left; the first that does not fit stops
  admission. So nothing is ever evicted.
- `trtllm-max-utilization` (`MaxUtilizationScheduler`): a request starts when the blocks of
  its next step are free, and when they run out the most recently started request is paused
  (its KV freed, recomputed on resume), as vLLM does.
- `sglang` (`python/sglang/srt/managers/schedule_policy.py` `PrefillAdder`, and
  `scheduler.py` / `schedule_batch.py` `retract_decode`): a waiting request starts when its
  prompt plus its max output fits in the free tokens left after each running request
  reserves new_token_ratio × its remaining output; the ratio starts at
  init = 0.7 × schedule_conservativeness (1.0), falls by (init − 0.14 × init) / 600 each
  decode step to its floor 0.14 × init, and when decodes run out of memory the running
  request with the fewest output tokens (the longest prompt on a tie) is retracted and the
  ratio re-estimated as min(1, (Σ decoded + 20 · running) / (Σ max output + 1)).
  Constants from `python/sglang/srt/environ.py` (SGLANG_INIT_NEW_TOKEN_RATIO 0.7,
  SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600,
  SGLANG_RETRACT_DECODE_STEPS 20; `global_config.py` before it, same values), sglang commit
  00550cd. A request's output length is its max_tokens, as benchmarks send them
  (`ignore_eos`); the 4,096-token clip on that estimate (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION)
  is applied to each request's whole output.

Steps: vLLM V1 and TensorRT-LLM's in-flight batching mix a prefill chunk with the decodes
under the token budget; SGLang (without --enable-mixed-chunk) and vLLM V0 (without chunked
prefill) run a prefill batch as a step of its own whenever one can start, the decodes waiting
(`InstanceModel.separate_prefill`). Either way the step model times the step from all of its
tokens at once.
"""

from __future__ import annotations

from typing import Any, Protocol

from kvplan.simulate.requests import Req


class Scheduling(Protocol):
    """What a policy reads of an instance (`InstanceState` has it)."""

    decoding: dict[int, Req]
    prefilling: list[Req]
    alloc: Any  # free_blocks: blocks no request holds

    def decoders_generated(self) -> int: ...

    def generated_now(self, req: Req) -> int: ...


POLICIES = ("continuous", "trtllm-guaranteed-no-evict", "trtllm-max-utilization", "sglang")
# The scheduler each engine runs when --scheduler is left to the engine.
ENGINE_DEFAULT = {"sglang": "sglang", "trtllm": "trtllm-guaranteed-no-evict"}
# Whether an engine chunks long prompts when --chunked-prefill is left to it: TensorRT-LLM's
# LLM API and trtllm-serve default to enable_chunked_prefill=False (tensorrt_llm/llmapi/
# llm_args.py, commands/serve.py get_llm_args; the TensorRT engines' executor default
# enable_chunked_context is false too), and without it a prompt longer than max_num_tokens
# is refused ("The sum of prompt length …, query length … should not exceed max_num_tokens",
# llmapi/llm.py _check_arguments). vLLM V1 and SGLang (chunked_prefill_size) chunk.
CHUNKS_BY_DEFAULT = {"trtllm": False}

SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS = 600
SGLANG_RETRACT_DECODE_STEPS = 20
SGLANG_CLIP_MAX_NEW_TOKENS = 4096
# Decode steps a jump may take while a request waits under SGLang: its ratio falls each
# step, so a request may become admissible inside a longer run.
SGLANG_JUMP_STEPS = 16


class Policy:
    """vLLM V1's rules (see the module docstring); the base the others override."""

    name = "continuous"
    evicts = True
    jump_limit: int | None = None  # most decode steps one jump may take while requests wait

    def admits(self, state: Scheduling, req: Req) -> bool:
        """Whether `req` may start now, beyond its first blocks being free."""
        return True

    def started(self, req: Req) -> None:
        """`req` took its first blocks."""

    def stopped(self, req: Req) -> None:
        """`req` left the running set (returned or preempted)."""

    def victim(self, state: Scheduling) -> Req:
        """The running request that gives way when blocks run out: the newest."""
        newest = max(state.decoding, default=-1)
        for req in state.prefilling:
            if req.order > newest:
                newest = req.order
        return state.decoding.get(newest) or next(r for r in state.prefilling if r.order == newest)

    def preempted(self, state: Scheduling) -> None:
        """Requests were preempted on this step."""

    def decoded(self, steps: int) -> None:
        """The running requests took `steps` decode steps."""


class GuaranteedNoEvict(Policy):
    """TensorRT-LLM GUARANTEED_NO_EVICT: reserve every running request's blocks to completion."""

    name = "trtllm-guaranteed-no-evict"
    evicts = False

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.committed_blocks = 0  # Σ blocks the running requests hold at completion

    def admits(self, state: Scheduling, req: Req) -> bool:
        return self.committed_blocks + req.final_blocks <= self.num_blocks

    def started(self, req: Req) -> None:
        self.committed_blocks += req.final_blocks

    def stopped(self, req: Req) -> None:
        self.committed_blocks -= req.final_blocks


class MaxUtilization(Policy):
    """TensorRT-LLM MAX_UTILIZATION: vLLM's rules (pause the last started request)."""

    name = "trtllm-max-utilization"


class SglangPolicy(Policy):
    """SGLang's new-token-ratio admission, its decay, and retraction (module docstring)."""

    name = "sglang"
    jump_limit = SGLANG_JUMP_STEPS

    def __init__(self, tokens_per_block: int, conservativeness: float = 1.0) -> None:
        self.init_ratio = min(SGLANG_INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)
        self.min_ratio = min(self.init_ratio * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.decay = (self.init_ratio - self.min_ratio) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
        self.ratio = self.init_ratio
        self.tokens_per_block = tokens_per_block
        self.running_output_tokens = 0  # Σ clipped max output of the running requests

    @staticmethod
    def _output(req: Req) -> int:
        return min(req.output, SGLANG_CLIP_MAX_NEW_TOKENS)

    def admits(self, state: Scheduling, req: Req) -> bool:
        # Remaining output of the running ones: Σ output − Σ generated so far.
        generated = sum(r.generated for r in state.prefilling) + state.decoders_generated()
        remaining = max(self.running_output_tokens - generated, 0)
        free_tokens = state.alloc.free_blocks * self.tokens_per_block
        wanted = req.target + self._output(req) - req.generated
        return wanted + self.ratio * remaining <= free_tokens

    def started(self, req: Req) -> None:
        self.running_output_tokens += self._output(req)

    def stopped(self, req: Req) -> None:
        self.running_output_tokens -= self._output(req)

    def victim(self, state: Scheduling) -> Req:
        """The fewest output tokens so far, the longest prompt on a tie (retract_decode)."""
        running = [*state.prefilling, *state.decoding.values()]
        return min(running, key=lambda r: (state.generated_now(r), -r.prompt, -r.order))

    def preempted(self, state: Scheduling) -> None:
        running = [*state.prefilling, *state.decoding.values()]
        decoded = sum(state.generated_now(r) for r in running)
        total = sum(self._output(r) for r in running)
        estimate = (decoded + SGLANG_RETRACT_DECODE_STEPS * len(running)) / (total + 1)
        self.ratio = min(1.0, estimate)

    def decoded(self, steps: int) -> None:
        self.ratio = max(self.ratio - steps * self.decay, self.min_ratio)


def policy(
    name: str, num_blocks: int, tokens_per_block: int, conservativeness: float = 1.0
) -> Policy:
    """The policy named `name` (one of POLICIES) for a pool of `num_blocks` blocks;
    `conservativeness` is SGLang's --schedule-conservativeness (sglang only)."""
    if name == "trtllm-guaranteed-no-evict":
        return GuaranteedNoEvict(num_blocks)
    if name == "trtllm-max-utilization":
        return MaxUtilization()
    if name == "sglang":
        return SglangPolicy(tokens_per_block, conservativeness)
    return Policy()
