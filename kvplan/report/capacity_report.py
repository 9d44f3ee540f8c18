"""`kvplan report`: one row per model × SKU × TP, and vLLM's own log lines to compare with."""

from __future__ import annotations

from typing import Any

from kvplan.plan.capacity import Capacity
from kvplan.report.render import (
    Format,
    Table,
    bar,
    emit,
    gib,
    human_bytes,
)

SORT_KEYS = (
    "model",
    "sku",
    "tp",
    "max_context_tokens",
    "max_concurrency",
    "kv_capacity_tokens",
    "decode_tokens_per_s",
    "kv_budget_bytes_per_gpu",
)


def capacity_record(row: Capacity) -> dict[str, Any]:
    """One row of the JSON contract (docs/commands/report.md); exact integers, bytes per GPU."""
    d, budget = row.deployment, row.budget
    decode = row.decode() if row.verdict == "fits" else None
    record: dict[str, Any] = {
        "model": d.model.name,
        "sku": row.sku.name,
        "engine": d.engine.name,
        "tp": d.tp,
        "pp": d.pp,
        "kv_dtype": d.kv_dtype,
        "batch": row.request.batch,
        "context": row.context_tokens,
        "memory_bytes": row.sku.memory_bytes,
        "weights_bytes_per_gpu": row.weights_bytes_per_gpu,
        "kv_budget_bytes_per_gpu": budget.kv_bytes,
        "budget": {
            "utilization": budget.utilization,
            "requested_bytes": budget.requested_bytes,
            "activation_bytes": budget.activation_bytes,
            "non_torch_bytes": budget.non_torch_bytes,
            "cudagraph_bytes": budget.cudagraph_bytes,
            "fixed_kv_memory": budget.fixed,
        },
        "kv_capacity_tokens": row.kv_capacity_tokens,
        "max_context_tokens": row.max_context_tokens,
        "native_limit_binds": row.native_limit_binds,
        "max_concurrency": row.max_concurrency(),
        "kv_bytes_per_token_per_gpu": decode.kv_bytes_per_token_per_gpu if decode else None,
        "decode_tokens_per_s": round(decode.tokens_per_s, 1) if decode else None,
        "decode_step_s": decode.step_s if decode else None,
        "verdict": row.verdict,
    }
    if row.is_vllm and budget.kv_bytes > 0:
        cache = row.vllm_cache()
        record["vllm"] = {
            "version": row.request.vllm_version.text,
            "num_gpu_blocks": cache.num_blocks,
            "block_tokens": cache.block_tokens,
            "kv_cache_groups": len(cache.groups),
            "padding_layers": cache.padding_layers,
            "gpu_kv_cache_tokens": cache.gpu_kv_cache_tokens,
            "max_concurrency": round(cache.max_concurrency, 2),
            "needed_bytes": cache.needed_bytes,
            "estimated_max_model_len": None
            if cache.fits_one_request
            else row.vllm_estimated_max_model_len(),
            "max_num_batched_tokens": budget.max_num_batched_tokens,
        }
    return record


def vllm_log_lines(row: Capacity) -> list[str]:
    """The startup lines vLLM prints for this budget, in that version's wording."""
    budget, version = row.budget, row.request.vllm_version
    lines = [f"Available KV cache memory: {budget.kv_bytes / 2**30:.2f} GiB"]
    if budget.kv_bytes <= 0:
        return [*lines, "No available memory for the cache blocks."]
    cache = row.vllm_cache()
    mml = cache.max_model_len
    for padding, layers in cache.layout.padding:
        if padding / layers > 0.05:  # vLLM only warns above 5 %
            lines.append(
                f"Add {padding} padding layers, may waste at most {padding / layers:.2%} "
                "KV cache memory"
            )
    concurrency = (
        f"Maximum concurrency for {mml:,} tokens per request: {cache.max_concurrency:.2f}x"
    )
    if version.era == "v0":
        lines += [f"# GPU blocks: {cache.num_blocks}", concurrency]
    elif version.era == "v1":
        lines += [f"GPU KV cache size: {cache.gpu_kv_cache_tokens:,} tokens", concurrency]
    else:
        lines.append(f"GPU KV cache size: {cache.gpu_kv_cache_tokens:,} tokens, {concurrency}")
    if not cache.fits_one_request:
        lines.append(
            f"To serve at least one request with the models's max seq len ({mml}), "
            f"({cache.needed_bytes / 2**30:.2f} GiB KV cache is needed, which is larger than the "
            f"available KV cache memory ({budget.kv_bytes / 2**30:.2f} GiB). "
            "Based on the available "
            f"memory, the estimated maximum model length is {row.vllm_estimated_max_model_len()}."
        )
    return lines


def capacity_table(rows: list[Capacity], records: list[dict[str, Any]] | None = None) -> Table:
    """The per-SKU table; exact values in the records, rounded strings on screen."""
    first = rows[0]
    batch, context = first.request.batch, first.context_tokens
    table = Table(
        f"engine {first.deployment.engine.name} · KV {first.deployment.kv_dtype} · "
        f"longest context at batch {batch} · concurrency at {context:,} tokens",
        [
            "model",
            "sku",
            "tp",
            "weights/GPU",
            "KV budget/GPU",
            "KV tokens",
            f"max ctx @{batch}",
            f"max conc @{context:,}",
            "decode tok/s",
            "KV/token",
            "verdict",
            "weights|KV|free",
        ],
        [
            "model",
            "sku",
            "tp",
            "weights_bytes_per_gpu",
            "kv_budget_bytes_per_gpu",
            "kv_capacity_tokens",
            "max_context_tokens",
            "max_concurrency",
            "decode_tokens_per_s",
            "kv_bytes_per_token_per_gpu",
            "verdict",
            "bar",
        ],
    )
    for i, row in enumerate(rows):
        record = records[i] if records else capacity_record(row)
        budget = max(record["kv_budget_bytes_per_gpu"], 0)
        used_kv = 0
        if record["verdict"] == "fits":
            used_kv = min(budget, row.seq_bytes_per_gpu(context) * batch)
        picture = bar(
            [
                (row.weights_bytes_per_gpu, "█"),
                (used_kv, "▒"),
                (row.sku.memory_bytes - row.weights_bytes_per_gpu - used_kv, "░"),
            ],
            max(row.sku.memory_bytes, row.weights_bytes_per_gpu),
            width=12,
        )
        cap_mark = "*" if record["native_limit_binds"] else ""
        tokens_per_s = record["decode_tokens_per_s"]
        per_token = record["kv_bytes_per_token_per_gpu"]
        table.add(
            [record[k] for k in table.keys[:-1]] + [picture],
            [
                row.deployment.model.name,
                row.sku.name,
                f"{row.deployment.tp}" + (f"×{row.deployment.pp}" if row.deployment.pp > 1 else ""),
                gib(row.weights_bytes_per_gpu),
                gib(record["kv_budget_bytes_per_gpu"]),
                f"{record['kv_capacity_tokens']:,}",
                f"{record['max_context_tokens']:,}{cap_mark}",
                f"{record['max_concurrency']:,}",
                f"{tokens_per_s:,.0f}" if tokens_per_s else "—",
                human_bytes(per_token) if per_token else "—",
                record["verdict"],
                picture,
            ],
        )
    table.notes.append("* the model's native context limit binds, not memory")
    table.notes.append(
        "decode tok/s: roofline (weights + KV bytes read per step / bandwidth × efficiency), "
        "at the batch and context above; KV/token is per GPU"
    )
    return table


def render_report(rows: list[Capacity], fmt: Format, log_lines: bool) -> None:
    """Print the report; with `log_lines`, vLLM's startup lines for each distinct plan."""
    records = [capacity_record(r) for r in rows]
    flat = [{k: v for k, v in r.items() if not isinstance(v, dict)} for r in records]
    emit(fmt, records, flat, lambda: _table_with_log_lines(rows, records, log_lines))


def _table_with_log_lines(rows: list[Capacity], records: list[dict], log_lines: bool) -> Table:
    table = capacity_table(rows, records)
    if not log_lines:
        return table
    seen: dict[tuple[str, ...], list[str]] = {}
    for row in rows:
        label = f"{row.deployment.model.name} tp{row.deployment.tp} {row.sku.name}"
        seen.setdefault(tuple(vllm_log_lines(row)), []).append(label)
    version = rows[0].request.vllm_version.text
    for lines, labels in seen.items():
        more = f" (+{len(labels) - 3} more)" if len(labels) > 3 else ""
        table.notes.append(f"vLLM {version} log lines for {', '.join(labels[:3])}{more}:")
        table.notes += [f"    {line}" for line in lines]
    return table
