"""`recommend --pareto`: the options that go with it, checked, and the frontier rendered."""

from __future__ import annotations

from typing import Any

from kvplan.cli.simulate_options import (
    SERVING_PARAMETERS,
    WORKLOAD_PARAMETERS,
    ServingOptions,
    WorkloadOptions,
)
from kvplan.errors import KvplanError

# The simulate options that mean something to the frontier: the request lengths and what
# sets the step times. The others (arrivals, scheduler, SLOs) belong to a simulation.
PARETO_OPTIONS = (
    "prompt_tokens",
    "output_tokens",
    "bandwidth_efficiency",
    "compute_efficiency",
    "calibration",
)
NOT_WITH_PARETO = ("concurrency", "headroom", "price", "rank", "top", "slo_attainment", "dp", "ep")


def pareto_frontier(
    given: list[str],
    base: Any,
    workload: WorkloadOptions,
    serving: ServingOptions,
    output: Any,
    columns: list[str] | None,
    **search: Any,
) -> None:
    """Check the options (`given`: those set on the command line), sweep and print the
    frontier (`kvplan.api.pareto.pareto`)."""
    from kvplan.api.pareto import pareto
    from kvplan.cli.calibration_options import calibrated_efficiency, read
    from kvplan.perf.efficiency import Efficiency
    from kvplan.report.pareto_report import render_pareto
    from kvplan.units import parse_tokens

    for name in (*WORKLOAD_PARAMETERS, *SERVING_PARAMETERS, *NOT_WITH_PARETO):
        if name not in PARETO_OPTIONS and name in given:
            raise KvplanError(f"{_flag(name)}: does not apply to --pareto")
    lengths = {}
    for name in ("prompt_tokens", "output_tokens"):
        if name not in given:
            raise KvplanError(f"--pareto: give {_flag(name)} N (a token count: 1024, 8k)")
        lengths[name] = parse_tokens(workload.values[name], _flag(name))
    values = serving.values
    default = Efficiency(values["bandwidth_efficiency"], values["compute_efficiency"])
    path = values["calibration"]
    notes: dict[str, None] = {}  # each note once, in the order the SKUs first give it

    def efficiency_of(sku):
        efficiency, said = calibrated_efficiency(path, sku, default)
        notes.update(dict.fromkeys(said))
        return efficiency

    speed_model = "shipped constants" if path is None else f"--calibration {read(path).name}"
    result = pareto(base, efficiency=efficiency_of, **lengths, **search)
    result = result.model_copy(
        update={"speed_model": speed_model, "notes": [*result.notes, *notes]}
    )
    render_pareto(result, output, columns)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
