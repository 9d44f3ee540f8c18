"""The user's overrides of the speed model's fitted fractions.

Its own module so that a plan can carry an Efficiency without loading the step model: the
step model and the fitted constants load when a speed is first asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.perf.constants import Band, PerfConstants
    from kvplan.perf.step_model import StepModel
    from kvplan.specs import SkuSpec


@dataclass(frozen=True)
class Efficiency:
    """Overrides of the fitted fractions (0 < f ≤ 1); None keeps the step model's constants.

    `bandwidth_fraction` replaces every bandwidth fraction (GEMM weight reads, attention,
    elementwise), `compute_fraction` the large-shape compute fractions: what
    --bandwidth-efficiency and --compute-efficiency set, and what a `verify` record's
    measured bandwidth sets.
    """

    bandwidth_fraction: float | None = None
    compute_fraction: float | None = None
    constants: PerfConstants | None = None  # None: kvplan/perf/constants.yaml

    def __post_init__(self) -> None:
        for option, value in (
            ("--bandwidth-efficiency", self.bandwidth_fraction),
            ("--compute-efficiency", self.compute_fraction),
        ):
            if value is not None and not 0 < value <= 1:  # also rejects NaN
                raise KvplanError(f"{option}: {value} must be in (0, 1]; a fraction, 0.5 = 50 %")

    @property
    def resolved_constants(self) -> PerfConstants:
        from kvplan.perf.constants import shipped_constants

        return self.constants or shipped_constants()

    def model(
        self,
        deployment: Deployment,
        sku: SkuSpec,
        dtype: str | None = None,
        compute_optional: bool = False,
    ) -> StepModel:
        """The step model of `deployment` on `sku` with these overrides (built once)."""
        from kvplan.perf.step_model import step_model

        return step_model(
            deployment,
            sku,
            self.constants,
            self.bandwidth_fraction,
            self.compute_fraction,
            dtype,
            compute_optional=compute_optional,
        )

    def band(self, metric: str) -> Band | None:
        """The test-split band of `metric` (constants.BAND_METRICS), or None if not fitted."""
        return self.resolved_constants.bands.get(metric)


DEFAULT_EFFICIENCY = Efficiency()
