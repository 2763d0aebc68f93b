"""Lease no faster than the workers take the work: the schedulers' backlog gate.

A lease makes its host wait for the worker that holds it. When the workers are CPU-bound,
leases taken at the pace hosts come due pile up ahead of the network (in the broker queue and
the engines' CPU queues): each host idles there for seconds, its server closes its kept-alive
connection meanwhile, and the next fetch pays a new TCP and TLS handshake on both sides. Left
in Redis instead, the due hosts are taken warmest first (frontier/lua/acquire.lua), so the
workers fetch the hosts they just fetched, over the connections they kept.

Each engine publishes the fetches it has on the network (EngineFigures.fetching, every
PUBLISH_S). A scheduler's leases out, less its share of those fetches, are the leases waiting
ahead of the network; it leases no more than keeps them under ``cpu_backlog`` per engine (its
partitions' share of it). The fetches' count is up to PUBLISH_S old: when it grew since, the
gate underestimates the room for a moment, and never lets the queue grow past the bound.

A member whose tasks all go to one engine (``fetch_affinity``: its own queue, consumed by its
own worker) is gated on that engine alone: leases out less that engine's fetches, under one
``cpu_backlog``. The share of all engines would let a member beside a small or slow engine
send it the backlog a larger one could take, to wait in its queue.
"""

from __future__ import annotations

import math
from typing import Any

import redis

from workers.runtime.figures import read_engines

#: How often the engines' figures are re-read (one HGETALL). Not a setting: the engines
#: publish every PUBLISH_S, so reading more often only repeats the same figures.
READ_EVERY_S = 0.25


class BacklogGate:
    def __init__(self, client: Any, key: str, per_engine: int, engine: str | None = None
                 ) -> None:
        """``engine``: the worker id of the one engine this scheduler's tasks go to (None:
        any engine may take them, as from the shared queue)."""
        self.client = client
        self.key = key
        self.per_engine = per_engine
        self.engine = engine
        self._read_at = -math.inf
        #: (engines publishing, their fetches on the network) as last read; None: none
        self._engines: tuple[int, int] | None = None

    def room(self, now: float, share: float, leases_out: int) -> int | None:
        """Leases this scheduler may still grant now, given its ``leases_out`` and ``share``
        (its partitions' fraction of the crawl). None when there is no limit: the gate is
        off, or no engine publishes (none started yet, or Redis out of reach; max_inflight
        still bounds the leases)."""
        if self.per_engine <= 0:
            return None
        if now - self._read_at >= READ_EVERY_S:
            self._read_at = now
            self._engines = self._read(now)
        if self._engines is None:
            return None
        count, fetching = self._engines
        if self.engine is not None:  # every lease of ours goes to that one engine
            share = 1.0
        waiting = leases_out - share * fetching
        return max(0, round(share * count * self.per_engine - waiting))

    def _read(self, now: float) -> tuple[int, int] | None:
        """(engines counted, their fetches on the network); None if none publishes."""
        try:
            engines = read_engines(self.client, self.key, now)
        except (redis.RedisError, OSError):  # the gate only paces: step on without it
            engines = []
        if self.engine is not None:
            engines = [e for e in engines if e.worker == self.engine]
        return (len(engines), sum(e.fetching for e in engines)) if engines else None
