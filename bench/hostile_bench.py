"""Timings of kvplan on the largest inputs its limits allow (numbers go in notes and reports).

Usage: python bench/hostile_bench.py [--repo PATH] [--cases catalog,check,report,simulate]

Each case builds its input in a scratch folder, runs `python -m kvplan.cli ...` once in a fresh
interpreter with HF_HUB_OFFLINE=1 and COLUMNS=120, and prints the wall-clock seconds, the peak
resident memory and the exit code. `--repo` times another checkout (e.g. /work/main, for the
figures before a change). What each case is:

- catalog N    `size gpt2 --catalog DIR`, DIR holding N small model files (cap: 10,000 entries)
- check N      `kvplan check FILE` of N products, as a table
- report       `report --model all` as a table (every model × SKU × TP)
- simulate N   `simulate gpt2 -s h100-sxm --requests N --rate 2`
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = """name: bench-{i}
source: "https://huggingface.co/openai-community/gpt2/blob/main/config.json"
family: gpt2
hidden_size: 768
tie_word_embeddings: true
num_layers: 12
vocab_size: 50257
intermediate_size: 3072
max_context: 1024
attention:
  num_heads: 12
  num_kv_heads: 12
  head_dim: 64
layers:
  pattern: [full]
"""
PRODUCT = """  - name: p{i}
    model: llama-3.1-8b
    sku: h100-sxm
    context: 8k
    concurrency: {concurrency}
"""


def _catalog(work: Path, count: int) -> list[str]:
    folder = work / f"catalog-{count}"
    folder.mkdir()
    for i in range(count):
        (folder / f"m{i}.yaml").write_text(MODEL.format(i=i))
    return ["size", "gpt2", "--catalog", str(folder)]


def _check(work: Path, count: int) -> list[str]:
    path = work / f"products-{count}.yaml"
    rows = "".join(PRODUCT.format(i=i, concurrency=1 + i % 64) for i in range(count))
    path.write_text("products:\n" + rows)
    return ["check", str(path)]


def cases(work: Path, wanted: set[str]) -> list[tuple[str, list[str]]]:
    """(label, argv) of every case in `wanted`."""
    chosen: list[tuple[str, list[str]]] = []
    if "catalog" in wanted:
        chosen += [(f"catalog {n:,} files", _catalog(work, n)) for n in (3_000, 9_990)]
    if "check" in wanted:
        chosen += [(f"check {n:,} products", _check(work, n)) for n in (1_000, 8_500)]
    if "report" in wanted:
        chosen.append(("report --model all (table)", ["report", "--model", "all"]))
    if "simulate" in wanted:
        for n in (100_000, 250_000):  # 250,000: the stated maximum
            argv = ["simulate", "gpt2", "-s", "h100-sxm", "--requests", str(n), "--rate", "2"]
            chosen.append((f"simulate {n:,} requests", argv))
    return chosen


def run(argv: list[str], repo: Path) -> tuple[float, float, int]:
    """Seconds, peak resident MiB and exit code of one run in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", "COLUMNS": "120"}
    env.pop("KVPLAN_CATALOG", None)
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "kvplan.cli", *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=tempfile.gettempdir(),
        )
        _, status, usage = os.wait4(process.pid, 0)  # this child's own peak memory
        seconds = time.perf_counter() - start
        process.returncode = code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            stderr.seek(0)
            print(f"  stderr: {stderr.read(300).decode(errors='replace')}", file=sys.stderr)
    return seconds, usage.ru_maxrss / 1024, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout whose kvplan to run")
    parser.add_argument("--cases", default="catalog,check,report,simulate")
    args = parser.parse_args()
    print(f"{'case':<32}{'seconds':>9}{'peak MiB':>10}{'exit':>6}  ({args.repo})")
    with tempfile.TemporaryDirectory(prefix="kvplan-bench-") as scratch:
        for label, argv in cases(Path(scratch), set(args.cases.split(","))):
            seconds, peak_mib, code = run(argv, args.repo)
            print(f"{label:<32}{seconds:>9.1f}{peak_mib:>10.0f}{code:>6}", flush=True)


if __name__ == "__main__":
    main()
