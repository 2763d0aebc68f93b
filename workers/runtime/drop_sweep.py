"""Ending the queued URLs of dropped hosts (``trawl drop``), with a JSONL record each.

Two ways in: the completer drains a host whose lease just ended ``dropped``
(workers/runtime/completion.py), and the sweep below drains, once per newly dropped domain,
every host of that domain queued anywhere in the crawl. Without the sweep a host whose next
visit is far off (a long Crawl-delay, up to ``max_delay_s``) would keep its URLs queued, and
counted as ``queued``, until that visit. One worker sweeps a domain (the first to claim it in
Redis, frontier/dropped.py); if it dies midway the rest end at their hosts' leases, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis

from frontier.counters import Outcome
from frontier.dropped import covering, dropped_reason
from workers.pipeline.result import entry_record
from workers.runtime import metrics

log = logging.getLogger(__name__)

#: Hosts one drain call of a sweep names (each partition's script gets its share as ARGV): a
#: domain with very many hosts is emptied in several calls, not one huge one.
SWEEP_HOSTS_PER_DRAIN = 500
#: Pauses between a sweep's tries to read the queued hosts while Redis fails (then the claim
#: is given back).
SWEEP_RETRY_S = (1.0, 2.0, 4.0, 8.0)


def end_dropped_hosts(ctx: Any, hosts: dict[str, int]) -> int:
    """End every queued URL of ``hosts`` (host -> partition) that holds no lease, writing
    their records; returns how many ended. If Redis fails here, those URLs stay queued and
    end one by one as their host is leased again."""
    try:
        taken = ctx.frontier.dropped.drain(hosts)
    except (redis.RedisError, OSError) as exc:
        log.warning("could not empty the queues of %d dropped hosts (%s): their URLs end "
                    "as they are leased", len(hosts), exc)
        return 0
    now = time.time()
    counted = metrics.active()
    if counted is not None:  # as the leases that end dropped are (trawl_leases_total)
        counted.count_outcome(Outcome.DROPPED, len(taken))
    if ctx.records is not None:
        for got in taken:
            domain = covering(ctx.dropped.domains, got.host) or got.host
            ctx.records.write(entry_record(
                got.host, got.entry, Outcome.DROPPED, now, None, got.entry.attempts,
                reason=dropped_reason(domain),
                revisit=True if got.entry.revisit else None))
    if taken:
        log.info("%d queued URLs of %d dropped hosts ended", len(taken), len(hosts))
    return len(taken)


class DropSweeper:
    """Sweeps each domain the worker's view newly sees dropped, on a thread of its own (a
    sweep reads every partition's ready heap: seconds on a large crawl, off the caller's
    path, which is a pipeline thread planning a lease)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._known: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def domains_changed(self, domains: frozenset[str]) -> None:
        with self._lock:
            added, self._known = domains - self._known, domains
            self._threads = [t for t in self._threads if t.is_alive()]
            if not added:
                return
            thread = threading.Thread(target=self.sweep, args=(sorted(added),),
                                      name="trawl-drop-sweep", daemon=True)
            self._threads.append(thread)
        thread.start()

    def sweep(self, domains: list[str]) -> int:
        """Claim and sweep each of ``domains``; returns the URLs ended."""
        ctx, ended = self._ctx, 0
        for domain in domains:
            try:
                if not ctx.frontier.dropped.claim_sweep(domain, ctx.worker_id):
                    continue  # another worker sweeps it
            except (redis.RedisError, OSError) as exc:
                log.warning("could not claim the sweep of dropped %s (%s): its URLs end as "
                            "its hosts are leased", domain, exc)
                continue
            hosts = self._hosts_under(domain)
            if hosts is None:
                continue
            names, here = list(hosts), 0
            for i in range(0, len(names), SWEEP_HOSTS_PER_DRAIN):
                here += end_dropped_hosts(
                    ctx, {h: hosts[h] for h in names[i:i + SWEEP_HOSTS_PER_DRAIN]})
            log.info("swept dropped %s: %d hosts queued, %d URLs ended", domain, len(hosts),
                     here)
            ended += here
        return ended

    def _hosts_under(self, domain: str) -> dict[str, int] | None:
        """The claimed domain's queued hosts, retried through a short Redis outage; None
        after the last try, with the claim given back (a worker that sees the drop later
        sweeps it; meanwhile its URLs end as its hosts are leased)."""
        frontier, worker = self._ctx.frontier, self._ctx.worker_id
        for attempt, pause_s in enumerate((*SWEEP_RETRY_S, None), start=1):
            try:
                return frontier.dropped.hosts_under(domain, range(frontier.partitions))
            except (redis.RedisError, OSError) as exc:
                if pause_s is None:
                    log.warning("could not sweep the queues of dropped %s after %d tries "
                                "(%s): its URLs end as its hosts are leased", domain, attempt,
                                exc)
                    break
                log.info("sweep of dropped %s: %s; trying again in %.0f s", domain, exc,
                         pause_s)
                time.sleep(pause_s)
        try:
            frontier.dropped.release_sweep(domain, worker)
        except (redis.RedisError, OSError) as exc:  # the claim then expires (SWEEP_CLAIM_S)
            log.warning("could not give back the sweep claim of %s: %s", domain, exc)
        return None

    def join(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the sweeps under way (a closing worker, tests)."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
