"""Imports follow DESIGN's arrows (STYLE §2 table); only kernels/validate touch torch or triton."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "kvplan": ROOT / "kvplan",
    "kvplan.kernels": ROOT / "kernels",
    "kvplan.validate": ROOT / "validate",
}

# module (first component under kvplan) -> kvplan modules it may import. `errors`, `limits`
# (stated maxima), `units` (number parsing) and `files` (bounded reads, atomic writes) are leaf
# helpers every layer may use.
LEAVES = {"errors", "limits", "units", "files"}
ALLOWED = {
    "errors": set(),
    "limits": {"errors"},
    "units": {"errors", "limits"},
    "files": {"errors", "limits"},
    "specs": {"errors", "specs", "limits"},
    "kvmath": {"specs", "errors", "kvmath", "limits"},
    "catalog": {"specs", "catalog", *LEAVES},
    "engine": {"kvmath", "catalog", "specs", "engine", *LEAVES},
    "perf": {"engine", "kvmath", "specs", "perf", *LEAVES},
    "plan": {"perf", "engine", "kvmath", "catalog", "specs", "plan", *LEAVES},
    "simulate": {"plan", "perf", "engine", "kvmath", "specs", "simulate", *LEAVES},
    "api": {"api", "plan", "simulate", "perf", "engine", "catalog", "specs", *LEAVES},
    "report": {"api", "plan", "simulate", "engine", "perf", "specs", "report", *LEAVES},
    "cli": {
        "api",
        "cli",
        *LEAVES,
        "specs",
        "kvmath",
        "catalog",
        "engine",
        "perf",
        "plan",
        "simulate",
        "report",
        "validate",
        "kernels",
    },
    "__main__": {"cli"},  # `python -m kvplan`: the console script, above every layer
    "kernels": {"kernels"},
    "validate": {"kernels", "engine", "perf", "plan", "specs", "validate", "kvmath", *LEAVES},
}
HEAVY = {"torch", "triton", "numpy"}


def _modules():
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder).with_suffix("")
            parts = [p for p in relative.parts if p != "__init__"]
            name = ".".join([package, *parts])
            yield name, path


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kvplan"


def _imports(path: Path, module: str):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level if path.name != "__init__.py" else None]
                if path.name == "__init__.py" and node.level > 1:
                    base = module.split(".")[: 1 - node.level]
                yield ".".join(base + ([node.module] if node.module else []))
            elif node.module:
                yield node.module


@pytest.mark.parametrize(("module", "path"), sorted(_modules()), ids=lambda x: str(x))
def test_imports_follow_the_arrows(module, path):
    layer = _layer(module)
    if layer == "kvplan":  # the package __init__
        return
    allowed = ALLOWED[layer]
    for imported in _imports(path, module):
        top = imported.split(".")[0]
        if top in HEAVY:
            assert layer in ("kernels", "validate"), f"{module} imports {imported}"
        if top == "kvplan" and imported != "kvplan":
            target = imported.split(".")[1]
            if target == "__version__":
                continue
            assert target in allowed, f"{module} may not import {imported}"


def test_every_package_ships_in_the_wheel():
    # pyproject lists packages by hand (the package-dir mapping needs it): a new subpackage
    # missing from the list works in an editable install and breaks an installed wheel.
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {name for name, path in _modules() if path.name == "__init__.py"}
    assert found <= listed
