"""The simulator `recommend` scores throughput targets with, over kvplan.simulate's public
functions: one run of the shared workload per candidate, unless arithmetic settles it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.plan.recommend import Simulated
from kvplan.simulate import SimConfig, Workload, instance_model, simulate
from kvplan.specs import SkuSpec


@dataclass
class WorkloadSimulator:
    """Serves `workload` on one candidate with `config_of(sku)`, max_model_len the context.

    The same requests go to every candidate, so candidates are compared on one workload.
    """

    workload: Workload
    config_of: Callable[[SkuSpec], SimConfig]
    context_tokens: int
    configs: dict[str, SimConfig] = field(default_factory=dict)
    unsimulated: dict[str, str] = field(default_factory=dict)  # SKU -> why it cannot run

    def config(self, sku: SkuSpec) -> SimConfig:
        """The configuration for `sku` (read once per SKU: a calibration is per SKU)."""
        found = self.configs.get(sku.name)
        if found is None:
            given = self.config_of(sku)
            # One instance per replica: the search's dp replicas are the instance count.
            found = replace(given, max_model_len=self.context_tokens, instances=1)
            self.configs[sku.name] = found
        return found

    def __call__(self, deployment: Deployment, sku: SkuSpec) -> Simulated:
        config = self.config(sku)
        try:
            # The quickest step there is: one sequence that reads no KV.
            quickest_s = instance_model(deployment, sku, config).cost.step_s(1, 0, 0, (), 0)
        except KvplanError as error:
            # A SKU the roofline cannot time (no peak FLOP/s in its file) cannot be
            # simulated, whatever the SLO: a miss, and the reason kept for whoever asks.
            self.unsimulated[sku.name] = str(error)
            return Simulated(0.0, 0.0, simulated=False)
        if self.too_slow_for_tpot(quickest_s, config):
            return Simulated(0.0, 0.0, simulated=False)
        result = simulate(deployment, sku, self.workload, config)
        return Simulated(result.slo_met_fraction or 0.0, result.goodput_requests_per_s or 0.0)

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(
            f"{name}: not simulated, counted as a miss ({why})"
            for name, why in sorted(self.unsimulated.items())
        )

    def too_slow_for_tpot(self, quickest_s: float, config: SimConfig) -> bool:
        """Whether no request can meet the TPOT target: the quickest decode step (one
        sequence, no KV read) already takes longer, and every request generates more than
        one token (a one-token request has no TPOT)."""
        target = config.slo.tpot_s
        if target is None or any(r.output_tokens <= 1 for r in self.workload.requests):
            return False
        return quickest_s > target
