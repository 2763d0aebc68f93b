"""Lease no faster than the workers' CPU takes the work: the schedulers' backlog gate.

A lease makes its host wait for the worker that holds it. When the workers are CPU-bound,
leases taken at the pace hosts come due pile up in the workers' queues: each host idles there
for seconds, its kept-alive connection is closed by its server meanwhile, and the next fetch
pays a new TCP and TLS handshake on both sides. Left in Redis instead, the due hosts are taken
warmest first (frontier/lua/acquire.lua), so the workers fetch the hosts they just fetched.

Each engine publishes how much CPU work waits for its pipeline threads (EngineFigures.backlog,
every PUBLISH_S). A scheduler may lease its partitions' share of the engines' free room under
``cpu_backlog`` each, less what it leased since those figures were taken (its leases reach
the engines' queues after the figures it read).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import redis

from workers.runtime.figures import read_engines

#: How often the engines' figures are re-read (one HGETALL). Not a setting: the engines
#: publish every PUBLISH_S, so reading more often only repeats the same figures.
READ_EVERY_S = 0.25


class BacklogGate:
    def __init__(self, client: Any, key: str, per_engine: int) -> None:
        self.client = client
        self.key = key
        self.per_engine = per_engine
        self._read_at = -math.inf
        #: free room over the live engines as last read, and when the oldest figure was taken
        self._free: int | None = None
        self._figures_at = 0.0
        self._granted: deque[tuple[float, int]] = deque()

    def room(self, now: float, share: float) -> int | None:
        """Leases this scheduler may still grant now: ``share`` (its partitions' fraction) of
        the engines' free backlog room, less its leases since the figures. None when there is
        no limit: the gate is off, or no engine publishes (none started yet, or a Redis
        error; max_inflight still bounds the leases)."""
        if self.per_engine <= 0:
            return None
        if now - self._read_at >= READ_EVERY_S:
            self._read_at = now
            try:
                engines = read_engines(self.client, self.key, now)
            except (redis.RedisError, OSError):  # the gate only paces: step on without it
                engines = []
            self._free = sum(max(0, self.per_engine - e.backlog) for e in engines) \
                if engines else None
            self._figures_at = min((e.at for e in engines), default=now)
        if self._free is None:
            return None
        while self._granted and self._granted[0][0] < self._figures_at:
            self._granted.popleft()
        since = sum(n for _, n in self._granted)
        return max(0, round(self._free * share) - since)

    def granted(self, n: int, now: float) -> None:
        if n > 0 and self.per_engine > 0:
            self._granted.append((now, n))
