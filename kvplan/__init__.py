"""kvplan: exact KV-cache sizing, per-GPU capacity and on-device verification.

`import kvplan` is cheap: the Python API (`kvplan.size`, `kvplan.report`, `kvplan.load_model`,
… — see kvplan.api and docs/api.md) loads on first use.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy: the CLI imports this package on every start and must not pay for the API.
    if name.startswith("_"):
        raise AttributeError(name)
    api = import_module("kvplan.api")
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *import_module("kvplan.api").__all__])
