"""`kvplan models`, `skus`, `show` and `import-hf` output."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kvplan.plan.catalog_facts import model_facts
from kvplan.report.render import (
    Format,
    Table,
    emit,
    gib,
    human_bytes,
    plural,
)
from kvplan.specs import ModelSpec, SkuSpec


def _emit(table: Table, fmt: Format) -> None:
    emit(fmt, table.records(), table.records(), lambda: table)


def _kinds(model: ModelSpec) -> str:
    counts = Counter(model.layer_kinds)
    return " + ".join(f"{n} {kind}" for kind, n in counts.items())


def models_table(models: list[ModelSpec]) -> Table:
    """One row per model: geometry and bf16 KV bytes per token."""
    table = Table(
        plural(len(models), "model"),
        [
            "model",
            "family",
            "layers",
            "q/kv heads × dim",
            "KV per token (bf16)",
            "max context",
            "params",
        ],
        [
            "model",
            "family",
            "layers",
            "attention",
            "kv_bytes_per_token_bf16",
            "max_context",
            "params",
        ],
        # A narrow terminal keeps the name and the KV bytes per token, then what a user
        # chooses a model by (context, size), then the geometry behind the bytes.
        priority=[0, 3, 5, 4, 1, 2, 2],
    )
    for model in models:
        facts = model_facts(model)
        a = model.attention
        geometry = (
            f"MLA {model.mla.kv_lora_rank}+{model.mla.qk_rope_head_dim}"
            if model.mla
            else f"{a.num_heads}/{a.num_kv_heads} × {a.head_dim}"
        )
        table.add(
            [
                model.name,
                model.family,
                dict(Counter(model.layer_kinds)),
                geometry,
                facts.kv_bytes_per_token_bf16,
                model.max_context,
                facts.params,
            ],
            [
                model.name,
                model.family,
                _kinds(model),
                geometry,
                human_bytes(facts.kv_bytes_per_token_bf16),
                f"{model.max_context:,}",
                f"{facts.params / 1e9:,.2f} B",
            ],
        )
    return table


def render_models(models: list[ModelSpec], fmt: Format, columns: list[str] | None = None) -> None:
    """Print the model list; `columns` picks the table's columns (--columns; all when None)."""
    table = models_table(models)
    emit(fmt, table.records(), table.records(), lambda: table, columns=columns)


def skus_table(skus: list[SkuSpec]) -> Table:
    """One row per SKU: memory, bandwidth, dense bf16/fp8 peaks."""
    table = Table(
        plural(len(skus), "GPU SKU"),
        ["sku", "vendor", "memory", "bandwidth", "bf16 dense", "fp8 dense"],
        [
            "sku",
            "vendor",
            "memory_bytes",
            "bandwidth_bytes_per_s",
            "bf16_flop_per_s",
            "fp8_flop_per_s",
        ],
    )
    for sku in skus:
        bf16, fp8 = sku.peak_flop_per_s.get("bf16"), sku.peak_flop_per_s.get("fp8")
        table.add(
            [sku.name, sku.vendor, sku.memory_bytes, sku.bandwidth_bytes_per_s, bf16, fp8],
            [
                sku.name,
                sku.vendor,
                gib(sku.memory_bytes),
                f"{sku.bandwidth_bytes_per_s / 1e12:.2f} TB/s",
                f"{bf16 / 1e12:,.0f} TFLOP/s" if bf16 else "—",
                f"{fp8 / 1e12:,.0f} TFLOP/s" if fp8 else "—",
            ],
        )
    return table


def render_skus(skus: list[SkuSpec], fmt: Format) -> None:
    """Print the SKU list."""
    _emit(skus_table(skus), fmt)


def _flatten(prefix: str, value: Any, rows: list[tuple[str, Any]]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else key, item, rows)
    else:
        rows.append((prefix, value))


def field_text(key: str, value: Any) -> str:
    """One catalogue field as a person reads it: bytes, rates and FLOP/s in units with the
    exact figure beside them, token counts and large numbers with separators.

    The unit comes from the field's name (STYLE: units in names): `…bytes…`, `…bytes_per_s`,
    `…flop_per_s`, `…_s` (seconds; µs below a millisecond), `…params…`, contexts and windows
    in tokens.
    """
    name = key.rsplit(".", 1)[-1]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(field_text(key, item) for item in value) or "—"
    if not isinstance(value, (int, float)):
        return str(value)
    if "flop_per_s" in key:
        return f"{value / 1e12:,.1f} TFLOP/s"
    if "bytes_per_s" in key:
        return f"{value / 1e9:,.0f} GB/s"
    if name.endswith("_s") and isinstance(value, float) and value < 1e-3:
        return f"{value * 1e6:,.1f} µs"
    if "bytes" in name and isinstance(value, int):
        return f"{human_bytes(value)} ({value:,} B)" if value >= 1024 else f"{value:,} B"
    if name.startswith("params") and isinstance(value, int):
        return f"{value:,} ({value / 1e9:,.2f} billion)"
    if isinstance(value, int) and any(w in name for w in ("context", "window", "tokens")):
        return plural(value, "token")
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def render_entry(entry: ModelSpec | SkuSpec, fmt: Format) -> None:
    """Print one catalogue entry: its fields and, for a model, derived numbers."""
    record = entry.model_dump(mode="json", exclude_none=True)
    if isinstance(entry, ModelSpec):
        facts = model_facts(entry)
        record["derived"] = {
            "layer_kinds": dict(Counter(entry.layer_kinds)),
            "kv_bytes_per_token_bf16": facts.kv_bytes_per_token_bf16,
            "params_computed": facts.params,
            "params_active": facts.active_params,
        }
    rows: list[tuple[str, Any]] = []
    _flatten("", record, rows)
    table = Table(entry.name, ["field", "value"], ["field", "value"], wrap=("value",))
    for key, value in rows:
        table.add([key, value], [key, field_text(key, value)], [None, "/" + key.replace(".", "/")])
    emit(fmt, record, table.records(), lambda: table)


def spec_yaml(spec: ModelSpec) -> str:
    """A catalogue YAML entry for `spec` (what `kvplan import-hf -o` writes)."""
    import yaml

    header = f"# Imported by `kvplan import-hf` from {spec.source}\n"
    return header + yaml.safe_dump(_entry(spec), sort_keys=False, width=100)


def spec_json(spec: ModelSpec) -> str:
    """The same entry as JSON (`kvplan import-hf --format json`)."""
    import json

    return json.dumps(_entry(spec), indent=2) + "\n"


def _entry(spec: ModelSpec) -> dict:
    data = spec.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    return {"name": data.pop("name"), **data}


def schema_text(schema: dict, fmt: str) -> str:
    """A JSON Schema as JSON (for editors) or YAML (to read)."""
    import json

    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(schema, sort_keys=False, width=100)
    return json.dumps(schema, indent=2) + "\n"
