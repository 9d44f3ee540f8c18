"""Every command gives one answer: size, report, check and claim agree for every catalogue model,
engine and TP degree, because they all ask the same engine profile.

Nothing here checks a number against kvplan's own formula; it checks that two commands never
disagree (the bytes one request is charged, how many requests fit, the verdict).
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.api.build import capacity_row, size_report
from kvplan.catalog import Catalog
from kvplan.catalog.resolve import ResolvedModel
from kvplan.cli import app
from kvplan.engine import ENGINES
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.plan.capacity import Capacity, tp_degrees
from kvplan.plan.guardrail import ProductSpec, check_product, claim_sheet
from kvplan.plan.sizing import size

CATALOG = Catalog()
SKU = CATALOG.sku("h100-sxm")
BATCH = 8


def _context(model) -> int:
    return min(model.max_context, 32_768)


def _cases():
    for model in CATALOG.models():
        for name, profile in ENGINES.items():
            base = Deployment(model, profile)
            for tp in tp_degrees(base, SKU):
                yield pytest.param(model, name, tp, id=f"{model.name}-{name}-tp{tp}")


@pytest.mark.parametrize(("model", "engine_name", "tp"), list(_cases()))
def test_size_and_report_agree(model, engine_name, tp):
    deployment = Deployment(model, ENGINES[engine_name], tp=tp)
    context = _context(model)
    sized = size_report(size(deployment, Batch.uniform(context, BATCH), SKU)).model_dump()
    reported = capacity_row(Capacity(deployment, SKU, BATCH, context)).model_dump()
    assert sized["kv_bytes_per_request_per_gpu"] == reported["kv_bytes_per_request_per_gpu"]
    assert sized["max_concurrency"] == reported["max_concurrency"]
    assert sized["max_context_tokens"] == reported["max_context_tokens"]
    assert sized["kv_budget_bytes_per_gpu"] == reported["kv_budget_bytes_per_gpu"]
    assert sized["verdict"] == reported["verdict"]
    assert sized["fits"] == (reported["verdict"] == "fits")
    # The batch's bytes are the per-request charge added up.
    assert sized["kv_bytes_per_gpu"] == BATCH * sized["kv_bytes_per_request_per_gpu"]


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@pytest.mark.parametrize(
    ("model_name", "tp", "context", "batch"),
    [
        ("qwen2.5-7b", 1, 131_072, 1),
        ("llama-3.1-70b", 4, 32_768, 64),
        ("gemma-2-9b", 1, 8192, 32),
        ("deepseek-v2-lite", 1, 32_768, 16),
        ("llama-4-scout", 8, 131_072, 4),
    ],
)
def test_check_and_claim_agree_with_capacity(engine_name, model_name, tp, context, batch):
    model = CATALOG.model(model_name)
    if ENGINES[engine_name].tp_refusal(model, tp):
        pytest.skip(f"{engine_name} refuses tp {tp} (its own test covers the refusal)")
    sku = CATALOG.sku("l4") if model_name == "qwen2.5-7b" else SKU
    product = ProductSpec.model_validate(
        {
            "name": "p",
            "model": model_name,
            "sku": sku.name,
            "tp": tp,
            "engine": engine_name,
            "context": context,
            "concurrency": batch,
        }
    )
    checked = check_product(product, ResolvedModel(model, "catalogue"), sku)
    deployment = Deployment(model, ENGINES[engine_name], tp=tp)
    sheet = claim_sheet(deployment, sku, context, batch)
    capacity = Capacity(deployment, sku, batch, context)
    assert checked.supported_concurrency == sheet.capacity.max_concurrency()
    assert checked.kv_bytes_per_request_per_gpu == sheet.kv_bytes_per_request_per_gpu
    assert checked.ok == sheet.fits == capacity.fits
    assert checked.capacity.verdict == sheet.verdict == capacity.verdict
    assert checked.capacity.weights_bytes_per_gpu == sheet.weights_bytes_per_gpu


def _json(*args: str) -> dict | list:
    result = CliRunner().invoke(app, [*args, "--format", "json"], env={"COLUMNS": "60"})
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from([m.name for m in CATALOG.models()]),
    engine_name=st.sampled_from(sorted(ENGINES)),
    tp=st.sampled_from([1, 2, 4, 8]),
    context=st.sampled_from(["4k", "32k", "128k"]),
    batch=st.integers(1, 64),
)
# A case the random draw found: SGLang's pool stores the cross-attention layers per token, so
# what it stores per token (engine_kv_bytes_per_token_per_gpu) is not the physics
# (kv_bytes_per_token_per_gpu); every command gives each key the same value.
@example(model="llama-3.2-11b-vision", engine_name="sglang", tp=1, context="4k", batch=1)
# The textbook MHA figure: naive stores 2 · layers · hidden per token, not Llama's 8 KV heads.
@example(model="llama-3.1-8b", engine_name="naive", tp=1, context="4k", batch=1)
def test_commands_agree_end_to_end(model, engine_name, tp, context, batch):
    common = ["--sku", "h100-sxm", "--tp", str(tp), "-e", engine_name]
    common += ["--context", context, "--batch", str(batch)]
    result = CliRunner().invoke(app, ["size", model, *common, "--format", "json"])
    uneven = CATALOG.model(model).attention.num_heads % tp != 0
    if uneven or result.exit_code == 2:  # vLLM also refuses tp against the KV heads
        assert result.exit_code == 2
        for command in (["report", "-m", model], ["claim", model]):
            refused = CliRunner().invoke(app, [*command, *common, "--format", "json"])
            assert (refused.exit_code, refused.stdout) == (2, "")
        return
    sized = json.loads(result.stdout)
    (reported,) = _json("report", "-m", model, *common)
    claimed = _json("claim", model, *common)
    assert sized["kv_bytes_per_request_per_gpu"] == reported["kv_bytes_per_request_per_gpu"]
    assert sized["kv_bytes_per_request_per_gpu"] == claimed["kv_bytes_per_request_per_gpu"]
    assert sized["max_concurrency"] == reported["max_concurrency"]
    assert sized["max_concurrency"] == claimed["max_concurrency_at_context"]
    assert sized["fits"] == claimed["fits"] == (reported["verdict"] == "fits")
    assert sized["verdict"] == claimed["verdict"] == reported["verdict"]
    assert sized["weights_bytes_per_gpu"] == claimed["weights_bytes_per_gpu"]
    assert sized["weights_bytes_per_gpu"] == reported["weights_bytes_per_gpu"]
    # The claim's arithmetic is the size's: what is left after the batch, and the verdict
    # never contradicts it (memory left over and "does not fit" only past the context limit).
    assert sized["free_bytes"] == claimed["free_bytes_per_gpu"]
    if claimed["within_native_limit"] and claimed["verdict"] != "weights don't fit":
        assert claimed["fits"] == (claimed["free_bytes_per_gpu"] >= 0)
    assert (result.exit_code == 1) == (not sized["fits"])
    startup = reported["startup"]
    if engine_name == "vllm" and startup:
        # The log lines' figures are the row's: one pool, read twice.
        assert startup["num_gpu_blocks"] == reported["kv_blocks"]
        assert startup["gpu_kv_cache_tokens"] == reported["kv_capacity_tokens"]
        assert startup["available_kv_bytes"] == reported["kv_budget_bytes_per_gpu"]
    checked = _check_json(model, engine_name, tp, context, batch)
    _same_fields_agree({"size": sized, "report": reported, "claim": claimed, "check": checked})


# Keys that name different things in different commands: each command's own notes (claim adds
# its sheet's caveats, check its products' Little's-law and scheduler notes).
OWN_MEANING = {"notes"}


def _same_fields_agree(records: dict[str, dict]) -> None:
    """A key two commands' JSON both hold has one value in both (the budget's terms, the
    weights, the charge per request, the verdict, the formula's terms, the RoPE reach…)."""
    for (a, x), (b, y) in itertools.combinations(records.items(), 2):
        shared = set(x) & set(y) - OWN_MEANING - {"exit"}
        for key in shared:
            assert x[key] == y[key], f"{key}: {a} says {x[key]!r}, {b} says {y[key]!r}"


def _check_json(model: str, engine_name: str, tp: int, context: str, batch: int) -> dict:
    """The product `check` reads for the same plan: its JSON record."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "products.yaml"
        path.write_text(
            f"products:\n  - name: p\n    model: {model}\n    sku: h100-sxm\n    tp: {tp}\n"
            f"    engine: {engine_name}\n    context: {context}\n    concurrency: {batch}\n",
            encoding="utf-8",
        )
        ran = CliRunner().invoke(app, ["check", str(path), "--format", "json"])
    assert ran.exit_code in (0, 1), ran.output
    return json.loads(ran.stdout)["products"][0]


def _all_commands(model: str, *options: str, tmp_path) -> dict[str, dict]:
    """size, claim, report and check of one plan, as JSON (check through a products file)."""
    sized = CliRunner().invoke(app, ["size", model, *options, "--format", "json"])
    claimed = CliRunner().invoke(app, ["claim", model, *options, "--format", "json"])
    reported = CliRunner().invoke(app, ["report", "-m", model, *options, "--format", "json"])
    flags = dict(zip(options[::2], options[1::2], strict=True))
    path = tmp_path / "products.yaml"
    path.write_text(
        f"products:\n  - name: p\n    model: {model}\n    sku: {flags['--sku']}\n"
        f"    tp: {flags.get('--tp', 1)}\n    context: {flags['--context']}\n"
        f"    concurrency: {flags.get('--batch', 1)}\n"
        + (f"    rope_scaling: {flags['--rope-scaling']}\n" if "--rope-scaling" in flags else ""),
        encoding="utf-8",
    )
    checked = CliRunner().invoke(app, ["check", str(path), "--format", "json"])
    for ran in (sized, claimed, reported, checked):
        assert ran.exit_code in (0, 1), ran.output
    return {
        "size": json.loads(sized.stdout) | {"exit": sized.exit_code},
        "claim": json.loads(claimed.stdout) | {"exit": claimed.exit_code},
        "report": json.loads(reported.stdout)[0],
        "check": json.loads(checked.stdout)["products"][0] | {"exit": checked.exit_code},
    }


# Llama-4-Scout-17B-16E-Instruct config.json: max_position_embeddings 10,485,760, head_dim 128.
# vLLM's RotaryEmbedding caches cos and sin for every position: 10,485,760 × 128 values × 2 B
# (bf16) = 2,684,354,560 B on every GPU, counted with the weights ("Model loading took").
SCOUT_ROPE_TABLE_BYTES = 10_485_760 * 128 * 2


def test_every_command_shows_the_engines_weights(tmp_path):
    out = _all_commands(
        "llama-4-scout-instruct",
        *("--sku", "h100-sxm", "--tp", "8", "--context", "128k", "--batch", "12"),
        tmp_path=tmp_path,
    )
    engine_weights = out["report"]["weights_bytes_per_gpu"]
    for command in ("size", "claim", "check"):
        assert out[command]["weights_bytes_per_gpu"] == engine_weights, command
    # The checkpoint's bytes are shown beside them, labelled, the RoPE table apart.
    for command in ("size", "claim"):
        checkpoint = out[command]["checkpoint_weights_bytes_per_gpu"]
        assert engine_weights - checkpoint == SCOUT_ROPE_TABLE_BYTES


def test_claim_arithmetic_agrees_with_its_verdict(tmp_path):
    # gpt-oss-20b on one L4 at 18 × 8k: the batch is over the budget, 17 requests fit; the
    # claim's "free" is the size's "short by" and its verdict the one size and report give.
    out = _all_commands(
        "gpt-oss-20b", *("--sku", "l4", "--context", "8k", "--batch", "18"), tmp_path=tmp_path
    )
    assert out["claim"]["free_bytes_per_gpu"] == out["size"]["free_bytes"] < 0
    free = out["claim"]["memory_bytes"] - out["claim"]["total_bytes_per_gpu"]
    assert free == out["claim"]["free_bytes_per_gpu"]
    assert out["claim"]["total_bytes_per_gpu"] == (
        out["claim"]["weights_bytes_per_gpu"]
        + out["claim"]["kv_bytes_batch_per_gpu"]
        + out["claim"]["engine_reserve_bytes_per_gpu"]
    )
    verdicts = {out[c]["verdict"] for c in ("size", "claim", "report")}
    assert verdicts == {f"fits {out['report']['fitting_batch']} of 18"}
    assert out["size"]["exit"] == out["claim"]["exit"] == out["check"]["exit"] == 1


@pytest.mark.parametrize(
    ("model", "options", "verdict"),
    [
        # Llama-3.1-8B config.json: max_position_embeddings 131,072 (llama3 RoPE scaling is
        # already inside it); 200k = 204,800 and 1M = 1,048,576 tokens are past it.
        ("llama-3.1-8b", ("--sku", "h100-sxm", "--context", "200k"), "native limit of 131,072"),
        ("llama-3.1-8b", ("--sku", "b200", "--context", "1M"), "native limit of 131,072"),
        # Qwen3-8B with YaRN ×4 over original_max_position_embeddings 32,768 (model card):
        # 4 × 32,768 = 131,072 tokens; 256k = 262,144 is past even the extended limit.
        (
            "qwen3-8b",
            ("--sku", "h100-sxm", "--context", "256k", "--rope-scaling", "yarn:4"),
            "extended limit of 131,072",
        ),
    ],
)
def test_past_the_context_limit_every_command_fails(model, options, verdict, tmp_path):
    out = _all_commands(model, *options, tmp_path=tmp_path)
    expected = f"exceeds the {verdict} tokens"
    assert out["size"]["verdict"] == out["claim"]["verdict"] == out["report"]["verdict"]
    assert out["size"]["verdict"] == expected
    assert out["size"]["fits"] is out["claim"]["fits"] is out["check"]["ok"] is False
    assert out["check"]["failure"] == "native_limit"
    assert expected.removeprefix("exceeds the ") in out["check"]["reason"]
    assert out["size"]["exit"] == out["claim"]["exit"] == out["check"]["exit"] == 1
    refused = CliRunner().invoke(app, ["recommend", model, *options[2:]])
    assert refused.exit_code == 2
    assert f"exceeds {model}'s {verdict} tokens" in refused.stderr


@pytest.mark.parametrize(
    ("model", "tp", "accepted"),
    [
        # Qwen2.5-7B config.json: 28 attention heads, 4 KV heads. tp must divide 28 and either
        # divide 4 or be a multiple of it: 1, 2, 4 and 28 (7 and 14 split no KV head evenly).
        ("qwen2.5-7b", 8, (1, 2, 4, 28)),
        ("qwen2.5-7b", 7, (1, 2, 4, 28)),
        # DeepSeek-R1-Distill-Qwen-1.5B config.json: 12 heads, 2 KV heads: 1, 2, 4, 6, 12.
        ("deepseek-r1-distill-qwen-1.5b", 3, (1, 2, 4, 6, 12)),
    ],
)
def test_tp_refusal_suggests_only_degrees_the_engine_accepts(model, tp, accepted):
    refused = CliRunner().invoke(app, ["size", model, "--tp", str(tp)])
    assert refused.exit_code == 2
    listed = refused.stderr.rsplit("use one of ", 1)[1].strip()
    assert listed == ", ".join(map(str, accepted))
    for degree in accepted:
        ran = CliRunner().invoke(app, ["size", model, "--tp", str(degree), "--format", "json"])
        assert ran.exit_code == 0, ran.output


def test_a_ragged_batch_gets_its_own_verdict():
    # exact engine on one L4: the KV budget is the runtime-visible memory (23,583,784,960 B,
    # the catalogue's deviceQuery figure) − Llama-3.1-8B's bf16 weights (8,030,261,248 params
    # × 2 B = 16,060,522,496 B) = 7,523,262,464 B = 57,397.99 tokens of 131,072 B. The
    # shortest first: 1,024 + 4,096 + 32,768 = 37,888 tokens fit; a second 32,768 would make
    # 70,656. So 3 of the 5 sequences fit (the uniform reading at 32,768 would say 1).
    lengths = "1k,4k,32k,32k,32k"
    ran = CliRunner().invoke(
        app,
        ["size", "llama-3.1-8b", "--lengths", lengths, "-s", "l4", "-e", "exact", "-f", "json"],
    )
    record = json.loads(ran.stdout)
    assert record["kv_budget_bytes_per_gpu"] == 23_583_784_960 - 16_060_522_496
    assert (record["verdict"], record["fits"], ran.exit_code) == ("fits 3 of 5", False, 1)
    held = CliRunner().invoke(
        app, ["size", "llama-3.1-8b", "--lengths", "1k,4k,32k", "-s", "l4", "-e", "exact"]
    )
    assert held.exit_code == 0 and "— fits (requests" in held.stdout
