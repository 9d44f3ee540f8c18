"""`kvplan check` output: promised vs supported per product, and the CI JSON contract."""

from __future__ import annotations

from typing import Any

from kvplan.api.results import CheckReport, ProductResult, dump
from kvplan.plan.context_limit import beyond_limit_sentence
from kvplan.plan.guardrail import GuardrailResult, ProductCheck
from kvplan.report.render import Format, Table, emit, gib, plural
from kvplan.specs import ModelSpec


def reason(check: ProductCheck) -> str:
    """Why the promise holds or fails, in one sentence with the numbers that decide it."""
    capacity, product = check.capacity, check.product
    context, promised = check.promised_context_tokens, check.promised_concurrency
    budget = capacity.budget
    where = f"{capacity.sku.name} tp {product.tp}" + (f"×pp {product.pp}" if product.pp > 1 else "")
    where += f"×dp {product.dp}" if product.dp > 1 else ""
    longest = (
        f"at {plural(promised, 'request')} at once the longest context is "
        f"{check.supported_context_tokens:,} tokens"
    )
    if check.failure == "weights" and budget.weights_fit:
        return (
            f"weights need {gib(capacity.weights_bytes_per_gpu)} per GPU and fit, but the "
            f"{product.engine} reserve takes the rest: nothing is left for KV on {where} "
            f"({gib(budget.requested_bytes)} usable of {gib(budget.total_bytes)})"
        )
    if check.failure == "weights":
        return (
            f"weights need {gib(capacity.weights_bytes_per_gpu)} per GPU; with the "
            f"{product.engine} reserve nothing is left for KV on {where} "
            f"({gib(budget.requested_bytes)} usable of {gib(budget.total_bytes)})"
        )
    if check.failure == "memory":
        return (
            f"weights ({gib(capacity.weights_bytes_per_gpu)}) and the fixed KV budget "
            f"({gib(budget.kv_bytes)}) need {gib(capacity.overcommit_bytes)} more than the "
            f"{gib(budget.total_bytes)} on {where}"
        )
    if check.failure == "native_limit":
        model = capacity.deployment.model
        return f"promised {beyond_limit_sentence(model, context)}" + _extension_hint(model, context)
    if check.failure == "one_request":
        return (
            f"one request of {context:,} tokens needs {gib(check.kv_bytes_per_request_per_gpu)} "
            f"of KV per GPU, the budget on {where} is {gib(budget.kv_bytes)}; {longest}"
        )
    if check.failure == "concurrency":
        return (
            f"{where} holds {plural(check.supported_concurrency, 'request')} of {context:,} tokens "
            f"at once, {promised:,} promised; {longest}"
        )
    capped = " (the model's native limit)" if capacity.native_limit_binds else ""
    held = plural(check.supported_concurrency, "request")
    return (
        f"{where} holds {held} of {context:,} tokens at once, "
        f"{promised:,} promised; {longest}{capped}"
    )


def check_record(product: ProductResult) -> dict[str, Any]:
    """One product of the JSON contract (docs/commands/check.md): its numbers and the reason."""
    record = dump(product)
    notes = record.pop("notes")
    return record | {"reason": reason(product.source), "notes": notes}


def check_payload(report: CheckReport) -> dict[str, Any]:
    """`{"ok": bool, "products": [...]}`: what a CI pipeline reads."""
    return {"ok": report.ok, "products": [check_record(p) for p in report.products]}


def _extension_hint(model: ModelSpec, context: int) -> str:
    """How a context past the native limit could be served: the RoPE extension to declare."""
    rope, extended = model.rope_scaling, model.extended_context
    if rope is None or extended is None or rope.applied or context > extended:
        return ""
    return (
        f"; its RoPE {rope.label()} reaches {extended:,}: declare it with "
        f"rope_scaling: {rope.rope_type}:{rope.factor:g}"
    )


def check_table(report: CheckReport) -> Table:
    """Promised vs supported, one row per product; the reasons as notes below."""
    result: GuardrailResult = report.source
    failed = sum(not c.ok for c in result.checks)
    count = len(result.checks)
    table = Table(
        f"{result.path}: {plural(count, 'product')}, "
        + (f"{failed} over what the hardware holds" if failed else "every promise holds"),
        [
            "product",
            "model",
            "sku",
            "tp×pp[×dp]",
            "engine",
            "promised ctx × conc",
            "supported conc @ctx",
            "longest ctx @conc",
            "KV needed/GPU",
            "KV budget/GPU",
            "result",
        ],
        [
            "name",
            "model",
            "sku",
            "tp",
            "engine",
            "promised_context",
            "supported_concurrency",
            "supported_context_at_promised_concurrency",
            "kv_bytes_needed_per_gpu",
            "kv_budget_bytes_per_gpu",
            "ok",
        ],
        # Narrow terminals keep the product and its result, then the numbers behind it.
        priority=[0, 8, 7, 9, 10, 3, 2, 4, 5, 6, 1],
        rows_at="/products",
    )
    for product in report.products:
        record, check = dump(product), product.source
        table.add(
            [record[k] for k in table.keys],
            [
                record["name"],
                record["model"],
                record["sku"],
                f"{record['tp']}×{record['pp']}" + (f"×{record['dp']}" if record["dp"] > 1 else ""),
                f"{record['engine']} {record['kv_dtype']}",
                f"{record['promised_context']:,} × {record['promised_concurrency']:,}",
                f"{record['supported_concurrency']:,}",
                f"{record['supported_context_at_promised_concurrency']:,}",
                gib(record["kv_bytes_needed_per_gpu"]),
                gib(record["kv_budget_bytes_per_gpu"]),
                ("ok*" if record["within_estimate_band"] else "ok") if check.ok else "FAIL",
            ],
        )
    if any(product.within_estimate_band for product in report.products):
        table.footnotes["ok"] = (
            "ok*: holds with the estimated KV budget, not at the low end of its band (the "
            "engine's activation and non-torch memory are estimates)"
        )
    for check in result.checks:
        table.notes.append(f"{'ok' if check.ok else 'FAIL'} {check.product.name}: {reason(check)}")
        table.notes += [f"  {check.product.name}: {note}" for note in check.notes]
    return table


def render_check(report: CheckReport, fmt: Format, columns: list[str] | None = None) -> None:
    """Print the check in `fmt` (--columns: the table's keys to show); the exit code is the
    CLI's job."""
    from kvplan.report.figures import check_figures

    records = [check_record(p) for p in report.products]
    emit(
        fmt,
        check_payload(report),
        records,
        lambda: check_table(report),
        figures=lambda: check_figures(report),
        columns=columns,
    )
