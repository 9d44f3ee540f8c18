"""What a simulation is asked to do besides the deployment: scheduler, allocator, limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency

if TYPE_CHECKING:
    from kvplan.simulate.step_table import StepTable

# "engine": the deployment's engine's own (policies.ENGINE_DEFAULT; vLLM's is continuous).
SCHEDULERS = (
    "engine",
    "continuous",
    "static",
    "trtllm-guaranteed-no-evict",
    "trtllm-max-utilization",
    "sglang",
)
ALLOCATORS = ("paged", "reserve-max", "reserve-pow2", "reserve-exact")
PLACEMENTS = ("first-fit", "buddy")  # where a contiguous reservation goes (allocators.py)
PREEMPTIONS = ("recompute", "swap")
ROUTERS = ("round-robin", "least-loaded")
# vLLM V0 --swap-space: 4 GiB of CPU memory per GPU for swapped-out blocks.
DEFAULT_SWAP_SPACE_BYTES = 4 * 2**30
# Factors beyond these are typing slips (a 1000× cache or a step 1000× slower).
MAX_FACTOR = 1000.0
MAX_INSTANCES = 4096


@dataclass(frozen=True)
class Slo:
    """Latency targets a request must meet to count towards goodput (None: no target)."""

    ttft_s: float | None = None  # time to first token, seconds
    tpot_s: float | None = None  # time per output token after the first, seconds

    def met(self, ttft_s: float, tpot_s: float | None) -> bool:
        """Whether a request with these latencies meets every target."""
        if self.ttft_s is not None and ttft_s > self.ttft_s:
            return False
        return self.tpot_s is None or tpot_s is None or tpot_s <= self.tpot_s


@dataclass(frozen=True)
class SimConfig:
    """The serving options a simulation runs with (the deployment carries the engine's).

    Units: tokens for lengths and windows, bytes for memory, bytes/s for links, fractions and
    plain factors otherwise.
    """

    scheduler: str = "engine"
    allocator: str = "paged"
    placement: str = "first-fit"  # contiguous allocators only
    chunked_prefill: bool | None = None  # None: the engine's (policies.CHUNKS_BY_DEFAULT)
    # TensorRT-LLM runs with the max batch size and max num tokens trtllm-bench picks for the
    # workload's mean (prompt, output) tokens and its longest prompt (trtllm_bench.py;
    # `simulate` fills the lengths).
    trtllm_bench: bool = False
    trtllm_bench_lengths: tuple[float, float, int] | None = None
    preemption: str = "recompute"
    max_model_len: int | None = None  # None: the model's native context
    kv_window_tokens: int | None = None  # keep only the last W tokens (plus sinks)
    kv_sink_tokens: int = 0  # ... and the first S
    kv_bytes_factor: float = 1.0  # KV bytes per token × this (a kernel that pads the cache)
    step_time_factor: float = 1.0  # every step time × this (a faster or slower kernel)
    efficiency: Efficiency = DEFAULT_EFFICIENCY
    step_table: StepTable | None = None  # measured step times replace the roofline
    host_link_bytes_per_s: float | None = None  # None: the SKU's figure
    swap_space_bytes: int = DEFAULT_SWAP_SPACE_BYTES  # per GPU
    instances: int = 1
    router: str = "round-robin"
    slo: Slo = field(default_factory=Slo)
    label: str = ""  # how the report names this configuration

    def __post_init__(self) -> None:
        for option, value, allowed in (
            ("--scheduler", self.scheduler, SCHEDULERS),
            ("--allocator", self.allocator, ALLOCATORS),
            ("--placement", self.placement, PLACEMENTS),
            ("--preemption", self.preemption, PREEMPTIONS),
            ("--router", self.router, ROUTERS),
        ):
            if value not in allowed:
                given = repr(value) if len(str(value)) <= 40 else f"{str(value)[:40]!r}…"
                raise KvplanError(f"{option}: unknown {given} (allowed: {', '.join(allowed)})")
        for option, factor in (
            ("--kv-bytes-factor", self.kv_bytes_factor),
            ("--step-time-factor", self.step_time_factor),
        ):
            if not 0 < factor <= MAX_FACTOR:  # also refuses NaN
                raise KvplanError(f"{option}: {factor} must be in (0, {MAX_FACTOR:g}]")
        if self.placement != "first-fit" and self.allocator == "paged":
            raise KvplanError(
                f"--placement {self.placement}: places contiguous reservations; --allocator "
                "paged has none (give reserve-max, reserve-pow2 or reserve-exact)"
            )
        if self.kv_window_tokens is not None and self.kv_window_tokens < 1:
            raise KvplanError(f"--kv-window: {self.kv_window_tokens} must be at least 1 token")
        if self.kv_sink_tokens < 0:
            raise KvplanError(f"--kv-sinks: {self.kv_sink_tokens} must not be negative")
        if self.kv_sink_tokens and self.kv_window_tokens is None:
            raise KvplanError("--kv-sinks needs --kv-window: sinks are kept beside a window")
        if not 1 <= self.instances <= MAX_INSTANCES:
            raise KvplanError(f"--instances: {self.instances} must be in 1 – {MAX_INSTANCES}")
        if self.host_link_bytes_per_s is not None and not self.host_link_bytes_per_s > 0:
            raise KvplanError(f"--host-link-bandwidth: {self.host_link_bytes_per_s} must be > 0")
        if self.swap_space_bytes < 0:
            raise KvplanError(f"--swap-space: {self.swap_space_bytes} must not be negative")

    @property
    def kept_tokens_cap(self) -> int | None:
        """Tokens a request keeps at most under eviction (sinks + window), or None."""
        if self.kv_window_tokens is None:
            return None
        return self.kv_sink_tokens + self.kv_window_tokens
