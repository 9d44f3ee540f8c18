"""The one exit path: however a run ends, the user sees an exit code and at most one line.

A few checks run the real console entry point in a subprocess (the path users take); the
rest call `kvplan.cli.exits.exit_code_of` in process with real exceptions.
"""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
import textwrap

import pytest
from fuzz_harness import assert_refused, cli
from typer.testing import CliRunner

from kvplan.cli import app, run
from kvplan.cli.exits import EXIT_INTERRUPTED, EXIT_PIPE_CLOSED, exit_code_of
from kvplan.errors import KvplanError


def _kvplan(*args: str, code: str | None = None, env: dict | None = None):
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "kvplan.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60, env=env)


def test_usage_error_is_one_line_in_a_real_process():
    done = _kvplan("size", "gpt2", "--batch", "x")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "error: --batch: 'x' is not a whole number; write digits 0-9, e.g. 8 "
        "(see `kvplan size --help`)\n"
    )


def test_a_bug_is_one_marked_line_and_its_traceback_on_request():
    # A command that fails the way a bug would: an exception kvplan does not expect.
    code = textwrap.dedent(
        """
        import sys
        from kvplan.cli import app, main

        @app.command("explode")
        def explode() -> None:
            raise RuntimeError("a bug\\nover two lines")

        sys.argv = ["kvplan", "explode"]
        main()
        """
    )
    done = _kvplan(code=code)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "internal error: RuntimeError: a bug over two lines (please report it; set "
        "KVPLAN_DEBUG=1 for the traceback)\n"
    )
    debug = _kvplan(code=code, env={**os.environ, "KVPLAN_DEBUG": "1"})
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.endswith("(please report it; set KVPLAN_DEBUG=1 for the traceback)\n")


def test_a_closed_pipe_is_quiet():
    # `kvplan schema models | head -c 100`: the reader leaves after 100 bytes of ~10 kB.
    process = subprocess.Popen(
        [sys.executable, "-m", "kvplan.cli", "schema", "models"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(100)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) in (0, EXIT_PIPE_CLOSED)  # 0 if it all fit in the pipe
    assert stderr == ""


def test_a_closed_stdout_is_one_line():
    # `kvplan models >&-`: the process starts without file descriptor 1.
    done = subprocess.run(
        [sys.executable, "-m", "kvplan.cli", "models"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 2
    assert done.stderr == "error: cannot write to standard output: it is closed\n"


class _FullDisk(io.RawIOBase):
    """A stdout on a full disk: every write fails the way `> /dev/full` does."""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("argv", [["models"], ["schema", "models"]])
def test_a_full_disk_is_one_line(monkeypatch, argv):
    # `models` (~5 kB) fails at the final flush, `schema` (~10 kB) while it writes.
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(_FullDisk(), 4096)))
    errors = io.StringIO()
    monkeypatch.setattr(sys, "stderr", errors)
    assert run(argv) == 2
    assert errors.getvalue() == (
        f"error: cannot write to standard output: {os.strerror(errno.ENOSPC)}\n"
    )


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (("size", "gpt2", "--bogus"), "error: No such option: --bogus (see `kvplan size --help`)"),
        (("size",), "error: Missing argument 'model'. (see `kvplan size --help`)"),
        (("nosuch",), "error: No such command 'nosuch'. (see `kvplan --help`)"),
        (
            ("size", "gpt2", "--tp", "0"),
            "error: --tp: 0 must be between 1 and 4,096 (see `kvplan size --help`)",
        ),
    ],
)
def test_usage_errors_are_one_line(argv, line):
    outcome = cli(*argv)
    assert_refused(outcome)
    assert outcome.stderr_lines == [line]


def test_help_still_works():
    outcome = cli("size", "--help")
    assert outcome.exit_code == 0 and "Usage: kvplan size" in outcome.stdout


def test_bare_kvplan_shows_the_help_on_stderr():
    outcome = cli()
    assert outcome.exit_code == 2 and outcome.stdout == ""
    assert outcome.stderr.startswith("Usage: kvplan [OPTIONS] COMMAND")


def test_test_runners_take_the_same_path():
    result = CliRunner().invoke(app, ["size", "gpt2", "--batch", "-1"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        "error: --batch: -1 must be between 1 and 1,048,576 (see `kvplan size --help`)\n"
    )


def test_exit_codes_of_every_ending(capsys):
    def bug() -> None:
        raise ZeroDivisionError("division by zero")

    def user_error() -> None:
        raise KvplanError("file.yaml:3: name: value '': a name must not be empty\nsecond: x")

    def interrupted() -> None:
        raise KeyboardInterrupt

    def broken_pipe() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    assert exit_code_of(lambda: None) == 0
    assert exit_code_of(lambda: 1) == 1
    assert exit_code_of(bug) == 2
    assert capsys.readouterr().err == (
        "internal error: ZeroDivisionError: division by zero (please report it; set "
        "KVPLAN_DEBUG=1 for the traceback)\n"
    )
    assert exit_code_of(user_error) == 2
    assert capsys.readouterr().err == (
        "error: file.yaml:3: name: value '': a name must not be empty\nerror: second: x\n"
    )
    assert exit_code_of(interrupted) == EXIT_INTERRUPTED
    assert exit_code_of(broken_pipe) == EXIT_PIPE_CLOSED
    assert capsys.readouterr().err == ""
