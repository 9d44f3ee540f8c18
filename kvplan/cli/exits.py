"""The one exit path: every way a command can end is an exit code and at most one stderr line.

| how a command ends                                   | stderr                          | exit |
|------------------------------------------------------|---------------------------------|------|
| normally                                             | (warnings only)                 | 0    |
| a check failed, or nothing planned fits (`check`,     | (warnings only)                 | 1    |
| `verify`, `size --sku`, `claim`, `recommend`,        |                                 |      |
| `report` with no row that fits)                      |                                 |      |
| bad input (KvplanError)                              | `error: …`, one line a problem  | 2    |
| bad usage (unknown option, missing argument, a value | `error: … (see `kvplan CMD      | 2    |
| an option's parser refused)                          | --help`)`                       |      |
| a bug (any other exception)                          | `internal error: …`             | 2    |
| Ctrl-C                                               | (nothing)                       | 130  |
| the reader of stdout went away (`kvplan … | head`)   | (nothing)                       | 141  |
| stdout cannot be written (closed, disk full)         | `error: cannot write to …`      | 2    |

A bug exits 2 like bad input, because a script cannot tell the two apart any better than the
user can: the line says "internal error", asks for a report, and `KVPLAN_DEBUG=1` shows the
traceback. 130 and 141 are the shell's own codes for SIGINT and SIGPIPE.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from kvplan.errors import KvplanError, SettingError, shown

DEBUG_ENV = "KVPLAN_DEBUG"
# What a write to a full, failing or closed output says (EPIPE has its own exit, 141).
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF})
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE


def _click_exception() -> type[Exception]:
    """The base class of typer's usage errors: vendored click from typer 0.29, click before."""
    vendored = getattr(typer, "TyperException", None)
    if vendored is not None:
        return vendored  # type: ignore[no-any-return]
    import click  # pragma: no cover - typer < 0.29 depends on click

    return click.ClickException  # pragma: no cover


def _one_line(text: str) -> str:
    return " ".join(text.split())


def usage_line(error: Exception) -> str:
    """One line for a typer/click usage error, naming the option and the way to its help."""
    message = getattr(error, "message", str(error))
    param = getattr(error, "param", None)
    # A parser's refusal names its option; click's own messages (a missing argument) say it all.
    if param is not None and message and getattr(error, "param_hint", None) is None:
        names = getattr(param, "opts", None) or [getattr(param, "name", "") or ""]
        text = f"{names[0]}: {message}"
    else:
        text = error.format_message()  # type: ignore[attr-defined]
    ctx = getattr(error, "ctx", None)
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return f"error: {_one_line(text)}{hint}"


def write_error(error: KvplanError) -> None:
    """The `error: …` lines of bad input on stderr, one a problem."""
    # A control character left in a line (a name from a file that did not go through
    # `shown`) is escaped here, never sent to the terminal. A setting is named by its flag.
    text = str(error)
    if isinstance(error, SettingError):
        from kvplan.engine.settings import flag_of  # only on an error: keeps start-up small

        text = error.render(flag_of)
    for line in text.splitlines() or [""]:
        sys.stderr.write(f"error: {shown(line)}\n")


def internal_error_line(error: BaseException) -> str:
    """The one line a bug prints: what it was, and how to report it."""
    detail = _one_line(str(error))[:200]
    what = type(error).__name__ + (f": {detail}" if detail else "")
    return f"internal error: {what} (please report it; set {DEBUG_ENV}=1 for the traceback)"


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a test's captured stream, or no stdout
        pass
    finally:
        os.close(devnull)


def _stdout_problem() -> str | None:
    """Why stdout cannot take output (closed, or a flush fails), or None when it can."""
    if sys.stdout is None:  # started with stdout closed (`kvplan … >&-`)
        return "it is closed"
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as error:
        return getattr(error, "strerror", None) or str(error) or type(error).__name__
    return None


def _stdout_error(problem: str) -> int:
    """Report that stdout failed, the way a bad path would be: one line, exit 2."""
    sys.stderr.write(f"error: cannot write to standard output: {problem}\n")
    _silence_stdout()
    return 2


def exit_code_of(run: Callable[[], object]) -> int:
    """Call `run` (a click command's main, standalone_mode=False); its exit code, see the table."""
    usage_error = _click_exception()
    if sys.stdout is None:
        return _stdout_error("it is closed")
    try:
        code = run()
        # Output is buffered: a full disk (`> /dev/full`) shows at this flush, not at exit.
        problem = _stdout_problem()
        if problem is not None:
            return _stdout_error(problem)
    except KvplanError as error:
        write_error(error)
        return 2
    except usage_error as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # bare `kvplan`: the help, on stderr
            error.show()  # type: ignore[attr-defined]
        else:
            sys.stderr.write(usage_line(error) + "\n")
        return int(getattr(error, "exit_code", 2))
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C, or EOF at a prompt
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE_CLOSED
    except SystemExit as exit_:
        # typer turns a closed stdout (EPIPE) into sys.exit(1) itself; nothing else in
        # kvplan calls sys.exit, and exit 1 means "a check failed".
        if exit_.code == 1:
            _silence_stdout()
            return EXIT_PIPE_CLOSED
        return exit_.code if isinstance(exit_.code, int) else 2
    except Exception as error:
        # A write error escaping a command is stdout's: kvplan's own files turn theirs into
        # KvplanError (kvplan.files), and stdout is the only other thing it writes.
        if isinstance(error, OSError) and error.errno in _WRITE_ERRNOS:
            return _stdout_error(error.strerror or str(error))
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        sys.stderr.write(internal_error_line(error) + "\n")
        return 2
    return code if isinstance(code, int) else 0


class OneExitGroup(TyperGroup):
    """The `kvplan` group: however it is invoked (console script, `python -m`, a test's
    CliRunner), every run ends through `exit_code_of`."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,  # always "kvplan" (a test's runner passes "root")
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> int:
        code = exit_code_of(
            lambda: super(OneExitGroup, self).main(
                args=args,
                prog_name="kvplan",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        )
        if standalone_mode:
            sys.exit(code)
        return code
