"""`kvplan recommend`: the ranked deployments, why each loses to the first, and how to start it."""

from __future__ import annotations

from typing import Any

from kvplan.plan.recommend import Candidate, Loss, PricePerHour, Recommendation
from kvplan.report.render import Format, Table, emit, gib


def candidate_record(c: Candidate, context_tokens: int) -> dict[str, Any]:
    """One candidate as JSON: its settings, exact bytes and counts, command and log lines."""
    d, capacity = c.deployment, c.capacity
    scheduler, budget = capacity.scheduler, capacity.budget
    return {
        "sku": c.sku.name,
        "gpus": c.gpus,
        "nodes": c.nodes,
        "tp": d.tp,
        "pp": d.pp,
        "dp": d.dp,
        "ep": d.ep,
        "weight_dtype": d.weight_dtype or d.model.weight_dtype,
        "kv_dtype": d.kv_dtype,
        "gpu_memory_utilization": budget.utilization,
        "kv_memory_bytes": d.settings.kv_memory_bytes,
        "max_num_seqs": scheduler.max_num_seqs,
        "max_num_batched_tokens": scheduler.max_num_batched_tokens,
        "tokens_per_block": capacity.layout.tokens_per_block,
        "cost": c.cost,
        "weights_bytes_per_gpu": capacity.weights_bytes_per_gpu,
        "kv_budget_bytes_per_gpu": budget.kv_bytes,
        "kv_budget_uncertainty_bytes": budget.uncertainty_bytes,
        "kv_blocks": capacity.pool.num_blocks if capacity.kv_usable else 0,
        "kv_blocks_within_headroom": c.usable.num_blocks if capacity.kv_usable else 0,
        "max_concurrency": capacity.max_concurrency(),
        "concurrency_within_headroom": c.score.achieved,
        "meets": c.score.meets,
        "launch_command": d.engine.launch_command(d, c.sku, context_tokens),
        "log_lines": capacity.log_lines(),
        "notes": d.engine.notes(d, c.sku),
    }


def recommendation_payload(result: Recommendation) -> dict[str, Any]:
    """The JSON document: target, ranking, the first's command, or the closest miss."""
    objective, base = result.objective, result.base
    context = objective.context_tokens
    ranked = []
    for entry in result.ranked:
        record = candidate_record(entry.candidate, context)
        record["loses_by"] = [
            {"kind": loss.kind, "value": loss.value, "first": loss.first} for loss in entry.losses
        ]
        record["why_not_first"] = why(entry.candidate, entry.losses)
        ranked.append(record)
    miss, plain = result.closest_miss, result.unquantised_miss
    stats = result.stats
    return {
        "model": base.model.name,
        "engine": base.engine.name,
        "engine_version": base.settings.version,
        "context_tokens": context,
        "concurrency": getattr(objective, "concurrency", None),
        "headroom_fraction": float(result.headroom),
        "rank_by": result.cost.name,
        "meets": bool(ranked),
        "ranked": ranked,
        "closest_miss": candidate_record(miss, context) if miss else None,
        "unquantised_miss": candidate_record(plain, context) if plain else None,
        "search": {
            "skus": stats.skus,
            "points": stats.points,
            "capacities_evaluated": stats.evaluated,
            "refused_by_engine": stats.refused,
            "beyond_cost_bound": stats.beyond_bound,
            "skus_without_price": list(stats.unpriced),
            "searched": {k: [_value(v) for v in values] for k, values in stats.searched.items()},
        },
    }


def render_recommendation(result: Recommendation, fmt: Format) -> None:
    """Print the recommendation in `fmt`."""
    payload = recommendation_payload(result)
    rows = payload["ranked"] or ([payload["closest_miss"]] if payload["closest_miss"] else [])
    records = [
        {k: v for k, v in row.items() if not isinstance(v, (list, dict))}
        | {"rank": i + 1 if payload["meets"] else 0}
        for i, row in enumerate(rows)
    ]
    emit(fmt, payload, records, lambda: _table(result, payload))


def why(c: Candidate, losses: tuple[Loss, ...]) -> str:
    """Why `c` loses to the first, e.g. "16 GPUs: 2 nodes; needs fp8 KV"."""
    words = []
    kinds = {loss.kind for loss in losses}
    for loss in losses:
        if loss.kind == "gpus":
            gpus, first = int(loss.value), int(loss.first)
            words.append(
                f"{gpus} GPUs: {c.nodes} nodes" if c.nodes > 1 else f"{gpus} GPUs, not {first}"
            )
        elif loss.kind == "price":
            words.append(f"costs {float(loss.value) / float(loss.first):.2g}× more")
        elif loss.kind in ("weights", "kv"):
            label = "KV" if loss.kind == "kv" else "weights"
            words.append(f"needs {_dtype_label(str(loss.value))} {label}")
        elif loss.kind == "nodes" and "gpus" not in kinds:
            words.append(f"{loss.value} nodes")
        elif loss.kind == "pipeline":
            words.append(f"pipeline parallel (pp {loss.value})")
        elif loss.kind == "held":
            words.append(f"holds {loss.value:,} vs {loss.first:,}")
        elif loss.kind == "utilization":
            words.append(f"needs utilization {loss.value:g}")
        elif loss.kind == "order":
            words.append("same figures; listed by SKU name")
    return "; ".join(words)


def _dtype_label(name: str) -> str:
    """fp8_e4m3 reads as fp8 (what vLLM calls it); other names as they are."""
    return "fp8" if name == "fp8_e4m3" else name


def _value(value: object) -> object:
    return "released" if value is None else value


def _table(result: Recommendation, payload: dict[str, Any]) -> Table:
    objective, base = result.objective, result.base
    by_price = isinstance(result.cost, PricePerHour)
    concurrency = payload["concurrency"]
    target = (
        f"{concurrency:,} requests × {objective.context_tokens:,} tokens"
        if concurrency is not None
        else f"{objective.context_tokens:,}-token requests"
    )
    version = f" {base.settings.version}" if base.settings.version else ""
    table = Table(
        f"{base.model.name} · {target} · engine {base.engine.name}{version} · headroom "
        f"{float(result.headroom):.0%} · ranked by {'price' if by_price else 'GPUs'}",
        [
            "#",
            "sku",
            "GPUs",
            "tp×pp×dp",
            "weights",
            "KV",
            "util",
            "max seqs",
            "block",
            "KV budget/GPU",
            "max conc",
            "within headroom",
            "price/h",
            "why not #1",
        ],
        [
            "rank",
            "sku",
            "gpus",
            "layout",
            "weight_dtype",
            "kv_dtype",
            "gpu_memory_utilization",
            "max_num_seqs",
            "tokens_per_block",
            "kv_budget_bytes_per_gpu",
            "max_concurrency",
            "concurrency_within_headroom",
            "cost",
            "why_not_first",
        ],
    )
    rows = payload["ranked"] or [payload["closest_miss"]]
    for i, record in enumerate(rows):
        rank = str(i + 1) if payload["meets"] else "miss"
        layout = f"{record['tp']}×{record['pp']}×{record['dp']}" + (" ep" if record["ep"] else "")
        reason = record.get("why_not_first") or ("chosen" if payload["meets"] else _miss(record))
        cost = record["cost"]
        table.add(
            [
                rank,
                record["sku"],
                record["gpus"],
                layout,
                record["weight_dtype"],
                record["kv_dtype"],
                record["gpu_memory_utilization"],
                record["max_num_seqs"],
                record["tokens_per_block"],
                record["kv_budget_bytes_per_gpu"],
                record["max_concurrency"],
                record["concurrency_within_headroom"],
                cost,
                reason,
            ],
            [
                rank,
                record["sku"],
                str(record["gpus"]),
                layout,
                record["weight_dtype"],
                _dtype_label(record["kv_dtype"]),
                f"{record['gpu_memory_utilization']:g}",
                f"{record['max_num_seqs']:,}",
                str(record["tokens_per_block"]),
                gib(record["kv_budget_bytes_per_gpu"]),
                f"{record['max_concurrency']:,}",
                f"{record['concurrency_within_headroom']:,}",
                f"{cost:,.2f}",
                reason,
            ],
        )
    if not by_price:  # the cost is the GPU count, already a column
        _drop_column(table, "price/h")
    table.notes += _notes(result, payload)
    table.footer += _footer(rows[0], payload["meets"], base.engine.name)
    return table


def _drop_column(table: Table, header: str) -> None:
    i = table.headers.index(header)
    for rows in (table.rows, table.display_rows):
        for row in rows:
            del row[i]
    del table.headers[i], table.keys[i]


def _miss(record: dict[str, Any]) -> str:
    return f"closest miss: holds {record['concurrency_within_headroom']:,} within the headroom"


def _notes(result: Recommendation, payload: dict[str, Any]) -> list[str]:
    stats, search = result.stats, payload["search"]
    searched = search["searched"]
    notes = [
        f"searched {stats.skus} SKU(s), {stats.points:,} points (tp {_list(searched['tp'])}; "
        f"pp {_list(searched['pp'])}; dp {_list(searched['dp'])}; KV {_list(searched['kv'])}; "
        f"weights {_list(searched['weights'])}; block {_list(searched['block'], 'engine default')}"
        f"): {stats.evaluated:,} capacities computed, {stats.beyond_bound:,} points costlier than "
        "the ranking skipped",
        "max conc: requests of the context the KV cache holds (what `kvplan report` and vLLM "
        "print); within headroom: the same with the headroom share of the budget kept unused",
    ]
    if stats.unpriced:
        notes.append(f"left out, no price: {', '.join(stats.unpriced)}")
    plain = payload["unquantised_miss"]
    if plain:
        notes.append(
            f"without quantisation, the closest as cheap as #1 holds "
            f"{plain['concurrency_within_headroom']:,} within the headroom "
            f"({plain['max_concurrency']:,} in all) on {plain['gpus']}× {plain['sku']}, "
            f"tp {plain['tp']} × pp {plain['pp']} × dp {plain['dp']}, utilization "
            f"{plain['gpu_memory_utilization']:g}"
        )
    first = payload["ranked"][0] if payload["ranked"] else payload["closest_miss"]
    notes += first["notes"]
    return notes


def _list(values: list[Any], none: str = "released") -> str:
    """Values as text; runs of three or more consecutive integers as a–b."""
    shown: list[str] = []
    run: list[int] = []
    for value in [*values, None]:
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (not run or value == run[-1] + 1)
        ):
            run.append(value)
            continue
        if run:
            shown += [f"{run[0]}–{run[-1]}"] if len(run) >= 3 else [str(v) for v in run]
            run = [value] if isinstance(value, int) and not isinstance(value, bool) else []
            if run:
                continue
        if value is not None:
            shown.append(none if value == "released" else _dtype_label(str(value)))
    return ", ".join(shown) if shown else "—"


def _footer(record: dict[str, Any], meets: bool, engine: str) -> list[str]:
    if not meets:
        return ["nothing in the searched space meets the target; the closest miss is shown"]
    command = record["launch_command"]
    lines = ["launch #1:"]
    if command:
        head, *flags = command.split(" --")
        lines.append("  " + " \\\n    --".join([head, *flags]))
    else:
        lines.append(f"  (kvplan cannot write a {engine} command for this deployment yet)")
    if record["log_lines"]:
        lines.append(f"{engine} should log at startup (per GPU):")
        lines += [f"  {line}" for line in record["log_lines"]]
    return lines
