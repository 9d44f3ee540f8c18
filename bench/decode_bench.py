"""Paged decode bandwidth on a GPU: Triton kernel vs a device-to-device copy and baselines.

Llama-3.1-8B attention geometry (32 query / 8 KV heads, head_dim 128), bf16 queries, bf16
or fp8 (e4m3) KV, pages scattered by a random permutation. For each (batch, context) it
checks the kernel against the float64 reference on a few sequences, then times it with
CUDA events after warm-up, rotating over enough pools that the KV read is at least 4× the
L2 cache (cold L2, as when every layer reads a different cache), and reports the median.

Useful bytes = KV (exact tokens, K and V) + q + out + block table + seq_lens; the split-K
partials (written and read back, 2 · B · Hq · S · (D + 1) · 4 bytes) are listed apart.
Bandwidth is decimal bytes/s, shown as a fraction of the datasheet figure and of a ≥ 2 GB
device-to-device copy timed in the same run.

Usage:
    python bench/decode_bench.py --csv decode_bench.csv
    python bench/decode_bench.py --cases 8x8192 --sweep-config   # num_warps × stages × tiles

Exits 0 with a message when there is no CUDA GPU.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

NUM_HEADS = 32  # Llama-3.1-8B config.json: num_attention_heads
NUM_KV_HEADS = 8  # num_key_value_heads
HEAD_DIM = 128  # head_dim (= hidden_size 4096 / 32 heads)
DEFAULT_CASES = "1x32768,8x8192,32x4096,128x1024,64x256"
H200_BANDWIDTH_BYTES_PER_S = 4.8e12  # NVIDIA H200 SXM datasheet: 4.8 TB/s
COPY_BYTES = 2 * 10**9  # ≥ 2 GB so the copy is far past L2 and launch overhead
FALLBACK_L2_BYTES = 60 * 2**20  # an H200 reports 60 MiB
TARGET_CASE = (32, 8192)  # batch x context where the kernel must reach the bar
TARGET_FRACTION_OF_COPY = 0.85


@dataclass
class Row:
    """One CSV row: a kernel at one shape and configuration."""

    kernel: str
    batch: int
    context_tokens: int
    kv_dtype: str
    num_splits: int
    num_warps: int
    num_stages: int
    tokens_per_tile: int
    pools: int
    median_us: float
    p10_us: float
    p90_us: float
    useful_bytes: int
    partial_bytes: int
    useful_bytes_per_s: float
    fraction_of_datasheet: float
    fraction_of_copy: float
    max_abs_err: float
    gpu: str


def _parse_cases(text: str) -> list[tuple[int, int]]:
    cases = []
    for item in text.split(","):
        batch, _, context = item.lower().partition("x")
        cases.append((int(batch), int(context)))
    return cases


def _time_us(torch, device, launch: Callable[[int], object], count: int, repeats: int, warmup: int):
    """Median, p10 and p90 in µs of ``launch(i)``, rotating i over ``count`` inputs.

    CUDA events on the current stream; on the CPU (``--cpu-smoke``) a wall clock.
    """
    on_gpu = device.type == "cuda"
    for i in range(warmup + count):  # JIT compile, allocator, every input touched once
        launch(i % count)
    times = []
    if on_gpu:
        torch.cuda.synchronize()
        events = []
        for i in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            launch(i % count)
            end.record()
            events.append((start, end))
        torch.cuda.synchronize()
        times = [start.elapsed_time(end) * 1e3 for start, end in events]
    else:
        for i in range(repeats):
            start_s = time.perf_counter()
            launch(i % count)
            times.append((time.perf_counter() - start_s) * 1e6)
    times.sort()
    quantiles = statistics.quantiles(times, n=10) if len(times) > 1 else times * 9
    return statistics.median(times), quantiles[0], quantiles[-1]


def _copy_bytes_per_s(torch, device, copy_bytes: int, repeats: int) -> float:
    """Device-to-device copy bandwidth, bytes read + written per second."""
    src = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    median_us, _, _ = _time_us(torch, device, lambda _: dst.copy_(src), 1, repeats, warmup=3)
    return 2 * copy_bytes / (median_us * 1e-6)


@dataclass
class Problem:
    """Pools, block tables and buffers for one (batch, context, dtype), several copies."""

    q: list  # [B, Hq, D] bf16 per pool set
    k_pools: list  # [N, P, Hkv, D] per pool set
    v_pools: list
    block_tables: list  # [B, max_blocks] int32
    seq_lens: list  # [B] int32
    k_scale: float
    v_scale: float


def _make_problem(torch, device, batch, context, kv_dtype, tokens_per_page, pools, seed) -> Problem:
    generator = torch.Generator(device=device).manual_seed(seed)
    pages_per_seq = math.ceil(context / tokens_per_page)
    num_pages = batch * pages_per_seq
    shape = (num_pages, tokens_per_page, NUM_KV_HEADS, HEAD_DIM)
    is_fp8 = kv_dtype == torch.float8_e4m3fn
    # fp8: unit-variance values stored at scale 1/2 (|x| ≤ ~5 → ≤ 10, well inside e4m3's 448).
    scale = 0.5 if is_fp8 else 1.0
    problem = Problem([], [], [], [], [], k_scale=scale, v_scale=scale)
    for _ in range(pools):
        pools_kv = []
        for _ in range(2):
            pool = torch.empty(shape, dtype=kv_dtype, device=device)
            for page in range(0, num_pages, 4096):  # in chunks: no fp32 copy of a whole pool
                chunk = torch.randn(
                    (min(4096, num_pages - page), *shape[1:]), device=device, generator=generator
                )
                pool[page : page + chunk.shape[0]] = (chunk / scale).to(kv_dtype)
            pools_kv.append(pool)
        problem.k_pools.append(pools_kv[0])
        problem.v_pools.append(pools_kv[1])
        order = torch.randperm(num_pages, device=device, generator=generator)
        problem.block_tables.append(order.view(batch, pages_per_seq).to(torch.int32))
        problem.seq_lens.append(torch.full((batch,), context, dtype=torch.int32, device=device))
        problem.q.append(
            torch.randn(batch, NUM_HEADS, HEAD_DIM, device=device, generator=generator).to(
                torch.bfloat16
            )
        )
    return problem


def _useful_bytes(batch, context, kv_dtype_bytes, tokens_per_page) -> int:
    kv = batch * context * NUM_KV_HEADS * HEAD_DIM * kv_dtype_bytes * 2
    q_and_out = 2 * batch * NUM_HEADS * HEAD_DIM * 2  # bf16
    tables = batch * math.ceil(context / tokens_per_page) * 4 + batch * 4
    return kv + q_and_out + tables


def _partial_bytes(batch, num_splits) -> int:
    return 0 if num_splits == 1 else 2 * batch * NUM_HEADS * num_splits * (HEAD_DIM + 1) * 4


def _sdpa_baseline(torch, problem: Problem, i: int):
    """PyTorch SDPA over pages gathered into contiguous K/V (a naive engine's decode)."""
    import torch.nn.functional as F

    table, q = problem.block_tables[i], problem.q[i]
    batch, context = q.shape[0], int(problem.seq_lens[i][0])

    def gather(pool, scale):
        dense = pool[table.long()].flatten(1, 2)[:, :context]  # [B, L, Hkv, D]
        dense = dense.to(torch.bfloat16) * scale if pool.dtype != torch.bfloat16 else dense
        return dense.transpose(1, 2)  # [B, Hkv, L, D]

    k = gather(problem.k_pools[i], problem.k_scale)
    v = gather(problem.v_pools[i], problem.v_scale)
    q = q.view(batch, NUM_HEADS, 1, HEAD_DIM)
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def _flashinfer_launcher(torch, problem: Problem, tokens_per_page: int):
    """FlashInfer's paged decode over the same pools, or None with the reason."""
    try:
        import flashinfer
    except ImportError as error:
        return None, f"flashinfer not importable ({error})"
    try:
        wrappers = []
        for i, table in enumerate(problem.block_tables):
            batch, pages_per_seq = table.shape
            context = int(problem.seq_lens[i][0])
            workspace = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
            wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
            indptr = torch.arange(batch + 1, dtype=torch.int32, device="cuda") * pages_per_seq
            last_page_len = context - (pages_per_seq - 1) * tokens_per_page
            wrapper.plan(
                indptr,
                table.flatten(),
                torch.full((batch,), last_page_len, dtype=torch.int32, device="cuda"),
                NUM_HEADS,
                NUM_KV_HEADS,
                HEAD_DIM,
                tokens_per_page,
                q_data_type=torch.bfloat16,
                kv_data_type=problem.k_pools[i].dtype,
            )
            wrappers.append(wrapper)

        def launch(i: int):
            return wrappers[i].run(
                problem.q[i],
                (problem.k_pools[i], problem.v_pools[i]),
                k_scale=problem.k_scale,
                v_scale=problem.v_scale,
            )

        launch(0)
        return launch, ""
    except Exception as error:  # API differences between FlashInfer versions
        return None, f"flashinfer failed: {type(error).__name__}: {error}"


@dataclass(frozen=True)
class Case:
    """One workload: B sequences of ``context`` tokens each."""

    batch: int
    context: int
    kv_name: str
    kv_dtype: object  # torch.dtype; torch is imported lazily
    tokens_per_page: int


def _describe(r: Row) -> str:
    # Baselines are timed, not checked: their error is NaN by construction.
    error = "not checked" if r.max_abs_err != r.max_abs_err else f"{r.max_abs_err:.1e}"
    return (
        f"B {r.batch:4d} L {r.context_tokens:6d} {r.kv_dtype:4s} {r.kernel:17s} "
        f"S {r.num_splits:2d} w{r.num_warps} s{r.num_stages} n{r.tokens_per_tile:<3d} "
        f"{r.median_us:9.1f} us  {r.useful_bytes_per_s / 1e12:6.3f} TB/s  "
        f"{r.fraction_of_datasheet:6.1%} of datasheet  {r.fraction_of_copy:6.1%} of copy  "
        f"err {error}  (+{r.partial_bytes / 1e6:.2f} MB partials)"
    )


def _bench_case(torch, args, device, case: Case, configs, l2_bytes, copy_bytes_per_s):
    """Rows for one workload: the Triton kernel per config, then the baselines."""
    from kvplan.kernels import paged_decode, paged_decode_reference
    from kvplan.kernels.config import default_num_splits

    batch, context, tokens_per_page = case.batch, case.context, case.tokens_per_page
    kv_dtype_bytes = torch.empty(0, dtype=case.kv_dtype).element_size()
    kv_bytes = batch * context * NUM_KV_HEADS * HEAD_DIM * kv_dtype_bytes * 2
    # Rotate over enough copies that the KV read between two uses of one copy is ≥ 4 × L2.
    pools = max(1, math.ceil(args.l2_multiple * l2_bytes / kv_bytes))
    problem = _make_problem(
        torch, device, batch, context, case.kv_dtype, tokens_per_page, pools, args.seed
    )
    num_splits = args.num_splits or default_num_splits(
        batch, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, context, tokens_per_page, device
    )
    useful = _useful_bytes(batch, context, kv_dtype_bytes, tokens_per_page)
    # Preallocated outside the timed region.
    out = torch.empty(batch, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16, device=device)
    mid_o = torch.empty(batch, NUM_HEADS, num_splits, HEAD_DIM, device=device)
    mid_lse = torch.empty(batch, NUM_HEADS, num_splits, device=device)
    datasheet = args.bandwidth_bytes_per_s

    def row(kernel, times, err, num_warps=0, num_stages=0, tile=0, splits=0, extra=0):
        median_us, p10_us, p90_us = times
        rate = useful / (median_us * 1e-6)
        return Row(
            kernel, batch, context, case.kv_name, splits, num_warps, num_stages, tile, pools,
            median_us, p10_us, p90_us, useful, extra, rate, rate / datasheet,
            rate / copy_bytes_per_s, err, "",
        )  # fmt: skip

    rows = []
    for num_warps, num_stages, tile in configs:

        def launch(i, num_warps=num_warps, num_stages=num_stages, tile=tile):
            return paged_decode(
                problem.q[i],
                problem.k_pools[i],
                problem.v_pools[i],
                problem.block_tables[i],
                problem.seq_lens[i],
                k_scale=problem.k_scale,
                v_scale=problem.v_scale,
                num_splits=num_splits,
                out=out,
                mid_o=mid_o,
                mid_lse=mid_lse,
                num_warps=num_warps,
                num_stages=num_stages,
                tokens_per_tile=tile,
            )

        try:
            launch(0)
        except Exception as error:  # e.g. out of shared memory at one sweep point
            print(f"  skip warps {num_warps} stages {num_stages} tile {tile}: {error}")
            continue
        # Correctness on the first sequences only: the float64 reference is slow.
        check = slice(0, min(batch, 4))
        want = paged_decode_reference(
            problem.q[0][check],
            problem.k_pools[0],
            problem.v_pools[0],
            problem.block_tables[0][check],
            problem.seq_lens[0][check],
            k_scale=problem.k_scale,
            v_scale=problem.v_scale,
        )
        err = (out[check].double() - want).abs().max().item()
        times = _time_us(torch, device, launch, pools, args.repeats, args.warmup)
        partial = _partial_bytes(batch, num_splits)
        rows.append(row("triton", times, err, num_warps, num_stages, tile, num_splits, partial))

    if not args.no_baselines:
        times = _time_us(torch, device, lambda i: _sdpa_baseline(torch, problem, i), pools, 20, 2)
        rows.append(row("torch_sdpa_gather", times, float("nan")))
        launch_flashinfer, reason = _flashinfer_launcher(torch, problem, tokens_per_page)
        if launch_flashinfer is None:
            print(f"  {reason}")
        else:
            times = _time_us(torch, device, launch_flashinfer, pools, args.repeats, args.warmup)
            rows.append(row("flashinfer", times, float("nan")))
    return rows


def build_parser() -> argparse.ArgumentParser:
    """The command line (bench/verify_gpu.sh's invocations are checked against it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=DEFAULT_CASES, help="BATCHxCONTEXT list, tokens")
    parser.add_argument("--kv-dtypes", default="bf16,fp8", help="comma list of bf16, fp8")
    parser.add_argument("--tokens-per-page", type=int, default=16, help="P, tokens per page")
    parser.add_argument("--num-splits", type=int, default=None, help="S; default: chosen")
    parser.add_argument(
        "--bandwidth-bytes-per-s",
        type=float,
        default=H200_BANDWIDTH_BYTES_PER_S,
        help="datasheet HBM bandwidth in bytes/s (default: H200, 4.8e12)",
    )
    parser.add_argument("--repeats", type=int, default=100, help="timed launches per row")
    parser.add_argument("--warmup", type=int, default=10, help="untimed launches first")
    parser.add_argument("--l2-multiple", type=float, default=4.0, help="KV read ≥ this × L2")
    parser.add_argument("--csv", default="decode_bench.csv", help="output CSV path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-baselines", action="store_true", help="skip SDPA / FlashInfer")
    parser.add_argument(
        "--sweep-config",
        action="store_true",
        help="also time num_warps {2,4,8} × num_stages {1,2,3} × tokens_per_tile {16,32,64}",
    )
    parser.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="no GPU: run the whole path once on tiny cases in the Triton interpreter "
        "(checks the script; its timings mean nothing)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; returns the process exit code."""
    args = build_parser().parse_args(argv)

    try:
        import torch
    except ImportError:
        print("decode_bench: torch is not installed; nothing to measure.")
        return 0
    if args.cpu_smoke:
        # Read when the kernels are decorated, i.e. at their import below.
        os.environ.setdefault("TRITON_INTERPRET", "1")
        # One timed launch each: the interpreter takes about a second per launch here, and
        # the smoke run checks the path, not the time.
        args.repeats, args.warmup = 1, 0
        if args.cases == DEFAULT_CASES:
            args.cases = "2x40"
        args.num_splits = args.num_splits or 2  # exercise the reduce stage too
        copy_bytes = 2**20
    elif not torch.cuda.is_available():
        print("decode_bench: no CUDA GPU here; timings need one. Nothing measured.")
        return 0
    else:
        copy_bytes = COPY_BYTES
    import triton

    from kvplan.kernels.config import default_tokens_per_tile

    if args.cpu_smoke:
        device, gpu, l2_bytes = torch.device("cpu"), "cpu (interpreter)", 2**16
        print("decode_bench: CPU smoke run in the Triton interpreter; timings mean nothing.")
    else:
        device = torch.device("cuda")
        properties = torch.cuda.get_device_properties(device)
        l2_bytes = getattr(properties, "L2_cache_size", 0) or FALLBACK_L2_BYTES
        gpu = properties.name
        print(f"{gpu}: {properties.multi_processor_count} SMs, L2 {l2_bytes / 2**20:.0f} MiB")
    print(f"torch {torch.__version__}, triton {triton.__version__}")
    copy_bytes_per_s = _copy_bytes_per_s(torch, device, copy_bytes, repeats=20)
    datasheet = args.bandwidth_bytes_per_s
    print(
        f"device-to-device copy: {copy_bytes_per_s / 1e12:.3f} TB/s "
        f"({copy_bytes_per_s / datasheet:.1%} of datasheet {datasheet / 1e12:.2f} TB/s)"
    )

    dtypes = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
    rows: list[Row] = [
        Row("d2d_copy", 0, 0, "", 0, 0, 0, 0, 1, 2 * copy_bytes / copy_bytes_per_s * 1e6, 0, 0,
            2 * copy_bytes, 0, copy_bytes_per_s, copy_bytes_per_s / datasheet, 1.0, 0.0, gpu)
    ]  # fmt: skip
    configs = (
        list(itertools.product([2, 4, 8], [1, 2, 3], [16, 32, 64]))
        if args.sweep_config
        else [(4, 2, default_tokens_per_tile(HEAD_DIM))]
    )
    for (batch, context), kv_name in itertools.product(
        _parse_cases(args.cases), args.kv_dtypes.split(",")
    ):
        case = Case(batch, context, kv_name, dtypes[kv_name], args.tokens_per_page)
        case_rows = _bench_case(torch, args, device, case, configs, l2_bytes, copy_bytes_per_s)
        for r in case_rows:
            r.gpu = gpu
            print(_describe(r))
        rows.extend(case_rows)
        if device.type == "cuda":
            torch.cuda.empty_cache()

    with open(args.csv, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    print(f"wrote {len(rows)} rows to {args.csv}")
    print(_target_line(rows))
    return 0


def _target_line(rows: list[Row]) -> str:
    """The kernel's bar: at 32 × 8k bf16, ≥ 85 % of the copy measured in the same run."""
    batch, context = TARGET_CASE
    candidates = [
        r
        for r in rows
        if r.kernel == "triton"
        and (r.batch, r.context_tokens, r.kv_dtype) == (*TARGET_CASE, "bf16")
    ]
    if not candidates:
        return f"target {batch} x {context} bf16: not in this run's cases"
    best = max(candidates, key=lambda r: r.fraction_of_copy)
    verdict = "meets" if best.fraction_of_copy >= TARGET_FRACTION_OF_COPY else "misses"
    return (
        f"target {batch} x {context} bf16: best {best.fraction_of_copy:.1%} of copy "
        f"(warps {best.num_warps}, stages {best.num_stages}, tile {best.tokens_per_tile}, "
        f"S {best.num_splits}): {verdict} the {TARGET_FRACTION_OF_COPY:.0%} bar"
    )


if __name__ == "__main__":
    sys.exit(main())
