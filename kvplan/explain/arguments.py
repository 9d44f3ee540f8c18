"""The engines' echoes of their arguments: command lines, Python dict and call reprs.

vLLM prints `non-default args: {'model': …, 'max_model_len': 16384}` (a dict literal), SGLang
`server_args=ServerArgs(model_path='…', tp_size=8, …)` (a dataclass repr), llama.cpp and
ollama their command lines. Each is read into {name: text} with underscores for dashes, so an
engine's table maps one spelling to kvplan's fact.
"""

from __future__ import annotations

import ast
import re
import shlex

# key='value' / key=123 / key=None / key=True inside a repr; nested calls are not read.
_REPR_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[-\w.+]+)")
MAX_ARGUMENT_CHARS = 65_536  # an echo line longer than this is not read


def _name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def command_line(text: str) -> dict[str, str]:
    """`--flag value`, `--flag=value` and bare switches ('true') of a shell command line;
    the first word after the program that is not a flag is `positional`."""
    try:
        words = shlex.split(text[:MAX_ARGUMENT_CHARS])
    except ValueError:  # an unbalanced quote: read the words as they are
        words = text[:MAX_ARGUMENT_CHARS].split()
    found: dict[str, str] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-") or word == "-":
            if "positional" not in found and index > 1 and found.get("_after") == "program":
                found["positional"] = word
            found["_after"] = "program"
            continue
        if "=" in word:
            flag, value = word.split("=", 1)
            found[_name(flag)] = value
            continue
        following = words[index] if index < len(words) else None
        if following is not None and (not following.startswith("-") or _is_number(following)):
            found[_name(word)] = following
            index += 1
        else:
            found[_name(word)] = "true"
    found.pop("_after", None)
    return found


def _is_number(word: str) -> bool:
    return bool(re.fullmatch(r"-\d+(\.\d+)?", word))


def dict_literal(text: str) -> dict[str, str]:
    """A Python dict literal's str/int/float/bool values as text; {} when it is not one."""
    try:
        value = ast.literal_eval(text[:MAX_ARGUMENT_CHARS])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        str(k): str(v)
        for k, v in value.items()
        if isinstance(v, str | int | float | bool) and not isinstance(v, complex)
    }


def repr_fields(text: str) -> dict[str, str]:
    """key=value fields of a dataclass repr (quotes removed)."""
    fields = {}
    for match in _REPR_FIELD.finditer(text[:MAX_ARGUMENT_CHARS]):
        value = match.group(2)
        fields.setdefault(match.group(1), value.strip("'\""))
    return fields


def as_int(value: str | None) -> int | None:
    """'16384' → 16384; None for anything else ('None', 'auto', '')."""
    if value is None or not re.fullmatch(r"\d{1,12}", value.replace(",", "")):
        return None
    return int(value.replace(",", ""))


def as_fraction(value: str | None) -> float | None:
    """'0.9' → 0.9 when it is a fraction in (0, 1]; else None."""
    if value is None or not re.fullmatch(r"\d{0,3}(\.\d{1,12})?", value) or value in ("", "."):
        return None
    number = float(value)
    return number if 0 < number <= 1 else None


def as_bool(value: str | None) -> bool | None:
    """'True'/'true'/'1'/'on' → True, 'False'/'0'/'off' → False, else None."""
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("true", "1", "on", "yes"):
        return True
    if lowered in ("false", "0", "off", "no"):
        return False
    return None


def take(
    arguments: dict[str, str], table: dict[str, tuple[str, object]], reading, line: int
) -> None:
    """Record the facts `table` names ({argument: (fact, converter)}) from `arguments`, and
    keep every argument as echoed (`reading.arguments`)."""
    for key, text in arguments.items():
        reading.arguments.setdefault(key, text[:200])
        if key in table:
            fact, convert = table[key]
            reading.fact(fact, convert(text), line)  # type: ignore[operator]
