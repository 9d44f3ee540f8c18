"""The one user-facing error type, and how a name from outside is printed in one."""

from __future__ import annotations

from collections.abc import Callable


class KvplanError(Exception):
    """Anything the user can fix: bad YAML, an unknown name, an impossible option.

    The message is one line naming the file, field, value and what is allowed.
    """


class UnknownNameError(KvplanError):
    """A well-formed name the catalogue does not hold (a bad catalogue file is not this)."""


def shown(path: object) -> str:
    """`path` (or any name read from outside) as an error prints it: control characters as
    Python escapes, so that a file named `a\\nb\\x1b[31m.yaml` neither breaks the one-line rule
    nor drives the terminal; everything printable as it is.
    """
    text = str(path)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class SettingError(KvplanError):
    """A problem with one engine setting, which it names by its declared name.

    `problem` may name other settings as `{declared_name}` (those in `mentions`). Each reader
    renders the names its way: the CLI as flags, a products file as keys; `str()` (what the
    Python API shows) keeps the declared names.
    """

    def __init__(
        self,
        setting: str,
        problem: str,
        *,
        mentions: tuple[str, ...] = (),
        also: tuple[str, ...] = (),
        lead: str | None = None,
    ) -> None:
        """`also`: more settings the message is about (`dp/ep: ...`); `lead`: what the line
        starts with when that is not a setting (a flag such as --kv-dtype)."""
        self.setting = setting
        self.problem = problem
        self.mentions = mentions
        self.also = also
        self.lead = lead
        super().__init__(self.render(lambda name: name))

    def render(self, name_of: Callable[[str], str]) -> str:
        """The one-line message with every setting named by `name_of(declared name)`."""
        text = self.problem
        for name in self.mentions:
            text = text.replace("{" + name + "}", name_of(name))
        lead = self.lead or "/".join(name_of(n) for n in (self.setting, *self.also))
        return f"{self.context}{lead}: {text}"

    context: str = ""  # what the line says before the setting (a search that wraps it)

    def within(self, context: str) -> SettingError:
        """The same problem, its line led by `context` (still rendered by each reader)."""
        wrapped = SettingError(
            self.setting, self.problem, mentions=self.mentions, also=self.also, lead=self.lead
        )
        wrapped.context = context + self.context
        wrapped.args = (wrapped.render(lambda name: name),)
        return wrapped
