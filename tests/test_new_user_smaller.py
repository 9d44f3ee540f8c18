"""Smaller things a new user met: one exit rule, `python -m kvplan`, output that fits and reads."""

from __future__ import annotations

import os
import subprocess
import sys

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def run(*args: str, columns: int | None = None):
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns) if columns else None})


def test_report_exits_1_when_no_row_fits_as_size_does():
    # Llama-3.1-405B's 405.85 billion bf16 parameters are ~756 GiB of weights; one L4 holds
    # 22.5 GiB: no row can fit, and size says so with exit 1 too.
    report = run("report", "-m", "llama-3.1-405b", "-s", "l4", "--tp", "1")
    size = run("size", "llama-3.1-405b", "--sku", "l4", "--context", "8k")
    assert (report.exit_code, size.exit_code) == (1, 1), report.output
    assert "weights don't fit" in report.stdout


def test_report_exits_0_when_a_row_fits():
    # tp 1 and tp 8 of Llama-3.1-70B on H100: tp 1 cannot hold 131 GiB of weights, tp 8 can.
    result = run("report", "-m", "llama-3.1-70b", "-s", "h100-sxm", "--tp", "1", "--tp", "8")
    assert result.exit_code == 0, result.output
    assert "weights don't fit" in result.stdout and "fits" in result.stdout


def test_python_dash_m_kvplan_runs():
    env = {**os.environ, "COLUMNS": "120"}
    done = subprocess.run(
        [sys.executable, "-m", "kvplan", "size", "llama-3.1-8b", "--context", "8k"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("llama-3.1-8b · engine vllm · KV bf16 · 1 × 8,192 tokens")


def test_simulate_vs_at_100_columns_keeps_the_runs_side_by_side():
    # 22 metrics, one line each (some wrap onto a second), plus the title, rules and notes;
    # the vertical layout took 4 lines a metric (90 lines).
    args = ("simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "10", "--requests", "100")
    result = run(*args, "--vs", "--kv-dtype fp8", columns=100)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) <= 45, len(lines)
    assert max(len(line) for line in lines) <= 100
    header = next(line for line in lines if "metric" in line)
    assert "as given" in header and "--kv-dtype fp8" in header


def test_kv_share_of_what_was_taken_says_so():
    result = run("simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "1", "--requests", "20")
    assert result.exit_code == 0, result.output
    assert "token states ÷ KV taken" in result.stdout
    assert "KV utilisation" not in result.stdout


def _notes(*args: str) -> list[str]:
    result = run("size", *args, "-f", "json")
    assert result.exit_code in (0, 1), result.output
    import json

    return json.loads(result.stdout)["notes"]


def test_ollama_notes_speak_ollama_settings():
    notes = " ".join(_notes("qwen3-30b-a3b", "--engine", "ollama", "--sku", "l4", "-c", "32k"))
    assert "OLLAMA_NUM_PARALLEL" in notes and "num_ctx" in notes
    assert "-np" not in notes and "-c B" not in notes
    fixed = " ".join(
        _notes(
            "qwen3-30b-a3b", "--engine", "ollama", "--sku", "l4", "-c", "32k", "-b", "2",
            "--ctx-size", "65536", "--parallel", "2", "--gpu-layers", "10",
        )
    )  # fmt: skip
    # 65,536 cells for 2 slots: num_ctx 32,768 each.
    assert "num_ctx 32,768 × OLLAMA_NUM_PARALLEL 2" in fixed
    assert "num_gpu 10" in fixed and "-ngl" not in fixed
    # llama.cpp keeps its own flags.
    llama = " ".join(_notes("qwen3-30b-a3b", "--engine", "llama.cpp", "--sku", "l4", "-c", "32k"))
    assert "-c B·L -np B" in llama


def test_a_quantised_cache_without_flash_attention_names_the_option_given():
    # --kv-dtype q8_0 alone sets V too (V follows K); the error named --v-dtype, never typed.
    for engine in ("ollama", "llama.cpp"):
        extra = ("--engine-version", "b4000") if engine == "llama.cpp" else ()
        result = run("size", "qwen3-30b-a3b", "--engine", engine, "--kv-dtype", "q8_0", *extra)
        assert result.exit_code == 2, result.output
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: --kv-dtype: a quantised V cache (q8_0)"), line
        assert "add --flash-attn" in line
    ollama = run("size", "qwen3-30b-a3b", "--engine", "ollama", "--kv-dtype", "q8_0")
    assert "OLLAMA_FLASH_ATTENTION=1" in ollama.stderr
    given = run(
        "size", "qwen3-30b-a3b", "--engine", "llama.cpp", "--v-dtype", "q8_0", "--no-flash-attn"
    )
    assert given.stderr.startswith("error: --v-dtype: a quantised V cache (q8_0)")


def test_the_kq_matrix_is_named_only_without_flash_attention():
    # compute_buffer_bytes counts the KQ scores only without flash attention.
    args = ("llama-3.1-8b", "--engine", "llama.cpp", "--sku", "l4", "-c", "8k")
    with_fa = " ".join(_notes(*args, "--flash-attn"))
    without = " ".join(_notes(*args, "--no-flash-attn"))
    assert "compute buffers are an estimate" in with_fa and "KQ" not in with_fa
    assert "KQ matrix" in without


def _one_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    return line


def test_minus_zero_is_refused_like_any_sign():
    line = _one_error(run("report", "-m", "llama-3.1-8b", "-s", "h100-sxm", "--kv-memory", "-0"))
    assert line.startswith("error: --kv-memory: '-0' has a minus sign")
    line = _one_error(run("size", "llama-3.1-8b", "--context", "-0k"))
    assert line.startswith("error: --context: '-0k' has a minus sign")
    # 0 itself stays a valid KV memory (a budget of nothing), and -1 is still out of range.
    assert "must be between 0" in _one_error(
        run("report", "-m", "llama-3.1-8b", "-s", "h100-sxm", "--kv-memory", "-1")
    )


def test_a_sku_with_a_slash_at_either_end_is_refused():
    line = _one_error(run("size", "llama-3.1-8b", "--sku", "h100-sxm/"))
    assert line == (
        "error: unknown sku 'h100-sxm/': a SKU name does not begin or end with '/'; "
        "did you mean 'h100-sxm'?"
    )
    # A family takes the same path (report expands families): it is not the h100 family.
    assert "'h100/'" in _one_error(run("report", "-m", "llama-3.1-8b", "-s", "h100/"))


def test_a_folder_named_like_a_yaml_file_in_a_catalogue_is_an_error(tmp_path):
    (tmp_path / "m.yaml").mkdir()
    line = _one_error(run("models", "--catalog", str(tmp_path)))
    assert line == (
        f"error: {tmp_path / 'm.yaml'}: a folder, not a YAML file; a catalogue entry is a "
        ".yaml file (rename the folder)"
    )
