"""Run one kvplan command line in a forked child, with a time bound and a memory cap.

The child runs `kvplan.cli.run(argv)` (the console script's own exit path, in process: no
interpreter start-up), so a fuzz example costs milliseconds. Forking is what makes the time
bound real: a hang inside C code (a regex, a repr, a parser) ignores signals, but a child can
be killed, and a runaway allocation hits the child's memory cap instead of the machine.

The bound is a hang detector, not a benchmark: CALL_LIMIT_S is far above any real run
(~0.05–0.3 s), so only a call that is stuck fails it. It bounds the child's CPU time, not the
wall clock: on a machine shared with other jobs a call's wall time stretches with the load
while its CPU time does not. The wall clock only kills a child that is still running at
WALL_FACTOR × the limit (one asleep or starved, not computing).
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings

CALL_LIMIT_S = 5.0  # seconds of the child's CPU time (user + system)
WALL_FACTOR = 6.0
MEMORY_HEADROOM_BYTES = 2 * 2**30  # on top of the test process's own address space
_WARMED: list[bool] = []


@dataclass(frozen=True)
class Outcome:
    """What a user of one command line saw."""

    argv: tuple[str, ...]
    exit_code: int | None  # None: killed at the time bound
    stdout: str
    stderr: str
    seconds: float
    crash: str | None = None  # an exception that escaped run() itself (never expected)

    @property
    def hung(self) -> bool:
        return self.exit_code is None

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.strip("\n").splitlines()

    def describe(self) -> str:
        return (
            f"kvplan {' '.join(repr(a)[:60] for a in self.argv)} -> exit {self.exit_code} in "
            f"{self.seconds:.2f} s\nstdout: {self.stdout[:300]!r}\nstderr: {self.stderr[:600]!r}"
            f"\ncrash: {self.crash}"
        )


def _virtual_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _child(argv: list[str], env: dict[str, str | None], result_path: str) -> None:
    """In the forked child: run the command line, write the outcome as JSON, exit at once."""
    cap = _virtual_bytes() + MEMORY_HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    stdout, stderr = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = stdout, stderr
    crash = None
    start = time.perf_counter()
    try:
        from kvplan.cli import run

        code = run(argv)
    except BaseException:  # whatever escapes run() is the finding
        code, crash = 99, traceback.format_exc()
    seconds = time.perf_counter() - start
    record = {"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}
    Path(result_path).write_text(json.dumps({**record, "seconds": seconds, "crash": crash}))


def _warm() -> None:
    """Import every kvplan module and parse the shipped catalogue once, here: a forked child
    inherits them, so each call costs its own work, not kvplan's start-up."""
    import importlib
    import pkgutil

    import kvplan
    from kvplan.catalog import Catalog

    for module in pkgutil.walk_packages(kvplan.__path__, "kvplan."):
        if not module.name.startswith(("kvplan.kernels", "kvplan.validate")):
            importlib.import_module(module.name)
    Catalog().models()
    Catalog().skus()


def cli(
    *argv: str, env: dict[str, str | None] | None = None, limit_s: float = CALL_LIMIT_S
) -> Outcome:
    """Run `kvplan ARGV...` in a forked child; killed after `limit_s` seconds."""
    if not _WARMED:
        _warm()
        _WARMED.append(True)
    # No network: a name that looks like a Hub id is looked up in the local HF cache only.
    environment = {
        "KVPLAN_CATALOG": None,
        "KVPLAN_DEBUG": None,
        "COLUMNS": "120",
        "HF_HUB_OFFLINE": "1",
        **(env or {}),
    }
    with tempfile.TemporaryDirectory(prefix="kvplan-fuzz-") as scratch:
        result_path = os.path.join(scratch, "outcome.json")
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            try:
                _child(list(argv), environment, result_path)
            finally:
                os._exit(0)
        while True:
            done, _, usage = os.wait4(pid, os.WNOHANG)
            elapsed = time.perf_counter() - start
            if done:
                cpu_s = usage.ru_utime + usage.ru_stime
                if cpu_s > limit_s:
                    return Outcome(tuple(argv), None, "", "", cpu_s)
                break
            if elapsed > limit_s * WALL_FACTOR or _cpu_s(pid) > limit_s:
                os.kill(pid, signal.SIGKILL)
                _, _, usage = os.wait4(pid, 0)
                return Outcome(tuple(argv), None, "", "", usage.ru_utime + usage.ru_stime)
            time.sleep(0.002)
        try:
            record = json.loads(Path(result_path).read_text())
        except (OSError, ValueError):
            return Outcome(tuple(argv), 98, "", "", elapsed, crash="the child died (memory cap?)")
    return Outcome(
        tuple(argv),
        record["code"],
        record["stdout"],
        record["stderr"],
        record["seconds"],
        record["crash"],
    )


def _cpu_s(pid: int) -> float:
    """A running child's CPU seconds so far (Linux /proc; 0 where it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # utime and stime are fields 14 and 15 of stat(5), counted after the ")" from field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def assert_clean(outcome: Outcome) -> None:
    """What every run must satisfy: finish in time, exit 0/1/2, no traceback, no internal error,
    and an exit 2 that printed nothing on stdout and only `error:` lines on stderr."""
    assert not outcome.hung, f"hang (killed after {outcome.seconds:.1f} s)\n{outcome.describe()}"
    assert outcome.crash is None, outcome.describe()
    assert outcome.exit_code in (0, 1, 2), outcome.describe()
    assert "Traceback" not in outcome.stderr, outcome.describe()
    assert "internal error" not in outcome.stderr, outcome.describe()
    if outcome.exit_code == 2:
        assert outcome.stdout == "", outcome.describe()
        lines = outcome.stderr_lines
        assert lines, outcome.describe()
        assert all(line.startswith(("error: ", "warning: ")) for line in lines), outcome.describe()


def assert_refused(outcome: Outcome, *fragments: str) -> None:
    """A clean refusal (exit 2) whose error lines contain every fragment."""
    assert_clean(outcome)
    assert outcome.exit_code == 2, outcome.describe()
    errors = "\n".join(line for line in outcome.stderr_lines if line.startswith("error: "))
    for fragment in fragments:
        assert fragment in errors, f"{fragment!r} not in the error\n{outcome.describe()}"


def assert_accepted(outcome: Outcome) -> None:
    """A clean run that did not refuse its input (exit 0, or 1 for a failed check)."""
    assert_clean(outcome)
    assert outcome.exit_code in (0, 1), outcome.describe()


def fuzz(ci_examples: int) -> settings:
    """Hypothesis settings for one fuzz property: bounded and reproducible in CI.

    CI runs `ci_examples` examples with a derandomised seed, so a failure reproduces;
    `KVPLAN_FUZZ_EXAMPLES=2000 pytest tests/fuzz` runs a far larger random search instead
    (bench/fuzz_campaign.py is the bigger, subprocess-per-case campaign).
    """
    scaled = int(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "0") or 0)
    return settings(
        max_examples=scaled or ci_examples,
        deadline=None,  # each call is bounded by CALL_LIMIT_S instead
        database=None,
        derandomize=not scaled,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
