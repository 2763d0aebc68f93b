"""What a fetch engine tells the crawl about itself: capacity, fetches in flight, URLs waiting
for a slot and its process's CPU load, published in Redis every ``PUBLISH_S`` for
``trawl status`` and the progress bar (workers/cli/load.py)."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis

log = logging.getLogger(__name__)

#: Seconds between two publications of an engine's figures (the scheduler's backlog gate
#: reads them: workers/cluster/backlog.py).
PUBLISH_S = 0.5
#: Figures older than this are of a stopped worker.
MAX_AGE_S = 6.0


def process_worker_id() -> str:
    """This process's worker id: its engine's figures are published under it, and a member
    in the same process finds its own engine by it."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """What ``trawl status`` shows of one engine."""

    worker: str
    capacity: int
    in_flight: int
    waiting: int
    completed: int
    #: CPU seconds per second of this process since its previous figures (1.0: one core)
    cpu_load: float
    at: float
    #: fetches on the network now (in_flight counts URLs the engine holds in any stage)
    fetching: int = 0


class CpuMeter:
    """This process's CPU load between two readings."""

    def __init__(self) -> None:
        self._mark = (time.monotonic(), _cpu_s())

    def load(self) -> float:
        now, cpu = time.monotonic(), _cpu_s()
        then, cpu_then = self._mark
        self._mark = (now, cpu)
        return round((cpu - cpu_then) / (now - then), 3) if now > then else 0.0


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def publish_figures(client: Any, key: str, figures: EngineFigures) -> None:
    """Write ``figures`` and drop entries of engines that stopped publishing (done here, not
    by readers, so that ``trawl status`` only reads)."""
    try:
        stale = [w for w, f in _parse(client.hgetall(key)) if f is None
                 or figures.at - f.at > MAX_AGE_S]
        pipe = client.pipeline(transaction=False)
        pipe.hset(key, figures.worker, json.dumps(asdict(figures)))
        if stale:
            pipe.hdel(key, *stale)
        pipe.execute()
    except (redis.RedisError, OSError) as exc:
        log.debug("engine figures not published: %s", exc)


def read_engines(client: Any, key: str, now: float | None = None,
                 max_age_s: float = MAX_AGE_S) -> list[EngineFigures]:
    """The live engines' latest figures (entries older than ``max_age_s`` are of stopped
    workers and are left out)."""
    now = time.time() if now is None else now
    return [f for _w, f in _parse(client.hgetall(key))
            if f is not None and now - f.at <= max_age_s]


def _parse(raw: dict[Any, Any]) -> list[tuple[Any, EngineFigures | None]]:
    out: list[tuple[Any, EngineFigures | None]] = []
    for worker, value in raw.items():
        try:
            out.append((worker, EngineFigures(**json.loads(value))))
        except (TypeError, ValueError):
            out.append((worker, None))
    return out
