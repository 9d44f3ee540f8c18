"""vLLM versions: which accounting rules and defaults a given release follows.

Read from vLLM's released source (vllm-project/vllm): `v1/core/kv_cache_utils.py`,
`config/cache.py`, `envs.py` and `v1/worker/gpu_worker.py` of 0.6.6, 0.11.0, 0.14.0,
0.18.0, 0.20.0, 0.22.0 and 0.33.0; docs/vllm-log-lines.md lists what each era prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engine.release import match_release
from kvplan.errors import SettingError

# The releases whose rules kvplan follows; other versions take the nearest older one's.
OLDEST_VERSION = (0, 5)
NEWEST_VERSION = (0, 33)


@dataclass(frozen=True)
class VllmVersion:
    """Version-specific behaviour of vLLM's startup accounting."""

    text: str
    major_minor: tuple[int, int]

    @property
    def era(self) -> str:
        """'v0' (block manager, ≤ 0.7 default), 'v1' (0.8–0.21 log lines) or 'v1-new' (≥ 0.22)."""
        if self.major_minor < (0, 8):
            return "v0"
        return "v1" if self.major_minor < (0, 22) else "v1-new"

    @property
    def default_utilization(self) -> float:
        """gpu_memory_utilization default: 0.9 through 0.18 (config/cache.py), 0.92 from 0.20."""
        return 0.92 if self.major_minor >= (0, 20) else 0.9

    @property
    def subtracts_cudagraph_estimate(self) -> bool:
        """VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" from 0.20.0 (envs.py)."""
        return self.major_minor >= (0, 20)

    @property
    def release(self) -> tuple[int, int, int]:
        """(major, minor, patch) of the text ('0.7.1' → (0, 7, 1); '0.11' → (0, 11, 0))."""
        match = match_release(self.text, "a version like 0.11 or 0.10.1", VLLM_VERSION)
        return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))

    @property
    def stores_mla_latent(self) -> bool:
        """DeepSeek's MLA cache is the latent from 0.7.1 (`DeepseekV2MLAAttention`,
        `model_config.use_mla`); before, vLLM ran MLA models as plain attention."""
        return self.release >= (0, 7, 1)

    @property
    def chunked_local_keeps_hybrid_manager(self) -> bool:
        """Whether chunked local attention (Llama 4) keeps the hybrid KV-cache manager on.

        VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE was added off by default (PR #21761,
        2025-07-28; "0" in 0.11.0's envs.py) and flipped to "1" by PR #29627 (opened 2025-11-27).
        The first release seen with it on is 0.19.0: its Llama-4-Scout log holds 4 KV-cache
        groups of 12 layers (1 full + 3 chunked-local), 4x the blocks of one 48-layer group.
        The release the flip shipped in is not pinned: 0.12 - 0.18 are taken as off.
        """
        return self.major_minor >= (0, 19)

    @property
    def group_size_prefers_max(self) -> bool:
        """Hybrid grouping takes the largest layer count when it is under 1.5× the smallest."""
        return self.major_minor >= (0, 22)


# The version setting as vLLM's own messages name it (kvplan.engine.settings.ALIASES).
VLLM_VERSION = "vllm_version"


def parse_version(text: str) -> VllmVersion:
    """A version such as '0.11', '0.10.1.1' or '0.22.0' (refused outside 0.5 – 0.33)."""
    match = match_release(text, "a version like 0.11 or 0.10.1", VLLM_VERSION)
    major_minor = (int(match.group(1)), int(match.group(2)))
    if not OLDEST_VERSION <= major_minor <= NEWEST_VERSION:
        low, high = (".".join(map(str, v)) for v in (OLDEST_VERSION, NEWEST_VERSION))
        raise SettingError(
            VLLM_VERSION, f"{text!r} is outside the releases kvplan follows ({low} – {high})"
        )
    return VllmVersion(text, major_minor)


DEFAULT_VERSION = parse_version("0.11.0")
