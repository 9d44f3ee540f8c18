"""The registry of engine profiles: each loaded from its module on first use.

`kvplan size` under vLLM loads the vLLM module and no other engine's; the names, aliases and
the module of each profile are in `names.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from typing import TYPE_CHECKING

from kvplan.engine.names import DEFAULT_ENGINE, ENGINE_ALIASES, PROFILES, engine_name

if TYPE_CHECKING:
    from kvplan.engine.base import EngineProfile

__all__ = ["DEFAULT_ENGINE", "ENGINES", "ENGINE_ALIASES", "engine"]


class _Profiles(Mapping[str, "EngineProfile"]):
    """Engine name -> profile, in PROFILES order; a profile's module loads when it is read."""

    def __getitem__(self, name: str) -> EngineProfile:
        module, attribute = PROFILES[name]
        profile: EngineProfile = getattr(import_module(f"kvplan.engine.{module}"), attribute)
        return profile

    def __contains__(self, name: object) -> bool:  # without loading the profile
        return name in PROFILES

    def __iter__(self) -> Iterator[str]:
        return iter(PROFILES)

    def __len__(self) -> int:
        return len(PROFILES)


ENGINES: Mapping[str, EngineProfile] = _Profiles()


def engine(name: str) -> EngineProfile:
    """The engine profile called `name` (any case, or an alias).

    Raises:
        SettingError: no engine is called `name`.
    """
    return ENGINES[engine_name(name)]
