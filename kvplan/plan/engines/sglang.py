"""The SGLang profile: a token pool (one token per slot, page 1) sized by mem_fraction_static.

SGLang (`srt/server_args.py`, `srt/model_executor/model_runner.py`) gives the KV pool
total · mem_fraction_static − weights and stores exactly the tokens' bytes (MLA latent,
window-honoured); mem_fraction_static defaults by tensor-parallel size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.plan.engines.analytic import AnalyticProfile

if TYPE_CHECKING:
    from kvplan.plan.deployment import Deployment


def mem_fraction_static(tp: int) -> float:
    """SGLang server_args.py default mem_fraction_static, by tensor-parallel size."""
    for threshold, fraction in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
        if tp >= threshold:
            return fraction
    return 0.88


class SglangProfile(AnalyticProfile):
    name = "sglang"
    summary = "token pool (page 1): exactly the tokens' bytes, MLA latent; mem_fraction_static"
    default_utilization_text = "by TP: 0.88 (tp 1), 0.87 (2), 0.85 (4), 0.81 (8), 0.79 (16)"

    def default_utilization(self, deployment: Deployment) -> float:
        return mem_fraction_static(deployment.tp)


SGLANG = SglangProfile()
