"""`kvplan size` output: the JSON contract, the table, CSV, Markdown and --explain."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.api.results import SizeReport, dump
from kvplan.report.memory_split import MemorySplit, memory_bar
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


def _title(report: SizeReport) -> str:
    lengths = {s.tokens for s in report.sequences}
    lengths_text = (
        f"{report.batch:,} × {report.context:,} tokens"
        if len(lengths) == 1
        else f"{report.batch:,} sequences of {min(lengths):,}–{max(lengths):,} tokens"
    )
    parallel = f"tp {report.tp} × pp {report.pp}" + (f" × dp {report.dp}" if report.dp > 1 else "")
    return (
        f"{report.model} · engine {report.engine} · KV {report.kv_dtype} · {lengths_text} · "
        f"{parallel}"
    )


def size_table(report: SizeReport) -> Table:
    """Rows a capacity planner reads: per token, per request, batch, weights, comparisons."""
    table = Table(
        _title(report),
        ["quantity", "per GPU", "whole deployment"],
        ["quantity", "per_gpu", "total"],
    )
    _kv_rows(report, table)
    weights_rows(
        table,
        WeightsShown(
            report.weight_dtype,
            report.weights_bytes_per_gpu,
            report.checkpoint_weights_bytes_per_gpu,
            report.weights_bytes,
            report.engine,
            report.sku,
        ),
    )
    table.add(
        ["params", None, report.params],
        [
            "params (computed)",
            "—",
            f"{report.params / 1e9:,.2f} B"
            + (
                f" (active {report.active_params / 1e9:,.2f} B)"
                if report.active_params != report.params
                else ""
            ),
        ],
    )
    if report.sku is not None:
        _fit_rows(report, table)
    _comparison_notes(report, table)
    table.notes += list(report.notes)
    return table


@dataclass(frozen=True)
class WeightsShown:
    """The weight figures a quantity table shows: as the engine loads them on the SKU (None:
    no SKU) and the checkpoint's, per GPU and whole."""

    weight_dtype: str
    loaded_bytes_per_gpu: int
    checkpoint_bytes_per_gpu: int
    checkpoint_bytes: int
    engine: str
    sku: str | None


def weights_rows(table: Table, weights: WeightsShown) -> None:
    """Weights as the engine loads them on the SKU and, when that differs, the checkpoint's."""
    dtype = weights.weight_dtype
    if weights.sku is None or weights.loaded_bytes_per_gpu == weights.checkpoint_bytes_per_gpu:
        keys = ("weights_bytes_per_gpu", "weights_bytes")
        quantity_row(
            table,
            f"weights ({dtype})",
            weights.checkpoint_bytes_per_gpu,
            weights.checkpoint_bytes,
            keys,
        )
        return
    # vLLM loads more than the checkpoint: its RoPE cos/sin table, padded MXFP4 experts.
    quantity_row(
        table,
        f"weights ({dtype}, as {weights.engine} loads them on {weights.sku})",
        weights.loaded_bytes_per_gpu,
        None,
        ("weights_bytes_per_gpu", None),
    )
    quantity_row(
        table,
        "  checkpoint weights",
        weights.checkpoint_bytes_per_gpu,
        weights.checkpoint_bytes,
        ("checkpoint_weights_bytes_per_gpu", "weights_bytes"),
    )


def _kv_rows(result: SizeReport, table: Table) -> None:
    """KV per token, per request and for the batch: exact, by layer kind, and as charged."""
    engine = result.engine
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


def _fit_rows(result: SizeReport, table: Table) -> None:
    """The engine's budget on the SKU, what the batch leaves, and the verdict with a bar."""
    budget, kv_budget = result.budget, result.kv_budget_bytes_per_gpu
    free, uncertainty = result.free_bytes, result.kv_budget_uncertainty_bytes
    # Each is set with a SKU (SizeReport).
    assert budget is not None and kv_budget is not None and free is not None
    band = f" ± {gib(uncertainty)}" if uncertainty else ""
    quantity_row(
        table,
        f"KV budget on {result.sku} ({result.engine}){band}",
        kv_budget,
        None,
        ("kv_budget_bytes_per_gpu", None),
    )
    if free >= 0:
        quantity_row(table, "KV budget left", free, None, ("free_bytes", None))
    else:
        quantity_row(table, "KV budget short by", -free, None)
    # The same split and picture as `report`'s bar column, 40 cells wide.
    weights = result.weights_bytes_per_gpu
    split = MemorySplit.of(budget.total_bytes, weights, result.kv_bytes_per_gpu, kv_budget)
    picture = memory_bar(split, 40)
    beyond = f" (+{gib(split.overflow_bytes)})" if split.overflow_bytes else ""
    table.notes.append(
        f"{result.sku} per GPU [{picture}] █ weights {gib(weights)} ▒ KV "
        f"{gib(result.kv_bytes_per_gpu)} ! KV beyond the budget{beyond} ░ engine reserve and "
        "free — "
        f"{result.verdict} (requests of {result.context:,} tokens that fit: "
        f"{result.max_concurrency:,})"
    )
    table.notes.append(f"device memory: {budget.total_basis}")


def _comparison_notes(result: SizeReport, table: Table) -> None:
    """The window-honoured vs full-reservation figures, and the textbook formula's error."""
    if result.full_reservation_kv_bytes is not None:
        table.notes.append(
            f"window-honoured KV (exact) {gib(result.exact_kv_bytes)}; full reservation "
            f"(every layer full length, an engine without a hybrid allocator) "
            f"{gib(result.full_reservation_kv_bytes)}"
        )
    kinds = set(result.layers)
    if result.num_kv_heads < result.num_heads or "mla" in kinds:
        ratio = result.naive_kv_bytes / max(result.exact_kv_bytes, 1)
        table.notes.append(
            f"the textbook MHA formula (2·layers·hidden·L·e) would claim "
            f"{gib(result.naive_kv_bytes)} for this batch: {ratio:,.1f}× the real figure"
        )


def explain_lines(report: SizeReport) -> list[str]:
    """The KV formula with this model's numbers substituted, one line per layer kind."""
    lines = [
        "KV bytes = Σ_layers Σ_sequences bytes_per_token(layer) × tokens_kept(layer, L)"
        f" × tp {report.tp}"
    ]
    for term in report.formula_terms:
        factors = " × ".join(f"{f.value:,} ({f.label})" for f in term.factors)
        if term.kind == "state":
            tokens = "1 state per sequence"
        else:
            tokens = " + ".join(
                f"{kept.tokens:,} tokens kept × {plural(kept.count, 'sequence')}"
                for kept in term.tokens_kept
            )
        rule = {
            "full": "all L tokens",
            "sliding": f"min(L, window {term.window_tokens or 0:,})",
            "chunked": f"((L−1) mod chunk {term.window_tokens or 0:,}) + 1",
            "mla": "all L tokens, one latent, no ×2, no heads",
            "state": "constant",
            "shared": "reuses another layer",
            "mlp": "FFN-only block, no cache",
            "parallel": "all L tokens' K/V + one recurrent state per sequence",
            "cross": "the request's encoder tokens, fixed whatever L",
        }.get(term.kind, term.kind)
        lines.append(
            f"  {term.kind}: {factors} × ({tokens}; {rule}) × {plural(term.layers, 'layer')} × "
            f"{plural(report.tp, 'GPU')}"
            f" = {term.kv_bytes:,} B ({gib(term.kv_bytes)})"
        )
    lines.append(f"  exact total = {report.exact_kv_bytes:,} B")
    lines += weights_explain_lines(report)
    if report.engine != "exact":
        charged = {
            "page": f"its blocks ({report.tokens_per_block} tokens each)",
            "byte": "its bytes (a pool of bytes, no pages)",
            "slot": "one of the slots the launch allocates",
        }[report.kv_block_unit]
        lines.append(
            f"  engine {report.engine} ({report.engine_summary}): charges each request {charged} "
            f"= {report.kv_bytes:,} B"
        )
    return lines


# Fields the JSON gained for --explain and the notes: CSV keeps the columns it had.
NOT_IN_CSV = ("num_heads", "num_kv_heads", "formula_terms", "engine_summary", "kv_block_unit")


def render_size(report: SizeReport, fmt: Format, explain: bool = False) -> None:
    """Print `report` in `fmt`."""
    record = dump(report)
    if explain:
        record["explain"] = explain_lines(report)

    def table() -> Table:
        drawn = size_table(report)
        if explain:
            drawn.notes[:0] = explain_lines(report)
        return drawn

    flat = {k: v for k, v in record.items() if k not in NOT_IN_CSV}
    emit(fmt, record, [flat], table)
