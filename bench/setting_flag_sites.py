"""Where code below the CLI names a command-line flag (numbers go in notes).

Usage: python bench/setting_flag_sites.py [-v]   (from the repository root)
Counts the lines of string literals (docstrings and comments left out) under kvplan/engine,
kvplan/plan and kvplan/simulate that name a flag: all flags, and those of engine settings.
kvplan/engine/settings.py, where each setting declares its flags, is left out. A flag an
engine itself takes (`--max-num-seqs` in a vLLM launch command) is counted too: -v lists the
sites so that each can be told apart.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

# Written out (not read from kvplan.engine.settings) so that older trees can be counted too.
SETTING_FLAGS = {
    "engine", "engine-version", "vllm-version", "utilization", "kv-memory", "block-size",
    "max-num-batched-tokens", "max-num-seqs", "activation-memory", "non-torch-memory",
    "cudagraph-memory", "no-hybrid-allocator", "draft-layers", "max-kv-tokens", "ctx-size",
    "parallel", "v-dtype", "flash-attn", "no-flash-attn", "kv-unified", "swa-full",
    "gpu-layers", "ubatch-size", "dp", "ep", "gpus-per-node",
}  # fmt: skip
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_-]*)")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def sites() -> list[tuple[str, int, str]]:
    """(path, line, flag) of every flag named in a string literal."""
    rows = []
    for folder in ("engine", "plan", "simulate"):
        for path in sorted(Path("kvplan", folder).rglob("*.py")):
            if path.name == "settings.py":
                continue
            tree = ast.parse(path.read_text())
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                literal = isinstance(node, ast.Constant) and isinstance(node.value, str)
                if literal and id(node) not in docs:
                    rows += [(str(path), node.lineno, m[1]) for m in FLAG.finditer(node.value)]
    return sorted(set(rows))


def main() -> None:
    rows = sites()
    setting = [row for row in rows if row[2] in SETTING_FLAGS]
    if "-v" in sys.argv:
        for path, line, flag in setting:
            print(f"{path}:{line} --{flag}")
    print("engine-setting flag sites:", len({(p, n) for p, n, _ in setting}))
    print("all flag sites:", len({(p, n) for p, n, _ in rows}))


if __name__ == "__main__":
    main()
