"""The verify extra installs what `kvplan verify --device cpu` imports; hints that work.

`kvplan verify --device cpu` runs in a fresh process (no TRITON_INTERPRET set, as a user
starts it); every third-party module it imports must belong to a distribution that
`pip install kvplan[verify]` brings: kvplan's own requirements (read from pyproject.toml)
and, recursively, theirs (read from the installed distributions' metadata).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from kvplan.cli.verify import CPU_TORCH_INDEX, install_hint

ROOT = Path(__file__).resolve().parents[1]

# Runs the CLI in-process after noting what the interpreter had loaded at start (site hooks),
# then writes the top-level modules the command added.
_RUN = r"""
import json, os, sys
before = set(sys.modules)
from kvplan.cli import main
sys.argv = ["kvplan", *sys.argv[2:]]
try:
    main()
    code = 0
except SystemExit as exit:
    code = exit.code
after = set(sys.modules) - before
with open(os.environ["MODULES_OUT"], "w") as file:
    json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in after})}, file)
"""


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _closure(extra: str) -> set[str]:
    """Distributions `pip install kvplan[extra]` installs: kvplan's requirements, recursively."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    todo += [Requirement(r) for r in project["optional-dependencies"][extra]]
    seen: set[str] = set()
    while todo:
        requirement = todo.pop()
        name = _name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            nested = Requirement(text)
            if nested.marker is None or nested.marker.evaluate({"extra": ""}):
                todo.append(nested)
    return seen


def test_verify_extra_declares_numpy():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(Requirement(r).name) for r in extra["optional-dependencies"]["verify"]}
    assert {"torch", "triton", "numpy"} <= names


def test_verify_cpu_imports_only_what_the_verify_extra_installs(tmp_path):
    out = tmp_path / "modules.json"
    run = subprocess.run(
        [
            *[sys.executable, "-c", _RUN, "--"],
            *[
                "verify",
                "llama-3.1-8b",
                "--device",
                "cpu",
                "--context",
                "16",
                "--layers",
                "1",
                "--repeats",
                "1",
            ],
            *["--format", "json"],
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        | {"MODULES_OUT": str(out)},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["code"] in (0, None), run.stderr[-2000:]
    assert json.loads(run.stdout)["verdict"]["numerics"] == "pass"
    owners = metadata.packages_distributions()
    allowed = _closure("verify")
    outside = {}
    for module in result["modules"]:
        if module in sys.stdlib_module_names or module == "kvplan" or module not in owners:
            continue  # standard library, kvplan itself, or built into the interpreter
        dists = {_name(d) for d in owners[module]}
        if not dists & allowed:
            outside[module] = sorted(dists)
    assert not outside, f"imported, but not installed by kvplan[verify]: {outside}"
    assert "numpy" in result["modules"]  # the interpreter's: why the extra lists it


def test_hint_for_a_checkout_installs_its_own_extra(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'kvplan'\n")
    hint = install_hint(tmp_path, has_gpu_driver=True)
    assert hint == f"{sys.executable} -m pip install -e '{tmp_path}[verify]'"
    assert install_hint(ROOT, has_gpu_driver=True).endswith(f"-e '{ROOT}[verify]'")


def test_hint_for_a_wheel_install_and_a_machine_without_gpu(tmp_path):
    # A wheel install from an index: no pyproject.toml beside the package, no direct_url.json.
    wheel = _dist_info(tmp_path, None)
    hint = install_hint(tmp_path, has_gpu_driver=True, distribution=wheel)
    assert hint == f"{sys.executable} -m pip install 'kvplan[verify]'"
    no_gpu = install_hint(tmp_path, has_gpu_driver=False, distribution=wheel)
    assert no_gpu.startswith(f"{sys.executable} -m pip install torch --index-url {CPU_TORCH_INDEX}")
    assert no_gpu.endswith("'kvplan[verify]'")


def _dist_info(tmp_path, direct_url: str | None):
    # The metadata folder pip writes for an installed kvplan, read back by importlib.
    info = tmp_path / "site" / "kvplan-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kvplan\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)
    return metadata.PathDistribution(info)


def test_hint_for_an_install_from_a_local_folder_uses_that_folder(tmp_path):
    # `pip install /src/kvplan` (not editable) records {"url": "file:///src/kvplan", ...}:
    # the extra must come from that folder, not from an index that may hold another kvplan.
    source = tmp_path / "my src" / "kvplan"
    url = source.as_uri()
    dist = _dist_info(tmp_path, json.dumps({"url": url, "dir_info": {}}))
    hint = install_hint(tmp_path, has_gpu_driver=True, distribution=dist)
    assert hint == f"{sys.executable} -m pip install '{source}[verify]'"


def test_hint_for_an_index_install_names_the_package(tmp_path):
    # From an index pip writes no direct_url.json; a remote URL is not a local source either.
    for record in (
        None,
        json.dumps({"url": "https://example.org/kvplan-0.1.0.tar.gz", "archive_info": {}}),
    ):
        dist = _dist_info(tmp_path / str(bool(record)), record)
        hint = install_hint(tmp_path, has_gpu_driver=True, distribution=dist)
        assert hint == f"{sys.executable} -m pip install 'kvplan[verify]'"
