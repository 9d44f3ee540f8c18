"""What an engine's startup lines print, `-f json` holds exactly: a script reads what a person
sees (the lines round GiB, MiB and the concurrency to two decimals; JSON keeps them exact)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

DOC = Path(__file__).resolve().parent.parent / "docs" / "vllm-log-lines.md"
GIB, MIB = 2**30, 2**20
runner = CliRunner()

# The three examples of docs/vllm-log-lines.md: one request class each for every log line.
LLAMA_8B = ["--kv-memory", "51.38GiB", "-m", "llama-3.1-8b", "-c", "131072", "-s", "h100-sxm"]
QWEN_ERROR = ["-m", "qwen3-30b-a3b", "--kv-dtype", "fp8", "--kv-memory", "5.59GiB"]
QWEN_ERROR += ["-c", "221000", "-s", "h100-sxm", "--vllm-version", "0.10"]
GEMMA_HYBRID = ["-m", "gemma-3-1b", "--kv-memory", "4GiB", "-c", "2048", "-s", "h100-sxm"]
GEMMA_HYBRID += ["--vllm-version", "0.13"]


def _row(*args: str) -> dict:
    result = runner.invoke(app, ["report", "--tp", "1", *args, "-f", "json"])
    assert result.exit_code in (0, 1), result.output  # 1: no row fits (the vLLM error case)
    (row,) = json.loads(result.stdout)
    return row


def _doc_keys() -> list[str]:
    """The dotted JSON keys in the last column of the page's table."""
    keys = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            keys += re.findall(r"`([a-z_.]+)`", cells[2])
    return keys


def _lookup(record: dict, dotted: str) -> tuple[bool, object]:
    value: object = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def test_the_page_names_a_key_for_every_log_line():
    keys = _doc_keys()
    # Six log lines, each with at least one key (the parse must not come back empty).
    assert len(keys) >= 9, keys
    assert "startup.max_concurrency" in keys and "startup.estimated_max_model_len" in keys


@pytest.mark.parametrize("key", _doc_keys())
def test_each_documented_key_is_in_real_json(key):
    rows = [_row("--engine", "vllm", *args) for args in (LLAMA_8B, QWEN_ERROR, GEMMA_HYBRID)]
    found = [_lookup(row, key) for row in rows]
    assert all(present for present, _ in found), f"{key} missing from report -f json"
    # Somewhere among the three examples the key holds a figure, not only a null.
    assert any(value not in (None, [], 0) for _, value in found) or key.endswith(
        "padding_layers"
    ), key


def test_vllm_figures_are_the_page_arithmetic():
    # 51.38 GiB = 55,168,854,917 B (floored); a block is 16 tokens x 131,072 B = 2,097,152 B,
    # so 26,306 blocks (26,306.99...) and 420,896 tokens; one 131,072-token request takes
    # 8,192 blocks: 26,306 / 8,192 = 3.211181640625 requests, logged as 3.21x.
    startup = _row(*LLAMA_8B)["startup"]
    assert startup["num_gpu_blocks"] == 26_306
    assert startup["gpu_kv_cache_tokens"] == 420_896
    assert startup["max_concurrency"] == 26_306 / 8_192
    assert startup["needed_bytes"] == 131_072 * 131_072  # 16 GiB for one request
    assert startup["estimated_max_model_len"] is None  # one request fits


def test_vllm_startup_error_figures():
    # Qwen3-30B-A3B: 48 layers x 4 KV heads x 128 x 2 (K, V) x 1 B (fp8) = 49,152 B/token.
    # 221,000 tokens take 13,813 blocks of 16 = 221,008 tokens: 10,862,985,216 B (10.12 GiB).
    # 5.59 GiB = 6,002,216,796 B buys 7,632 blocks of 786,432 B: 122,112 tokens, the estimate.
    startup = _row(*QWEN_ERROR)["startup"]
    assert startup["needed_bytes"] == 221_008 * 49_152
    assert startup["estimated_max_model_len"] == 7_632 * 16
    assert startup["max_concurrency"] == pytest.approx(7_632 / 13_813)


def _shown_numbers(line: str) -> list[str]:
    """Numbers as a line prints them; digits inside names (CUDA0, q8_0, bfloat16) are not."""
    return re.findall(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?", line)


def _renderings(value: object) -> set[str]:
    """Every way a startup line writes an exact value: as is, with commas, in GiB or MiB to
    two decimals, or a float to two decimals."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return set()
    shown = {f"{value:.2f}", f"{value / GIB:.2f}", f"{value / MIB:.2f}"}
    if isinstance(value, int):
        shown |= {str(value), f"{value:,}"}
    return shown


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


ENGINE_CASES = {
    "vllm-v0": ["-m", "llama-3.1-8b", "-c", "32k", "--vllm-version", "0.6"],
    "vllm-v1": ["-m", "llama-3.1-8b", "-c", "32k"],
    "vllm-0.22": ["-m", "llama-3.1-8b", "-c", "32k", "--vllm-version", "0.22"],
    "vllm-error": QWEN_ERROR,
    "vllm-hybrid": GEMMA_HYBRID,
    "sglang": ["-e", "sglang", "-m", "llama-3.1-8b", "-c", "32k"],
    "sglang-0.4.0": [
        "-e",
        "sglang",
        "-m",
        "llama-3.1-8b",
        "-c",
        "32k",
        "--engine-version",
        "0.4.0",
    ],
    "sglang-mla": ["-e", "sglang", "-m", "deepseek-v2-lite", "-c", "32k"],
    "trtllm-1.0": ["-e", "trtllm", "-m", "llama-3.1-8b", "-c", "32k"],
    "trtllm-0.9": ["-e", "trtllm", "-m", "llama-3.1-8b", "-c", "32k", "--engine-version", "0.9"],
    "trtllm-0.8": ["-e", "trtllm", "-m", "llama-3.1-8b", "-c", "32k", "--engine-version", "0.8"],
    "trtllm-0.5": ["-e", "trtllm", "-m", "llama-3.1-8b", "-c", "32k", "--engine-version", "0.5"],
    "llama.cpp-swa": ["-e", "llama.cpp", "-m", "gemma-2-9b", "-c", "8k", "-b", "2"],
    "llama.cpp-b3000": [
        "-e",
        "llama.cpp",
        "-m",
        "gemma-2-9b",
        "-c",
        "8k",
        "--engine-version",
        "b3000",
    ],
    "llama.cpp-b1000": [
        "-e",
        "llama.cpp",
        "-m",
        "llama-3.1-8b",
        "-c",
        "8k",
        "--engine-version",
        "b1000",
    ],
    "ollama": ["-e", "ollama", "-m", "llama-3.1-8b", "-c", "8k", "-b", "4"],
}


@pytest.mark.parametrize("case", ENGINE_CASES, ids=str)
def test_every_number_a_startup_line_prints_is_in_the_json(case):
    args = ENGINE_CASES[case]
    row = _row(*args) if "-s" in args else _row("-s", "h100-sxm", *args)
    assert row["log_lines"] and row["startup"], "the case prints no startup lines"
    values = [*_leaves(row["startup"]), row["context"], row["kv_budget_bytes_per_gpu"]]
    values += [row["budget"]["total_bytes"]]
    # vLLM's padding warning prints each group's share: padding / its layers, as a percent.
    values += [100 * p["padding_layers"] / p["layers"] for p in row["startup"].get("padding", [])]
    shown = set().union(*(_renderings(v) for v in values))
    missing = {
        (number, line)
        for line in row["log_lines"]
        for number in _shown_numbers(line)
        if number not in shown
    }
    assert not missing, f"{case}: numbers no JSON field holds: {sorted(missing)}"
