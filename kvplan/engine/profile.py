"""The two protocols a serving engine implements: accounting and startup.

- `Accounting`: how the engine cuts one GPU's KV cache into pages and what one request is
  charged (`layout`, no memory involved), the bytes it gives the cache on a SKU, term by term
  (`budget`), the pages that budget buys (`pool`), and the tokens it reports they hold
  (`capacity_tokens`);
- `Startup`: what a launch as planned prints (`log_lines`, and every number in them exact:
  `startup_figures`) and the command that starts it (`launch_command`).

Both are generic in the engine's own layout (`Layout`): an engine's pool carries the layout
its `layout()` built, so the facts the startup lines need (vLLM's version, SGLang's row bytes,
TensorRT-LLM's token cap, llama.cpp's launch plan) are typed fields of that layout, read
without asking what class it is. `base.EngineProfile` implements both, with the checks,
defaults and notes every command shows beside the numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kvplan.engine.pool import KvPool, Layout

if TYPE_CHECKING:
    from kvplan.engine.budget import Budget
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import SkuSpec


@runtime_checkable
class Accounting(Protocol[Layout]):
    """An engine's KV accounting for one deployment on one GPU of a SKU."""

    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> Layout:
        """How one GPU's KV is cut into pages, per pipeline stage (no memory involved)."""
        ...

    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        """The KV budget on one GPU of `sku` for requests up to `max_model_len` tokens."""
        ...

    def pool(self, layout: Layout, budget: Budget) -> KvPool[Layout]:
        """The pages `budget` buys with `layout`, every rank agreeing on the count."""
        ...

    def capacity_tokens(self, pool: KvPool[Layout], max_model_len: int) -> int:
        """Tokens of KV the pool holds, as the engine reports it."""
        ...


@runtime_checkable
class Startup(Protocol[Layout]):
    """What an engine prints when it starts as planned, and how it is started."""

    def log_lines(
        self,
        budget: Budget,
        pool: KvPool[Layout],
        max_model_len: int,
        sku: SkuSpec | None = None,
    ) -> list[str]:
        """The startup lines the engine prints for this budget and pool, in its wording."""
        ...

    def startup_figures(
        self,
        budget: Budget,
        pool: KvPool[Layout],
        max_model_len: int,
        sku: SkuSpec | None = None,
    ) -> dict[str, Any]:
        """Every number those lines print, exact, keyed by its meaning (JSON's `startup`)."""
        ...

    def launch_command(
        self, deployment: Deployment, sku: SkuSpec | None, context_tokens: int
    ) -> str | None:
        """The command that starts the engine as planned; None where kvplan cannot write one."""
        ...
