"""Read one YAML file into a pydantic spec, turning every failure into a one-line KvplanError.

The only place (with `catalog/hf`) that sees `yaml.YAMLError` and pydantic's
`ValidationError`: each error becomes `file:line: dotted.field: value …: message`,
the line found by walking the document's node tree along the error's `loc`.
Files are read through `kvplan.files.read_text` (regular files, size cap) and parsed by
`yaml_safe.load` (YAML 1.2 scalars, no duplicate keys, depth and alias budgets).
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

import kvplan.limits as limits
from kvplan.catalog import yaml_safe
from kvplan.errors import KvplanError, shown
from kvplan.files import read_text

SpecT = TypeVar("SpecT", bound=BaseModel)

# One file with thousands of bad values would print thousands of lines; the first ones
# locate the problem.
MAX_ERROR_LINES = 20


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file: its data, and its node tree for line numbers."""

    path: Path
    data: Any
    root: yaml.Node | None

    def line_of(self, loc: tuple[int | str, ...]) -> int | None:
        """1-based line of the value at `loc`, or of its nearest existing parent."""
        node = self.root
        line = node.start_mark.line + 1 if node is not None else None
        for key in loc:
            if isinstance(node, yaml.MappingNode):
                pair = next(
                    (
                        (k, v)
                        for k, v in node.value
                        if isinstance(k, yaml.ScalarNode) and k.value == str(key)
                    ),
                    None,
                )
                if pair is None:
                    return line
                line, node = pair[0].start_mark.line + 1, pair[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
                if not 0 <= key < len(node.value):
                    return line
                node = node.value[key]
                line = node.start_mark.line + 1
            else:
                return line
        return line

    def where(self, loc: tuple[int | str, ...]) -> str:
        """`file:line` of the value at `loc` (just `file` when no line is known)."""
        line = self.line_of(loc)
        return f"{shown(self.path)}{f':{line}' if line else ''}"


def read_document(path: Path) -> YamlDocument:
    """The YAML document in `path`; errors name the file, line and column.

    Raises:
        KvplanError: unreadable (see kvplan.files.read_text), malformed, or beyond a limit.
    """
    text = read_text(path, limits.YAML_FILE_BYTES)
    try:
        data, root = yaml_safe.load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        kind = "" if isinstance(error, yaml_safe.YamlLimitError) else "malformed YAML: "
        key = getattr(error, "key", None)
        raise KvplanError(
            f"{shown(path)}{where}: {f'{shown(key)}: ' if key else ''}{kind}{shown(problem)}"
        ) from None
    return YamlDocument(path, data, root)


def read_yaml(path: Path) -> Any:
    """Parsed YAML of `path` (see `read_document`)."""
    return read_document(path).data


# reprlib bounds the rendering of any value (a long list, a nested one) to about a line.
_REPR = reprlib.Repr()  # keyword arguments need Python 3.12
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxstring, _REPR.maxother = 2, 6, 6, 70, 70


def _shown(value: Any) -> str:
    """A short, one-line rendering of an offending value."""
    if isinstance(value, dict):
        return "{…}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 80:
        return f"an integer of about {value.bit_length() * 3 // 10:,} digits"
    return _REPR.repr(value)


def _yaml11_hint(value: Any) -> str:
    """Why a string is there when a number or boolean was expected, for YAML 1.1 spellings."""
    if not isinstance(value, str):
        return ""
    if value.lower() in ("yes", "no", "on", "off", "y", "n"):
        return " (kvplan reads YAML 1.2: booleans are true or false)"
    if ":" in value or value[:2].lower() in ("0x", "0o", "0b") or value[:1] == "0" != value:
        return " (kvplan reads YAML 1.2: write the number in plain decimal digits)"
    return ""


def _describe(error: dict[str, Any]) -> str:
    loc = tuple(part for part in error["loc"] if not str(part).startswith("function-after"))
    field = ".".join(str(part) for part in loc) or "(top level)"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        return f"{field}: required field missing"
    if error["type"] == "extra_forbidden":
        return f"{field}: unknown field (value {_shown(error['input'])})"
    value = error.get("input")
    hint = _yaml11_hint(value) if error["type"] in ("int_type", "bool_type", "float_type") else ""
    return f"{field}: value {_shown(value)}: {message}{hint}"


def validation_problems(document: YamlDocument, error: ValidationError) -> list[tuple[int, str]]:
    """(line, `file:line: field: value: message`) for every error, in pydantic's order."""
    return [
        (
            document.line_of(tuple(item["loc"])) or 0,
            f"{document.where(tuple(item['loc']))}: {_describe(item)}",
        )
        for item in error.errors(include_url=False)
    ]


def problem_lines(document: YamlDocument, problems: list[tuple[int, str]]) -> list[str]:
    """The messages of (line, message) `problems` by line, at most MAX_ERROR_LINES."""
    shown_problems = sorted(problems, key=lambda pair: pair[0])[:MAX_ERROR_LINES]
    messages = [message for _, message in shown_problems]
    if len(problems) > MAX_ERROR_LINES:
        messages.append(f"{document.path}: … and {len(problems) - MAX_ERROR_LINES:,} more problems")
    return messages


def validation_lines(document: YamlDocument, error: ValidationError) -> list[str]:
    """One `file:line: field: value: message` line per error, by line, at most MAX_ERROR_LINES."""
    return problem_lines(document, validation_problems(document, error))


def spec_from_document(document: YamlDocument, spec_type: type[SpecT]) -> SpecT:
    """`spec_type` validated from the document's mapping; one KvplanError line per problem."""
    if not isinstance(document.data, dict):
        raise KvplanError(
            f"{document.path}: expected a mapping of fields, got {type(document.data).__name__}"
        )
    try:
        return spec_type.model_validate(document.data)
    except ValidationError as error:
        raise KvplanError("\n".join(validation_lines(document, error))) from None


def load_spec(path: Path, spec_type: type[SpecT]) -> SpecT:
    """`spec_type` validated from the YAML mapping in `path`; one KvplanError line per problem."""
    return spec_from_document(read_document(path), spec_type)
