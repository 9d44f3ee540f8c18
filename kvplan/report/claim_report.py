"""`kvplan claim` output: the bytes behind a long-context claim, and what to ask the vendor."""

from __future__ import annotations

from typing import Any

from kvplan.api.results import dump
from kvplan.api.results_check import ClaimReport
from kvplan.report.render import (
    Format,
    Table,
    emit,
    gib,
    human_bytes,
    plural,
    quantity_row,
)
from kvplan.report.size_report import WeightsShown, weights_rows

# Fields the JSON gained (the formula's terms, the budget): CSV keeps the columns it had.
NOT_IN_CSV = (
    "kv_budget_bytes_per_gpu",
    "kv_budget_uncertainty_bytes",
    "budget",
    "formula_terms",
    "concurrency_by_context",
)


def claim_record(report: ClaimReport) -> dict[str, Any]:
    """The JSON contract of `kvplan claim` (docs/commands/claim.md): the numbers, the formula
    with them, the questions to ask and the notes."""
    record = dump(report)
    del record["notes"]
    return record | {
        "formula": formula_lines(report),
        "questions": vendor_questions(report),
        "notes": notes(report),
    }


def formula_lines(sheet: ClaimReport) -> list[str]:
    """The KV formula with the model's numbers, one line per layer kind (whole deployment)."""
    lines = []
    for term in sheet.formula_terms:
        factors = " × ".join(f"{f.value:,} ({f.label})" for f in term.factors)
        kept = max(k.tokens for k in term.tokens_kept)
        tokens = "1 state" if term.kind == "state" else f"{kept:,} tokens kept"
        lines.append(
            f"{term.kind} × {plural(term.layers, 'layer')}: {factors} × {tokens} × "
            f"{plural(sheet.batch, 'request')} × {plural(sheet.tp, 'GPU')} = "
            f"{term.kv_bytes:,} B"
        )
    exact = sum(t.kv_bytes for t in sheet.formula_terms)
    lines.append(f"KV for the batch (exact) = {exact:,} B = {gib(exact)}")
    if sheet.kv_bytes_batch != exact:
        lines.append(
            f"KV for the batch ({sheet.engine}, paged/engine rounding) = {sheet.kv_bytes_batch:,} B"
        )
    lines.append(
        f"total per GPU = weights {sheet.weights_bytes_per_gpu:,} + KV "
        f"{sheet.kv_bytes_batch_per_gpu:,} + engine reserve "
        f"{sheet.engine_reserve_bytes_per_gpu:,} = "
        f"{sheet.total_bytes_per_gpu:,} B vs {sheet.memory_bytes:,} B on {sheet.sku}"
    )
    return lines


def _batch_question(sheet: ClaimReport) -> str:
    """Whether the length holds at the batch, or only for a lone request."""
    context, batch = sheet.context, sheet.batch
    fit = (
        f"{plural(sheet.max_concurrency_at_context, 'request')} of {context:,} tokens fit at "
        f"once, and the longest context at batch {batch} is "
        f"{sheet.max_context_tokens_at_batch:,} tokens"
    )
    if batch == 1:
        return f"How many requests of {context:,} tokens are served at once? Here {fit}."
    return (
        f"Is {context:,} tokens served at batch {batch}, or only to one request at a time? "
        f"Here {fit}."
    )


def vendor_questions(sheet: ClaimReport) -> list[str]:
    """What to ask instead of accepting "long context": each question carries our figure."""
    context, batch = sheet.context, sheet.batch
    questions = [
        f"At {context:,} tokens and batch {batch}, what KV dtype and how many GPUs (TP × PP)? "
        f"Here {sheet.kv_dtype} KV on {sheet.gpus} × {sheet.sku} needs "
        f"{gib(sheet.kv_bytes_batch_per_gpu)} of KV per GPU next to "
        f"{gib(sheet.weights_bytes_per_gpu)} of weights.",
        _batch_question(sheet),
        "Which engine, version and memory settings (gpu_memory_utilization / "
        "mem_fraction_static), and how much memory does it keep for activations and CUDA "
        f"graphs? Here the {sheet.engine} reserve is "
        f"{gib(sheet.engine_reserve_bytes_per_gpu)} per GPU.",
        f"Which weight dtype ({sheet.weight_dtype} here), and is any KV quantised, "
        "offloaded to CPU or evicted at this length? What accuracy was measured at "
        f"{context:,} tokens with that setup?",
    ]
    if context > sheet.native_context_limit:
        questions.append(
            f"{sheet.model}'s native limit is {sheet.native_context_limit:,} tokens: how is "
            f"{context:,} reached (RoPE scaling, which factor), and was quality measured there?"
        )
    return questions


def notes(sheet: ClaimReport) -> list[str]:
    """Assumptions and caveats that travel with the sheet in every format."""
    lines = list(sheet.notes)
    if sheet.engine in ("exact", "hf", "naive"):
        lines.append(
            "no engine reserve counted (--engine vllm or sglang adds activations, "
            "non-torch memory and the unused utilization share)"
        )
    if sheet.kv_budget_uncertainty_bytes:
        lines.append(
            f"the engine reserve is an estimate: KV budget {gib(sheet.kv_budget_bytes_per_gpu)} "
            f"± {gib(sheet.kv_budget_uncertainty_bytes)} per GPU"
        )
    lines.append(f"device memory: {sheet.budget.total_basis}")
    return lines


def claim_table(sheet: ClaimReport) -> Table:
    """The sheet as rows of quantities: per GPU and whole deployment."""
    table = Table(
        f"{sheet.model} on {sheet.gpus} × {sheet.sku} (tp {sheet.tp} × pp {sheet.pp}) · "
        f"{sheet.batch} × {sheet.context:,} tokens · KV {sheet.kv_dtype} · "
        f"engine {sheet.engine}",
        ["quantity", "per GPU", "whole deployment"],
        ["quantity", "per_gpu", "total"],
    )
    _kv_and_weights_rows(table, sheet)
    _reserve_rows(table, sheet)
    quantity_row(
        table,
        "total = weights + KV + reserve",
        sheet.total_bytes_per_gpu,
        None,
        ("total_bytes_per_gpu", None),
    )
    quantity_row(table, f"{sheet.sku} memory", sheet.memory_bytes, None, ("memory_bytes", None))
    free = sheet.free_bytes_per_gpu
    if free >= 0:
        quantity_row(table, "free", free, None, ("free_bytes_per_gpu", None))
    else:
        quantity_row(table, "short by", -free, None)
    table.add(["fits", sheet.fits, None], ["verdict", sheet.verdict, "—"], [None, "/fits", None])
    table.notes += ["formula: " + line for line in formula_lines(sheet)]
    table.notes.append(
        f"limits: longest context at batch {sheet.batch}: "
        f"{sheet.max_context_tokens_at_batch:,} tokens (native limit "
        f"{sheet.native_context_limit:,}); requests of {sheet.context:,} tokens that fit at "
        f"once: {sheet.max_concurrency_at_context:,}"
    )
    table.notes += [f"ask: {q}" for q in vendor_questions(sheet)]
    table.notes += notes(sheet)
    return table


def _kv_and_weights_rows(table: Table, sheet: ClaimReport) -> None:
    rows = [
        (
            "KV per token",
            sheet.kv_bytes_per_token_per_gpu,
            sheet.kv_bytes_per_token,
            "kv_bytes_per_token",
        ),
        (
            f"KV per request ({sheet.context:,} tokens)",
            sheet.kv_bytes_per_request_per_gpu,
            sheet.kv_bytes_per_request,
            "kv_bytes_per_request",
        ),
        (
            f"KV for the batch ({plural(sheet.batch, 'request')})",
            sheet.kv_bytes_batch_per_gpu,
            sheet.kv_bytes_batch,
            "kv_bytes_batch",
        ),
    ]
    for i, (label, per_gpu, total, key) in enumerate(rows):
        show = human_bytes if i == 0 else gib  # a token's KV is KiB, the rest GiB
        quantity_row(table, label, per_gpu, total, (f"{key}_per_gpu", key), show)
    weights_rows(
        table,
        WeightsShown(
            sheet.weight_dtype,
            sheet.weights_bytes_per_gpu,
            sheet.checkpoint_weights_bytes_per_gpu,
            sheet.weights_bytes,
            sheet.engine,
            sheet.sku,
        ),
    )


def _reserve_rows(table: Table, sheet: ClaimReport) -> None:
    """The engine's reserve per GPU and, when it has one, its terms."""
    reserve = sheet.engine_reserve
    quantity_row(
        table,
        f"engine reserve ({sheet.engine})",
        sheet.engine_reserve_bytes_per_gpu,
        None,
        ("engine_reserve_bytes_per_gpu", None),
    )
    if not sheet.engine_reserve_bytes_per_gpu:
        return
    terms = [
        (
            f"  unused share (1 − utilization {reserve.utilization:g})",
            reserve.headroom_bytes,
            "headroom_bytes",
        ),
        ("  activation peak", reserve.activation_bytes, "activation_bytes"),
        ("  non-torch (CUDA context, NCCL)", reserve.non_torch_bytes, "non_torch_bytes"),
        ("  CUDA graphs", reserve.cudagraph_bytes, "cudagraph_bytes"),
    ]
    for label, value, key in terms:
        quantity_row(table, label, value, None, (f"engine_reserve/{key}", None))


def render_claim(report: ClaimReport, fmt: Format) -> None:
    """Print the claim sheet in `fmt`."""
    from kvplan.report.figures import claim_figures

    record = claim_record(report)
    flat = {k: v for k, v in record.items() if k not in NOT_IN_CSV}
    emit(
        fmt,
        record,
        [flat],
        lambda: claim_table(report),
        figures=lambda: claim_figures(report),
    )
