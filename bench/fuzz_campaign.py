"""A large generated campaign of hostile input against the `kvplan` command line.

Every case runs `python -m kvplan.cli ...` in its own subprocess with a wall-clock timeout and
a memory cap, and is judged on what a user would see:

- traceback  a Python traceback or "internal error" on stderr, or an exit code outside 0/1/2
- hang       still running at the timeout (killed), and again when rerun alone with four
             times the timeout (a busy machine alone does not make a hang)
- silent     documented as refused, but exit 0 or 1 (kvplan accepted it)
- wrong      accepted, but a number in the JSON output differs from the documented reading
- refused    documented as accepted, but exit 2 (counted, not a failure: a check of the oracle)
- ok         everything else

Usage:
    python bench/fuzz_campaign.py [--repo PATH] [--seed 0] [--scale 1.0] [--jobs 2]
        [--timeout 10] [--json results.json] [--classes numbers,catalogue]

`--repo` runs another checkout's kvplan (e.g. /work/main, to count what a change fixed); the
cases and their expectations always come from this checkout.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "fuzz"), str(ROOT / "bench")]

import fuzz_cases  # noqa: E402
import fuzz_cases_files  # noqa: E402
import fuzz_cases_round2  # noqa: E402
from fuzz_cases import Case  # noqa: E402

MEMORY_CAP_BYTES = 4 * 2**30  # a runaway case must not take the shared machine down with it
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def generate(seed: int, scale: float, work: Path) -> list[Case]:
    """Every case of the campaign, in a fixed order for a given seed and scale."""
    rng = random.Random(seed)
    cases: list[Case] = []
    cases += fuzz_cases.number_cases(rng, int(1200 * scale))
    cases += fuzz_cases.name_cases(rng)
    cases += fuzz_cases.catalogue_cases(rng, work, max(1, int(14 * scale)))
    cases += fuzz_cases_files.config_cases(rng, work, max(1, int(12 * scale)))
    cases += fuzz_cases_files.products_cases(rng, work, int(300 * scale))
    cases += fuzz_cases_files.output_cases(work)
    cases += fuzz_cases_files.argv_cases(rng, int(300 * scale))
    cases += fuzz_cases_files.simulate_cases(random.Random(seed + 1), work, int(150 * scale))
    cases += fuzz_cases_round2.number_cases(random.Random(seed + 2), int(300 * scale))
    cases += fuzz_cases_round2.file_cases(work)
    cases += fuzz_cases_round2.option_sweep_cases(work)
    return cases


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def run_case(case: Case, repo: Path, timeout_s: float) -> dict:
    """Run one case; its outcome, the time it took and the traceback's last kvplan frame."""
    # HF_HUB_OFFLINE: a name that looks like a Hub id never waits on the network.
    env = {**os.environ, "PYTHONPATH": str(repo), "COLUMNS": "120", "HF_HUB_OFFLINE": "1"}
    env |= case.env
    env.pop("KVPLAN_DEBUG", None)
    if "KVPLAN_CATALOG" not in case.env:
        env.pop("KVPLAN_CATALOG", None)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kvplan.cli", *case.argv],
            capture_output=True,
            timeout=timeout_s,
            env=env,
            cwd=tempfile.gettempdir(),
            preexec_fn=_limit_memory,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "hang", "seconds": timeout_s, "site": None}
    seconds = time.perf_counter() - start
    stdout = done.stdout.decode("utf-8", "replace")
    stderr = done.stderr.decode("utf-8", "replace")
    return {"seconds": seconds, **_judge(case, done.returncode, stdout, stderr)}


def _judge(case: Case, code: int, stdout: str, stderr: str) -> dict:
    crashed = code not in (0, 1, 2) or "Traceback" in stderr or "internal error" in stderr
    if crashed:
        frames = [m for m in _FRAME.finditer(stderr) if "kvplan" in m.group(1)]
        site = f"{Path(frames[-1].group(1)).name}:{frames[-1].group(2)}" if frames else None
        last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {code}"
        return {"outcome": "traceback", "site": site or last[:80], "error": last[:200]}
    if case.expect == "refuse" and code != 2:
        return {"outcome": "silent", "site": None}
    if case.expect == "accept" and code == 2:
        return {"outcome": "refused", "site": None, "error": stderr.strip()[:200]}
    if case.check is not None and code in (0, 1):
        try:
            right = case.check(stdout)
        except (ValueError, KeyError, IndexError, TypeError):
            right = False
        if not right:
            return {"outcome": "wrong", "site": None}
    return {"outcome": "ok", "site": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout whose kvplan to run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 ≈ 3,000 cases")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per case")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    parser.add_argument("--classes", help="comma-separated input classes to run (default: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvplan-fuzz-") as scratch:
        cases = generate(args.seed, args.scale, Path(scratch))
        if args.classes:
            cases = [c for c in cases if c.kind in args.classes.split(",")]
        print(f"{len(cases)} cases against {args.repo}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        done = 0

        def run(case: Case) -> dict:
            nonlocal done
            result = run_case(case, args.repo, args.timeout)
            done += 1
            if done % 250 == 0:
                print(f"{done} done, {time.perf_counter() - start:.0f} s", file=sys.stderr,
                      flush=True)  # fmt: skip
            return result

        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run, cases))
        for index, result in enumerate(results):
            if result["outcome"] == "hang":  # rerun alone: is it stuck, or was the machine busy?
                again = run_case(cases[index], args.repo, 4 * args.timeout)
                results[index] = again if again["outcome"] != "hang" else result
        elapsed = time.perf_counter() - start
    _report(cases, results, elapsed)
    if args.json:
        records = [
            {"kind": c.kind, "label": c.label, "argv": c.argv[:8], "owner": c.owner,
             "expect": c.expect, **r}
            for c, r in zip(cases, results, strict=True)
        ]  # fmt: skip
        args.json.write_text(json.dumps(records, indent=1, default=str) + "\n")


def _report(cases: list[Case], results: list[dict], elapsed_s: float) -> None:
    outcomes = ("traceback", "hang", "silent", "wrong", "refused", "ok")
    table: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    sites: collections.Counter = collections.Counter()
    for case, result in zip(cases, results, strict=True):
        table[(case.kind, case.owner)][result["outcome"]] += 1
        if result["outcome"] == "traceback":
            sites[result["site"]] += 1
    print(f"{'class':<12}{'owner':<7}{'cases':>7}" + "".join(f"{o:>10}" for o in outcomes))
    for (kind, owner), counts in sorted(table.items()):
        print(f"{kind:<12}{owner:<7}{sum(counts.values()):>7}"
              + "".join(f"{counts[o]:>10}" for o in outcomes))  # fmt: skip
    total = collections.Counter()
    for counts in table.values():
        total.update(counts)
    print(f"{'all':<19}{sum(total.values()):>7}" + "".join(f"{total[o]:>10}" for o in outcomes))
    slowest = max(r["seconds"] for r in results)
    print(f"{len(sites)} distinct traceback sites; slowest case {slowest:.1f} s; "
          f"{elapsed_s:.0f} s in all")  # fmt: skip
    for site, count in sites.most_common(40):
        print(f"  {count:>4}  {site}")
    for outcome in ("hang", "silent", "wrong", "refused"):
        seen: collections.Counter = collections.Counter()
        for case, result in zip(cases, results, strict=True):
            if result["outcome"] == outcome:
                seen[f"{case.kind}: {case.label}"] += 1
        if seen:
            print(f"{outcome}:")
            for label, count in seen.most_common(30):
                print(f"  {count:>4}  {label}")


if __name__ == "__main__":
    main()
