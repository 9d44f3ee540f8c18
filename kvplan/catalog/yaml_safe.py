"""A YAML loader for hostile input: safe tags only, YAML 1.2 scalars, bounded, no duplicate keys.

PyYAML's safe loader is safe from code execution, not from mistakes or bombs:

- It reads YAML 1.1 scalars: `1:20` is the sexagesimal integer 80, `yes`/`no`/`on`/`off` are
  booleans, `017` is octal 15 and `2024-01-01` a date. Here only `true`/`false` are booleans
  and a plain integer is decimal digits (`_` between groups allowed: `8_000_000_000_000`);
  anything else stays a string, which the schema then refuses, naming the field and value.
- A repeated key silently keeps the last value; here it is refused, naming both lines.
- Aliases share one object, so a "billion laughs" file is small to load but every walk over
  it (validation, error messages) is exponential: the values an expanded walk would visit are
  counted on the node graph before anything is built, and refused past a budget, as are
  recursive aliases and nesting deeper than kvplan.limits.NESTING_DEPTH.
- `!!int abc` raises ValueError from the constructor; here every construction failure is a
  YAMLError with the node's position, like any other malformed YAML.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import yaml

import kvplan.limits as limits

try:  # libyaml's C parser: same safe semantics as yaml.SafeLoader, several times faster
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeLoader

# No leading zero: YAML 1.1 reads 017 as octal 15, YAML 1.2 as 17; kvplan refuses to guess.
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*(?:_[0-9]+)*)", re.ASCII)
_FLOAT = re.compile(
    r"[-+]?[0-9]+(?:_[0-9]+)*\.[0-9]*(?:[eE][-+]?[0-9]+)?"  # 1.  1.5  1.5e3
    r"|[-+]?\.[0-9]+(?:[eE][-+]?[0-9]+)?"  # .5
    r"|[-+]?[0-9]+(?:_[0-9]+)*[eE][-+]?[0-9]+"  # 1e3
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
    re.ASCII,
)
_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
_NULL = re.compile(r"~|null|Null|NULL|")


class YamlLimitError(yaml.YAMLError):
    """A file beyond kvplan's stated YAML limits, or a value the constructor cannot build."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark
        self.key: str | None = None  # the mapping key whose value failed, when known


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """Safe loader with YAML 1.2 core scalars (see the module docstring)."""

    yaml_implicit_resolvers: dict = {}  # noqa: RUF012 - PyYAML's class-level table

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, OverflowError) as error:
            shown = node.value if isinstance(node, yaml.ScalarNode) else node.id
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise YamlLimitError(
                f"cannot read {str(shown)[:40]!r} as {tag}: {str(error)[:80]}",
                node.start_mark,
            ) from None

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        _refuse_duplicate_keys(node)
        try:
            return super().construct_mapping(node, deep)
        except YamlLimitError as error:
            if error.key is None and error.problem_mark is not None:
                error.key = _key_holding(node, error.problem_mark.index)
            raise

    def construct_yaml_int(self, node: yaml.Node) -> int:
        text = self.construct_scalar(node)
        if not _INT.fullmatch(text):
            raise ValueError("not a decimal integer")
        digits = text.replace("_", "").lstrip("+-")
        if len(digits) > limits.NUMBER_CHARS:
            raise ValueError(f"{len(digits):,} digits; a number has at most {limits.NUMBER_CHARS}")
        return int(text.replace("_", ""), 10)

    def construct_yaml_float(self, node: yaml.Node) -> float:
        text = self.construct_scalar(node)
        if not (_FLOAT.fullmatch(text) or _INT.fullmatch(text)):
            raise ValueError("not a decimal number")
        written = text.replace("_", "")
        if len(written) > limits.NUMBER_CHARS:
            raise ValueError(f"{len(written):,} characters; a number has at most "
                             f"{limits.NUMBER_CHARS}")  # fmt: skip
        if written.lower().lstrip("+-") in (".inf", ".nan"):  # schemas refuse these by name
            return float(written.lower().replace(".", "", 1))
        value = float(written)
        # A float holds about 17 significant digits: 2.0000000000000001 would be read as 2.0
        # and 1e400 as infinity. Refused, so that every number read is the number written.
        if not math.isfinite(value):
            raise ValueError("beyond the range of a float")
        if value == 0 and Decimal(written) != 0:
            raise ValueError("too small for a float")
        if Decimal(written) != Decimal(repr(value)):
            raise ValueError("more significant digits than a float holds; write at most 15")
        return value

    def construct_yaml_bool(self, node: yaml.Node) -> bool:
        text = self.construct_scalar(node)
        if not _BOOL.fullmatch(text):
            raise ValueError("a boolean is true or false")
        return text.lower() == "true"


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:bool", _Loader.construct_yaml_bool)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", _BOOL, "tTfF"),
    ("tag:yaml.org,2002:int", _INT, "-+0123456789"),
    ("tag:yaml.org,2002:float", _FLOAT, "-+0123456789."),
    ("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:merge", re.compile(r"<<"), "<"),
):
    # PyYAML matches with .match(): anchor at the end too, or "1:20" would resolve as int 1.
    _Loader.add_implicit_resolver(_tag, re.compile(f"(?:{_pattern.pattern})\\Z"), list(_first))


def _key_holding(node: yaml.MappingNode, index: int) -> str | None:
    """The scalar key of `node` whose value spans character `index`, if any."""
    for key, value in node.value:
        spans = value.start_mark.index <= index <= value.end_mark.index
        if spans and isinstance(key, yaml.ScalarNode):
            return str(key.value)[:40]
    return None


def _refuse_duplicate_keys(node: yaml.MappingNode) -> None:
    """A YamlLimitError naming a key that appears twice in one mapping, with both lines."""
    first_line: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        identity = (key.tag, key.value)
        if identity in first_line:
            raise YamlLimitError(
                f"duplicate key {key.value[:40]!r}: first on line {first_line[identity]}, "
                f"again on line {line} (YAML would keep only the last; remove one)",
                key.start_mark,
            )
        first_line[identity] = line


_TOO_DEEP = f"nested deeper than {limits.NESTING_DEPTH} levels (kvplan's limit)"
_TOO_MANY = f"more than {limits.YAML_NODES:,} values (kvplan's limit for one YAML file)"
_TOO_MANY_ALIASED = (
    f"more than {limits.YAML_NODES:,} values once aliases are expanded "
    "(kvplan's limit; an alias bomb?)"
)


class _Walk:
    """Values and depth of the document so far, aliases expanded, counted event by event."""

    def __init__(self) -> None:
        self.values = 0
        self.aliased = False  # an alias has expanded to more than one value
        self.anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded values, depth)
        self.open: list[tuple[int, int, str | None]] = []  # (values at start, deepest, anchor)

    def value(self, size: int, depth: int, mark: yaml.Mark) -> None:
        """A finished value of `size` values and `depth` levels, inside the open collections."""
        self.values += size
        if self.values > limits.YAML_NODES:
            raise YamlLimitError(_TOO_MANY_ALIASED if self.aliased else _TOO_MANY, mark)
        if len(self.open) + depth > limits.NESTING_DEPTH:
            raise YamlLimitError(_TOO_DEEP, mark)
        if self.open:
            start, deepest, anchor = self.open[-1]
            self.open[-1] = (start, max(deepest, depth), anchor)

    def alias(self, anchor: str, mark: yaml.Mark) -> None:
        if any(open_anchor == anchor for _, _, open_anchor in self.open):
            raise YamlLimitError("an alias refers to a value that contains it", mark)
        size, depth = self.anchors.get(anchor, (1, 1))  # undefined: the composer says so
        self.aliased = self.aliased or size > 1
        self.value(size, depth, mark)

    def start(self, anchor: str | None) -> None:
        self.open.append((self.values, 0, anchor))

    def end(self, mark: yaml.Mark) -> None:
        start, deepest, anchor = self.open.pop()
        if anchor is not None:
            self.anchors[anchor] = (self.values - start + 1, deepest + 1)
        self.value(1, deepest + 1, mark)


def check_events(text: str) -> None:
    """Refuse `text` when walking its values, aliases expanded, would be too big, too deep, or
    endless; checked on the parser's event stream, before any node is built.

    Building nodes costs about 10 µs a value (a 4 MiB list of one-letter items would take half
    a minute); the events cost about 1 µs and the walk stops at the first value over budget.
    Each anchor's expanded size and depth are kept, so an alias costs what it expands to
    without being expanded.

    Raises:
        YamlLimitError: more than kvplan.limits.YAML_NODES values once aliases are expanded,
            nesting deeper than kvplan.limits.NESTING_DEPTH, or an alias inside itself.
        yaml.YAMLError: malformed YAML (the parser's own error).
    """
    walk = _Walk()
    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, yaml.AliasEvent):
            walk.alias(event.anchor, event.start_mark)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                walk.anchors[event.anchor] = (1, 1)
            walk.value(1, 1, event.start_mark)
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(walk.open) >= limits.NESTING_DEPTH:
                raise YamlLimitError(_TOO_DEEP, event.start_mark)
            walk.start(event.anchor)
        elif isinstance(event, yaml.CollectionEndEvent):
            walk.end(event.start_mark)


def load(text: str) -> tuple[Any, yaml.Node | None]:
    """The data of the one YAML document in `text`, and its node tree (for line numbers).

    Raises:
        yaml.YAMLError: malformed YAML, a duplicate key, a bad tagged value, or a limit
            exceeded (YamlLimitError); each with the position it was found at.
    """
    check_events(text)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        return loader.construct_document(root), root
    except RecursionError:  # the pure-Python parser (no libyaml) recurses per nesting level
        raise YamlLimitError(_TOO_DEEP, None) from None
    finally:
        loader.dispose()
