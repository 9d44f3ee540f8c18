"""Several instances behind a router, fed one workload in arrival order.

An open workload (a rate, a trace, offline) is fed by its arrival times. A capped one (a
closed loop, `Workload.max_concurrency`) sends request i at the later of its scheduled time
and the moment one of the N requests in flight returns, so its send times come out of the
run: the instances advance in time order (the one whose clock is earliest takes its steps,
never starting one past the next send or another busy instance's clock), so a request sent
when another returns reaches an instance at most one step in progress late, as it would a
real engine.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

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
    if workload.max_concurrency is not None:
        _closed_loop(instances, router, workload, workload.max_concurrency)
    elif router == "round-robin" or count == 1:
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


def _closed_loop(instances: list[Instance], router: str, workload: Workload, cap: int) -> None:
    """Serve `workload` with at most `cap` requests in flight (see the module docstring).

    A request rejected on arrival frees its place at once; the next one is sent at the same
    time. Send times are the requests' `arrival_s` in the instances' records.
    """
    specs, count = workload.requests, len(instances)
    returned = [0] * count  # requests each instance had returned when last looked at
    frees: list[float] = []  # return times not yet given to a waiting request
    in_flight, index = 0, 0
    while True:
        send_s = math.inf
        if index < len(specs):
            if in_flight < cap:
                send_s = specs[index].arrival_s
            elif frees:
                send_s = max(specs[index].arrival_s, frees[0])
        busy = [inst for inst in instances if inst.in_system]
        earliest = min(busy, key=lambda inst: inst.t, default=None)
        if send_s < math.inf and (earliest is None or send_s <= earliest.t):
            if in_flight >= cap:
                heapq.heappop(frees)
                in_flight -= 1
            target = _route(instances, router, index)
            target.run_until(send_s)  # an idle instance's clock moves to the send
            if not target.submit(replace(specs[index], arrival_s=send_s), index):
                heapq.heappush(frees, send_s)
            in_flight += 1
            index += 1
            continue
        if earliest is None:
            return
        others = [inst.t for inst in busy if inst is not earliest]
        earliest.run_to_return(min(send_s, *others) if others else send_s)
        position = instances.index(earliest)
        finished = earliest.metrics.finish_s
        for finish_s in finished[returned[position] :]:
            heapq.heappush(frees, finish_s)
        returned[position] = len(finished)


def _route(instances: list[Instance], router: str, order: int) -> Instance:
    """round-robin: request i to instance i mod count; least-loaded: the fewest in system."""
    if router == "round-robin" or len(instances) == 1:
        return instances[order % len(instances)]
    return min(instances, key=lambda inst: inst.in_system)
