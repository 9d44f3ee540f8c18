"""Notes below the CLI name a setting by its declared name; the CLI prints its flag.

The Python API's notes say `cudagraph_bytes` (the keyword a script passes), the command line's
say --cudagraph-memory (the flag a user types), for the same plan.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.engine.settings import SETTINGS

FLAGS = {flag.split("/")[0] for s in SETTINGS for flag in s.flags if flag.startswith("--")}
NAMES = {s.name for s in SETTINGS}
FLAG_IN_TEXT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

# (engine, options): each plan's notes name a setting (TensorRT-LLM's activation and non-torch
# estimates, SGLang's non-torch estimate, vLLM 0.20's CUDA-graph estimate, llama.cpp's cells
# without a context size).
PLANS = [
    ("trtllm", {}, "activation_bytes"),
    ("sglang", {}, "non_torch_bytes"),
    ("vllm", {"version": "0.20"}, "cudagraph_bytes"),
    ("llama.cpp", {}, "context_size_tokens"),
]


@pytest.mark.parametrize(("engine", "options", "named"), PLANS)
def test_api_notes_name_settings_and_cli_notes_flags(engine, options, named):
    notes = kvplan.size("llama-3.1-8b", sku="h100-sxm", engine=engine, **options).notes
    assert any(f"`{named}`" in note for note in notes), notes
    assert not {f for note in notes for f in FLAG_IN_TEXT.findall(note)} & FLAGS
    flags = ["--engine-version", options["version"]] if options else []
    ran = CliRunner().invoke(
        app, ["size", "llama-3.1-8b", "--sku", "h100-sxm", "-e", engine, *flags, "-f", "json"]
    )
    shown = json.loads(ran.stdout)["notes"]
    setting = next(s for s in SETTINGS if s.name == named)
    assert any(setting.flag in note for note in shown), shown
    assert not any(f"`{name}`" in note for note in shown for name in NAMES)
