"""`kvplan report`'s rows: a deployment that spans nodes is marked in every format, and a
combination the engine refuses is a row with its reason instead of sinking the report."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kvplan.cli import app

ROOT = Path(__file__).resolve().parent.parent
# Qwen2.5-1.5B (the distill's base): num_attention_heads 12, which tp 8 does not divide.
# https://huggingface.co/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B/blob/main/config.json
REFUSED_MODEL = "deepseek-r1-distill-qwen-1.5b"
REFUSAL = "total number of attention heads (12) must be divisible by tensor parallel size (8)"


def _report(*args: str):
    return CliRunner().invoke(app, ["report", *args])


def _gpus_per_node(sku: str) -> int:
    """The node size, read from the SKU's YAML without kvplan."""
    text = (ROOT / "sku_profiles" / f"{sku}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)["max_gpus_per_node"]


# --- a deployment that spans nodes ------------------------------------------------------


@pytest.mark.parametrize(
    "parallel, cell",
    [(["--tp", "16"], "16†"), (["--tp", "8", "--pp", "2"], "8×2†")],
)
def test_a_deployment_spanning_nodes_is_marked_in_every_format(parallel, cell):
    words = ["-m", "llama-3.1-405b", "--sku", "h100-sxm", *parallel]
    # An HGX H100 board holds 8 GPUs: 16 GPUs (16 × 1 or 8 × 2) take 16 / 8 = 2 nodes.
    nodes = 16 // _gpus_per_node("h100-sxm")
    assert nodes == 2
    note = "one replica spans 2 nodes"
    table = _report(*words)
    assert table.exit_code == 0, table.output
    (line,) = [line for line in table.stdout.splitlines() if line.startswith("│ llama")]
    assert f" {cell} " in line
    assert f"note: † {note}" in table.stdout
    markdown = _report(*words, "--format", "md")
    assert f"| {cell} |" in markdown.stdout and f"† {note}" in markdown.stdout
    page = _report(*words, "--format", "html")
    assert f">{cell}</td>" in page.stdout and f"† {note}" in page.stdout
    (record,) = json.loads(_report(*words, "--format", "json").stdout)
    assert record["nodes"] == nodes
    assert any(f"spans {nodes} nodes of 8 h100-sxm" in n for n in record["notes"])
    (row,) = csv.DictReader(io.StringIO(_report(*words, "--format", "csv").stdout))
    assert row["nodes"] == str(nodes)


def test_one_node_is_not_marked():
    result = _report("-m", "llama-3.1-70b", "--sku", "h100-sxm", "--tp", "8")
    assert "†" not in result.stdout and "spans" not in result.stdout
    (record,) = json.loads(_report("-m", "llama-3.1-70b", "-s", "h100-sxm", "--format", "json",
                                   "--tp", "8").stdout)  # fmt: skip
    assert record["nodes"] == 1


# --- refused combinations ---------------------------------------------------------------


def test_a_refused_model_is_a_row_of_a_whole_catalogue_report():
    result = _report("-m", "all", "--sku", "h100-sxm", "--tp", "8", "--format", "json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    # One row per model of the catalogue, counted from its files.
    assert len(records) == len(list((ROOT / "model_specs").glob("*.yaml")))
    by_model = {r["model"]: r for r in records}
    refused = by_model[REFUSED_MODEL]
    assert REFUSAL in refused["refused"]
    assert refused["verdict"] == f"refused: {refused['refused']}"
    assert "max_concurrency" not in refused  # no figures for a plan that does not start
    # Llama-3.1-8B: 32 query and 8 KV heads, both divide by 8.
    assert "refused" not in by_model["llama-3.1-8b"]
    assert by_model["llama-3.1-8b"]["verdict"] == "fits"
    for record in records:
        assert ("refused" in record) == record["verdict"].startswith("refused: ")


def test_the_table_shows_the_refused_row_and_the_others():
    result = _report("-m", REFUSED_MODEL, "-m", "llama-3.1-8b", "--sku", "h100-sxm", "--tp", "8")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 2
    assert f"refused: vLLM refuses tp 8 for {REFUSED_MODEL}: {REFUSAL}" in rows[0]
    assert " fits " in rows[1]
    csv_rows = list(csv.DictReader(io.StringIO(_report(
        "-m", REFUSED_MODEL, "-m", "llama-3.1-8b", "-s", "h100-sxm", "--tp", "8", "--format", "csv"
    ).stdout)))  # fmt: skip
    assert REFUSAL in csv_rows[0]["refused"] and csv_rows[0]["max_concurrency"] == ""
    assert csv_rows[1]["refused"] == "" and int(csv_rows[1]["max_concurrency"]) > 0


def test_refused_rows_sort_last():
    result = _report(
        "-m", REFUSED_MODEL, "-m", "llama-3.1-8b", "--sku", "h100-sxm", "--tp", "8", "--tp", "4",
        "--sort", "max_concurrency", "--format", "json",
    )  # fmt: skip
    records = json.loads(result.stdout)
    concurrency = [r.get("max_concurrency") for r in records]
    assert concurrency[-1] is None and None not in concurrency[:-1]
    assert concurrency[:-1] == sorted(concurrency[:-1], reverse=True)


@pytest.mark.parametrize(
    "skus", [["--sku", "h100-sxm"], ["--sku", "h100-sxm", "--sku", "h200"]], ids=["one", "every"]
)
def test_a_lone_refusal_or_a_report_of_refusals_is_an_error(skus):
    result = _report("-m", REFUSED_MODEL, *skus, "--tp", "8")
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --tp: ") and REFUSAL in line


def test_the_plot_draws_the_planned_rows(tmp_path):
    pytest.importorskip("matplotlib")
    both, planned = tmp_path / "both.svg", tmp_path / "planned.svg"
    words = ["--sku", "h100-sxm", "--tp", "8", "--plot"]
    result = _report("-m", REFUSED_MODEL, "-m", "llama-3.1-8b", *words, str(both))
    assert result.exit_code == 0, result.output
    assert _report("-m", "llama-3.1-8b", *words, str(planned)).exit_code == 0
    # The refused row has nothing to draw: the picture is the planned row's alone.
    assert both.read_bytes() == planned.read_bytes()


# --- data-parallel attention for MoE models ---------------------------------------------

# DeepSeek-V3 config.json (huggingface.co/deepseek-ai/DeepSeek-V3): 61 layers of MLA with
# kv_lora_rank 512 and qk_rope_head_dim 64, max_position_embeddings 163,840. One token's latent
# in bf16: (512 + 64) × 61 × 2 bytes = 70,272 bytes, whole on every GPU whether TP splits the
# heads or not (MLA has one latent, no heads to split).
DEEPSEEK_V3_LATENT_BYTES_PER_TOKEN = (512 + 64) * 61 * 2
DEEPSEEK_V3_CONTEXT = 163_840


def _rows(*args: str) -> list[dict]:
    result = _report(*args, "-f", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_an_moe_report_shows_data_parallel_attention_rows():
    rows = _rows("-m", "deepseek-v3", "-s", "h200", "-b", "16")
    layouts = [(r["tp"], r["dp"], r["ep"]) for r in rows]
    assert layouts == [(1, 1, False), (2, 1, False), (4, 1, False), (8, 1, False)] + [
        (1, n, True) for n in (2, 4, 8)
    ]
    tp8, dp8 = rows[3], rows[-1]
    for row in (tp8, dp8):
        assert row["gpus"] == 8
        assert row["kv_bytes_per_token_per_gpu"] == DEEPSEEK_V3_LATENT_BYTES_PER_TOKEN
    # Batch 16 over 8 DP replicas is 2 requests per GPU: 2 × 163,840 × 70,272 bytes of KV, where
    # TP 8 keeps all 16 on every GPU. The DP row holds the whole batch at the full context.
    per_replica_bytes = 2 * DEEPSEEK_V3_CONTEXT * DEEPSEEK_V3_LATENT_BYTES_PER_TOKEN
    assert dp8["kv_budget_bytes_per_gpu"] >= per_replica_bytes
    assert dp8["max_context_tokens"] == DEEPSEEK_V3_CONTEXT and dp8["verdict"] == "fits"
    assert dp8["max_concurrency"] >= 16 > tp8["max_concurrency"]
    table = _report("-m", "deepseek-v3", "-s", "h200", "-b", "16").stdout
    assert "1 dp8+ep" in table and "note: dpN+ep: data-parallel attention" in table


@pytest.mark.parametrize(
    "args",
    [
        ["-m", "llama-3.1-8b", "-s", "h100-sxm"],  # dense: replicas are not a layout of it
        ["-m", "deepseek-v3", "-s", "h200", "--tp", "8"],  # the degrees asked for, only
        ["-m", "qwen3-30b-a3b", "-s", "h100-sxm", "-e", "llama.cpp"],  # one instance only
    ],
)
def test_no_data_parallel_rows_where_they_do_not_apply(args):
    assert all(r["dp"] == 1 and not r["ep"] for r in _rows(*args))
