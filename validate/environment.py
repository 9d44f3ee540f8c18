"""Where a verify run happened: GPU, driver, CUDA, torch, triton, kvplan version and commit.

Every probe is best-effort: a missing nvidia-smi or git (or a wheel install without a
checkout) gives null fields, never an error.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

_PROBE_TIMEOUT_S = 10
# nvidia-smi fields recorded around the run: throttled clocks explain a low result.
_CLOCK_FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu")


def _run(command: list[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, cwd=cwd, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def kvplan_commit() -> dict[str, Any]:
    """The git commit of the kvplan checkout this code runs from, and whether it is dirty."""
    here = Path(__file__).resolve().parent
    commit = _run(["git", "rev-parse", "HEAD"], cwd=here)
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here)
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def gpu_clocks(index: int) -> dict[str, str] | None:
    """SM/memory clocks (MHz), power (W) and temperature (C) from nvidia-smi, or None."""
    text = _run(
        [
            "nvidia-smi",
            f"--id={index}",
            f"--query-gpu={','.join(_CLOCK_FIELDS)}",
            "--format=csv,noheader,nounits",
        ]
    )
    if not text:
        return None
    values = [v.strip() for v in text.splitlines()[0].split(",")]
    return dict(zip(_CLOCK_FIELDS, values, strict=False))


def collect_environment(device: torch.device) -> dict[str, Any]:
    """The environment block of the record."""
    import triton

    from kvplan import __version__

    environment: dict[str, Any] = {
        "device": device.type,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": getattr(triton, "__version__", None),
        "cuda_runtime": torch.version.cuda,
        "kvplan": _version("kvplan") or __version__,
        **kvplan_commit(),
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
    }
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        properties = torch.cuda.get_device_properties(index)
        environment |= {
            "gpu_name": properties.name,
            "gpu_memory_bytes": int(properties.total_memory),
            "sm_count": int(properties.multi_processor_count),
            "compute_capability": f"{properties.major}.{properties.minor}",
            "l2_bytes": int(getattr(properties, "L2_cache_size", 0)) or None,
            "driver": _run(
                [
                    "nvidia-smi",
                    f"--id={index}",
                    "--query-gpu=driver_version",
                    "--format=csv,noheader",
                ]
            ),
            "clocks_before": gpu_clocks(index),
        }
    else:
        environment |= {
            "gpu_name": None,
            "gpu_memory_bytes": None,
            "sm_count": None,
            "driver": None,
            "cpu": platform.processor() or platform.machine(),
        }
    return environment
