"""`kvplan size` output: the JSON contract, the table, CSV, Markdown and --explain."""

from __future__ import annotations

from typing import Any

from kvplan.plan.sizing import SizeResult, formula_terms
from kvplan.report.render import (
    Format,
    Table,
    bar,
    emit,
    gib,
    human_bytes,
)


def size_record(result: SizeResult) -> dict[str, Any]:
    """The stable JSON contract of `kvplan size` (docs/commands/size.md); exact integers."""
    d = result.deployment
    weights = result.weights
    record: dict[str, Any] = {
        "model": d.model.name,
        "engine": d.engine.name,
        "context": result.context,
        "batch": result.batch,
        "lengths": list(result.lengths),
        "kv_dtype": d.kv_dtype,
        "weight_dtype": weights.weight_dtype,
        "tp": d.tp,
        "pp": d.pp,
        "gpus": d.gpus,
        "tokens_per_block": d.engine.tokens_per_block(d.model, d.options),
        "kv_bytes": result.kv_bytes,
        "kv_bytes_per_gpu": result.kv_bytes_per_gpu,
        "kv_bytes_per_token": result.kv_bytes_per_token,
        "kv_bytes_per_token_per_gpu": result.kv_bytes_per_token_per_gpu,
        "kv_bytes_per_request": result.kv_bytes_per_request,
        "kv_bytes_by_kind": result.kv_bytes_by_kind,
        "naive_kv_bytes": result.naive_kv_bytes,
        "full_reservation_kv_bytes": result.full_reservation_kv_bytes,
        "weights_bytes": weights.total_bytes,
        "weights_bytes_per_gpu": weights.per_gpu_bytes,
        "params": weights.params.total,
        "active_params": weights.params.active,
        "published_params": d.model.params,
        "max_context": d.model.max_context,
        "layers": result.layers,
    }
    fit = result.sku_fit
    if fit is not None:
        record |= {
            "sku": fit.sku.name,
            "memory_bytes": fit.memory_bytes,
            "free_bytes": fit.free_bytes,
            "fits": fit.fits,
        }
    record["notes"] = list(result.notes)
    return record


def _title(result: SizeResult) -> str:
    d = result.deployment
    lengths = (
        f"{result.batch} × {result.context:,} tokens"
        if len(set(result.lengths)) == 1
        else f"{result.batch} sequences of {min(result.lengths):,}–{result.context:,} tokens"
    )
    return (
        f"{d.model.name} · engine {d.engine.name} · KV {d.kv_dtype} · {lengths} · "
        f"tp {d.tp} × pp {d.pp}"
    )


def size_table(result: SizeResult) -> Table:
    """Rows a capacity planner reads: per token, per request, batch, weights, comparisons."""
    d = result.deployment
    table = Table(
        _title(result),
        ["quantity", "per GPU", "whole deployment"],
        ["quantity", "per_gpu", "total"],
    )

    def row(label: str, per_gpu: int | None, total: int, exact: bool = False) -> None:
        show = human_bytes if exact else gib
        table.add(
            [label, per_gpu, total],
            [label, show(per_gpu) if per_gpu is not None else "—", show(total)],
        )

    row("KV per token", result.kv_bytes_per_token_per_gpu, result.kv_bytes_per_token, exact=True)
    per_request_gpu = result.kv_bytes_per_request // d.tp if d.pp == 1 else None
    row(f"KV per request ({result.context:,} tokens)", per_request_gpu, result.kv_bytes_per_request)
    row(f"KV for the batch ({d.engine.name})", result.kv_bytes_per_gpu, result.kv_bytes)
    for kind, count in result.layers.items():
        total = result.kv_bytes_by_kind.get(kind, 0)
        row(f"  {kind} layers × {count}", None, total)
    row(
        f"weights ({result.weights.weight_dtype})",
        result.weights.per_gpu_bytes,
        result.weights.total_bytes,
    )
    params = result.weights.params
    table.add(
        ["params", None, params.total],
        [
            "params (computed)",
            "—",
            f"{params.total / 1e9:,.2f} B"
            + (f" (active {params.active / 1e9:,.2f} B)" if params.active != params.total else ""),
        ],
    )
    if result.full_reservation_kv_bytes is not None:
        table.notes.append(
            f"window-honoured KV (hybrid allocator) {gib(result.kv_bytes)}; full reservation "
            f"(every layer full length, an engine without a hybrid allocator) "
            f"{gib(result.full_reservation_kv_bytes)}"
        )
    kinds = set(result.layers)
    if d.model.attention.num_kv_heads < d.model.attention.num_heads or "mla" in kinds:
        ratio = result.naive_kv_bytes / max(result.kv_bytes, 1)
        table.notes.append(
            f"the textbook MHA formula (2·layers·hidden·L·e) would claim "
            f"{gib(result.naive_kv_bytes)} for this batch: {ratio:,.1f}× the real figure"
        )
    fit = result.sku_fit
    if fit is not None:
        picture = bar(
            [
                (fit.weights_bytes_per_gpu, "█"),
                (fit.kv_bytes_per_gpu, "▒"),
                (max(fit.free_bytes, 0), "░"),
            ],
            max(fit.memory_bytes, fit.weights_bytes_per_gpu + fit.kv_bytes_per_gpu),
        )
        verdict = "fits" if fit.fits else f"does NOT fit: short by {gib(-fit.free_bytes)}"
        table.add(
            [f"free on {fit.sku.name}", fit.free_bytes, None],
            [f"free on {fit.sku.name} ({gib(fit.memory_bytes)} per GPU)", gib(fit.free_bytes), "—"],
        )
        table.notes.append(
            f"{fit.sku.name} per GPU [{picture}] █ weights {gib(fit.weights_bytes_per_gpu)} "
            f"▒ KV {gib(fit.kv_bytes_per_gpu)} ░ free — {verdict} (no engine reserve; "
            "see `kvplan report` for vLLM/SGLang budgets)"
        )
    table.notes += list(result.notes)
    return table


def explain_lines(result: SizeResult) -> list[str]:
    """The KV formula with this model's numbers substituted, one line per layer kind."""
    d = result.deployment
    lines = [
        "KV bytes = Σ_layers Σ_sequences bytes_per_token(layer) × tokens_kept(layer, L)"
        f" × tp {d.tp}"
    ]
    for term in formula_terms(result):
        factors = " × ".join(f"{value:,} ({label})" for label, value in term.factors)
        if term.kind == "state":
            tokens = "1 state per sequence"
        else:
            kept = sorted(set(term.tokens_kept))
            tokens = (
                " + ".join(f"{n:,}" for n in term.tokens_kept)
                if len(kept) > 1
                else (f"{kept[0]:,} tokens kept × {len(term.tokens_kept)} sequences")
            )
        rule = {
            "full": "all L tokens",
            "sliding": f"min(L, window {d.model.layers.sliding_window or 0:,})",
            "chunked": f"((L−1) mod chunk {d.model.layers.chunk_size or 0:,}) + 1",
            "mla": "all L tokens, one latent, no ×2, no heads",
            "state": "constant",
            "shared": "reuses another layer",
            "mlp": "FFN-only block, no cache",
            "parallel": "all L tokens' K/V + one recurrent state per sequence",
            "cross": "the request's encoder tokens, fixed whatever L",
        }.get(term.kind, term.kind)
        lines.append(
            f"  {term.kind}: {factors} × ({tokens}; {rule}) × {term.layers} layers × {d.tp} GPUs"
            f" = {term.bytes_total:,} B ({gib(term.bytes_total)})"
        )
    lines.append(f"  exact total = {sum(t.bytes_total for t in formula_terms(result)):,} B")
    if d.engine.name != "exact":
        lines.append(f"  engine {d.engine.name} ({d.engine.summary}): {result.kv_bytes:,} B")
    return lines


def render_size(result: SizeResult, fmt: Format, explain: bool = False) -> None:
    """Print `result` in `fmt`."""
    record = size_record(result)
    if explain:
        record["explain"] = explain_lines(result)

    def table() -> Table:
        drawn = size_table(result)
        if explain:
            drawn.notes[:0] = explain_lines(result)
        return drawn

    emit(fmt, record, [record], table)
