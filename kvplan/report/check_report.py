"""`kvplan check` output: promised vs supported per product, and the CI JSON contract."""

from __future__ import annotations

from typing import Any

from kvplan.api.results import dump
from kvplan.api.results_check import CheckReport, ProductResult
from kvplan.report.render import Format, Table, emit, gib, plural
from kvplan.specs import RopeScalingSpec


def reason(product: ProductResult) -> str:
    """Why the promise holds or fails, in one sentence with the numbers that decide it."""
    context, promised = product.promised_context, product.promised_concurrency
    budget = product.budget
    where = f"{product.sku} tp {product.tp}" + (f"×pp {product.pp}" if product.pp > 1 else "")
    where += f"×dp {product.dp}" if product.dp > 1 else ""
    longest = (
        f"at {plural(promised, 'request')} at once the longest context is "
        f"{product.supported_context_at_promised_concurrency:,} tokens"
    )
    weights = gib(product.weights_bytes_per_gpu)
    usable = f"({gib(budget.requested_bytes)} usable of {gib(budget.total_bytes)})"
    if product.failure == "weights" and product.weights_fit:
        return (
            f"weights need {weights} per GPU and fit, but the {product.engine} reserve takes "
            f"the rest: nothing is left for KV on {where} {usable}"
        )
    if product.failure == "weights":
        return (
            f"weights need {weights} per GPU; with the {product.engine} reserve nothing is "
            f"left for KV on {where} {usable}"
        )
    if product.failure == "memory":
        return (
            f"weights ({weights}) and the fixed KV budget "
            f"({gib(product.kv_budget_bytes_per_gpu)}) need {gib(product.overcommit_bytes)} "
            f"more than the {gib(budget.total_bytes)} on {where}"
        )
    if product.failure == "native_limit":
        return f"promised {product.beyond_limit}" + _extension_hint(product)
    if product.failure == "one_request":
        return (
            f"one request of {context:,} tokens needs "
            f"{gib(product.kv_bytes_per_request_per_gpu)} of KV per GPU, the budget on {where} "
            f"is {gib(product.kv_budget_bytes_per_gpu)}; {longest}"
        )
    if product.failure == "concurrency":
        return (
            f"{where} holds {plural(product.supported_concurrency, 'request')} of "
            f"{context:,} tokens at once, {promised:,} promised; {longest}"
        )
    capped = " (the model's native limit)" if product.native_limit_binds else ""
    held = plural(product.supported_concurrency, "request")
    return (
        f"{where} holds {held} of {context:,} tokens at once, "
        f"{promised:,} promised; {longest}{capped}"
    )


# Fields the JSON gained beside each product (the figures behind its reason): CSV keeps the
# columns it had.
NOT_IN_CSV = (
    "budget",
    "weights_fit",
    "overcommit_bytes",
    "native_limit_binds",
    "beyond_limit",
    "extended_context",
    "rope_scaling",
    "concurrency_by_context",
)


def check_record(product: ProductResult) -> dict[str, Any]:
    """One product of the JSON contract (docs/commands/check.md): its numbers and the reason."""
    record = dump(product)
    notes = record.pop("notes")
    return record | {"reason": reason(product), "notes": notes}


def check_payload(report: CheckReport) -> dict[str, Any]:
    """`{"ok": bool, "products": [...]}`: what a CI pipeline reads."""
    return {"ok": report.ok, "products": [check_record(p) for p in report.products]}


def _extension_hint(product: ProductResult) -> str:
    """How a context past the native limit could be served: the RoPE extension to declare."""
    extended = product.extended_context
    if product.rope_scaling is None or extended is None:
        return ""
    rope = RopeScalingSpec.model_validate(product.rope_scaling)
    if rope.applied or product.promised_context > extended:
        return ""
    return (
        f"; its RoPE {rope.label()} reaches {extended:,}: declare it with "
        f"rope_scaling: {rope.rope_type}:{rope.factor:g}"
    )


def check_table(report: CheckReport) -> Table:
    """Promised vs supported, one row per product; the reasons as notes below."""
    failed = sum(not p.ok for p in report.products)
    count = len(report.products)
    table = Table(
        f"{report.path}: {plural(count, 'product')}, "
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
        record = dump(product)
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
                ("ok*" if record["within_estimate_band"] else "ok") if product.ok else "FAIL",
            ],
        )
    if any(product.within_estimate_band for product in report.products):
        table.footnotes["ok"] = (
            "ok*: holds with the estimated KV budget, not at the low end of its band (the "
            "engine's activation and non-torch memory are estimates)"
        )
    for product in report.products:
        table.notes.append(f"{'ok' if product.ok else 'FAIL'} {product.name}: {reason(product)}")
        table.notes += [f"  {product.name}: {note}" for note in product.notes]
    return table


def render_check(report: CheckReport, fmt: Format, columns: list[str] | None = None) -> None:
    """Print the check in `fmt` (--columns: the table's keys to show); the exit code is the
    CLI's job."""
    from kvplan.report.figures import check_figures

    payload = check_payload(report)
    records = [
        {k: v for k, v in record.items() if k not in NOT_IN_CSV} for record in payload["products"]
    ]
    emit(
        fmt,
        payload,
        records,
        lambda: check_table(report),
        figures=lambda: check_figures(report),
        columns=columns,
    )
