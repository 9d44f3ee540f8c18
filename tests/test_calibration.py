"""`--calibration FILE`: the file format, the fit onto the speed model's efficiencies, its
path through report / simulate / recommend --pareto, and hostile files (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from calibration_files import calibration_data, write_calibration
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import EngineSettings, engine
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.perf.calibration import read_calibration
from kvplan.perf.calibration_map import calibrated_for, fitted_values, step_constants
from kvplan.perf.constants import shipped_constants
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY
from kvplan.perf.estimates import batched_step


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_fit_recovers_the_efficiencies_the_times_were_made_from(tmp_path):
    values, notes = fitted_values(read_calibration(write_calibration(tmp_path / "c.json")))
    expected = {
        "gemm_bandwidth_fraction": 0.8,
        "gemm_compute_fraction": 0.7 * 8192 / 8256,
        "gemm_half_efficiency_tokens": 512 * ((0.7 * 8192 / 8256) / (0.7 * 512 / 576) - 1),
        "attention_decode_bandwidth_fraction": 0.8,
        "attention_decode_fixed_tokens": 256,
        "collective_bandwidth_fraction": 0.7,
        "collective_latency_s": 10e-6,
    }
    assert values == pytest.approx(expected, rel=1e-6)
    assert notes == []


def test_fitted_names_are_step_model_constants(tmp_path):
    calibration = read_calibration(write_calibration(tmp_path / "c.json"))
    merged = shipped_constants().with_overrides(step_constants(calibration))
    assert merged.value("attention_decode_fixed_tokens") == pytest.approx(256)
    assert "verify --profile" in merged.sources["gemm_compute_fraction"]


@pytest.fixture
def llama(catalog):
    return Deployment(catalog.model("llama-3.1-8b"), engine("vllm"), settings=EngineSettings())


# The operations a profile measures: the GEMMs (qkv, out, MLP, and lm_head's logits) stream
# weights at the GEMM bandwidth, decode attention reads KV at its own. Elementwise kernels,
# sampling and the engine's overhead are not measured and keep the shipped constants.
MEASURED = ("qkv_proj", "out_proj", "mlp", "logits", "attention_decode")
UNMEASURED = ("elementwise", "sampling", "engine_overhead")


def parts_with(tmp_path, sku, deployment, name, step, **scales):
    calibration = read_calibration(write_calibration(tmp_path / name, **scales))
    efficiency, _ = calibrated_for(calibration, sku, DEFAULT_EFFICIENCY)
    return step(efficiency).parts_s


def test_halved_bandwidth_doubles_a_decode_bound_step(tmp_path, catalog, llama):
    sku = catalog.sku("h100-sxm")

    def step(efficiency):
        return batched_step(llama, sku, Batch.uniform(4096, 8), efficiency=efficiency)

    full = parts_with(tmp_path, sku, llama, "full.json", step)
    half = parts_with(tmp_path, sku, llama, "half.json", step, bandwidth_scale=0.5)
    # Batch 8 is far below any GEMM's ridge point: every measured part is its bytes ÷ the
    # measured bandwidth, so half the bandwidth is twice the time.
    for operation in MEASURED:
        assert full[operation] > 0
        assert half[operation] == pytest.approx(2 * full[operation], rel=1e-12), operation
    for operation in UNMEASURED:
        assert half[operation] == full[operation], operation
    # And the calibrated GEMM reads run at 0.8 of 3.35 TB/s (the shipped constant differs).
    shipped = step(DEFAULT_EFFICIENCY).parts_s
    ratio = shipped_constants().value("gemm_bandwidth_fraction") / 0.8
    assert full["mlp"] == pytest.approx(shipped["mlp"] * ratio, rel=1e-12)


def test_halved_compute_doubles_a_compute_bound_gemm(tmp_path, catalog, llama):
    sku = catalog.sku("h100-sxm")

    def step(efficiency):
        return batched_step(llama, sku, None, [(0, 8192)], efficiency=efficiency)

    full = parts_with(tmp_path, sku, llama, "full.json", step)
    half = parts_with(tmp_path, sku, llama, "half.json", step, compute_scale=0.5)
    # An 8,192-token chunk computes: each GEMM takes FLOPs ÷ (fraction(M) × peak), and the
    # fitted m½ is the same in both files (it depends on ratios of fractions only).
    for operation in ("qkv_proj", "out_proj", "mlp"):
        assert half[operation] == pytest.approx(2 * full[operation], rel=1e-12), operation
    assert half["attention_prefill"] == full["attention_prefill"]  # not measured


def test_other_skus_and_cpu_files_keep_the_shipped_constants(tmp_path, catalog):
    calibration = read_calibration(write_calibration(tmp_path / "c.json"))
    efficiency, notes = calibrated_for(calibration, catalog.sku("h200"), DEFAULT_EFFICIENCY)
    assert efficiency == DEFAULT_EFFICIENCY
    assert "measured on h100-sxm; h200 keeps the shipped constants" in notes[0]
    data = calibration_data()
    data["measured_on"]["meaningful"] = False
    (tmp_path / "cpu.json").write_text(json.dumps(data))
    cpu = read_calibration(tmp_path / "cpu.json")
    efficiency, notes = calibrated_for(cpu, catalog.sku("h100-sxm"), DEFAULT_EFFICIENCY)
    assert efficiency == DEFAULT_EFFICIENCY and "not meaningful" in notes[0]


def report_json(*args: str) -> list[dict]:
    result = run("report", "-m", "llama-3.1-8b", "--tp", "1", "-f", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def measured_s(tmp_path, catalog, llama, batch: Batch) -> float:
    """Seconds of the measured operations of one step, under the full-bandwidth file."""
    sku = catalog.sku("h100-sxm")
    calibration = read_calibration(write_calibration(tmp_path / "measured.json"))
    efficiency, _ = calibrated_for(calibration, sku, DEFAULT_EFFICIENCY)
    parts = batched_step(llama, sku, batch, efficiency=efficiency).parts_s
    return sum(parts[operation] for operation in MEASURED)


def test_report_rows_of_the_calibrated_sku_only(tmp_path, catalog, llama):
    full = write_calibration(tmp_path / "full.json")
    half = write_calibration(tmp_path / "half.json", bandwidth_scale=0.5)
    skus = ("--sku", "h100-sxm", "--sku", "h200")
    plain, calibrated, halved = (
        {row["sku"]: row for row in report_json(*skus, *extra)}
        for extra in ((), ("--calibration", str(full)), ("--calibration", str(half)))
    )
    assert list(calibrated) == list(plain)  # the same rows in the same order
    h100 = [rows["h100-sxm"]["decode_step_s"] for rows in (plain, calibrated, halved)]
    assert h100[1] != h100[0]
    # Halving the bandwidth doubles the measured operations and nothing else: the step grows
    # by exactly their time (report decodes one request of the model's 131,072 tokens).
    grown = measured_s(tmp_path, catalog, llama, Batch.uniform(131_072, 1))
    assert h100[2] - h100[1] == pytest.approx(grown, rel=1e-9)
    assert calibrated["h200"]["decode_step_s"] == plain["h200"]["decode_step_s"]
    assert any("calibrated by full.json" in n for n in calibrated["h100-sxm"]["notes"])


def test_simulate_tpot_grows_by_the_measured_operations(tmp_path, catalog, llama):
    tpots = []
    for name, scale in (("full.json", 1.0), ("half.json", 0.5)):
        path = write_calibration(tmp_path / name, bandwidth_scale=scale)
        result = run(
            "simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "0.001", "--requests",
            "2", "--prompt-tokens", "16", "--output-tokens", "64", "--calibration", str(path),
            "-f", "json",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "step times calibrated by" in result.stderr
        (payload,) = json.loads(result.stdout)["runs"]
        tpots.append(payload["tpot_s"]["p50"])
    # One request at a time, its 63 decode steps at 16 + 1 … 16 + 63 tokens: every step grows
    # by the measured operations' time, linear in the context, so the mean at 48 tokens.
    grown = measured_s(tmp_path, catalog, llama, Batch.uniform(48, 1))
    assert tpots[1] - tpots[0] == pytest.approx(grown, rel=0.01)


def test_pareto_says_which_step_times(tmp_path):
    path = write_calibration(tmp_path / "c.json")
    result = run(
        "recommend",
        "llama-3.1-8b",
        "--pareto",
        "--prompt-tokens",
        "1k",
        "--output-tokens",
        "128",
        "-s",
        "h100-sxm",
        "--max-gpus",
        "1",
        "--no-quantization",
        "--kv-dtype",
        "bf16",
        "--calibration",
        str(path),
        "-f",
        "json",
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["speed_model"].startswith("--calibration c.json (NVIDIA H100")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "not a calibration file"),
        ('{"format": "kvplan-perf-constants/1"}', "format: 'kvplan-perf-constants/1' is not"),
        (lambda d: d | {"extra": 1}, "unknown field 'extra'"),
        (lambda d: d | {"gemm": [{"op": "gemm"}]}, "gemm[0].dtype: None"),
        (lambda d: d | {"gemm": "x"}, "gemm: must be a list"),
        (lambda d: d | {"decode_attention": [1]}, "decode_attention[0]: must be an object"),
        (
            lambda d: d | {"all_reduce": [{"gpus": 1, "bytes": 8, "seconds": 1e-6}]},
            "all_reduce[0].gpus: 1",
        ),
        (
            lambda d: d | {"all_reduce": [{"gpus": 2, "bytes": 8, "seconds": -1}]},
            "all_reduce[0].seconds: -1 must be a finite number above 0",
        ),
        (
            lambda d: d | {"all_reduce": [{"gpus": True, "bytes": 8, "seconds": 1}]},
            "all_reduce[0].gpus: True is not a whole number",
        ),
        (
            lambda d: d | {"measured_on": d["measured_on"] | {"gpu": "x" * 500}},
            "measured_on.gpu: 'xxxxxxxx",
        ),
        (lambda d: d | {"gemm": [d["gemm"][0]] * 10_001}, "gemm: 10,001 entries"),
        (lambda d: d | {"datasheet": {"bandwidth_bytes_per_s": 0}}, "datasheet.peak_flop_per_s"),
        (lambda d: d | {"gemm": [d["gemm"][0] | {"dtype": []}]}, "gemm[0].dtype: []"),
        (lambda d: d | {"gemm": [d["gemm"][0] | {"op": {}}]}, "gemm[0].op: {}"),
        (
            lambda d: d | {"gemm": [d["gemm"][0] | {"seconds": 1e308}]},
            "gemm[0].seconds: 1e+308 s is more than 3,600 s",
        ),
        # A datasheet a hundred-million-fold too high: the times it implies are no efficiency.
        (
            lambda d: d | {"datasheet": d["datasheet"] | {"bandwidth_bytes_per_s": 3.35e20}},
            "not a measured efficiency",
        ),
    ],
)
def test_hostile_files_are_one_line_exit_2(tmp_path, text, fragment):
    path = tmp_path / "c.json"
    path.write_text(text if isinstance(text, str) else json.dumps(text(calibration_data())))
    result = run("report", "-m", "llama-3.1-8b", "--sku", "h100-sxm", "--calibration", str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_unreadable_paths_are_one_line_exit_2(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (65 * 2**20))  # past the 64 MiB a JSON input may be
    for path in (tmp_path / "missing.json", tmp_path, big):
        result = run(
            "simulate",
            "llama-3.1-8b",
            "--sku",
            "h100-sxm",
            "--rate",
            "1",
            "--calibration",
            str(path),
        )
        assert result.exit_code == 2 and result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_calibration_with_step_times_or_calibrate_refused(tmp_path):
    path = write_calibration(tmp_path / "c.json")
    for other in ("--step-times", "--calibrate"):
        result = run(
            "simulate",
            "llama-3.1-8b",
            "--sku",
            "h100-sxm",
            "--rate",
            "1",
            "--calibration",
            str(path),
            other,
            str(path),
        )
        assert result.exit_code == 2
        assert "not both: both set step times" in result.stderr


def test_reading_a_calibration_loads_no_torch(tmp_path):
    path = write_calibration(tmp_path / "c.json")
    code = (
        "import sys; from pathlib import Path; from kvplan.perf.calibration import "
        "read_calibration; from kvplan.perf.calibration_map import fitted_values; "
        f"fitted_values(read_calibration(Path({str(path)!r}))); "
        "assert not {'torch', 'triton', 'numpy'} & set(sys.modules), sys.modules.keys()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_documented_format_example_is_the_hand_written_file():
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "docs/examples/calibration-format-example.json"
    shown = json.loads(example.read_text())
    assert {k: v for k, v in shown.items() if k != "notes"} == {
        k: v for k, v in calibration_data().items() if k != "notes"
    }
    assert "none is measured" in shown["notes"][0]


def test_pools_takes_the_calibration(tmp_path):
    path = write_calibration(tmp_path / "c.json")
    args = ["pools", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "5", "--requests", "50"]
    args += ["--max-model-len", "8k", "--slo-ttft", "1s", "--slo-tpot", "40ms"]
    args += ["--max-instances", "2", "--format", "json", "--calibration", str(path)]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "step times calibrated by c.json" in result.stderr
    bad = run(*args[:-1], str(tmp_path / "missing.json"))
    assert bad.exit_code == 2 and bad.stdout == ""


def test_a_cpu_file_shows_fractions_below_the_floor(tmp_path):
    # The same hundred-million-fold datasheet: refused in a file that says it was measured on
    # its GPU; shown, never used, in one that says its timings are not meaningful (a CPU).
    data = calibration_data()
    data["datasheet"] = data["datasheet"] | {"bandwidth_bytes_per_s": 3.35e20}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(Exception, match="not a measured efficiency"):
        fitted_values(read_calibration(path))
    data["measured_on"]["meaningful"] = False
    path.write_text(json.dumps(data))
    values, _ = fitted_values(read_calibration(path))
    assert 0 < values["gemm_bandwidth_fraction"] < 1e-6
