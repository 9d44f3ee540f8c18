"""kvplan's prediction for one measured speed case (tests/golden/speed_cases), any checkout.

Run by bench/speed_errors.py in-process, or as `OTHER/.venv/bin/python bench/speed_predict.py`
with cases as JSON lines on stdin (one prediction a line on stdout) to time another checkout:
it imports whichever kvplan that interpreter has, so the code here sticks to what every
checkout since the step model's introduction (and the roofline before it) offers.

How each workload kind is predicted, through the public path:
- offline (every request at t = 0, as trtllm-bench throughput): `kvplan simulate` with
  `--offline` where the checkout has it, else Poisson arrivals at 10^6 req/s (all requests
  arrive within a millisecond: the same queue);
- rate: `kvplan simulate --rate R`, Poisson, the source's request count (up to 500);
- latency (one batch of B, as vLLM's benchmark_latency): `kvplan simulate` of B requests at
  t = 0; the batch latency is the makespan;
- concurrency (closed loop at C users): `kvplan simulate --concurrency C` where the checkout
  has it, else the steady state of the closed loop from the step model (`_closed_loop`).
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from typing import Any

OFFLINE_REQUESTS_CAP = 1000  # enough for the batch to reach its steady state and stay there
RATE_REQUESTS_CAP = 500
INSTANT_RATE = "1000000"


def _cli(args: list[str]) -> dict[str, Any]:
    """`kvplan ARGS -f json`, in this process, parsed."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    result = CliRunner().invoke(app, [*args, "-f", "json"])
    if result.exit_code != 0:
        raise RuntimeError(f"kvplan {' '.join(args)}: exit {result.exit_code}: {result.output}")
    return json.loads(result.stdout)


@lru_cache(maxsize=16)
def _has_option(command: str, option: str) -> bool:
    from typer.testing import CliRunner

    from kvplan.cli import app

    return option in CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout


def layout(case: dict[str, Any]) -> tuple[int, int, bool]:
    """(tp, dp, ep) in kvplan's terms: 'DEPn' (tp n, dp n, ep n in the case) is n attention
    replicas (tp 1 × dp n) with the experts spread over all n GPUs."""
    tp, dp, ep = case["tp"], case.get("dp", 1), case.get("ep", 1) > 1
    if dp == 1 and _sglang_dp_attention(case):
        return 1, tp, True
    if dp > 1:
        return max(tp // dp, 1), dp, ep
    return tp, 1, ep


def _sglang_dp_attention(case: dict[str, Any]) -> bool:
    """SGLang before 0.5 launched with --enable-dp-attention sets dp_size = tp_size
    (server_args.py: "Data parallel size is adjusted to be the same as tensor parallel size"):
    every GPU runs the attention of its own requests, and the MoE layers see all ranks'
    tokens with the experts sharded over every GPU, which kvplan's DEP layout times (tp 1 ×
    dp n with the experts over n GPUs; TP-sharded experts read the same bytes per GPU)."""
    version = re.match(r"\s*v?(\d+)\.(\d+)", str(case.get("engine_version", "")))
    return (
        case.get("engine") == "sglang"
        and "--enable-dp-attention" in str(case.get("notes", ""))
        and version is not None
        and (int(version.group(1)), int(version.group(2))) < (0, 5)
    )


def engine_of(source: dict[str, Any], case: dict[str, Any] | None = None) -> str:
    """The engine kvplan follows: the case's or the source's, vllm where it names another."""
    engine = (case or {}).get("engine") or source["engine"]
    return engine if engine in ("vllm", "sglang", "trtllm") else "vllm"


def lengths_of(work: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt, output) tokens per request: as stated, else the run's totals ÷ requests
    (ShareGPT runs state totals only: every request is then taken at the mean lengths)."""
    if "input_tokens" in work and "output_tokens" in work:
        return work["input_tokens"], work["output_tokens"]
    totals = work.get("total_input_tokens"), work.get("total_output_tokens")
    if all(totals) and work.get("requests"):
        count = work["requests"]
        return max(round(totals[0] / count), 1), max(round(totals[1] / count), 1)
    return None


def deployment_args(case: dict[str, Any], source: dict[str, Any]) -> list[str]:
    tp, dp, ep = layout(case)
    engine = engine_of(source, case)
    args = [case["model"], "-s", case["sku"], "--tp", str(tp), "--engine", engine]
    if dp > 1:
        args += ["--dp", str(dp)]
    if ep:
        args.append("--ep")
    args += ["--weight-dtype", case["weight_dtype"]]
    if case.get("kv_dtype", "auto") != "auto":
        args += ["--kv-dtype", case["kv_dtype"]]
    stated = case.get("engine_version") or source.get("engine_version", "")
    version = re.match(r"\s*v?(\d+\.\d+(\.\d+)?)", str(stated))
    if version:  # the release whose kernels, defaults and memory rules applied
        args += ["--engine-version", version.group(1)]
    return args


def predict(case: dict[str, Any], source: dict[str, Any], requests_cap: int | None = None) -> dict:
    """{metric: predicted value} for the metrics the case measured, and how it was predicted."""
    work = dict(case["workload"])
    kind = work["kind"]
    found = lengths_of(work)
    if found is None:
        return {"values": {}, "method": "skipped", "error": "the source states no lengths"}
    work["input_tokens"], work["output_tokens"] = found
    case = {**case, "workload": work}
    if kind == "concurrency" and not _has_option("simulate", "--concurrency"):
        return _closed_loop(case, source)
    lengths = [
        "--prompt-tokens",
        f"fixed:{work['input_tokens']}",
        "--output-tokens",
        f"fixed:{work['output_tokens']}",
    ]
    if kind == "offline":
        count = min(
            work.get("requests", OFFLINE_REQUESTS_CAP), requests_cap or OFFLINE_REQUESTS_CAP
        )
        how = ["--offline"] if _has_option("simulate", "--offline") else ["--rate", INSTANT_RATE]
        how += ["--requests", str(count)]
    elif kind == "latency":
        how = ["--rate", INSTANT_RATE, "--requests", str(work["batch"])]
    elif kind == "rate":
        count = min(work.get("requests", RATE_REQUESTS_CAP), RATE_REQUESTS_CAP)
        how = ["--rate", str(work["rate"]), "--requests", str(count)]
    else:  # concurrency, through the simulator's closed loop
        count = max(work.get("requests", 0), 8 * work["concurrency"], 64)
        how = ["--concurrency", str(work["concurrency"]), "--requests", str(min(count, 1000))]
    # TensorRT-LLM leaves chunked prefill off by default, but the measured runs are
    # trtllm-bench's, which then raises max_num_tokens until the longest prompt fits whole
    # beside a full batch; chunked steps of the default budget stand for that here, as the
    # constants were fitted (`--trtllm-bench` models the limits themselves).
    if engine_of(source, case) == "trtllm":
        how += ["--chunked-prefill"]
    run = _cli(["simulate", *deployment_args(case, source), *lengths, *how])["runs"][0]
    for key in ("ttft_s", "tpot_s", "itl_s"):  # no second token: no TPOT or ITL (None)
        run[key] = {q: (v * 1e3 if v is not None else None) for q, v in run[key].items()}
    gpus = case["gpus"]
    makespan = run["makespan_s"]
    values = {
        "output_tokens_per_s": run["output_tokens_per_s"],
        "output_tokens_per_s_per_gpu": run["output_tokens_per_s"] / gpus,
        "requests_per_s": run["throughput_requests_per_s"],
        "total_tokens_per_s": run["output_tokens_per_s"]
        * (work["input_tokens"] + work["output_tokens"])
        / work["output_tokens"],
        "ttft_ms_mean": run["ttft_s"]["mean"],
        "ttft_ms": run["ttft_s"]["mean"],
        "ttft_ms_p99": run["ttft_s"]["p99"],
        "tpot_ms_p99": run["tpot_s"]["p99"],
        "itl_ms_p99": run["itl_s"]["p99"],
        "ttft_ms_median": run["ttft_s"]["p50"],
        "itl_ms_mean": run["itl_s"]["mean"],
        "itl_ms_median": run["itl_s"]["p50"],
        "tpot_ms_mean": run["tpot_s"]["mean"],
        "tpot_ms_median": run["tpot_s"]["p50"],
        "latency_s": makespan,
    }
    if kind == "latency":
        values["output_tokens_per_s"] = work["batch"] * work["output_tokens"] / makespan
    method = "simulate " + " ".join(how[:2])
    return {"values": _measured_only(case, values), "method": method}


def _measured_only(case: dict[str, Any], values: dict[str, Any]) -> dict[str, float]:
    return {k: values[k] for k in case["measured"] if values.get(k) is not None}


def _closed_loop(case: dict[str, Any], source: dict[str, Any]) -> dict:
    """The steady state of C users each sending a request when the last returns.

    Per replica (n = C / dp users, at most what the KV pool holds at the mean length I + O / 2): a
    request's service is its prefill P (one prompt alone) plus O decode steps of d (the step at
    n sequences, context I + O / 2), and every other user's prefill stalls the decode batch once
    per cycle: T = O · d + n · P. Requests/s = n · dp / T; TTFT = P + d / 2 (the step in
    flight) + the expected wait behind the other users' prefills + the wait for a slot when C
    exceeds what the pool holds (C / throughput − T); ITL = (T − service TTFT) / (O − 1).
    """
    import kvplan

    try:
        from kvplan.perf.estimates import decode_step, prefill
    except ImportError:  # checkouts before the step model
        from kvplan.perf.roofline import decode_step, prefill  # type: ignore[no-redef]
    from kvplan.engine.batch import Batch

    work = case["workload"]
    tp, dp, ep = layout(case)
    kv = case.get("kv_dtype", "auto")
    deployment = kvplan.deployment(
        case["model"],
        engine=engine_of(source, case),
        tp=tp,
        dp=dp,
        ep=ep,
        weight_dtype=case["weight_dtype"],
        kv_dtype=None if kv == "auto" else kv,
    )
    sku = kvplan.load_sku(case["sku"])
    inp, out = work["input_tokens"], work["output_tokens"]
    # Users beyond what the KV pool holds at their mean length wait in the queue (Little's law).
    held = kvplan.capacity(deployment, sku, batch=1, context=inp + out // 2).max_concurrency
    running = max(min(work["concurrency"], held or 1) / dp, 1.0)
    context = inp + out // 2
    d = decode_step(deployment, Batch.uniform(context, max(round(running), 1)), sku).step_s
    p = prefill(deployment, inp, sku).time_s
    service = out * d + running * p
    service_ttft = p + d / 2 + (running - 1) * (p / service) * p / 2
    throughput = running * dp / service  # requests/s
    admission_wait = max(work["concurrency"] / throughput - service, 0.0)
    ttft = admission_wait + service_ttft
    itl = (service - service_ttft) / max(out - 1, 1)
    values = {
        "output_tokens_per_s": throughput * out,
        "ttft_ms_mean": ttft * 1e3,
        "ttft_ms_median": ttft * 1e3,
        "ttft_ms": ttft * 1e3,
        "itl_ms_mean": itl * 1e3,
        "itl_ms_median": itl * 1e3,
        "tpot_ms_mean": itl * 1e3,
        "tpot_ms_median": itl * 1e3,
    }
    return {"values": _measured_only(case, values), "method": "closed-loop steady state"}


def main() -> None:
    """Cases as JSON lines {"case": ..., "source": ...} on stdin; predictions on stdout."""
    for line in sys.stdin:
        item = json.loads(line)
        try:
            answer = predict(item["case"], item["source"], item.get("requests_cap"))
        except Exception as error:  # a case the checkout cannot run: reported, not fatal
            answer = {"values": {}, "method": "failed", "error": str(error).splitlines()[0][:300]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
