"""The workload and serving options `simulate` and `pools` share, declared once.

Two option groups (`cli.engine_options.option_group`): `@workload_options` hands a command
a `WorkloadOptions`, `@serving_options` a `ServingOptions`; each resolves its values inside
the command's error handler, so a bad value is one line and exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

import kvplan.limits as limits
from kvplan.cli.calibration_options import CALIBRATION_HELP
from kvplan.cli.engine_options import option_group
from kvplan.cli.options import count, file_path, fraction, rate


def _entry(
    kind: Any, default: Any, decl: str, help: str, shown: bool = False, parser: Any = None
) -> tuple:
    """One option as (annotation, default) for `option_group`; `parser` reads its text."""
    option = typer.Option(decl, help=help, show_default=shown, parser=parser)
    return Annotated[kind, option], default


def _given(parse: Any, text: str | None, option: str) -> Any:
    """`parse(text, option)`, or None when the option is absent: '' is given, and refused."""
    return None if text is None else parse(text, option)


DEFAULT_PROMPT = "lognormal:mean=1024,sigma=1"
DEFAULT_OUTPUT = "lognormal:mean=256,sigma=1"
DEFAULT_REQUESTS = 1000
DISTRIBUTION_HELP = (
    "a token count (512), fixed:N, uniform:LOW-HIGH, lognormal:mean=M,sigma=S (M the mean "
    "in tokens, S the standard deviation of ln tokens) or empirical:FILE (one count a line)"
)


def _rate_entry(alternatives: str) -> tuple:
    """--rate, naming the other workload kinds the command takes."""
    return _entry(
        float | None,
        None,
        "--rate",
        "Poisson arrivals, requests per second, a decimal from 0.000001 to 1,000,000,000 "
        f"(or give {alternatives})",
        parser=rate(),
    )


# name -> (annotation, default)
WORKLOAD_PARAMETERS: dict[str, tuple[Any, Any]] = {
    "rate": _rate_entry("--concurrency, --offline or --trace"),
    "concurrency": _entry(
        int | None,
        None,
        "--concurrency",
        "a closed loop of N clients: each sends its next request when its previous one "
        "returns (vllm bench serve --max-concurrency, genai-perf/AIPerf --concurrency); with "
        "--rate or --trace, at most N requests in flight",
        parser=count(limits.BATCH),
    ),
    "offline": _entry(
        bool,
        False,
        "--offline",
        "every request at t = 0, served as fast as the deployment can (trtllm-bench throughput)",
    ),
    "prompt_tokens": _entry(
        str, DEFAULT_PROMPT, "--prompt-tokens", f"prompt lengths: {DISTRIBUTION_HELP}", True
    ),
    "output_tokens": _entry(
        str, DEFAULT_OUTPUT, "--output-tokens", "output lengths, written as --prompt-tokens", True
    ),
    "trace": _entry(
        Path | None,
        None,
        "--trace",
        "requests from a CSV or JSONL trace: arrival_s, prompt_tokens, output_tokens, or the "
        "Azure LLM inference trace's TIMESTAMP, ContextTokens, GeneratedTokens",
        parser=file_path,
    ),
    "requests": _entry(
        int | None,
        None,
        "--requests",
        f"number of requests (default {DEFAULT_REQUESTS:,}; a trace: its first N)",
    ),
    "duration": _entry(
        str | None,
        None,
        "--duration",
        "arrivals during this long instead of --requests (600s, 10min)",
    ),
    "seed": _entry(
        int,
        0,
        "--seed",
        "random seed of the workload, 0 to 2^63-1",
        True,
        parser=count(limits.SEED, minimum=0),
    ),
}

SERVING_PARAMETERS: dict[str, tuple[Any, Any]] = {
    "scheduler": _entry(
        str,
        "engine",
        "--scheduler",
        "engine (the engine's own: sglang for SGLang, trtllm-guaranteed-no-evict for "
        "TensorRT-LLM, continuous otherwise), continuous (iteration-level, vLLM V1), "
        "trtllm-guaranteed-no-evict, trtllm-max-utilization, sglang (new-token-ratio "
        "admission, retraction), or static (request-level batches that decode until their "
        "longest request ends)",
        True,
    ),
    "allocator": _entry(
        str,
        "paged",
        "--allocator",
        "paged (blocks as requests grow), or a contiguous reservation per request placed "
        "first-fit: reserve-max (the context), reserve-pow2 (prompt + output rounded up to a "
        "power of 2), reserve-exact (prompt + true output)",
        True,
    ),
    "placement": _entry(
        str,
        "first-fit",
        "--placement",
        "where a reserve-* allocator puts a reservation: first-fit (the lowest hole that "
        "holds it) or buddy (a power-of-two run, split and merged with its buddy, as the "
        "PagedAttention paper's Orca baselines)",
        True,
    ),
    "trtllm_bench": _entry(
        bool,
        False,
        "--trtllm-bench",
        "TensorRT-LLM: the max batch size and max num tokens trtllm-bench throughput picks "
        "for the workload's mean prompt and output lengths (--max-num-seqs and "
        "--max-num-batched-tokens, when given, win)",
    ),
    "chunked_prefill": _entry(
        bool | None,
        None,
        "--chunked-prefill/--no-chunked-prefill",
        "split long prompts over steps of max_num_batched_tokens; default: the engine's, on "
        "for vLLM and SGLang, off for TensorRT-LLM (enable_chunked_prefill=False: a prompt "
        "longer than max_num_tokens is refused)",
    ),
    "preemption": _entry(
        str,
        "recompute",
        "--preemption",
        "when blocks run out the newest request is preempted by recompute, or by swap to host "
        "memory over the SKU's host link",
        True,
    ),
    "host_link_bandwidth": _entry(
        str | None,
        None,
        "--host-link-bandwidth",
        "GPU-to-host bytes/s one way for swap (64GB); default: the SKU's",
    ),
    "swap_space": _entry(
        str, "4GiB", "--swap-space", "host memory per GPU for swapped KV (vLLM --swap-space)", True
    ),
    "max_model_len": _entry(
        str | None,
        None,
        "--max-model-len",
        "longest prompt + output in tokens (8k, 32k); longer requests are rejected; default: "
        "the model's native context",
    ),
    "kv_window": _entry(
        str | None, None, "--kv-window", "evict all but the last W tokens' KV per request (tokens)"
    ),
    "kv_sinks": _entry(
        int, 0, "--kv-sinks", "... and keep the first S tokens too (attention sinks)", True
    ),
    "kv_bytes_factor": _entry(
        float,
        1.0,
        "--kv-bytes-factor",
        "KV bytes per token × this (a kernel or layout that pads the cache)",
        True,
    ),
    "step_time_factor": _entry(
        float, 1.0, "--step-time-factor", "every step time × this (0.8: a kernel 20 % faster)", True
    ),
    "bandwidth_efficiency": _entry(
        float | None,
        None,
        "--bandwidth-efficiency",
        "fraction of datasheet bandwidth every read of a step reaches, in place of the step "
        "model's fitted per-operation fractions (docs/speed-model.md)",
        parser=fraction(),
    ),
    "compute_efficiency": _entry(
        float | None,
        None,
        "--compute-efficiency",
        "fraction of dense peak FLOP/s large GEMMs and prefill attention reach, in place of "
        "the fitted fractions (docs/speed-model.md)",
        parser=fraction(),
    ),
    "calibration": _entry(Path | None, None, "--calibration", CALIBRATION_HELP, parser=file_path),
    "calibrate": _entry(
        Path | None,
        None,
        "--calibrate",
        "a plain `kvplan verify` record: its one measured bandwidth fraction replaces "
        "--bandwidth-efficiency (--calibration takes a full `verify --profile` file)",
        parser=file_path,
    ),
    "step_times": _entry(
        Path | None,
        None,
        "--step-times",
        "measured whole-step times, a CSV grid of batch_size, kv_tokens, prefill_tokens, "
        "step_s, interpolated in place of the speed model (--calibration corrects the model "
        "instead, and keeps it for steps not measured)",
        parser=file_path,
    ),
    "instances": _entry(int, 1, "--instances", "instances behind the router (× --dp)", True),
    "router": _entry(
        str,
        "round-robin",
        "--router",
        "round-robin, or least-loaded (fewest requests queued or running)",
        True,
    ),
    "slo_ttft": _entry(
        str | None, None, "--slo-ttft", "time-to-first-token target with a unit (2s, 500ms)"
    ),
    "slo_tpot": _entry(
        str | None, None, "--slo-tpot", "time-per-output-token target with a unit (50ms)"
    ),
}


@dataclass(frozen=True)
class WorkloadOptions:
    """The workload options as typed; `build()` makes the workload."""

    values: dict[str, Any]

    def build(self):
        """The requests: a trace, or Poisson arrivals from the length distributions."""
        from kvplan.errors import KvplanError
        from kvplan.simulate import (
            offline_workload,
            parse_distribution,
            parse_seconds,
            poisson_workload,
            read_trace,
        )

        v = self.values
        duration = _given(parse_seconds, v["duration"], "--duration")
        requests = v["requests"]
        concurrency, offline = v.get("concurrency"), v.get("offline", False)
        if requests is not None and requests < 1:
            raise KvplanError(f"--requests: {requests} must be at least 1")
        if v["trace"] is not None:
            if v["rate"] is not None or offline:
                flag = "--rate" if v["rate"] is not None else "--offline"
                raise KvplanError(
                    f"give {flag} or --trace, not both (a trace has its own arrivals)"
                )
            trace = read_trace(v["trace"], requests=requests, duration_s=duration)
            return trace if concurrency is None else trace.capped(concurrency)
        if offline and (v["rate"] is not None or concurrency is not None):
            flag = "--rate" if v["rate"] is not None else "--concurrency"
            raise KvplanError(
                f"give --offline or {flag}, not both: offline sends every request at t = 0"
            )
        if v["rate"] is None and not offline and concurrency is None:
            loop = " --concurrency N," if "concurrency" in v else ""
            raise KvplanError(
                f"give --rate R (requests per second),{loop} --offline or --trace FILE"
            )
        if requests is not None and duration is not None:
            raise KvplanError("give --requests or --duration, not both")
        prompt = parse_distribution(v["prompt_tokens"], "--prompt-tokens")
        output = parse_distribution(v["output_tokens"], "--output-tokens")
        if v["rate"] is None:  # offline, or a closed loop: no arrival clock to run for
            if duration is not None:
                flag = "--offline" if offline else "--concurrency"
                raise KvplanError(f"--duration: {flag} has no arrival rate; give --requests")
            return offline_workload(
                prompt,
                output,
                requests=requests or DEFAULT_REQUESTS,
                seed=v["seed"],
                max_concurrency=concurrency,
            )
        if requests is None and duration is None:
            requests = DEFAULT_REQUESTS
        made = poisson_workload(
            v["rate"], prompt, output, requests=requests, duration_s=duration, seed=v["seed"]
        )
        return made if concurrency is None else made.capped(concurrency)

    def check_fits(self, max_model_len: int) -> None:
        """Refuse synthetic lengths whose every request is longer than the context."""
        from kvplan.errors import KvplanError
        from kvplan.simulate import parse_distribution

        v = self.values
        if v["trace"] is not None:
            return  # a trace's long rows are counted as rejected, row by row
        shortest = parse_distribution(v["prompt_tokens"], "--prompt-tokens").smallest_tokens
        shortest += parse_distribution(v["output_tokens"], "--output-tokens").smallest_tokens
        if shortest > max_model_len:
            raise KvplanError(
                f"--prompt-tokens/--output-tokens: every request is at least {shortest:,} "
                f"tokens, longer than max_model_len {max_model_len:,}"
            )


@dataclass(frozen=True)
class ServingOptions:
    """The serving options as typed; `config()` makes the simulation's configuration."""

    values: dict[str, Any]

    def resolve(self, sku, label: str = ""):
        """(SimConfig for `sku`, notes): reads the step-time table and the verify record."""
        from kvplan.cli.calibration_options import calibrated_efficiency as calibration_efficiency
        from kvplan.errors import KvplanError
        from kvplan.perf.efficiency import Efficiency
        from kvplan.simulate import SimConfig, Slo, parse_seconds
        from kvplan.simulate.calibration import calibrated_efficiency
        from kvplan.simulate.step_table import read_step_table
        from kvplan.units import parse_bytes, parse_tokens

        v = self.values
        efficiency = Efficiency(v["bandwidth_efficiency"], v["compute_efficiency"])
        notes: list[str] = []
        given = [f for f in ("calibration", "calibrate", "step_times") if v[f] is not None]
        if len(given) > 1:
            first, second = ("--" + f.replace("_", "-") for f in given[:2])
            raise KvplanError(f"give {first} or {second}, not both: both set step times")
        if v["calibrate"] is not None:
            efficiency, notes = calibrated_efficiency(v["calibrate"], efficiency, sku.name)
        efficiency, more = calibration_efficiency(v["calibration"], sku, efficiency)
        notes += more
        link = v["host_link_bandwidth"]
        config = SimConfig(
            scheduler=v["scheduler"],
            allocator=v["allocator"],
            placement=v["placement"],
            trtllm_bench=v["trtllm_bench"],
            chunked_prefill=v["chunked_prefill"],
            preemption=v["preemption"],
            max_model_len=_given(parse_tokens, v["max_model_len"], "--max-model-len"),
            kv_window_tokens=_given(parse_tokens, v["kv_window"], "--kv-window"),
            kv_sink_tokens=v["kv_sinks"],
            kv_bytes_factor=v["kv_bytes_factor"],
            step_time_factor=v["step_time_factor"],
            efficiency=efficiency,
            step_table=read_step_table(v["step_times"]) if v["step_times"] else None,
            host_link_bytes_per_s=_given(parse_bytes, link, "--host-link-bandwidth"),
            swap_space_bytes=parse_bytes(v["swap_space"], "--swap-space"),
            instances=v["instances"],
            router=v["router"],
            slo=Slo(
                _given(parse_seconds, v["slo_ttft"], "--slo-ttft"),
                _given(parse_seconds, v["slo_tpot"], "--slo-tpot"),
            ),
            label=label,
        )
        return config, notes


workload_options = option_group(WORKLOAD_PARAMETERS, "workload_options", WorkloadOptions)
# recommend's own --concurrency (requests held at once) is the closed loop's N there.
recommend_workload_options = option_group(
    {name: entry for name, entry in WORKLOAD_PARAMETERS.items() if name != "concurrency"},
    "workload_options",
    WorkloadOptions,
)
# pools sizes pools for arrival times: no closed loop (it would couple the two pools).
POOLS_WORKLOAD_PARAMETERS = {
    **{name: entry for name, entry in WORKLOAD_PARAMETERS.items() if name != "concurrency"},
    "rate": _rate_entry("--offline or --trace"),
}
pools_workload_options = option_group(
    POOLS_WORKLOAD_PARAMETERS, "workload_options", WorkloadOptions
)
serving_options = option_group(SERVING_PARAMETERS, "serving_options", ServingOptions)
