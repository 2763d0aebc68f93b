"""What limits a crawl right now: politeness, CPU, or the in-flight cap.

A user whose crawl is slow must be able to see why (``trawl status``, the progress bar). The
answer comes from three figures: hosts due now that nobody fetches yet (work waiting for the
crawler), hosts waiting on their politeness delay (work waiting for the web's permission), and
the fetch engines' fill and CPU (workers/runtime/engine.py publishes them every 2 s).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum

from frontier.frontier import Frontier
from workers.runtime.figures import read_engines

#: An engine this busy (CPU seconds per second; a worker process runs Python on one core)
#: is CPU-bound.
CPU_BOUND_LOAD = 0.85
#: Engines this full (in flight + waiting for a slot, of their capacity) are at their cap.
CAP_FILL = 0.9


class Limit(StrEnum):
    POLITENESS = "politeness"
    CPU = "cpu"
    INFLIGHT_CAP = "in-flight cap"
    DISPATCH = "dispatch"
    NO_WORKERS = "no workers"
    IDLE = "idle"


@dataclass(frozen=True, slots=True)
class CrawlLoad:
    #: fetches running in the engines, URLs handed over waiting for a slot, their capacity
    in_flight: int
    waiting: int
    capacity: int
    engines: int
    #: mean CPU load of the engines' processes (1.0 = one core each)
    cpu_load: float
    #: leases out (handed to workers or in the broker queue), and the crawl's cap on them
    leases_out: int
    max_inflight: int
    #: hosts with queued URLs: due now (not leased), and waiting on their delay
    hosts_ready: int
    hosts_waiting: int
    limit: Limit
    why: str


def measure(frontier: Frontier, leases_out: int, now: float | None = None) -> CrawlLoad:
    """One look at the crawl (a pipeline of ZCOUNTs over the partitions, one HGETALL)."""
    now = time.time() if now is None else now
    keys = frontier.keys
    pipe = frontier.pipeline()
    for p in range(frontier.partitions):
        pipe.command("zcount", keys.ready(p), "-inf", repr(now))
        pipe.command("zcount", keys.ready(p), f"({now!r}", "+inf")
        pipe.command("zcard", keys.due_heap(p))
    replies = [int(x or 0) for x in pipe.execute()]
    ready = sum(replies[0::3]) + sum(replies[2::3])
    waiting_hosts = sum(replies[1::3])
    engines = read_engines(frontier.r, keys.engines, now)
    in_flight = sum(e.in_flight for e in engines)
    waiting = sum(e.waiting for e in engines)
    capacity = sum(e.capacity for e in engines)
    cpu = sum(e.cpu_load for e in engines) / len(engines) if engines else 0.0
    # leases ahead of the network (broker queue, engines' CPU queues): at the backlog
    # gate's bound, the schedulers hold due hosts back for the workers' CPU
    queued = leases_out - sum(e.fetching for e in engines)
    gated = bool(engines) and frontier.config.cpu_backlog > 0 and \
        queued >= CAP_FILL * frontier.config.cpu_backlog * len(engines)
    limit, why = _diagnose(ready, waiting_hosts, in_flight + waiting, capacity, cpu,
                           leases_out, frontier.config.max_inflight, len(engines),
                           queued if gated else 0)
    return CrawlLoad(in_flight, waiting, capacity, len(engines), round(cpu, 2), leases_out,
                     frontier.config.max_inflight, ready, waiting_hosts, limit, why)


def _diagnose(ready: int, waiting_hosts: int, held: int, capacity: int, cpu: float,
              leases_out: int, max_inflight: int, engines: int, gated_leases: int = 0
              ) -> tuple[Limit, str]:
    """``gated_leases``: leases waiting ahead of the network when the backlog gate holds
    the schedulers back (0 when it does not)."""
    if not engines:
        return Limit.NO_WORKERS, "no fetch engine reported in the last 6 s"
    if ready == 0 and waiting_hosts == 0 and leases_out == 0:
        return Limit.IDLE, "nothing queued"
    if capacity and held >= CAP_FILL * capacity:
        return Limit.INFLIGHT_CAP, (f"engines hold {held} of {capacity} fetches: raise "
                                    "fetch_concurrency or add workers")
    if leases_out >= CAP_FILL * max_inflight:
        return Limit.INFLIGHT_CAP, (f"{leases_out} leases out of max_inflight {max_inflight}: "
                                    "raise max_inflight")
    if cpu >= CPU_BOUND_LOAD:
        return Limit.CPU, (f"worker processes use {cpu:.0%} of a core each: add workers "
                           "(cores or machines)")
    if gated_leases:
        return Limit.CPU, (f"{gated_leases} leases wait for the workers' CPU (cpu_backlog), "
                           "due hosts stay queued: add workers (cores or machines)")
    if ready > max(10, held // 5):
        return Limit.DISPATCH, (f"{ready} hosts due now wait for the scheduler or the broker")
    return Limit.POLITENESS, (f"{waiting_hosts} hosts wait on their delay, {ready} due now: "
                              "more hosts (or shorter delays) would go faster")
