"""`kvplan recommend`: the ranked deployments, why each loses to the first, and how to start it."""

from __future__ import annotations

from typing import Any

from kvplan.api.results import dump
from kvplan.api.results_recommend import RecommendCandidate, RecommendLoss, RecommendReport
from kvplan.report.render import Format, Table, emit, gib, plural


def recommendation_payload(result: RecommendReport) -> dict[str, Any]:
    """The JSON document: the result's numbers, each alternative with why it loses."""
    payload = dump(result)
    for record, candidate in zip(payload["ranked"], result.ranked, strict=True):
        record["why_not_first"] = why(candidate, candidate.loses_by)
    return payload


def render_recommendation(
    result: RecommendReport, fmt: Format, columns: list[str] | None = None
) -> None:
    """Print the recommendation in `fmt` (--columns: the table's keys to show)."""
    from kvplan.report.figures import recommend_figures

    payload = recommendation_payload(result)
    rows = payload["ranked"] or ([payload["closest_miss"]] if payload["closest_miss"] else [])
    records = [
        {k: v for k, v in row.items() if not isinstance(v, (list, dict))}
        | {"rank": i + 1 if payload["meets"] else 0}
        for i, row in enumerate(rows)
    ]
    emit(
        fmt,
        payload,
        records,
        lambda: _table(payload),
        figures=lambda: recommend_figures(result),
        columns=columns,
    )


def why(c: RecommendCandidate, losses: list[RecommendLoss]) -> str:
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
        elif loss.kind == "slo_met":
            words.append(
                f"{_percent(float(loss.value))} within SLO vs {_percent(float(loss.first))}"
            )
        elif loss.kind == "goodput":
            words.append(f"goodput {float(loss.value):,.2f} vs {float(loss.first):,.2f} req/s")
        elif loss.kind == "utilization":
            words.append(f"needs utilization {loss.value:g}")
        elif loss.kind == "order":
            words.append("same figures; listed by SKU name")
    return "; ".join(words)


def _percent(fraction: float) -> str:
    """A share as the user wrote it: 0.005 -> 0.5%, 0.125 -> 12.5%, 0.1 -> 10%."""
    return f"{round(fraction * 100, 6):g}%"


def _dtype_label(name: str) -> str:
    """fp8_e4m3 reads as fp8 (what vLLM calls it); other names as they are."""
    return "fp8" if name == "fp8_e4m3" else name


def _table(payload: dict[str, Any]) -> Table:
    by_price = payload["rank_by"] == "price"
    concurrency, context = payload["concurrency"], payload["context_tokens"]
    throughput = payload["throughput"]
    target = (
        f"{plural(concurrency, 'request')} × {context:,} tokens"
        if concurrency is not None
        else f"{context:,}-token requests"
    )
    if throughput is not None:
        target = _throughput_target(throughput, context)
    version = f" {payload['engine_version']}" if payload["engine_version"] else ""
    table = Table(
        f"{payload['model']} · {target} · engine {payload['engine']}{version} · headroom "
        f"{_percent(payload['headroom_fraction'])} · ranked by "
        f"{'price' if by_price else 'GPUs'}",
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
            "SLO met",
            "goodput req/s",
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
            "slo_met_fraction",
            "goodput_requests_per_s",
            "cost",
            "why_not_first",
        ],
        # Narrow terminals keep the rank and SKU, then the size and what it holds.
        priority=[0, 0, 1, 2, 6, 5, 9, 11, 12, 10, 3, 3, 3, 4, 7, 8],
        key_columns=2,
        wrap=("why_not_first",),
    )
    rows = payload["ranked"] or [payload["closest_miss"]]
    for i, record in enumerate(rows):
        _add_candidate(table, i, record, payload["meets"], bool(payload["ranked"]))
    if not by_price:  # the cost is the GPU count, already a column
        _drop_column(table, "price/h")
    if throughput is None:
        _drop_column(table, "SLO met")
        _drop_column(table, "goodput req/s")
    table.notes += _notes(payload)
    table.footer += _footer(rows[0], payload["meets"], payload["engine"])
    return table


def _add_candidate(table: Table, i: int, record: dict[str, Any], meets: bool, ranked: bool) -> None:
    """One candidate's row: the exact values, what is shown, and where the JSON holds them."""
    rank = str(i + 1) if meets else "miss"
    layout = f"{record['tp']}×{record['pp']}×{record['dp']}" + (" ep" if record["ep"] else "")
    reason = record.get("why_not_first") or ("chosen" if meets else _miss(record))
    cost = record["cost"]
    values = [
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
        record["slo_met_fraction"],
        record["goodput_requests_per_s"],
        cost,
        reason,
    ]
    shown = [
        rank,
        record["sku"],
        str(record["gpus"]),
        layout,
        record["weight_dtype"],
        _dtype_label(record["kv_dtype"]),
        f"{record['gpu_memory_utilization']:g}",
        _seqs_shown(record["max_num_seqs"]),
        str(record["tokens_per_block"]),
        gib(record["kv_budget_bytes_per_gpu"]),
        f"{record['max_concurrency']:,}",
        f"{record['concurrency_within_headroom']:,}",
        _share_shown(record["slo_met_fraction"]),
        _rate_shown(record["goodput_requests_per_s"]),
        f"{cost:,.2f}",
        reason,
    ]
    where = f"/ranked/{i}/" if ranked else "/closest_miss/"
    table.add(values, shown, _paths(where, table.keys, record))


def _paths(where: str, keys: list[str], record: dict[str, Any]) -> list[str | None]:
    """Where the JSON holds each shown value: not the rank and layout (not in the JSON), the
    KV dtype (shown as vLLM names it) or the reason of a row that has none in the JSON."""
    hidden = {"rank", "layout", "kv_dtype"} | ({"why_not_first"} - {k for k in record if record[k]})
    return [None if key in hidden else where + key for key in keys]


def _drop_column(table: Table, header: str) -> None:
    i = table.headers.index(header)
    for rows in (table.rows, table.display_rows, table.paths):
        for row in rows:
            del row[i]
    del table.headers[i], table.keys[i]
    if table.priority is not None:
        del table.priority[i]


def _miss(record: dict[str, Any]) -> str:
    if record["slo_met_fraction"] is not None:
        return f"closest miss: {_percent(record['slo_met_fraction'])} of requests within SLO"
    return f"closest miss: holds {record['concurrency_within_headroom']:,} within the headroom"


def _seqs_shown(max_num_seqs: int) -> str:
    # Engines without a cap of their own (SGLang, TensorRT-LLM) report 2^31 - 1.
    return "no limit" if max_num_seqs >= 2**31 - 1 else f"{max_num_seqs:,}"


def _share_shown(fraction: float | None) -> str:
    return "—" if fraction is None else f"{fraction:.1%}"


def _rate_shown(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:,.2f}"


def _throughput_target(throughput: dict[str, Any], context: int) -> str:
    """E.g. "≥ 90% of requests within TTFT 1 s, TPOT 50 ms (≤ 16,384 tokens each)"."""
    slos = [
        f"{name} {_seconds(value)}"
        for name, value in (("TTFT", throughput["slo_ttft_s"]), ("TPOT", throughput["slo_tpot_s"]))
        if value is not None
    ]
    return (
        f"≥ {_percent(throughput['slo_attainment_fraction'])} of requests within "
        f"{', '.join(slos)} (≤ {context:,} tokens each)"
    )


def _seconds(value: float) -> str:
    return f"{value * 1000:g} ms" if value < 1 else f"{value:g} s"


def _notes(payload: dict[str, Any]) -> list[str]:
    search = payload["search"]
    searched = search["searched"]
    notes = [
        f"searched {plural(search['skus'], 'SKU')}, {plural(search['points'], 'point')} "
        f"(tp {_list(searched['tp'])}; "
        f"pp {_list(searched['pp'])}; dp {_list(searched['dp'])}; KV {_list(searched['kv'])}; "
        f"weights {_list(searched['weights'])}; block {_list(searched['block'], 'engine default')}"
        f"): {plural(search['capacities_evaluated'], 'capacity', 'capacities')} computed, "
        f"{plural(search['beyond_cost_bound'], 'point')} costlier than the ranking skipped",
        "max conc: requests of the context the KV cache holds (what `kvplan report` and vLLM "
        "print); within headroom: the same with the headroom share of the budget kept unused",
    ]
    throughput = payload["throughput"]
    if throughput is not None:
        offered = throughput["offered_requests_per_s"]
        rate = f" (offered {offered:,.2f} req/s)" if offered is not None else ""
        notes[1] = (
            f"workload: {throughput['workload']}{rate}; "
            f"{plural(search['simulations'], 'candidate')} simulated; SLO met: share of its "
            "requests meeting every SLO (rejected ones "
            "missed); goodput: those requests per second of the run; within headroom: requests "
            "of the context the KV less the headroom holds"
        )
        notes += throughput["notes"]
    if search["skus_without_price"]:
        notes.append(f"left out, no price: {', '.join(search['skus_without_price'])}")
    plain = payload["unquantised_miss"]
    if plain:
        reach = (
            f"holds {plain['concurrency_within_headroom']:,} within the headroom "
            f"({plain['max_concurrency']:,} in all)"
            if plain["slo_met_fraction"] is None
            else f"serves {_percent(plain['slo_met_fraction'])} of requests within SLO"
        )
        notes.append(
            f"without quantisation, the closest as cheap as #1 {reach} "
            f"on {plain['gpus']}× {plain['sku']}, "
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
