"""SkuSpec: a GPU/accelerator SKU from its public datasheet."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kvplan.specs.common import (
    Aliases,
    Bytes,
    BytesPerS,
    FlopPerS,
    GpuCount,
    Name,
    Names,
    UnitCount,
    _Spec,
)


class SkuSpec(_Spec):
    """A GPU/accelerator SKU, from its public datasheet."""

    name: Name = Field(description="catalogue name, e.g. h100-sxm")
    aliases: Aliases = Field(
        (), description="other names, incl. the device name torch/nvidia-smi reports"
    )
    vendor: Literal["nvidia", "amd", "intel", "google", "aws", "other"] = Field(
        description="vendor"
    )
    family: Name = Field(description="product family for --sku filters, e.g. h100")
    compute_capability: str | None = Field(
        None,
        pattern=r"^([0-9]{1,2}\.[0-9]|gfx[0-9a-f]{3,4})$",
        description="NVIDIA compute capability (9.0 = Hopper) or AMD gfx target (gfx942): "
        "engines pick kernels, hence block sizes, by it",
    )
    memory_bytes: Bytes = Field(description="device memory in bytes, exact")
    memory_basis: str = Field(
        min_length=1,
        description="how memory_bytes was derived: datasheet GB (10^9) or GiB, or nvidia-smi total",
    )
    runtime_memory_bytes: Bytes | None = Field(
        None,
        description="device memory in bytes as the CUDA/ROCm runtime reports it "
        "(torch.cuda.mem_get_info() total; what vLLM multiplies by gpu_memory_utilization); "
        "below the nvidia-smi total. null: memory_bytes is used",
    )
    runtime_memory_basis: str | None = Field(
        None,
        description="where runtime_memory_bytes comes from: a public log line, or the rule used",
    )
    memory_type: str = Field(min_length=1, description="HBM3, HBM3e, GDDR6, ...")
    bandwidth_bytes_per_s: BytesPerS = Field(description="datasheet memory bandwidth, bytes/s")
    peak_flop_per_s: dict[str, FlopPerS] = Field(
        description="dense (not sparse) peak FLOP/s per dtype: bf16, fp16, fp8, int8, fp4, tf32, "
        "fp32, fp64"
    )
    interconnect: str | None = Field(None, description="GPU-to-GPU link, e.g. NVLink 4 900 GB/s")
    interconnect_bytes_per_s: BytesPerS | None = Field(
        None,
        description="GPU-to-GPU bandwidth in one direction, bytes/s (half the datasheet's "
        "bidirectional NVLink figure); what moves KV between instances. null: not stated",
    )
    interconnect_latency_s: float | None = Field(
        None,
        gt=0,
        lt=0.01,
        allow_inf_nan=False,
        description="time of one small all-reduce over the GPU-to-GPU link, seconds (the "
        "fixed cost a tensor-parallel step pays per collective); null: the step model's "
        "collective_latency_s",
    )
    interconnect_latency_basis: str | None = Field(
        None, min_length=1, description="where interconnect_latency_s comes from: the measurement"
    )
    host_link_bytes_per_s: BytesPerS | None = Field(
        None,
        description="GPU-to-host bandwidth in one direction, bytes/s (half the datasheet's "
        "bidirectional PCIe or C2C figure); what swaps KV to CPU memory. null: not stated",
    )
    max_gpus_per_node: GpuCount = Field(8, description="largest TP degree in one node")
    sm_count: UnitCount | None = Field(None, description="SMs / compute units")
    l2_bytes: Bytes | None = Field(None, description="last-level on-chip cache, bytes")
    source: str = Field(min_length=1, description="datasheet URL")
    notes: Names = Field((), description="caveats, conversions")
    price_per_hour: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="what one GPU costs per hour, in your currency (kvplan ships no prices; "
        "`kvplan recommend --rank price` ranks by it)",
    )

    @model_validator(mode="after")
    def _flop_dtypes(self) -> SkuSpec:
        allowed = {"bf16", "fp16", "fp8", "int8", "fp4", "tf32", "fp32", "fp64"}
        unknown = set(self.peak_flop_per_s) - allowed
        if unknown:
            raise ValueError(
                f"peak_flop_per_s has unknown dtype(s) {sorted(unknown)}; "
                f"allowed: {sorted(allowed)}"
            )
        if (self.interconnect_latency_s is None) != (self.interconnect_latency_basis is None):
            raise ValueError("give interconnect_latency_s together with interconnect_latency_basis")
        if (self.runtime_memory_bytes is None) != (self.runtime_memory_basis is None):
            raise ValueError("give runtime_memory_bytes together with runtime_memory_basis")
        if self.runtime_memory_bytes is not None and self.runtime_memory_bytes > self.memory_bytes:
            raise ValueError(
                f"runtime_memory_bytes {self.runtime_memory_bytes} exceeds memory_bytes "
                f"{self.memory_bytes}"
            )
        return self
