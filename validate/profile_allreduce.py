"""The all-reduce `verify --profile` times over every visible GPU (torch.distributed, NCCL).

One process per GPU (torch.multiprocessing), each all-reducing a bf16 buffer of each size;
rank 0's median of CUDA-event times per size is the point. One GPU, or none: no point, and a
note says so.
"""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch

SIZES_BYTES = (2**16, 2**20, 16 * 2**20, 64 * 2**20)
REPEATS, WARMUP = 20, 5


def all_reduce_points(device: torch.device) -> tuple[list[dict[str, Any]], list[str]]:
    """(points, notes): one point per size over all visible GPUs."""
    if device.type != "cuda":
        return [], ["all-reduce: not timed on CPU"]
    gpus = torch.cuda.device_count()
    if gpus < 2:
        return [], [f"all-reduce: {gpus} GPU visible; needs at least 2 (collectives not measured)"]
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "times.txt"
        port = _free_port()
        mp.spawn(_worker, args=(gpus, port, str(result)), nprocs=gpus, join=True)
        times = [float(line) for line in result.read_text().split()]
    points = [
        {"gpus": gpus, "bytes": size, "seconds": seconds}
        for size, seconds in zip(SIZES_BYTES, times, strict=True)
    ]
    return points, []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _worker(rank: int, gpus: int, port: int, result: str) -> None:
    import torch.distributed as dist

    os.environ.setdefault("NCCL_DEBUG", "WARN")
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=gpus
    )
    medians = []
    for size in SIZES_BYTES:
        buffer = torch.ones(size // 2, dtype=torch.bfloat16, device="cuda")
        times = []
        for i in range(WARMUP + REPEATS):
            dist.barrier()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dist.all_reduce(buffer)
            stop.record()
            stop.synchronize()
            if i >= WARMUP:
                times.append(start.elapsed_time(stop) / 1e3)
        medians.append(statistics.median(times))
    if rank == 0:
        Path(result).write_text("\n".join(repr(t) for t in medians))
    dist.destroy_process_group()
