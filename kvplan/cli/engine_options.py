"""The engine options every planning command takes, generated from kvplan.engine.settings.

`size`, `report`, `claim` (and any command that computes a budget) get the same engine,
version, memory and parallelism options with the same defaults: the `@engine_options`
decorator adds one option per declared setting to the command's signature and hands the
command one `EngineOptions` value, which it resolves inside its error handler.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from kvplan.cli.options import name
from kvplan.engine.settings import BYTES, NAME, SETTINGS, SWITCH, Setting, settings_from
from kvplan.errors import KvplanError

F = TypeVar("F", bound=Callable[..., Any])


def _usage_check(setting: Setting) -> Callable[[str], object]:
    """The typer parser of `setting`: its declared check on the text typed (a refusal is a
    usage error naming the flag)."""

    def parse(value: str) -> object:
        try:
            return setting.check(value)
        except KvplanError as error:
            raise typer.BadParameter(str(error).split(": ", 1)[-1]) from None

    return parse


def _parameter(setting: Setting) -> tuple[Any, Any]:
    """(annotation, default) of the typer parameter that sets `setting`."""
    kwargs: dict[str, Any] = {"help": setting.help, "show_default": setting.show_default}
    if setting.metavar is not None:
        kwargs["metavar"] = setting.metavar
    if setting.unit == NAME:
        kwargs["parser"] = name
    elif setting.type in (int, float) and setting.unit != BYTES:
        kwargs["parser"] = _usage_check(setting)
    hint: Any = str if setting.unit == BYTES else setting.type
    default = False if setting.unit == SWITCH else setting.default
    if default is None:
        hint = hint | None
    return Annotated[hint, typer.Option(*setting.flags, **kwargs)], default


# parameter name (the products-file key) -> (annotation, default), from the declaration
_PARAMETERS: dict[str, tuple[Any, Any]] = {s.key: _parameter(s) for s in SETTINGS}


@dataclass(frozen=True)
class EngineOptions:
    """The engine options as typed; `resolve()` validates them into engine settings."""

    values: dict[str, Any]

    @property
    def engine(self) -> str:
        return str(self.values["engine"])

    def resolve(self) -> tuple[str, Any, int, bool]:
        """(engine name, EngineSettings, dp, ep); raises KvplanError on a bad value."""
        return settings_from(self.values)


def engine_options(command: F) -> F:
    """Add the engine options to `command`; it receives them as `engine_options`."""
    return option_group(_PARAMETERS, "engine_options", EngineOptions)(command)


def option_group(
    parameters: dict[str, tuple[Any, Any]], keyword: str, make: Callable[[dict[str, Any]], Any]
) -> Callable[[F], F]:
    """A decorator that adds `parameters` (name -> (annotation, default)) to a command.

    The command declares one keyword-only parameter `keyword` and receives
    `make({name: value})` there. Decorators stack: each keeps the command's own parameters
    first and --format and --catalog last in --help.
    """

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != keyword]
        tail = [p for p in kept if p.name in ("fmt", "catalog_dirs")]
        head = [p for p in kept if p not in tail]
        keyword_only = inspect.Parameter.KEYWORD_ONLY
        added = [
            inspect.Parameter(name, keyword_only, default=default, annotation=hint)
            for name, (hint, default) in parameters.items()
        ]
        keyword_head = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in head]
        first = [p for p in keyword_head if p.default is inspect.Parameter.empty]
        rest = [p for p in keyword_head if p.default is not inspect.Parameter.empty]
        tail = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in tail]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in parameters}
            return command(**kwargs, **{keyword: make(values)})

        wrapper.__signature__ = signature.replace(parameters=first + rest + added + tail)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {}
        return wrapper  # type: ignore[return-value]

    return decorate
