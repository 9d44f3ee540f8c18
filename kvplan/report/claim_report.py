"""`kvplan claim` output: the bytes behind a long-context claim, and what to ask the vendor."""

from __future__ import annotations

from typing import Any

from kvplan.api.results import ClaimReport, dump
from kvplan.plan.guardrail import ClaimSheet
from kvplan.plan.sizing import formula_terms
from kvplan.report.render import (
    Format,
    Table,
    emit,
    gib,
    human_bytes,
    plural,
    quantity_row,
)
from kvplan.report.size_report import weights_rows


def claim_record(report: ClaimReport) -> dict[str, Any]:
    """The JSON contract of `kvplan claim` (docs/commands/claim.md): the numbers, the formula
    with them, the questions to ask and the notes."""
    sheet: ClaimSheet = report.source
    record = dump(report)
    del record["notes"]
    return record | {
        "formula": formula_lines(sheet),
        "questions": vendor_questions(sheet),
        "notes": notes(sheet),
    }


def formula_lines(sheet: ClaimSheet) -> list[str]:
    """The KV formula with the model's numbers, one line per layer kind (whole deployment)."""
    result = sheet.size
    d = result.deployment
    lines = []
    for term in formula_terms(result):
        factors = " × ".join(f"{value:,} ({label})" for label, value in term.factors)
        kept = max(tokens for tokens, _ in term.tokens_kept)
        tokens = "1 state" if term.kind == "state" else f"{kept:,} tokens kept"
        lines.append(
            f"{term.kind} × {plural(term.layers, 'layer')}: {factors} × {tokens} × "
            f"{plural(result.batch.size, 'request')} × {plural(d.tp, 'GPU')} = "
            f"{term.bytes_total:,} B"
        )
    exact = sum(t.bytes_total for t in formula_terms(result))
    lines.append(f"KV for the batch (exact) = {exact:,} B = {gib(exact)}")
    if result.kv_bytes != exact:
        lines.append(
            f"KV for the batch ({d.engine.name}, paged/engine rounding) = {result.kv_bytes:,} B"
        )
    lines.append(
        f"total per GPU = weights {sheet.weights_bytes_per_gpu:,} + KV "
        f"{result.kv_bytes_per_gpu:,} + engine reserve {sheet.reserve_bytes_per_gpu:,} = "
        f"{sheet.total_bytes_per_gpu:,} B vs {sheet.memory_bytes:,} B on {sheet.capacity.sku.name}"
    )
    return lines


def _batch_question(sheet: ClaimSheet) -> str:
    """Whether the length holds at the batch, or only for a lone request."""
    result, capacity = sheet.size, sheet.capacity
    context, batch = result.context, result.batch.size
    fit = (
        f"{plural(capacity.max_concurrency(), 'request')} of {context:,} tokens fit at once, "
        f"and the longest context at batch {batch} is {capacity.max_context_tokens:,} tokens"
    )
    if batch == 1:
        return f"How many requests of {context:,} tokens are served at once? Here {fit}."
    return (
        f"Is {context:,} tokens served at batch {batch}, or only to one request at a time? "
        f"Here {fit}."
    )


def vendor_questions(sheet: ClaimSheet) -> list[str]:
    """What to ask instead of accepting "long context": each question carries our figure."""
    result, capacity = sheet.size, sheet.capacity
    d = result.deployment
    context, batch = result.context, result.batch.size
    questions = [
        f"At {context:,} tokens and batch {batch}, what KV dtype and how many GPUs (TP × PP)? "
        f"Here {d.kv_dtype} KV on {d.gpus} × {capacity.sku.name} needs "
        f"{gib(result.kv_bytes_per_gpu)} of KV per GPU next to {gib(sheet.weights_bytes_per_gpu)} "
        "of weights.",
        _batch_question(sheet),
        "Which engine, version and memory settings (gpu_memory_utilization / "
        "mem_fraction_static), and how much memory does it keep for activations and CUDA "
        f"graphs? Here the {d.engine.name} reserve is {gib(sheet.reserve_bytes_per_gpu)} per GPU.",
        f"Which weight dtype ({result.weights.weight_dtype} here), and is any KV quantised, "
        "offloaded to CPU or evicted at this length? What accuracy was measured at "
        f"{context:,} tokens with that setup?",
    ]
    if context > d.model.max_context:
        questions.append(
            f"{d.model.name}'s native limit is {d.model.max_context:,} tokens: how is "
            f"{context:,} reached (RoPE scaling, which factor), and was quality measured there?"
        )
    return questions


def notes(sheet: ClaimSheet) -> list[str]:
    """Assumptions and caveats that travel with the sheet in every format."""
    result, capacity = sheet.size, sheet.capacity
    lines = list(result.notes)
    if result.deployment.engine.name in ("exact", "hf", "naive"):
        lines.append(
            "no engine reserve counted (--engine vllm or sglang adds activations, "
            "non-torch memory and the unused utilization share)"
        )
    budget = capacity.budget
    if budget.uncertainty_bytes:
        lines.append(
            f"the engine reserve is an estimate: KV budget {gib(budget.kv_bytes)} "
            f"± {gib(budget.uncertainty_bytes)} per GPU"
        )
    lines.append(f"device memory: {budget.total_basis}")
    return lines


def claim_table(sheet: ClaimSheet) -> Table:
    """The sheet as rows of quantities: per GPU and whole deployment."""
    result, capacity = sheet.size, sheet.capacity
    d = result.deployment
    table = Table(
        f"{d.model.name} on {d.gpus} × {capacity.sku.name} (tp {d.tp} × pp {d.pp}) · "
        f"{result.batch.size} × {result.context:,} tokens · KV {d.kv_dtype} · "
        f"engine {d.engine.name}",
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
    quantity_row(
        table, f"{capacity.sku.name} memory", sheet.memory_bytes, None, ("memory_bytes", None)
    )
    free = sheet.free_bytes_per_gpu
    if free >= 0:
        quantity_row(table, "free", free, None, ("free_bytes_per_gpu", None))
    else:
        quantity_row(table, "short by", -free, None)
    table.add(["fits", sheet.fits, None], ["verdict", sheet.verdict, "—"], [None, "/fits", None])
    table.notes += ["formula: " + line for line in formula_lines(sheet)]
    table.notes.append(
        f"limits: longest context at batch {result.batch.size}: {capacity.max_context_tokens:,} "
        f"tokens (native limit {d.model.max_context:,}); requests of {result.context:,} tokens "
        f"that fit at once: {capacity.max_concurrency():,}"
    )
    table.notes += [f"ask: {q}" for q in vendor_questions(sheet)]
    table.notes += notes(sheet)
    return table


def _kv_and_weights_rows(table: Table, sheet: ClaimSheet) -> None:
    result = sheet.size
    rows = [
        (
            "KV per token",
            result.kv_bytes_per_token_per_gpu,
            result.kv_bytes_per_token,
            "kv_bytes_per_token",
        ),
        (
            f"KV per request ({result.context:,} tokens)",
            sheet.kv_bytes_per_request_per_gpu,
            result.kv_bytes_per_request,
            "kv_bytes_per_request",
        ),
        (
            f"KV for the batch ({plural(result.batch.size, 'request')})",
            result.kv_bytes_per_gpu,
            result.kv_bytes,
            "kv_bytes_batch",
        ),
    ]
    for i, (label, per_gpu, total, key) in enumerate(rows):
        show = human_bytes if i == 0 else gib  # a token's KV is KiB, the rest GiB
        quantity_row(table, label, per_gpu, total, (f"{key}_per_gpu", key), show)
    weights_rows(table, result)


def _reserve_rows(table: Table, sheet: ClaimSheet) -> None:
    """The engine's reserve per GPU and, when it has one, its terms."""
    d, budget = sheet.size.deployment, sheet.capacity.budget
    quantity_row(
        table,
        f"engine reserve ({d.engine.name})",
        sheet.reserve_bytes_per_gpu,
        None,
        ("engine_reserve_bytes_per_gpu", None),
    )
    if not sheet.reserve_bytes_per_gpu:
        return
    terms = [
        (
            f"  unused share (1 − utilization {budget.utilization:g})",
            sheet.headroom_bytes_per_gpu,
            "headroom_bytes",
        ),
        ("  activation peak", budget.activation_bytes, "activation_bytes"),
        ("  non-torch (CUDA context, NCCL)", budget.non_torch_bytes, "non_torch_bytes"),
        ("  CUDA graphs", budget.cudagraph_bytes, "cudagraph_bytes"),
    ]
    for label, value, key in terms:
        quantity_row(table, label, value, None, (f"engine_reserve/{key}", None))


def render_claim(report: ClaimReport, fmt: Format) -> None:
    """Print the claim sheet in `fmt`."""
    from kvplan.report.figures import claim_figures

    record = claim_record(report)
    emit(
        fmt,
        record,
        [record],
        lambda: claim_table(report.source),
        figures=lambda: claim_figures(report),
    )
