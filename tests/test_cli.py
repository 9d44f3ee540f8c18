"""The command line as a user meets it: exit codes, parseable JSON, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def run(*args: str, columns: int | None = None):
    """Invoke kvplan; without `columns`, as piped output (no terminal width)."""
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns) if columns else None})


def test_size_json_contract_exact_integers_at_40_columns():
    result = run(
        "size",
        "llama-3.1-70b",
        "--context",
        "128k",
        "--batch",
        "8",
        "--sku",
        "h100-sxm",
        "--tp",
        "8",
        "--format",
        "json",
        columns=40,
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    for key in (
        "model",
        "engine",
        "context",
        "batch",
        "kv_dtype",
        "tp",
        "pp",
        "kv_bytes",
        "kv_bytes_per_gpu",
        "kv_bytes_per_token",
        "weights_bytes",
        "weights_bytes_per_gpu",
        "params",
        "layers",
        "sku",
        "memory_bytes",
        "free_bytes",
        "fits",
    ):
        assert key in record
    # 80 layers x 8 KV heads x 128 x 2 (K,V) x 2 B = 327_680 B per token; x 131_072 x 8.
    assert record["kv_bytes"] == 327_680 * 131_072 * 8
    assert record["kv_bytes_per_gpu"] == record["kv_bytes"] // 8
    assert record["context"] == 131_072 and record["layers"] == {"full": 80}
    assert record["fits"] is True


def test_size_table_shows_textbook_and_bar():
    result = run("size", "llama-2-70b", "-c", "4k", "-b", "32", "--sku", "h100-sxm", "--explain")
    # 69B params x 2 B = 138 GB of weights on one 80 GB GPU: a failed check, exit 1.
    assert result.exit_code == 1
    assert "textbook MHA formula" in result.stdout and "8.0×" in result.stdout
    assert "█" in result.stdout and "weights don't fit" in result.stdout
    # 2 x 8 KV heads x 256 B rows x 4,096 tokens x 32 sequences x 80 layers = 42,949,672,960 B.
    explained = (
        "2 (K and V) × 8 (kv heads per GPU) × 256 (bytes per head row) × (4,096 tokens kept × "
        "32 sequences; all L tokens) × 80 layers × 1 GPU = 42,949,672,960 B"
    )
    assert explained in result.stdout


def test_size_windowed_shows_both_figures():
    result = run("size", "gemma-2-9b", "-c", "8k")
    assert "window-honoured" in result.stdout and "full reservation" in result.stdout


def test_size_warns_past_native_limit():
    result = run("size", "llama-2-7b", "-c", "8k", "-f", "json")
    assert any("native limit" in n for n in json.loads(result.stdout)["notes"])


def test_ragged_lengths():
    result = run("size", "llama-3.1-8b", "--lengths", "1,1k,32k", "-f", "json")
    record = json.loads(result.stdout)
    assert record["batch"] == 3
    assert record["sequences"] == [
        {"tokens": 1, "count": 1},
        {"tokens": 1024, "count": 1},
        {"tokens": 32768, "count": 1},
    ]
    assert record["exact_kv_bytes"] == 131_072 * (1 + 1024 + 32768)
    # vLLM charges whole 16-token blocks: 1 + 64 + 2048 blocks of 16 tokens.
    assert record["kv_bytes"] == 131_072 * 16 * (1 + 64 + 2048)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["size", "llama-3.1-8c"], "unknown model 'llama-3.1-8c'; did you mean"),
        (["size", "llama-3.1-8b", "--batch", "-1"], "--batch: -1 must be between 1 and"),
        (["size", "llama-3.1-8b", "--batch", "0"], "--batch: 0 must be between 1 and"),
        (["size", "llama-3.1-8b", "--context", "12q"], "--context: '12q' is not a token count"),
        (["size", "llama-3.1-8b", "--kv-dtype", "fp9"], "unknown dtype 'fp9'; did you mean 'fp8'"),
        (["size", "llama-3.1-8b", "--engine", "vlm"], "unknown engine 'vlm'; did you mean 'vllm'"),
        (["size", "llama-3.1-8b", "--tp", "0"], "--tp: 0 must be between 1 and"),
        (["size", "llama-3.1-8b", "--tp", "3"], "vLLM refuses tp 3 for llama-3.1-8b"),
        (["size", "gpt2", "--tp", "5", "-e", "exact"], "cannot split gpt2's 12 attention heads"),
        (["size", "llama-3.1-8b", "--sku", "h100"], "'h100' is a family of 3 SKUs: h100-nvl,"),
        (["size", "llama-3.1-8b", "--format", "xml"], "--format: unknown format 'xml'"),
        (["size", "/nonexistent/config.json"], "config.json"),
        (["show", "nothing-like-it"], "unknown model 'nothing-like-it'"),
        (["schema", "gpus"], "schema: unknown kind 'gpus'"),
        (["report"], "--model: give at least one model"),
        (
            ["report", "-m", "llama-3.1-8b", "--kv-memory", "lots"],
            "--kv-memory: 'lots' is not a size",
        ),
        (["report", "-m", "llama-3.1-8b", "--sort", "speed"], "--sort: unknown column 'speed'"),
    ],
)
def test_bad_input_one_line_exit_2(args, fragment):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


def test_not_json_config(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    result = runner.invoke(app, ["size", str(bad)])
    assert result.exit_code == 2 and result.stdout == ""
    assert "config.json" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_models_skus_show_schema_json():
    models = json.loads(run("models", "-f", "json").stdout)
    assert len(models) >= 40 and {"model", "kv_bytes_per_token_bf16"} <= set(models[0])
    skus = json.loads(run("skus", "-f", "json").stdout)
    assert any(s["sku"] == "h200" for s in skus)
    shown = json.loads(run("show", "deepseek-v3", "-f", "json").stdout)
    assert shown["derived"]["kv_bytes_per_token_bf16"] == 70_272
    schema = json.loads(run("schema", "models").stdout)
    assert "attention" in schema["properties"]


def test_every_model_field_has_a_description():
    from kvplan.specs import (
        AttentionSpec,
        IndexerSpec,
        LayerPlan,
        MlaSpec,
        ModelSpec,
        MoeSpec,
        SkuSpec,
        StateSpec,
        VisionSpec,
    )

    for spec in (
        ModelSpec,
        AttentionSpec,
        MlaSpec,
        IndexerSpec,
        MoeSpec,
        StateSpec,
        VisionSpec,
        LayerPlan,
        SkuSpec,
    ):
        missing = [n for n, f in spec.model_fields.items() if not f.description]
        assert missing == [], spec.__name__


def test_report_prints_vllm_log_lines():
    # 51.38 GiB / (16 tokens x 131_072 B) = 26_306.56 -> 26_306 blocks -> 420,896 tokens;
    # concurrency 26_306 / (131_072 / 16) = 3.21.
    result = run(
        "report",
        "--engine",
        "vllm",
        "--kv-memory",
        "51.38GiB",
        "--model",
        "llama-3.1-8b",
        "--context",
        "131072",
        "--sku",
        "h100-sxm",
        "--tp",
        "1",
    )
    assert result.exit_code == 0, result.output
    assert "Available KV cache memory: 51.38 GiB" in result.stdout
    assert "GPU KV cache size: 420,896 tokens" in result.stdout
    assert "Maximum concurrency for 131,072 tokens per request: 3.21x" in result.stdout


def test_report_json_rows_and_family_filter():
    result = run("report", "-m", "llama-3.1-70b", "-s", "h100", "-c", "32k", "-f", "json")
    rows = json.loads(result.stdout)
    assert {r["sku"] for r in rows} == {"h100-sxm", "h100-pcie", "h100-nvl"}
    assert {r["tp"] for r in rows} == {1, 2, 4, 8}
    tp1 = [r for r in rows if r["tp"] == 1]
    assert all(r["verdict"] == "weights don't fit" for r in tp1)


@pytest.mark.parametrize(
    "argv",
    [
        "'size', 'llama-3.1-8b', '--sku', 'h100-sxm', '-f', 'json'",
        "'recommend', 'llama-3.1-8b', '-c', '8k', '-n', '8', '-f', 'json'",
    ],
)
def test_calculator_never_imports_torch_or_triton(argv):
    code = (
        f"import sys; from kvplan.cli import main; sys.argv = ['kvplan', {argv}];\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'triton', 'numpy', 'kvplan.kernels', 'huggingface_hub')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in done.stderr


def test_a_run_builds_only_the_command_it_invokes():
    # typer reads every parameter of every command it registers: `size` loads no other command's
    # module, while `kvplan --help` still lists all thirteen.
    code = (
        "import sys; from kvplan.cli import COMMANDS, run\n"
        "run(['size', 'llama-3.1-8b', '-f', 'json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('kvplan.cli.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout.splitlines()[-1].replace("'", '"')))
    from kvplan.cli import COMMANDS

    command_modules = {f"kvplan.cli.{module}" for module, _ in COMMANDS.values()}
    assert loaded & command_modules == {"kvplan.cli.size"}
    listed = run("--help").stdout
    assert [line.split()[0] for line in listed.split("Commands:")[1].splitlines() if line] == list(
        COMMANDS
    )


def test_documented_schemas_are_current():
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs" / "schema"
    for kind in ("models", "skus"):
        printed = json.loads(run("schema", kind).stdout)
        assert json.loads((docs / f"{kind}.schema.json").read_text()) == printed, kind


def test_report_padding_warning_as_vllm_prints_it():
    # eole-nlp benchmark log (tests/golden/vllm_logs/gemma3-1b-it-v0.13-mml2k.yaml), vLLM 0.13:
    # "Add 2 padding layers, may waste at most 9.09% KV cache memory": 22 sliding layers in
    # groups of 4 (the 4 full layers) -> 6 groups = 24 slots, 2 / 22 = 9.09 %.
    result = run(
        "report",
        "-m",
        "gemma-3-1b",
        "--kv-memory",
        "25.39GiB",
        "--context",
        "2048",
        "--max-num-batched-tokens",
        "8192",
        "--vllm-version",
        "0.13",
        "-s",
        "rtx-5090",
        "--tp",
        "1",
    )
    assert "Add 2 padding layers, may waste at most 9.09% KV cache memory" in result.stdout


def test_an_error_inside_a_command_body_escapes_control_characters(capsys):
    """user_errors prints what the exit path prints: a control character never reaches the
    terminal raw, and each problem is its own line."""
    import typer

    from kvplan.cli import user_errors
    from kvplan.errors import KvplanError

    with pytest.raises(typer.Exit) as exited, user_errors():
        raise KvplanError("model 'a\x1b[31mb': unknown\nsecond problem")
    assert exited.value.exit_code == 2
    assert capsys.readouterr().err == "error: model 'a\\x1b[31mb': unknown\nerror: second problem\n"
