"""Values that used to slip through a per-option sweep: an empty value read as "not given",
a bad --catalog reported once per product, verify's choices checked only after torch loaded,
and table cells Python's float() reads but kvplan must not ("٣", "1e308")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_harness import assert_refused, cli

SIMULATE = ("simulate", "gpt2", "-s", "h100-sxm", "-f", "json", "--requests", "5")
SLOS = ("--slo-ttft", "2s", "--slo-tpot", "50ms")
POOLS = ("pools", "gpt2", "-s", "h100-sxm", "--tp", "1", "--requests", "5", "--rate", "1")


def _refused_in_one_line(argv: tuple[str, ...], fragment: str) -> None:
    outcome = cli(*argv)
    assert_refused(outcome, fragment)
    assert len(outcome.stderr_lines) == 1, outcome.describe()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        # '' is a value that went missing (`--catalog "$DIR"` with DIR unset), not the default:
        # as a path it would be '.', the working folder, read as a catalogue.
        (("size", "gpt2", "--catalog", ""), "--catalog: an empty path"),
        (("size", "gpt2", "--engine-version", ""), "--engine-version: empty; leave it out"),
        (("size", "gpt2", "-e", "llama.cpp", "--v-dtype", ""), "--v-dtype: empty; leave it out"),
        ((*SIMULATE, "--rate", "1", "--duration", ""), "--duration: ''"),
        ((*SIMULATE, "--rate", "1", "--max-model-len", ""), "--max-model-len: ''"),
        ((*SIMULATE, "--rate", "1", "--kv-window", ""), "--kv-window: ''"),
        ((*SIMULATE, "--rate", "1", "--host-link-bandwidth", ""), "--host-link-bandwidth: ''"),
        ((*SIMULATE, "--rate", "1", "--slo-ttft", ""), "--slo-ttft: ''"),
        ((*SIMULATE, "--rate", "1", "--slo-tpot", ""), "--slo-tpot: ''"),
        ((*POOLS, *SLOS, "--link-bandwidth", ""), "--link-bandwidth: ''"),
        ((*POOLS, *SLOS, "--link-bandwidth", "0"), "--link-bandwidth: 0 must be above 0"),
        (("recommend", "gpt2", "-s", "h100-sxm", "--rank", ""), "--rank: unknown ranking ''"),
        # --top counts deployments to list: the stated maximum, not any 400-digit number.
        (("recommend", "gpt2", "-s", "h100-sxm", "--top", "1" * 20), "--top: 11,111,111,111"),
        (("recommend", "gpt2", "-s", "h100-sxm", "--top", "9" * 400), "--top: '9999"),
    ],
)  # fmt: skip
def test_empty_and_zero_values_are_refused(argv, fragment):
    _refused_in_one_line(argv, fragment)


def test_a_bad_catalogue_folder_is_one_error_in_check(tmp_path):
    products = tmp_path / "products.yaml"
    products.write_text(
        "products:\n"
        "  - {name: a, model: gpt2, sku: h100-sxm, context: 1k, concurrency: 1}\n"
        "  - {name: b, model: gpt2, sku: h100-sxm, context: 1k, concurrency: 1}\n"
    )
    missing = str(tmp_path / "nowhere")
    # Two products, each naming a model and a SKU: four lookups, one folder, one error.
    _refused_in_one_line(("check", str(products), "--catalog", missing), "not a folder")


def test_an_empty_engine_version_in_a_deployment_file_is_refused(tmp_path):
    products = tmp_path / "products.yaml"
    products.write_text(
        "products:\n  - {name: a, model: gpt2, sku: h100-sxm, context: 1k, concurrency: 1,"
        " engine_version: ''}\n"
    )
    _refused_in_one_line(("check", str(products)), "engine_version")


@pytest.mark.parametrize(
    ("option", "value", "fragment"),
    [("--device", "", "--device: unknown device ''"),
     ("--device", "٣", "--device: unknown device"),
     ("--engine", "hf", "--engine: verify allocates a paged pool"),
     ("--bandwidth-pass", "0", "--bandwidth-pass: 0 must be in (0, 1]")],
)  # fmt: skip
def test_verify_refuses_its_choices_before_torch_loads(option, value, fragment):
    argv = ["verify", "gpt2", "-c", "1k", option, value]
    _refused_in_one_line(tuple(argv), fragment)
    # Importing torch takes seconds: a typo must be refused before it. A fresh interpreter,
    # since the fuzz harness's warm parent may hold torch already.
    script = (
        "import sys\nfrom kvplan.cli import run\ntry:\n    run(sys.argv[1:])\n"
        "except BaseException:\n    pass\nprint('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout + done.stderr


TRACE_HEADER = "arrival_s,prompt_tokens,output_tokens\n"
STEP_HEADER = "batch_size,kv_tokens,prefill_tokens,step_s\n"
# A full 2 × 2 × 2 grid; the last row's step_s is the cell under test.
STEP_ROWS = "".join(
    f"{b},{k},{p},0.0{1 + i}\n" for i, (b, k, p) in enumerate(
        (b, k, p) for b in (1, 8) for k in (0, 4096) for p in (0, 512))
)[: -len("0.08\n")]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [("fullwidth.csv", TRACE_HEADER + "0,5,5\n４,5,5\n", "arrival '４' is neither seconds"),
     ("arabic.csv", TRACE_HEADER + "0,5,5\n٣,5,5\n", "arrival '٣' is neither seconds"),
     # 1e308 s after the first arrival: the time-weighted means overflowed to inf.
     ("far.csv", TRACE_HEADER + "0,5,5\n1e308,5,5\n", "arrivals span 1e+308 s, more than"),
     ("far.jsonl", '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 5}\n'
      '{"arrival_s": 1e308, "prompt_tokens": 5, "output_tokens": 5}\n', "arrivals span")],
)  # fmt: skip
def test_hostile_trace_arrivals(tmp_path: Path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    _refused_in_one_line(("simulate", "gpt2", "-s", "h100-sxm", "--trace", str(path)), fragment)


@pytest.mark.parametrize(
    ("cell", "fragment"),
    [("٣", "step_s: '٣' is not a finite number; '٣' is not an ASCII digit"),
     ("４", "is not an ASCII digit"),
     ("1e308", "step_s '1e308' is not a positive time up to 1,000,000,000 s"),
     ("nan", "step_s: 'nan' is not a finite number"),
     ("-1", "is not a positive time")],
)  # fmt: skip
def test_hostile_step_times(tmp_path: Path, cell, fragment):
    path = tmp_path / "steps.csv"
    path.write_text(STEP_HEADER + STEP_ROWS + cell + "\n", encoding="utf-8")
    _refused_in_one_line((*SIMULATE, "--rate", "1", "--step-times", str(path)), fragment)


def test_the_step_grid_itself_is_accepted(tmp_path: Path):
    # The control for the cases above: the same grid with a real time in the last cell.
    path = tmp_path / "steps.csv"
    path.write_text(STEP_HEADER + STEP_ROWS + "0.08\n", encoding="utf-8")
    outcome = cli(*SIMULATE, "--rate", "1", "--step-times", str(path))
    assert outcome.exit_code == 0, outcome.describe()


MIXTRAL = Path(__file__).resolve().parents[1] / "fixtures/hf/mixtral-8x7b-instruct-v0.1/config.json"


def _config(tmp_path: Path, torch_dtype: str) -> str:
    text = MIXTRAL.read_text(encoding="utf-8")
    assert '"torch_dtype": "bfloat16"' in text
    path = tmp_path / "config.json"
    path.write_text(text.replace('"torch_dtype": "bfloat16"', f'"torch_dtype": {torch_dtype}'))
    return str(path)


def test_a_torch_dtype_that_is_not_a_name_is_refused(tmp_path: Path):
    _refused_in_one_line(("size", _config(tmp_path, "1e308")), "torch_dtype 1e+308 is not a dtype")


def test_an_unknown_torch_dtype_is_named_not_called_missing(tmp_path: Path):
    # Weights fall back to fp32 as transformers does, but the warning names what was there.
    outcome = cli("size", _config(tmp_path, '"nan"'), "-f", "json")
    assert outcome.exit_code == 0, outcome.describe()
    assert "torch_dtype 'nan' is not one of float32, bfloat16, float16" in outcome.stderr
    assert "no torch_dtype" not in outcome.stderr
