"""The one declaration of the engine settings, and the three interfaces built from it.

The command line, the products file and the Python API must each take every declared
setting and nothing the declaration lacks; a setting named in an error is named by its
declared name below the CLI, by its flag on the command line and by its key in a file.
"""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import pytest
import typer

import kvplan
from kvplan.cli import app
from kvplan.engine.settings import ENGINE_SETTINGS, SETTINGS, EngineSettings
from kvplan.errors import KvplanError, SettingError
from kvplan.plan.guardrail.products import ProductSpec

# A product's own fields: what it is and what it promises, not how the engine is set.
PRODUCT_FIELDS = {
    "name", "model", "sku", "tp", "pp", "kv_dtype", "weight_dtype", "context", "concurrency",
    "requests_per_s", "duration_s", "rope_scaling",
    "vllm_version",  # engine_version under its older name, kept for old files
}  # fmt: skip
# kvplan.deployment()'s own keywords that are not engine settings.
DEPLOYMENT_KEYWORDS = {
    "model", "kv_dtype", "weight_dtype", "tp", "pp", "rope_scaling", "catalog", "settings",
    "setting_fields",
}  # fmt: skip
# A value each text setting accepts, and what a setting needs beside it to be accepted.
VALUES = {"version": "0.11", "v_dtype": "f16"}
NEEDS = {"parallel": {"context_size_tokens": 8192}, "version": {}}


def _options(command: str) -> set[str]:
    """Every flag of `kvplan COMMAND`, as click parses them."""
    click_app = typer.main.get_command(app)
    found: set[str] = set()
    for param in click_app.commands[command].params:  # type: ignore[attr-defined]
        found |= set(param.opts) | set(param.secondary_opts)
    return found


def _declared_flags() -> set[str]:
    flags = set()
    for setting in SETTINGS:
        for declared in setting.flags:
            flags |= set(declared.split("/"))
    return flags


def test_names_are_unique():
    for attribute in ("name", "key", "keyword", "flag"):
        values = [getattr(s, attribute) for s in SETTINGS]
        assert len(values) == len(set(values)), attribute


@pytest.mark.parametrize("command", ["size", "report", "claim", "recommend", "simulate"])
def test_every_declared_setting_is_an_option_of_the_planning_commands(command):
    assert _declared_flags() <= _options(command), sorted(_declared_flags() - _options(command))


def test_every_declared_setting_is_a_products_key_and_nothing_else_is():
    keys = {s.key for s in SETTINGS}
    fields = set(ProductSpec.model_fields)
    assert keys <= fields, sorted(keys - fields)
    assert fields - keys == PRODUCT_FIELDS, sorted(fields - keys ^ PRODUCT_FIELDS)


def test_every_declared_setting_is_an_api_keyword_and_nothing_else_is():
    engine_fields = {f.name for f in dataclasses.fields(EngineSettings)}
    assert engine_fields == {s.name for s in ENGINE_SETTINGS}
    own = set(inspect.signature(kvplan.deployment).parameters) - DEPLOYMENT_KEYWORDS
    on_deployment = {s.keyword for s in SETTINGS if s.on_deployment}
    assert own == on_deployment, sorted(own ^ on_deployment)
    # Each keyword is accepted (a value the declaration allows) ...
    for setting in ENGINE_SETTINGS:
        value = {bool: True, str: "", int: 1, float: 0.5}[setting.type] or VALUES[setting.name]
        engine = setting.engines[0]
        fields = {setting.keyword: value, **NEEDS.get(setting.name, {})}
        given = kvplan.deployment("llama-3.1-8b", engine=engine, **fields)
        assert getattr(given.settings, setting.name) == value
    # ... and a keyword the declaration lacks is refused, naming what is allowed.
    with pytest.raises(KvplanError, match=r"unknown engine setting\(s\) \['block_size'\]"):
        kvplan.deployment("llama-3.1-8b", block_size=16)


def test_utilization_is_refused_below_the_declared_minimum_by_every_interface(tmp_path):
    # The declared minimum is kvplan.limits.MIN_FRACTION, 10⁻⁶; 10⁻⁷ is below it. The CLI and
    # products files refused it, the API let it through to a budget of ~0 bytes.
    with pytest.raises(SettingError, match=r"^utilization: 1e-07 is below kvplan's minimum"):
        kvplan.size("llama-3.1-8b", sku="h100-sxm", utilization=1e-7)
    cli = _kvplan("size", "llama-3.1-8b", "--sku", "h100-sxm", "--utilization", "0.0000001")
    assert cli.returncode == 2 and cli.stdout == ""
    assert cli.stderr.startswith("error: --utilization: 0.0000001 is below kvplan's minimum")


def _kvplan(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvplan.cli", *argv], capture_output=True, text=True, check=False
    )


def test_an_engine_error_names_the_flag_on_the_command_line_and_the_key_in_a_file(tmp_path):
    # llama.cpp slots need the cells they share: -np without -c is refused by the engine,
    # which names both settings by their declared names; each reader prints its own names.
    with pytest.raises(SettingError) as raised:
        kvplan.size("llama-3.1-8b", engine="llama.cpp", parallel=2)
    assert str(raised.value).startswith("parallel: give context_size_tokens with it")
    cli = _kvplan("size", "llama-3.1-8b", "--engine", "llama.cpp", "--parallel", "2")
    assert cli.returncode == 2 and cli.stdout == ""
    assert cli.stderr.startswith("error: --parallel: give --ctx-size with it")
    products = tmp_path / "products.yaml"
    products.write_text(
        "products:\n  - name: chat\n    model: llama-3.1-8b\n    sku: h100-sxm\n"
        "    engine: llama.cpp\n    context: 8k\n    concurrency: 1\n    parallel: 2\n"
    )
    check = _kvplan("check", str(products))
    assert check.returncode == 2 and check.stdout == ""
    assert "parallel: give ctx_size with it" in check.stderr, check.stderr


def test_a_setting_the_engine_does_not_read_is_said_to_be_ignored():
    """SGLang's pre-load reading means nothing to vLLM: the command says so, once, on stderr,
    and the plan is the one without it; the engine that reads it takes it without a word."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    base = ["size", "llama-3.1-8b", "--sku", "h100-sxm", "-f", "json"]
    reading = ["--avail-mem-before-load", "70GiB"]
    plain = CliRunner().invoke(app, [*base, "-e", "vllm"])
    ignored = CliRunner().invoke(app, [*base, "-e", "vllm", *reading])
    assert ignored.exit_code == 0
    assert ignored.stderr.splitlines() == [
        "warning: --avail-mem-before-load is not read by vllm (only by sglang); ignored"
    ]
    assert ignored.stdout == plain.stdout
    read = CliRunner().invoke(app, [*base, "-e", "sglang", *reading])
    assert read.exit_code == 0 and read.stderr == ""


def test_a_report_over_several_models_says_it_once():
    from typer.testing import CliRunner

    from kvplan.cli import app

    args = ["report", "-m", "llama-3.1-8b", "-m", "qwen2.5-7b", "--sku", "h100-sxm"]
    ran = CliRunner().invoke(app, [*args, "-e", "vllm", "--parallel", "2", "-f", "json"])
    assert ran.exit_code == 0
    assert ran.stderr.splitlines() == [
        "warning: --parallel is not read by vllm (only by llama.cpp, ollama); ignored"
    ]
