"""kvplan against two serving papers' own figures, through the CLI: predicted vs paper.

Usage:
    python bench/serving_papers.py            # both comparisons, one table each

- PagedAttention (Kwon et al., SOSP'23), Fig. 13: requests batched at once, OPT-13B on one
  A100-40GB, ShareGPT at 2 req/s and Alpaca at 30 req/s, vLLM and Orca (Max). kvplan runs
  `simulate` as vLLM V0 without chunked prefill (the paper's vLLM predates both V1 and chunked
  prefill; 0.5 is the oldest release kvplan follows), recompute preemption, max_model_len
  2,048, and the paper's own KV memory (Table 1: 12 GB, 15.7K slots); Orca (Max) is
  `--allocator reserve-max`. The figure compared is `running_mean` (requests prefilling or
  decoding, time-averaged). Lengths: the paper gives each dataset's means only; kvplan draws
  lognormal lengths with those means and sigma 1 (an assumption, not the paper's histograms).
- DistServe (Zhong et al., OSDI'24), the 13B example: OPT-13B (the paper's 13B model; the
  example does not name it) on A100-80GB, 512 in / 64 out, Poisson at the disaggregated
  goodput the authors report, P90 TTFT <= 0.4 s and P90 TPOT <= 0.04 s; `pools` as vLLM V0
  without chunked prefill (the colocated baseline: prefill steps stall the decodes). Goodput
  per GPU is `pools --goodput`: each layout pools picks, at the highest rate where 90 % of the
  requests meet both SLOs (DistServe's SLO attainment), ÷ its GPUs.

Every paper figure comes from tests/golden/serving_papers/*.yaml.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / "serving_papers"
PAGED = GOLDEN / "pagedattention_fig13_fig2.yaml"
DISTSERVE = GOLDEN / "distserve_goodput_example.yaml"
# vLLM as the papers ran it: V0's scheduler, prefill steps of their own.
VLLM_V0 = ("--engine-version", "0.5", "--no-chunked-prefill")
# Orca (Max) and vLLM, as kvplan's allocators.
ALLOCATORS = {"vllm": "paged", "orca_max": "reserve-max"}
DURATION = "600s"  # arrivals; the paper's traces are an hour, the drain stays small


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def kvplan_json(*args: str) -> dict:
    """`kvplan ARGS -f json`, parsed."""
    cmd = [sys.executable, "-m", "kvplan", *args, "-f", "json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def fig13_args(paper: dict, dataset: str, system: str) -> list[str]:
    """The `simulate` arguments for one Fig. 13 bar."""
    setup = paper["setup"]
    lengths = setup["datasets"][dataset]
    rate = paper["fig13_mean_batched_requests"][f"{dataset}_rate_rps"]
    slots = setup["table1_opt13b"]["memory_for_kv_cache_gb"]
    return [
        "simulate", setup["catalogue_model"], "-s", setup["sku"], *VLLM_V0,
        "--max-model-len", str(setup["max_sequence_length"]),
        "--kv-memory", f"{slots}GiB",  # 12 GiB of fp16 OPT-13B KV = Table 1's 15.7K slots
        "--block-size", str(setup["block_size_tokens"]),
        "--rate", str(rate), "--duration", DURATION,
        "--prompt-tokens", f"lognormal:mean={lengths['mean_input_tokens']},sigma=1",
        "--output-tokens", f"lognormal:mean={lengths['mean_output_tokens']},sigma=1",
        "--allocator", ALLOCATORS[system],
    ]  # fmt: skip


def fig13_rows() -> list[tuple[str, str, float, float]]:
    """(dataset, system, predicted running mean, paper's mean batched requests)."""
    paper = load(PAGED)
    rows = []
    for dataset in ("sharegpt", "alpaca"):
        for system in ALLOCATORS:
            run = kvplan_json(*fig13_args(paper, dataset, system))["runs"][0]
            measured = paper["fig13_mean_batched_requests"][dataset][system]
            rows.append((dataset, system, run["running_mean"], measured))
    return rows


def distserve_pools(rate: float | None = None, *extra: str) -> dict:
    """`pools EXTRA` for DistServe's example at `rate` (default: its disaggregated goodput)."""
    paper = load(DISTSERVE)
    setup, work = paper["setup"], paper["setup"]["workload"]
    slo = setup["slo"]
    rate = paper["measured"]["disaggregated"]["goodput_rps"] if rate is None else rate
    args = [
        "pools", "opt-13b", "-s", setup["sku"], *VLLM_V0,
        "--rate", str(rate),
        "--prompt-tokens", str(work["input_tokens"]),
        "--output-tokens", str(work["output_tokens"]),
        "--slo-ttft", f"{slo['ttft_p90_s']}s", "--slo-tpot", f"{slo['tpot_p90_s']}s",
        "--slo-percentile", "90", *extra,
    ]  # fmt: skip
    return kvplan_json(*args)["pools"][0]


def goodput_per_gpu(rate: float | None = None) -> tuple[float, float, str]:
    """(colocated, disaggregated) goodput per GPU, DistServe's way, from `pools --goodput`:
    the layouts pools chooses at `rate` (default: the paper's colocated goodput, where one
    colocated GPU suffices), each at the highest rate at which 90 % of the requests meet
    both P90 SLOs, ÷ its GPUs; and the disaggregated split."""
    paper = load(DISTSERVE)["measured"]
    rate = paper["colocated"]["goodput_rps_per_gpu"] if rate is None else rate
    found = {g["layout"]: g for g in distserve_pools(rate, "--goodput")["goodput"]}
    colocated, disaggregated = found["colocated"], found["disaggregated"]
    per_gpu = "goodput_requests_per_s_per_gpu"
    return colocated[per_gpu], disaggregated[per_gpu], disaggregated["split"]


def main() -> None:
    print("PagedAttention Fig. 13: mean batched requests (kvplan running_mean)")
    print(f"{'dataset':<9} {'system':<9} {'kvplan':>8} {'paper':>8} {'ratio':>6}")
    for dataset, system, predicted, measured in fig13_rows():
        ratio = predicted / measured
        print(f"{dataset:<9} {system:<9} {predicted:8.2f} {measured:8.2f} {ratio:6.2f}")
    paper = load(DISTSERVE)["measured"]
    pools = distserve_pools()
    colocated = paper["colocated"]["goodput_rps_per_gpu"]
    disaggregated = paper["disaggregated"]["goodput_rps_per_gpu"]
    ours = pools["disaggregated_requests_per_s_per_gpu"] / pools["colocated_requests_per_s_per_gpu"]
    print("\nDistServe 13B example at its disaggregated goodput (kvplan pools)")
    label = paper["disaggregated"]["split"]["label"]
    print(f"split        kvplan {pools['ratio']:<6} paper {label}")
    print(
        f"GPUs         kvplan {pools['disaggregated_gpus']} disaggregated vs "
        f"{pools['colocated_gpus']} colocated"
    )
    print(f"GPU ratio    kvplan {ours:.2f}x  paper {disaggregated / colocated:.2f}x")
    for rate in (colocated, paper["disaggregated"]["goodput_rps"]):
        ours_colocated, ours_disaggregated, split = goodput_per_gpu(rate)
        print(
            f"\nDistServe goodput per GPU of the layouts pools picks at {rate:g} req/s "
            "(pools --goodput: largest rate with 90 % of requests within both SLOs)"
        )
        print(f"colocated    kvplan {ours_colocated:5.2f} req/s  paper {colocated:5.2f}")
        ours_line = f"{split:<12} kvplan {ours_disaggregated:5.2f} req/s"
        print(f"{ours_line}  paper {disaggregated:5.2f} ({label})")
        gain = ours_disaggregated / ours_colocated
        print(f"gain         kvplan {gain:5.2f}x      paper {disaggregated / colocated:5.2f}x")


if __name__ == "__main__":
    main()
