"""The engine model: one profile per serving engine, kept in a registry.

Every command (size, report, check, claim, recommend, verify) asks a profile for the KV
layout, the budget and the pool; none has its own copy of an engine rule. Adding an engine
adds a module here and never changes `kvmath`.

The names below load on first use: the CLI reads `kvplan.engine.settings` to build its
options on every start, and must not load every engine for it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.engine.base import EngineProfile
    from kvplan.engine.budget import Budget
    from kvplan.engine.names import DEFAULT_ENGINE, ENGINE_ALIASES
    from kvplan.engine.pool import KvLayout, KvPool
    from kvplan.engine.registry import ENGINES, engine
    from kvplan.engine.resolved import Scheduler
    from kvplan.engine.settings import EngineSettings

# name -> the module of kvplan.engine that defines it
_HOMES = {
    "Budget": "budget",
    "EngineProfile": "base",
    "KvLayout": "pool",
    "KvPool": "pool",
    "Scheduler": "resolved",
    "DEFAULT_ENGINE": "names",
    "ENGINE_ALIASES": "names",
    "ENGINES": "registry",
    "engine": "registry",
    "EngineSettings": "settings",
}
__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "ENGINE_ALIASES",
    "Budget",
    "EngineProfile",
    "EngineSettings",
    "KvLayout",
    "KvPool",
    "Scheduler",
    "engine",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:  # a submodule (`from kvplan.engine import vllm_memory`) is imported
        raise AttributeError(f"module 'kvplan.engine' has no attribute {name!r}")
    return getattr(import_module(f"kvplan.engine.{home}"), name)
