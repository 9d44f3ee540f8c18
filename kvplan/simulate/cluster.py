"""Several instances behind a router, fed one workload in arrival order."""

from __future__ import annotations

import math

from kvplan.simulate.engine_view import InstanceModel
from kvplan.simulate.instance import Instance
from kvplan.simulate.metrics import Metrics
from kvplan.simulate.workload import Workload

# Points on the memory timeline (per instance): enough for a plot, few enough for JSON.
TIMELINE_POINTS = 400


def run_instances(
    view: InstanceModel, count: int, router: str, workload: Workload
) -> list[Metrics]:
    """Simulate `count` identical instances serving `workload`; each one's metrics.

    round-robin sends request i to instance i mod count; least-loaded sends each arrival to
    the instance with the fewest requests in its system (queued or running) at that moment,
    the lowest index on a tie.
    """
    interval = max(workload.duration_s, 1e-3) / TIMELINE_POINTS
    instances = [Instance(view, Metrics(interval)) for _ in range(count)]
    if router == "round-robin" or count == 1:
        for index, instance in enumerate(instances):
            for order in range(index, len(workload.requests), count):
                spec = workload.requests[order]
                instance.run_until(spec.arrival_s)
                instance.submit(spec, order)
            instance.run_until(math.inf)
    else:
        for order, spec in enumerate(workload.requests):
            for instance in instances:
                instance.run_until(spec.arrival_s)
            target = min(instances, key=lambda inst: inst.in_system)
            target.submit(spec, order)
        for instance in instances:
            instance.run_until(math.inf)
    return [instance.metrics for instance in instances]
