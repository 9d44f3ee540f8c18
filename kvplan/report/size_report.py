"""`kvplan size` output: the JSON contract, the table, CSV, Markdown and --explain."""

from __future__ import annotations

from kvplan.api.results import SizeReport, dump
from kvplan.plan.sizing import SizeResult, formula_terms
from kvplan.report.capacity_report import MemorySplit, memory_bar
from kvplan.report.render import (
    Format,
    Table,
    emit,
    gib,
    human_bytes,
    plural,
    quantity_row,
)


def weights_explain_lines(report: SizeReport) -> list[str]:
    """Which weight bytes every TP rank holds whole and which it holds a share of."""
    weights, per_gpu = report.weights, report.weights.per_gpu
    shards = report.tp * report.dp if report.ep else report.tp
    lines = [
        f"weights per GPU ({weights.basis}) = split {human_bytes(per_gpu.split_bytes)} "
        f"(1/{report.tp} of the matrices, vocabulary, vision tower) + routed experts "
        f"{human_bytes(per_gpu.routed_expert_bytes)} (1/{shards}) + replicated "
        f"{human_bytes(per_gpu.replicated_bytes)} (norms, routers, per-tensor scales, "
        f"whole on every rank) = {human_bytes(per_gpu.total_bytes)}"
    ]
    if weights.bytes_by_role is not None and weights.bytes_by_dtype is not None:
        roles = ", ".join(f"{r} {human_bytes(b)}" for r, b in weights.bytes_by_role.items() if b)
        dtypes = ", ".join(f"{t} {human_bytes(b)}" for t, b in weights.bytes_by_dtype.items())
        lines.append(f"  checkpoint {weights.checkpoint}: {weights.tensors:,} tensors; {roles}")
        lines.append(f"  by dtype: {dtypes}")
        if weights.bytes_by_role.get("unloaded"):
            lines.append("  unloaded: layers past num_layers (multi-token prediction), not on GPUs")
    return lines


def _title(result: SizeResult) -> str:
    d, batch = result.deployment, result.batch
    lengths = (
        f"{batch.size:,} × {result.context:,} tokens"
        if batch.is_uniform
        else f"{batch.size:,} sequences of {batch.shortest:,}–{batch.longest:,} tokens"
    )
    parallel = f"tp {d.tp} × pp {d.pp}" + (f" × dp {d.dp}" if d.dp > 1 else "")
    return f"{d.model.name} · engine {d.engine.name} · KV {d.kv_dtype} · {lengths} · {parallel}"


def size_table(result: SizeResult) -> Table:
    """Rows a capacity planner reads: per token, per request, batch, weights, comparisons."""
    table = Table(
        _title(result),
        ["quantity", "per GPU", "whole deployment"],
        ["quantity", "per_gpu", "total"],
    )
    _kv_rows(result, table)
    weights_rows(table, result)
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
    if result.capacity is not None:
        _fit_rows(result, table)
    _comparison_notes(result, table)
    table.notes += list(result.notes)
    return table


def weights_rows(table: Table, result: SizeResult) -> None:
    """Weights as the engine loads them on the SKU and, when that differs, the checkpoint's."""
    weights, capacity = result.weights, result.capacity
    dtype = weights.weight_dtype
    if capacity is None or result.weights_bytes_per_gpu == weights.per_gpu_bytes:
        keys = ("weights_bytes_per_gpu", "weights_bytes")
        quantity_row(table, f"weights ({dtype})", weights.per_gpu_bytes, weights.total_bytes, keys)
        return
    # vLLM loads more than the checkpoint: its RoPE cos/sin table, padded MXFP4 experts.
    engine = result.deployment.engine.name
    quantity_row(
        table,
        f"weights ({dtype}, as {engine} loads them on {capacity.sku.name})",
        result.weights_bytes_per_gpu,
        None,
        ("weights_bytes_per_gpu", None),
    )
    quantity_row(
        table,
        "  checkpoint weights",
        weights.per_gpu_bytes,
        weights.total_bytes,
        ("checkpoint_weights_bytes_per_gpu", "weights_bytes"),
    )


def _kv_rows(result: SizeResult, table: Table) -> None:
    """KV per token, per request and for the batch: exact, by layer kind, and as charged."""
    engine = result.deployment.engine.name
    charged = engine != "exact"
    quantity_row(
        table,
        "KV per token",
        result.kv_bytes_per_token_per_gpu,
        result.kv_bytes_per_token,
        ("kv_bytes_per_token_per_gpu", "kv_bytes_per_token"),
        human_bytes,
    )
    if charged:
        quantity_row(
            table,
            f"KV per request ({result.context:,} tokens, {engine} charge)",
            result.kv_bytes_per_request_per_gpu,
            result.kv_bytes_per_request,
            ("kv_bytes_per_request_per_gpu", "kv_bytes_per_request"),
        )
    quantity_row(
        table,
        "KV for the batch (exact)",
        result.exact_kv_bytes_per_gpu,
        result.exact_kv_bytes,
        ("exact_kv_bytes_per_gpu", "exact_kv_bytes"),
    )
    for kind, count in result.layers.items():
        total = result.kv_bytes_by_kind.get(kind, 0)
        quantity_row(
            table, f"  {kind} layers × {count}", None, total, (None, f"kv_bytes_by_kind/{kind}")
        )
    if charged:
        quantity_row(
            table,
            f"KV for the batch ({engine} charge)",
            result.kv_bytes_per_gpu,
            result.kv_bytes,
            ("kv_bytes_per_gpu", "kv_bytes"),
        )


def _fit_rows(result: SizeResult, table: Table) -> None:
    """The engine's budget on the SKU, what the batch leaves, and the verdict with a bar."""
    capacity = result.capacity
    assert capacity is not None
    budget, sku = capacity.budget, capacity.sku
    band = f" ± {gib(budget.uncertainty_bytes)}" if budget.uncertainty_bytes else ""
    quantity_row(
        table,
        f"KV budget on {sku.name} ({result.deployment.engine.name}){band}",
        budget.kv_bytes,
        None,
        ("kv_budget_bytes_per_gpu", None),
    )
    free = result.free_bytes_per_gpu
    assert free is not None  # a SKU was given
    if free >= 0:
        quantity_row(table, "KV budget left", free, None, ("free_bytes", None))
    else:
        quantity_row(table, "KV budget short by", -free, None)
    # The same split and picture as `report`'s bar column, 40 cells wide.
    split = MemorySplit.of(
        budget.total_bytes, budget.weights_bytes, result.kv_bytes_per_gpu, budget.kv_bytes
    )
    picture = memory_bar(split, 40)
    beyond = f" (+{gib(split.overflow_bytes)})" if split.overflow_bytes else ""
    table.notes.append(
        f"{sku.name} per GPU [{picture}] █ weights {gib(budget.weights_bytes)} ▒ KV "
        f"{gib(result.kv_bytes_per_gpu)} ! KV beyond the budget{beyond} ░ engine reserve and "
        "free — "
        f"{capacity.verdict} (requests of {result.context:,} tokens that fit: "
        f"{capacity.max_concurrency():,})"
    )
    table.notes.append(f"device memory: {budget.total_basis}")


def _comparison_notes(result: SizeResult, table: Table) -> None:
    """The window-honoured vs full-reservation figures, and the textbook formula's error."""
    d = result.deployment
    if result.full_reservation_kv_bytes is not None:
        table.notes.append(
            f"window-honoured KV (exact) {gib(result.exact_kv_bytes)}; full reservation "
            f"(every layer full length, an engine without a hybrid allocator) "
            f"{gib(result.full_reservation_kv_bytes)}"
        )
    kinds = set(result.layers)
    if d.model.attention.num_kv_heads < d.model.attention.num_heads or "mla" in kinds:
        ratio = result.naive_kv_bytes / max(result.exact_kv_bytes, 1)
        table.notes.append(
            f"the textbook MHA formula (2·layers·hidden·L·e) would claim "
            f"{gib(result.naive_kv_bytes)} for this batch: {ratio:,.1f}× the real figure"
        )


def explain_lines(report: SizeReport) -> list[str]:
    """The KV formula with this model's numbers substituted, one line per layer kind."""
    result: SizeResult = report.source
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
            tokens = " + ".join(
                f"{kept:,} tokens kept × {plural(count, 'sequence')}"
                for kept, count in term.tokens_kept
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
            f"  {term.kind}: {factors} × ({tokens}; {rule}) × {plural(term.layers, 'layer')} × "
            f"{plural(d.tp, 'GPU')}"
            f" = {term.bytes_total:,} B ({gib(term.bytes_total)})"
        )
    lines.append(f"  exact total = {result.exact_kv_bytes:,} B")
    lines += weights_explain_lines(report)
    if d.engine.name != "exact":
        layout = result.layout
        charged = {
            "page": f"its blocks ({layout.tokens_per_block} tokens each)",
            "byte": "its bytes (a pool of bytes, no pages)",
            "slot": "one of the slots the launch allocates",
        }[layout.unit]
        lines.append(
            f"  engine {d.engine.name} ({d.engine.summary}): charges each request {charged} "
            f"= {result.kv_bytes:,} B"
        )
    return lines


def render_size(report: SizeReport, fmt: Format, explain: bool = False) -> None:
    """Print `report` in `fmt`."""
    record = dump(report)
    if explain:
        record["explain"] = explain_lines(report)

    def table() -> Table:
        drawn = size_table(report.source)
        if explain:
            drawn.notes[:0] = explain_lines(report)
        return drawn

    emit(fmt, record, [record], table)
