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
    # report renders the API's result records: it computes nothing, so it needs no layer
    # below api but the specs (a record's RoPE scaling, the catalogue listing).
    "report": {"api", "specs", "report", *LEAVES},
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
# Renderers that still read a lower layer's objects, each with the layer it reads: the
# catalogue listing's per-model facts.
MODULE_ALLOWED = {
    "kvplan.report.catalog_report": {"plan"},
}


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
    allowed = ALLOWED[layer] | MODULE_ALLOWED.get(module, set())
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


def _graph() -> dict[str, set[str]]:
    """kvplan module -> the kvplan modules it imports (resolved to a module that exists)."""
    found = dict(_modules())
    graph: dict[str, set[str]] = {}
    for module, path in found.items():
        graph[module] = set()
        for imported in _imports(path, module):
            parts = imported.split(".")
            while parts and ".".join(parts) not in found:
                parts.pop()
            target = ".".join(parts)
            if target and target != module:
                graph[module].add(target)
    return graph


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path of imports from `start` back to itself, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        module, path = stack.pop()
        for target in graph[module]:
            if target == start:
                return path
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


def test_report_has_no_import_cycles():
    # Lazy imports count too: a renderer that imports `emit` while `emit` imports it is
    # one module split in two.
    graph = _graph()
    for module in sorted(m for m in graph if m.startswith("kvplan.report")):
        cycle = _cycle_through(graph, module)
        assert cycle is None, " -> ".join([*cycle, module]) if cycle else ""


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle_through(graph, "a") == ["a", "b", "c"]
    assert _cycle_through(graph, "d") is None


def _import_graph() -> dict[str, set[str]]:
    """kvplan module -> the kvplan modules it names in any import statement.

    Every import counts: module level, inside a function (lazy) and under TYPE_CHECKING, since
    two modules that name each other depend on each other in the design whatever Python
    tolerates at run time. `from package import name` is an edge to the submodule when `name`
    is one, else to the package.
    """
    modules = dict(_modules())
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, set())
        for imported, names in _imported_names(path, module):
            targets = [f"{imported}.{n}" for n in names if f"{imported}.{n}" in modules]
            if len(targets) < len(names) or not names:
                targets.append(imported)
            edges |= {t for t in targets if t in modules and t != module}
    return graph


def _imported_names(path: Path, module: str):
    """(module imported, names taken from it) for each import statement of `path`."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names)
            if node.level:
                base = module.split(".")
                drop = node.level - (1 if path.name == "__init__.py" else 0)
                base = base[: len(base) - drop] if drop else base
                yield ".".join(base + ([node.module] if node.module else [])), names
            elif node.module:
                yield node.module, names


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycles():
    cycles = _cycles(_import_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_type_checking_and_lazy_imports(tmp_path):
    # Three modules: a imports b at module level, b imports c inside a function, c names a
    # only under TYPE_CHECKING. One cycle of three; d, imported by a alone, is in none.
    graph = {"a": {"b", "d"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycles(graph) == [("a", "b", "c")]
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kvplan.engine.base import EngineProfile\n"
        "def f():\n    from kvplan.engine import vllm\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert sorted(_imported_names(path, "kvplan.engine.probe")) == [
        ("kvplan.engine", ("vllm",)),
        ("kvplan.engine.base", ("EngineProfile",)),
        ("typing", ("TYPE_CHECKING",)),
    ]
