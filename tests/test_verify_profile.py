"""`verify --profile` on CPU: the same path as on a GPU at tiny shapes through Triton's
interpreter, a calibration file that reads back, and says its timings are not meaningful."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.perf.calibration import read_calibration
from kvplan.validate.profile_shapes import CPU_DIM, gemm_shapes

# Looked up, not imported: importing triton here would settle its interpreter setting for
# every later test in this process (the in-process verify examples of the docs).
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("torch", "triton")),
    reason="needs the verify extra (torch, triton)",
)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    path = tmp_path_factory.mktemp("profile") / "calibration.json"
    # A fresh process: the kernels are decorated for the interpreter when first imported.
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    command = [sys.executable, "-m", "kvplan.cli", "verify", "llama-3.1-8b", "--device", "cpu"]
    command += ["--sku", "h100-sxm", "--profile", str(path), "-f", "json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return path, json.loads(done.stdout)


def test_the_file_reads_back_and_says_not_meaningful(profiled):
    path, payload = profiled
    calibration = read_calibration(path)
    assert calibration.meaningful is False and calibration.sku == "h100-sxm"
    assert any("not meaningful" in note for note in calibration.notes)
    # Llama-3.1-8B's four GEMMs at three M values each, cut to 128 × 128 on CPU.
    assert len(calibration.gemm) == 12
    assert {(p.op, p.n, p.k) for p in calibration.gemm} == {
        (op, CPU_DIM, CPU_DIM) for op in ("qkv", "out", "mlp_up", "mlp_down")
    }
    # 2 batches × 2 contexts, K and V of one KV head of 128 fp32 elements per token.
    assert [(p.batch, p.context_tokens, p.kv_bytes) for p in calibration.decode_attention] == [
        (b, n, 2 * b * n * 128 * 4) for b in (1, 2) for n in (32, 64)
    ]
    assert calibration.all_reduce == ()
    assert payload["calibration"]["measured_on"]["meaningful"] is False


def test_gpu_shapes_are_the_models(catalog):
    # Llama-3.1-8B: hidden 4096, 32 heads, 8 KV heads of 128, intermediate 14336.
    shapes = {(s.op, s.n, s.k) for s in gemm_shapes(catalog.model("llama-3.1-8b"), 1, False)}
    assert shapes == {
        ("qkv", (32 + 2 * 8) * 128, 4096),
        ("out", 4096, 32 * 128),
        ("mlp_up", 2 * 14336, 4096),
        ("mlp_down", 4096, 14336),
    }


def test_a_cpu_file_changes_no_step_time(profiled):
    path, _ = profiled
    args = ["report", "-m", "llama-3.1-8b", "--sku", "h100-sxm", "--tp", "1", "-f", "json"]
    plain = CliRunner().invoke(app, args)
    calibrated = CliRunner().invoke(app, [*args, "--calibration", str(path)])
    assert calibrated.exit_code == plain.exit_code
    assert "timings not meaningful); not used" in calibrated.stderr
    steps = [json.loads(r.stdout)[0]["decode_step_s"] for r in (plain, calibrated)]
    assert steps[0] == steps[1]


@pytest.mark.parametrize("extra", [["--capacity"], ["--json", "r.json"], ["--batch", "4"]])
def test_profile_runs_alone(tmp_path, extra):
    args = ["verify", "llama-3.1-8b", "--profile", str(tmp_path / "c.json"), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.stdout == ""
    assert "--profile times its own shapes" in result.stderr
    assert not (tmp_path / "c.json").exists()
