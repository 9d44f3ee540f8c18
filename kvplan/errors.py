"""The one user-facing error type, and how a name from outside is printed in one."""


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
