"""vLLM's startup check of the free memory it finds against the memory it is asked to hold.

V1's worker takes a memory snapshot before loading and refuses to start when the free memory
is below gpu_memory_utilization × total: "ValueError: Free memory on device (61.05/119.7 GiB)
on startup is less than desired GPU memory utilization (0.52, 62.24 GiB). Decrease GPU memory
utilization or reduce GPU memory used by other processes." (a public vLLM 0.11+ run; later
releases name the device, "Free memory on device cuda:0 (…)"). The releases before 0.11 were
not read for it: kvplan checks it from 0.11.
"""

from __future__ import annotations

from kvplan.engine.vllm_version import VllmVersion

GIB = 1 << 30
FREE_AT_START = "free_memory_at_start_bytes"  # the setting's declared name
CHECKED_FROM = (0, 11)


def free_memory_refusal(
    free: int | None, total: int, utilization: float, version: VllmVersion
) -> str | None:
    """vLLM's refusal when the free memory at startup is below the requested memory."""
    if free is None or version.major_minor < CHECKED_FROM:
        return None
    requested = total * utilization
    if free >= requested:
        return None
    return (
        f"vLLM {version.text} refuses to start: free memory on device "
        f"({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup is less than the desired GPU "
        f"memory utilization ({utilization:g}, {requested / GIB:.2f} GiB); lower the "
        "utilization or free the memory other processes hold"
    )
