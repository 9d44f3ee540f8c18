"""bench/verify_gpu.sh is ready for the GPU machine: it parses, and every command it runs parses.

The script runs once, on a lent GPU, with no chance to fix a typo in between: its DRY_RUN mode
prints the commands, and each is checked here against the real command line (kvplan verify's
options, decode_bench's argparse parser) without a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import typer

from kvplan.cli import app

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "verify_gpu.sh"


def _dry_run(tmp_path) -> list[list[str]]:
    env = {**os.environ, "DRY_RUN": "1", "RECORDS": str(tmp_path), "PYTHON": "python3"}
    run = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, check=False
    )
    assert run.returncode == 0, run.stderr
    return [shlex.split(line) for line in run.stdout.splitlines() if line.strip()]


def test_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0


def test_every_verify_command_parses(tmp_path):
    commands = [c for c in _dry_run(tmp_path) if c[1:4] == ["-m", "kvplan.cli", "verify"]]
    names = {c[c.index("--json") + 1].rsplit("/", 1)[-1] for c in commands if "--json" in c}
    assert {
        "verify-capacity-llama-3.1-8b-bf16.json",
        "verify-capacity-llama-3.1-8b-fp8.json",
        "verify-llama-3.1-8b-bf16-8x3000.json",
        "verify-llama-3.1-8b-bf16-1x10000.json",
        "verify-deepseek-v2-lite-bf16-32x8k.json",
    } <= names
    verify = typer.main.get_command(app).get_command(None, "verify")
    for command in commands:
        # Parsing only (types, option names), as click does before running the command.
        context = verify.make_context("verify", command[4:])
        assert context.params["device"] == "cuda" and context.params["model"]
    capacity = [c for c in commands if "--capacity" in c]
    assert len(capacity) == 2 and all("--context" not in c for c in capacity)  # the longest
    (profile,) = [c for c in commands if "--profile" in c]
    written = verify.make_context("verify", profile[4:]).params["profile"]
    # The report step reads the calibration the profile step writes.
    (report,) = [c for c in _dry_run(tmp_path) if c[1:4] == ["-m", "kvplan.cli", "report"]]
    command = typer.main.get_command(app).get_command(None, "report")
    assert command.make_context("report", report[4:]).params["calibration"] == written


def test_every_bench_command_parses(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "decode_bench", ROOT / "bench" / "decode_bench.py"
    )
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up while defined
    spec.loader.exec_module(bench)
    commands = [c for c in _dry_run(tmp_path) if c[1].endswith("decode_bench.py")]
    assert len(commands) == 2
    sweep = bench.build_parser().parse_args(commands[0][2:])
    assert sweep.sweep_config and sweep.cases == "32x8192" and sweep.kv_dtypes == "bf16"
    bench.build_parser().parse_args(commands[1][2:])


def test_summary_reads_a_record(tmp_path):
    example = ROOT / "docs" / "examples" / "verify-cpu-llama-3.1-8b.json"
    (tmp_path / example.name).write_text(example.read_text())
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "verify_summary.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "| cpu-llama-3.1-8b (CPU) |" in run.stdout
    assert "the 32 x 8192 bf16 case was not run" in run.stdout
