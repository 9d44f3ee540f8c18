"""The one user-facing error type."""


class KvplanError(Exception):
    """Anything the user can fix: bad YAML, an unknown name, an impossible option.

    The message is one line naming the file, field, value and what is allowed.
    """
