"""`kvplan check`: exit codes, the CI JSON contract, and one exact line per bad-file problem.

Expected numbers are derived by hand in the comments from the catalogue's public figures:
Llama-3.1-8B (32 layers, 8 KV heads, head_dim 128, 8.03 B params, native 131,072 tokens),
Llama-3.1-70B (80 layers, 8 KV heads, head_dim 128, 70.6 B params), H100 SXM
85,520,809,984 B (nvidia-smi 81,559 MiB), L4 24,152,899,584 B (nvidia-smi 23,034 MiB).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.plan.guardrail import ProductSpec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GIB = 2**30

# Llama-3.1-8B bf16: 2 (K, V) × 32 layers × 8 heads × 128 × 2 B = 131,072 B per token.
LLAMA_8B_KV_BYTES_PER_TOKEN = 131_072


def _write(tmp_path: Path, text: str, name: str = "products.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _check(*args: str, columns: int | None = None):  # -> click Result
    env = {"COLUMNS": str(columns)} if columns else None
    return CliRunner().invoke(app, ["check", *args], env=env)


def _product(name: str, model: str, sku: str, context: str, promise: str, extra: str = "") -> str:
    return (
        f"  - name: {name}\n    model: {model}\n    sku: {sku}\n    context: {context}\n"
        f"    {promise}\n{extra}"
    )


PASSING = _product("chat-8k", "llama-3.1-8b", "h100-sxm", "8k", "concurrency: 4")
# Llama-3.1-8B at 128k on one L4: one request needs 131,072 × 131,072 B = 16 GiB of KV, but the
# L4 has 24,152,899,584 B = 22.49 GiB and the bf16 weights alone take 8.03e9 × 2 B = 14.96 GiB,
# so even with no engine reserve at most 7.5 GiB are left: not one request fits.
LONG_ON_L4 = _product("long-128k", "llama-3.1-8b", "l4", "128k", "concurrency: 1")
# Llama-3.1-70B promising 128k × 64 on one L4: 70.6e9 params × 2 B = 141 GB of weights against
# a 24.15 GB card; nothing is left for KV at all.
HUGE_ON_L4 = _product("big-128k", "llama-3.1-70b", "l4", "128k", "concurrency: 64")


def _json(result) -> dict:
    return json.loads(result.stdout)


# --- exit codes and the JSON contract ----------------------------------------------------


def test_passing_product_exits_0_with_exact_integers(tmp_path):
    path = _write(tmp_path, "products:\n" + PASSING)
    result = _check(str(path), "--format", "json")
    assert result.exit_code == 0, result.stderr
    payload = _json(result)
    assert payload["ok"] is True
    (product,) = payload["products"]
    assert {
        "name",
        "model",
        "sku",
        "tp",
        "pp",
        "engine",
        "promised_context",
        "promised_concurrency",
        "supported_concurrency",
        "supported_context_at_promised_concurrency",
        "kv_bytes_needed_per_gpu",
        "kv_budget_bytes_per_gpu",
        "ok",
        "reason",
    } <= set(product)
    assert (product["name"], product["model"], product["sku"]) == (
        "chat-8k",
        "llama-3.1-8b",
        "h100-sxm",
    )
    assert (product["tp"], product["pp"], product["engine"]) == (1, 1, "vllm")
    assert product["promised_context"] == 8192
    assert product["promised_concurrency"] == 4
    # 8,192 tokens × 131,072 B = 1 GiB per request (8,192 is a whole number of 16-token
    # blocks, so vLLM's paging adds nothing); 4 requests need exactly 4 GiB.
    assert product["kv_bytes_per_request_per_gpu"] == 8192 * LLAMA_8B_KV_BYTES_PER_TOKEN == GIB
    assert product["kv_bytes_needed_per_gpu"] == 4 * GIB
    assert isinstance(product["kv_budget_bytes_per_gpu"], int)
    # The budget is at most memory − weights = 79.65 − 14.96 GiB, at least several GiB.
    assert 4 * GIB < product["kv_budget_bytes_per_gpu"] < 85_520_809_984 - 16 * 10**9
    assert product["supported_concurrency"] >= 4
    assert product["supported_context_at_promised_concurrency"] >= 8192
    assert product["ok"] is True


def test_128k_on_hardware_that_holds_less_exits_1(tmp_path):
    path = _write(tmp_path, "products:\n" + LONG_ON_L4)
    result = _check(str(path), "--format", "json")
    assert result.exit_code == 1
    assert result.stderr == ""
    payload = _json(result)
    assert payload["ok"] is False
    (product,) = payload["products"]
    assert product["ok"] is False
    assert product["failure"] == "one_request"
    assert product["supported_concurrency"] == 0
    assert product["kv_bytes_needed_per_gpu"] == 131_072 * LLAMA_8B_KV_BYTES_PER_TOKEN == 16 * GIB
    assert product["kv_budget_bytes_per_gpu"] < int(7.6 * GIB)
    # Whatever fits on the L4 is far short of the promise: at most 7.5 GiB / 128 KiB = 60k.
    assert 0 < product["supported_context_at_promised_concurrency"] < 61_440
    assert "131,072 tokens needs 16.00 GiB" in product["reason"]


def test_weights_that_do_not_fit_exit_1(tmp_path):
    path = _write(tmp_path, "products:\n" + HUGE_ON_L4)
    result = _check(str(path), "--format", "json")
    assert result.exit_code == 1
    (product,) = _json(result)["products"]
    assert product["failure"] == "weights"
    assert product["supported_concurrency"] == 0
    assert product["supported_context_at_promised_concurrency"] == 0
    assert product["kv_budget_bytes_per_gpu"] < 0
    assert product["reason"].startswith("weights need ")


def test_concurrency_short_of_the_promise(tmp_path):
    # One 128k request of Llama-3.1-8B is 16 GiB; an H100 leaves at most 79.65 − 14.96 = 64.7
    # GiB for KV, so at most 4 fit, and at least 1 (vLLM keeps 0.9 × 79.65 − 14.96 − a few GiB
    # of activations ≈ 50 GiB). 64 promised is far beyond.
    text = _product("many-128k", "llama-3.1-8b", "h100-sxm", "128k", "concurrency: 64")
    result = _check(str(_write(tmp_path, "products:\n" + text)), "--format", "json")
    assert result.exit_code == 1
    (product,) = _json(result)["products"]
    assert product["failure"] == "concurrency"
    assert 1 <= product["supported_concurrency"] <= 4
    assert product["kv_bytes_needed_per_gpu"] == 64 * 16 * GIB
    assert product["supported_context_at_promised_concurrency"] < 131_072


def test_context_beyond_the_native_limit_fails(tmp_path):
    text = _product("too-long", "llama-3.1-8b", "h100-sxm", "256k", "concurrency: 1", "    tp: 8\n")
    result = _check(str(_write(tmp_path, "products:\n" + text)), "--format", "json")
    assert result.exit_code == 1
    (product,) = _json(result)["products"]
    assert product["failure"] == "native_limit"
    assert "native limit of 131,072 tokens" in product["reason"]


def test_one_failing_product_fails_the_file(tmp_path):
    path = _write(tmp_path, "products:\n" + PASSING + LONG_ON_L4)
    result = _check(str(path), "--format", "json", columns=40)
    assert result.exit_code == 1
    payload = _json(result)  # still parses at 40 columns: plain writes, no rich wrapping
    assert payload["ok"] is False
    assert [p["ok"] for p in payload["products"]] == [True, False]


def test_littles_law_rate_times_duration(tmp_path):
    # 0.1 requests/s × 30 s = 3 requests in flight (binary floats would round 3.0000000000000004
    # up to 4).
    text = _product(
        "rag", "llama-3.1-8b", "h100-sxm", "8k", "requests_per_s: 0.1", "    duration_s: 30\n"
    )
    result = _check(str(_write(tmp_path, "products:\n" + text)), "--format", "json")
    assert result.exit_code == 0, result.stderr
    (product,) = _json(result)["products"]
    assert product["promised_concurrency"] == 3
    assert product["kv_bytes_needed_per_gpu"] == 3 * GIB
    assert any("Little's law" in note for note in product["notes"])


def test_product_spec_reads_token_suffixes_and_engine_overrides():
    spec = ProductSpec.model_validate(
        {
            "name": "x",
            "model": "llama-3.1-8b",
            "sku": "h100-sxm",
            "context": "128k",
            "concurrency": 2,
            "kv_dtype": "fp8",
            "kv_memory": "40GiB",
        }
    )
    assert spec.context == 131_072
    assert spec.kv_dtype == "fp8_e4m3"
    assert spec.kv_memory == 40 * GIB
    assert spec.engine == "vllm"
    assert spec.promised_concurrency == 2


@pytest.mark.parametrize("fmt", ["table", "md", "csv"])
def test_other_formats_keep_the_exit_code(tmp_path, fmt):
    path = _write(tmp_path, "products:\n" + PASSING + LONG_ON_L4)
    result = _check(str(path), "--format", fmt)
    assert result.exit_code == 1
    assert "long-128k" in result.stdout
    if fmt != "csv":
        assert "FAIL long-128k:" in result.stdout


def test_shipped_examples():
    assert _check(str(EXAMPLES / "products.yaml")).exit_code == 1
    assert _check(str(EXAMPLES / "products-ok.yaml")).exit_code == 0


# --- bad files: exit 2, empty stdout, one stderr line per problem --------------------------


def _bad(tmp_path: Path, text: str) -> tuple[Path, list[str]]:
    path = _write(tmp_path, text)
    result = _check(str(path), "--format", "json")
    assert result.exit_code == 2
    assert result.stdout == ""
    return path, result.stderr.splitlines()


def test_malformed_yaml(tmp_path):
    path, lines = _bad(tmp_path, "products:\n  - name: a\n   model: [\n")
    assert lines == [f"error: {path}:3:4: malformed YAML: did not find expected '-' indicator"]


def test_unknown_field(tmp_path):
    path, lines = _bad(tmp_path, "products:\n" + PASSING + "    colour: red\n")
    assert lines == [f"error: {path}:7: products.0.colour: unknown field (value 'red')"]


def test_negative_concurrency(tmp_path):
    text = _product("a", "llama-3.1-8b", "h100-sxm", "8k", "concurrency: -4")
    path, lines = _bad(tmp_path, "products:\n" + text)
    assert lines == [
        f"error: {path}:6: products.0.concurrency: value -4: Input should be greater than 0"
    ]


def test_both_concurrency_and_rate(tmp_path):
    text = PASSING + "    requests_per_s: 2\n    duration_s: 30\n"
    path, lines = _bad(tmp_path, "products:\n" + text)
    assert lines == [
        f"error: {path}:2: products.0: value {{…}}: give either concurrency or "
        "requests_per_s with duration_s, not both"
    ]


def test_rate_without_duration(tmp_path):
    text = _product("a", "llama-3.1-8b", "h100-sxm", "8k", "requests_per_s: 2")
    path, lines = _bad(tmp_path, "products:\n" + text)
    assert lines == [
        f"error: {path}:2: products.0: value {{…}}: give concurrency, or both "
        "requests_per_s and duration_s (Little's law)"
    ]


def test_unknown_model_and_sku_with_suggestions(tmp_path):
    text = PASSING + _product("b", "llama-3.1-7b", "h100-sxn", "8k", "concurrency: 1")
    path, lines = _bad(tmp_path, "products:\n" + text)
    assert len(lines) == 2
    assert lines[0].startswith(
        f"error: {path}:8: products.1.model (product 'b'): unknown model 'llama-3.1-7b'; "
        "did you mean llama-3.1-70b, llama-3.1-8b"
    )
    assert lines[1].startswith(
        f"error: {path}:9: products.1.sku (product 'b'): unknown sku 'h100-sxn'; "
        "did you mean one of h100-nvl, h100-pcie, h100-sxm?"
    )


def test_bad_context_kv_dtype_and_engine_one_line_each(tmp_path):
    text = _product(
        "a",
        "llama-3.1-8b",
        "h100-sxm",
        "8q",
        "concurrency: 1",
        "    kv_dtype: fp9\n    engine: vllm2\n",
    )
    path, lines = _bad(tmp_path, "products:\n" + text)
    # pydantic reports in field order; each line names its own line number.
    assert sorted(lines) == [
        f"error: {path}:5: products.0.context: value '8q': '8q' is not a token "
        "count; use an integer or a k/M suffix (8k = 8192, 128k = 131072, 1M = 1048576)",
        f"error: {path}:7: products.0.kv_dtype: value 'fp9': unknown dtype 'fp9'; "
        "did you mean 'fp8'? (allowed: fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int8, int4, nvfp4, "
        "mxfp4, q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl)",
        f"error: {path}:8: products.0.engine: value 'vllm2': unknown engine "
        "(allowed: vllm, sglang, trtllm, llama.cpp, ollama, exact, hf, naive)",
    ]


def test_repeated_product_name(tmp_path):
    path, lines = _bad(tmp_path, "products:\n" + PASSING + PASSING)
    assert lines == [
        f"error: {path}:7: products.1.name: value 'chat-8k': repeats products.0's name "
        "(product names must be unique)"
    ]


def test_empty_and_missing_files(tmp_path):
    path, lines = _bad(tmp_path, "products: []\n")
    assert lines == [
        f"error: {path}:1: products: value []: List should have at least 1 item after "
        "validation, not 0"
    ]
    missing = tmp_path / "nope.yaml"
    result = _check(str(missing))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: {missing}: no such file\n"


def test_plan_errors_name_the_product(tmp_path):
    # Llama-3.1-8B has 32 layers: 64 pipeline stages cannot each hold one.
    path, lines = _bad(tmp_path, "products:\n" + PASSING + "    pp: 64\n")
    assert lines == [
        f"error: {path}:2: products.0 (chat-8k): --pp 64 exceeds the model's 32 layers"
    ]


# --- every engine option the CLI has, in a products file ------------------------------------


def test_products_take_every_engine_option_of_the_cli():
    from kvplan.cli.engine_options import _PARAMETERS

    fields = set(ProductSpec.model_fields)
    assert set(_PARAMETERS) <= fields, sorted(set(_PARAMETERS) - fields)


# gpt-oss-120b on 2 × 2 H100s with expert parallelism, 32-token blocks, a 4 GiB activation
# override and vLLM 0.11's accounting: the file and the flags must plan the same deployment.
MOE_OPTIONS = {
    "dp": "2",
    "ep": "true",
    "block_size": "32",
    "activation_memory": "4GiB",
    "engine_version": '"0.11"',
}


def test_a_product_with_dp_ep_and_engine_options_plans_what_the_cli_plans(tmp_path):
    extra = "".join(f"    {key}: {value}\n" for key, value in MOE_OPTIONS.items())
    text = _product("moe", "gpt-oss-120b", "h100-sxm", "32k", "concurrency: 16", extra)
    result = _check(
        str(
            _write(tmp_path, "products:\n" + text.replace("    context", "    tp: 2\n    context"))
        ),
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    (product,) = _json(result)["products"]
    flags = ["--dp", "2", "--ep", "--block-size", "32", "--activation-memory", "4GiB"]
    flags += ["--engine-version", "0.11", "--tp", "2", "-c", "32k", "-b", "16"]
    reported = CliRunner().invoke(
        app, ["report", "-m", "gpt-oss-120b", "-s", "h100-sxm", *flags, "--format", "json"]
    )
    (row,) = json.loads(reported.stdout)
    assert (product["dp"], product["ep"]) == (2, True)
    assert product["kv_budget_bytes_per_gpu"] == row["kv_budget_bytes_per_gpu"]
    assert product["weights_bytes_per_gpu"] == row["weights_bytes_per_gpu"]
    assert product["supported_concurrency"] == row["max_concurrency"]
    assert row["budget"]["activation_bytes"] == 4 * GIB
    assert row["tokens_per_block"] == 32
    # 16 promised over 2 replicas: each GPU holds 8 requests' KV.
    assert product["kv_bytes_needed_per_gpu"] == 8 * product["kv_bytes_per_request_per_gpu"]


@pytest.mark.parametrize(
    ("key", "value", "flag"),
    [
        ("block_size", "5000", ["--block-size", "5000"]),  # kvplan's block limit is 4,096
        ("dp", "0", ["--dp", "0"]),
        ("ep", "true", ["--ep"]),  # llama-3.1-8b has no routed experts
        ("engine_version", '"0.1"', ["--engine-version", "0.1"]),  # vLLM 0.5 is the oldest
    ],
)
def test_a_bad_engine_option_is_refused_in_a_file_as_on_the_command_line(
    tmp_path, key, value, flag
):
    text = _product(
        "a", "llama-3.1-8b", "h100-sxm", "8k", "concurrency: 1", f"    {key}: {value}\n"
    )
    path, lines = _bad(tmp_path, "products:\n" + text)
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}:")
    refused = CliRunner().invoke(app, ["size", "llama-3.1-8b", *flag])
    assert (refused.exit_code, refused.stdout) == (2, "")


# --- every problem in one run, the estimate band, the change that would pass ----------------


def test_schema_and_name_problems_come_in_one_run(tmp_path):
    # An unknown field in one product and an unknown SKU in another: a user fixing the file
    # sees both at once, in the file's order, not the names only after the fields are fixed.
    text = (
        PASSING
        + "    colour: red\n"
        + _product("b", "llama-3.1-8b", "h100-sxn", "8k", "concurrency: 1")
        + _product("c", "llama-3.1-7b", "h100-sxm", "8k", "concurrency: -1")
    )
    path, lines = _bad(tmp_path, "products:\n" + text)
    assert len(lines) == 4
    assert lines[0] == f"error: {path}:7: products.0.colour: unknown field (value 'red')"
    assert lines[1].startswith(f"error: {path}:10: products.1.sku (product 'b'): unknown sku")
    assert lines[2].startswith(f"error: {path}:14: products.2.model (product 'c'): unknown model")
    assert lines[3] == (
        f"error: {path}:17: products.2.concurrency: value -1: Input should be greater than 0"
    )


def test_plan_errors_of_every_product_come_in_one_run(tmp_path):
    # Llama-3.1-8B has 32 layers: neither 64 nor 48 pipeline stages can each hold one.
    first = PASSING + "    pp: 64\n"
    second = _product("b", "llama-3.1-8b", "h100-sxm", "8k", "concurrency: 1", "    pp: 48\n")
    path, lines = _bad(tmp_path, "products:\n" + first + second)
    assert lines == [
        f"error: {path}:2: products.0 (chat-8k): --pp 64 exceeds the model's 32 layers",
        f"error: {path}:8: products.1 (b): --pp 48 exceeds the model's 32 layers",
    ]


def _json_products(path: Path) -> list[dict]:
    result = _check(str(path), "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["products"]


def test_a_promise_inside_the_estimate_band_is_marked(tmp_path):
    # Llama-3.1-8B at 8k: one request is 8,192 × 131,072 B = 1 GiB exactly (8,192 tokens are
    # 512 whole blocks of 16). A promise of N requests holds at the low end of the budget's
    # band only if budget − band ≥ N GiB; it holds with the estimate if budget ≥ N GiB.
    text = "products:\n" + "".join(
        _product(f"n{n}", "llama-3.1-8b", "h100-sxm", "8k", f"concurrency: {n}")
        for n in (40, 50, 51)
    )
    products = _json_products(_write(tmp_path, text))
    marked = []
    for product in products:
        budget, needed = product["kv_budget_bytes_per_gpu"], product["kv_bytes_needed_per_gpu"]
        band = product["kv_budget_uncertainty_bytes"]
        assert band > 0  # vLLM's activation peak and non-torch memory are estimates
        assert needed == product["promised_concurrency"] * GIB
        assert product["ok"] == (budget >= needed)
        low_end = product["supported_concurrency_at_band_low_end"]
        assert low_end == (budget - band) // GIB
        assert product["within_estimate_band"] == (product["ok"] and budget - band < needed)
        if product["within_estimate_band"]:
            marked.append(product["name"])
            assert any(n.startswith("within the KV budget's ±") for n in product["notes"])
    assert "n40" not in marked and marked  # the case has a marked product and a clear one
    table = _check(str(tmp_path / "products.yaml")).stdout
    assert "ok*" in table and "note: ok*: holds with the estimated KV budget" in table


def test_a_failure_hints_the_tp_that_would_pass(tmp_path):
    # LONG_ON_L4 fails at tp 1 (above). Its hint names a degree; the same product at that
    # degree must then pass, checked on its own.
    products = _json_products(_write(tmp_path, "products:\n" + LONG_ON_L4))
    (hint,) = [n for n in products[0]["notes"] if "would hold it" in n]
    tp = int(hint.split()[1])
    assert tp > 1
    wider = _product("wider", "llama-3.1-8b", "l4", "128k", "concurrency: 1", f"    tp: {tp}\n")
    (again,) = _json_products(_write(tmp_path, "products:\n" + wider, "wider.yaml"))
    assert again["ok"] is True
    # And no smaller degree than the one named passes: tp 1 failed, tp 2 up to it are checked.
    for smaller in (t for t in (2, 4) if t < tp):
        tp_line = f"    tp: {smaller}\n"
        lower = _product("lower", "llama-3.1-8b", "l4", "128k", "concurrency: 1", tp_line)
        (result,) = _json_products(_write(tmp_path, "products:\n" + lower, "lower.yaml"))
        assert result["ok"] is False
