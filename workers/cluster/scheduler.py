"""The scheduler: turns due hosts into Celery tasks, re-queues expired leases.

Each step leases due hosts from the partitions that have one (one batched script call: those
whose last acquire said a host is due by now, those a worker hinted since, and every partition
once per ``partition_sweep_s``), passes them through the per-IP gate, and sends them as tasks of
``task_batch`` URLs of distinct hosts. The number of leases
out at once is bounded by ``max_inflight``, so the broker queue stays short and every task a
worker receives is due now. Tasks are kept full where that costs little (Celery's cost and a
task's round trips are per task): a step waits for a whole task's worth of room, tops a short
last task up from partitions with hosts still due, and, while plenty is in flight, lets it wait
up to ``task_linger_s`` for the next steps' leases.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.frontier import Completion, Frontier, Lease, ip_token
from frontier.keys import host_name
from workers.cluster.backlog import BacklogGate
from workers.cluster.revisits import RevisitOwner
from workers.dns.pool import Pending, ResolverPool, worker_resolver
from workers.fetch.order import FetchOrder
from workers.runtime import metrics

log = logging.getLogger(__name__)

#: How often a step reaps expired leases of its partitions. Not a setting: a reaped URL
#: waited lease_keep_s / fetch_lease_s / lease_ttl_s already, and a second more is noise.
REAP_EVERY_S = 1.0
#: How stale the count of leases in flight may be (one pipeline per read). Not a setting: it
#: only saves round trips; max_inflight is the limit a user sets.
INFLIGHT_READ_EVERY_S = 0.05
#: Longest sleep while leases are out or waiting (something may free room any moment). Not a
#: setting: a poll interval of the loop, with no effect on what is crawled or when it is due.
BUSY_POLL_S = 0.02


@dataclass
class StepResult:
    dispatched: int
    earliest: float | None


def _summary(batch: list[list[object]]) -> str:
    """What Flower shows as a task's arguments: its URLs, the first few in full."""
    urls = [str(msg[0]) for msg in batch[:3]]
    more = f" +{len(batch) - 3}" if len(batch) > 3 else ""
    return f"[{len(batch)} URLs: {' '.join(urls)}{more}]"


class Scheduler:
    def __init__(self, client: redis.Redis, config: CrawlConfig, app: Celery,
                 queue: str | None = None, engine: str | None = None) -> None:
        """``queue`` and ``engine``: a member's own task queue and the worker id of the one
        engine that consumes it (fetch_affinity); None: the shared queue, any engine."""
        self.client = client
        self.config = config
        self.frontier = Frontier(client, config)
        self.app = app
        #: where tasks go: ``queue`` (a member's own, fetch_affinity), else the shared queue
        self.queue = queue or self.frontier.keys.task_queue
        self.resolver = worker_resolver(config)
        self.dns = ResolverPool(self.resolver, config.dns_timeout_s)
        #: host name being looked up -> its leases: they go out when the lookup ends
        self._dns_waiting: dict[str, list[Lease]] = {}
        #: leases in _dns_waiting (``dns_waiting``)
        self._dns_count = 0
        self._last_reap = 0.0
        #: partition -> earliest time one of its hosts is due, as far as we know (inf: none)
        self._due: dict[int, float] = {}
        self._swept = 0.0
        self._swept_parts: frozenset[int] = frozenset()
        #: earliest hint time (not yet due) of an owned partition, from the last take_due
        self._hint_next: float | None = None
        self._inflight = 0
        self._inflight_read = 0.0
        #: granted leases waiting to fill a task (task_linger_s), and since the oldest waits
        self._held: list[tuple[Lease, str | None]] = []
        self._held_since = 0.0
        #: continuous crawling: revisit promotion and replanning (workers/cluster/revisits.py)
        self.revisits = RevisitOwner(self.frontier) if config.continuous else None
        #: paces leasing to the engines' CPU backlog (cpu_backlog)
        self.backlog = BacklogGate(client, self.frontier.keys.engines, config.cpu_backlog,
                                   engine=engine)
        self.dispatched = 0
        #: Tasks sent (``dispatched / tasks``: URLs a task carries on average).
        self.tasks = 0

    def inflight(self, now: float, partitions: list[int]) -> int:
        """Leases out of ``partitions``, re-read from Redis at most every 50 ms."""
        if now - self._inflight_read > INFLIGHT_READ_EVERY_S:
            pipe = self.frontier.pipeline()
            self.frontier.queue_inflight(pipe, partitions)
            self._inflight = sum(int(v or 0) for v in pipe.execute())
            self._inflight_read = now
        return self._inflight

    def step(self, owners: Mapping[int, str] | None = None) -> StepResult:
        """One round over ``owners`` (partition -> fencing value; None = all, unfenced)."""
        now = time.time()
        if self._held and now - self._held_since >= self.config.task_linger_s:
            self.flush()
        if self._dns_waiting:
            self._dispatch_resolved(now)
        if owners is None:
            owners = dict.fromkeys(range(self.frontier.partitions), "")
        if not owners:
            return StepResult(0, None)
        parts = list(owners)
        sweep = self._reap_and_sweep(now, owners)
        if self.revisits is not None:
            for p, t in self.revisits.step(now, owners).items():
                self._requeued_at(p, t)
        share = self.config.max_inflight * len(parts) / self.frontier.partitions
        leases_out = self.inflight(now, parts)
        budget = max(1, round(share)) - leases_out
        # leases waiting on a name lookup wait on the network, not on the CPU
        room = self.backlog.room(now, len(parts) / self.frontier.partitions,
                                 leases_out - self._dns_count)
        if room is not None:
            budget = min(budget, room)
        size = self.config.task_batch
        if budget <= 0 or (budget < size and self._inflight >= size):
            # With leases still out, wait until a whole task's worth of room is free: tasks
            # then carry task_batch URLs instead of the one or two a completion frees, and
            # Celery's cost (publish, receive, ack: ~8 broker commands) is paid per task.
            return StepResult(0, None)
        if sweep:
            chosen = parts
            self._swept, self._swept_parts = now, frozenset(parts)
        else:
            hinted, self._hint_next = self.frontier.take_due(parts, now)
            chosen = [p for p in parts if p in hinted or self._due.get(p, 0.0) <= now]
            if not chosen:
                return StepResult(0, self._earliest(parts))
        per_partition = max(1, -(-budget // len(chosen)))
        leases = self._acquire(per_partition, now, {p: owners[p] for p in chosen})
        short = -len(leases) % size
        if short:
            # The last task is not full: top it up from the partitions that said they still
            # have a host due now (one more round trip, only then). The share of a partition
            # with one due host is otherwise lost to the step, and tasks averaged ~5 URLs of 8.
            # So a step may lease up to task_batch - 1 more than its in-flight budget.
            more = [p for p in chosen if self._due.get(p, math.inf) <= now][:short]
            if more:
                leases += self._acquire(-(-short // len(more)), now,
                                        {p: owners[p] for p in more})
        if not leases:
            return StepResult(0, self._earliest(parts))
        leases, ips = self._resolve(leases)
        fresh = self._gate(leases, ips, now) if leases else []
        self._inflight += len(leases)
        return StepResult(self._send_tasks(fresh, now), self._earliest(parts))

    def _reap_and_sweep(self, now: float, owners: Mapping[int, str]) -> bool:
        """Re-queue expired leases (every REAP_EVERY_S); True when this step asks every
        partition: a sweep is due, the owned partitions changed, or leases were re-queued."""
        sweep = (now - self._swept >= self.config.partition_sweep_s
                 or self._swept_parts != frozenset(owners))
        if now - self._last_reap >= REAP_EVERY_S:
            reaped = self.frontier.reap(now, partitions=owners)
            if reaped:
                log.warning("re-queued %d expired leases", reaped)
                sweep = True
                counted = metrics.active()
                if counted is not None:
                    counted.reaped.inc(reaped)
            self._last_reap = now
        return sweep

    def _send_tasks(self, fresh: list[tuple[Lease, str | None]], now: float) -> int:
        """Send the held and newly granted leases as tasks of task_batch URLs; a short last
        task may be held back (see below). Returns how many URLs were sent."""
        size = self.config.task_batch
        granted, held = self._held + fresh, len(self._held)
        self._held = []
        cut = len(granted) - len(granted) % size
        if cut < len(granted) and self._inflight >= 2 * size:
            # Plenty in flight (the broker queue is not about to run dry): the last, short
            # task waits up to task_linger_s for the next steps' leases instead of going out.
            # A scheduler that dies meanwhile leaves those leases to the reaper (lease_ttl_s),
            # as it would any lease it had acquired but not yet sent.
            # With every host busy, a step finds only the one or two hosts a completion freed.
            if cut >= held:
                self._held_since = now
            self._held = granted[cut:]
            granted = granted[:cut]
        self._dispatch(granted)
        return len(granted)

    def flush(self) -> int:
        """Send the leases waiting to fill a task (at once: the scheduler stops, or they
        waited task_linger_s). Returns how many."""
        held, self._held = self._held, []
        self._dispatch(held)
        return len(held)

    def _dispatch(self, granted: list[tuple[Lease, str | None]]) -> None:
        size = self.config.task_batch
        for start in range(0, len(granted), size):
            chunk = granted[start:start + size]
            try:
                self._send([FetchOrder(lease, ip).to_json() for lease, ip in chunk])
            except Exception:
                self._give_back(granted[start:], time.time())
                raise

    def _acquire(self, per_partition: int, now: float,
                 owners: dict[int, str]) -> list[Lease]:
        """Lease due hosts of ``owners``' partitions; note each one's next due time."""
        leases, _ = self.frontier.acquire(per_partition, now, partitions=owners)
        for p, t in self.frontier.next_due.items():
            self._due[p] = math.inf if t is None else t
        for p in self.frontier.fenced:
            self._due.pop(p, None)
        return leases

    def _earliest(self, parts: list[int]) -> float | None:
        """When a step next has work: the earliest due time we know of, or a hint's."""
        t = min((self._due.get(p, 0.0) for p in parts), default=math.inf)
        if self._hint_next is not None:
            t = min(t, self._hint_next)
        return None if t == math.inf else t

    def _requeued(self, lease: Lease, at: float) -> None:
        """We put a lease's URL back (deferred, unsent): its partition is due at ``at``."""
        self._requeued_at(lease.partition, at)

    def _requeued_at(self, p: int, at: float) -> None:
        self._due[p] = min(self._due.get(p, math.inf), at)

    def _give_back(self, unsent: list[tuple[Lease, str | None]], now: float) -> None:
        """The broker refused a task: its leases go back to the head of their queues now
        (and their IP tokens are freed), instead of waiting out ``lease_ttl_s``. If Redis is
        away too, the leases simply expire and the reaper re-queues them."""
        for lease, _ in unsent:
            self._requeued(lease, now)
        counted = metrics.active()
        if counted is not None:
            counted.count_outcome(Outcome.UNSENT, len(unsent))
        try:
            pipe = self.frontier.pipeline()
            self.frontier.queue_complete(pipe, [
                Completion(lease, now, Outcome.UNSENT, requeue=lease.entry, at_head=True)
                for lease, _ in unsent])
            self.frontier.queue_ip_release(
                pipe, [(ip, ip_token(lease), now) for lease, ip in unsent if ip])
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("could not return %d unsent leases (they expire): %s", len(unsent), exc)

    # -- name resolution (workers/dns/pool.py): a slow name never holds up others ----
    @property
    def dns_waiting(self) -> int:
        """Leases waiting in this scheduler for their host's name lookup."""
        return self._dns_count

    def _resolve(self, leases: list[Lease]) -> tuple[list[Lease], list[str | None]]:
        """The leases whose host's IP is known now (or whose lookup failed: the worker tries
        again and records the failure), with their IPs. The others wait here, not in Redis
        (their lease lasts lease_ttl_s), until ``_dispatch_resolved`` sees their lookup end."""
        ready: list[Lease] = []
        ips: list[str | None] = []
        for lease in leases:
            answer = self.dns.lookup_nowait(host_name(lease.host))
            if isinstance(answer, Pending):
                self._dns_waiting.setdefault(answer.name, []).append(lease)
                self._dns_count += 1
            else:
                ready.append(lease)
                ips.append(answer if isinstance(answer, str) else None)
        return ready, ips

    def _dispatch_resolved(self, now: float) -> int:
        """Send the waiting leases whose lookup ended (failed or past dns_timeout_s: with no
        IP), through the per-IP gate. Returns how many were sent."""
        ready: list[Lease] = []
        ips: list[str | None] = []
        for name, answer in self.dns.collect().items():
            leases = self._dns_waiting.pop(name, [])
            self._dns_count -= len(leases)
            if not isinstance(answer, str):
                log.debug("lookup of %s failed (%s): %d leases go out without IP", name,
                          answer, len(leases))
            ready += leases
            ips += [answer if isinstance(answer, str) else None] * len(leases)
        if not ready:
            return 0
        granted = self._gate(ready, ips, now)
        self._inflight += len(ready)
        self._dispatch(granted)
        return len(granted)

    def release_waiting(self) -> int:
        """The scheduler stops: the leases still waiting for DNS go back to the head of their
        queues now (as unsent), instead of waiting out lease_ttl_s. Returns how many."""
        waiting = [(lease, None) for leases in self._dns_waiting.values() for lease in leases]
        self._dns_waiting, self._dns_count = {}, 0
        if waiting:
            self._give_back(waiting, time.time())
        return len(waiting)

    def _gate(self, leases: list[Lease], ips: list[str | None],
              now: float) -> list[tuple[Lease, str | None]]:
        """Per-IP politeness: leases whose IP is busy go back to the head of their queue."""
        gated = [(le, ip) for le, ip in zip(leases, ips, strict=True) if ip]
        waits = self.frontier.ip_acquire([(ip, ip_token(le)) for le, ip in gated], now)
        wait_of = {id(le): w for (le, _), w in zip(gated, waits, strict=True)}
        granted, deferred = [], []
        for lease, ip in zip(leases, ips, strict=True):
            wait = wait_of.get(id(lease), 0.0)
            if wait > 0:
                deferred.append(Completion(lease, now + wait, Outcome.DEFERRED, requeue=lease.entry,
                                           at_head=True))
                self._requeued(lease, now + wait)
            else:
                granted.append((lease, ip))
        if deferred:
            self.frontier.complete(deferred)
            counted = metrics.active()
            if counted is not None:
                counted.count_outcome(Outcome.DEFERRED, len(deferred))
                counted.ip_deferred.inc(len(deferred))
                counted.ip_wait.inc(sum(c.next_allowed for c in deferred) - now * len(deferred))
        return granted

    def _send(self, batch: list[list[object]]) -> None:
        # argsrepr given: Celery would otherwise saferepr() the whole batch for every task
        # (a quarter of send_task's 0.36 ms); Flower shows this summary instead.
        self.app.send_task("trawl.fetch", args=[batch], queue=self.queue,
                           argsrepr=_summary(batch), kwargsrepr="{}")
        self.dispatched += len(batch)
        self.tasks += 1
        counted = metrics.active()
        if counted is not None:
            counted.dispatched.inc(len(batch))
            counted.tasks.inc()

    def run(self, should_stop: Callable[[], bool], idle_sleep_s: float = 0.2,
            owners: Callable[[], Mapping[int, str] | None] = lambda: None) -> None:
        """Step until ``should_stop()``; sleeps until the earliest due host when idle."""
        try:
            while not should_stop():
                result = self.step(owners())
                if result.dispatched:
                    continue
                wait = idle_sleep_s
                if result.earliest is not None:
                    wait = min(max(result.earliest - time.time(), 0.002), idle_sleep_s)
                time.sleep(min(wait, BUSY_POLL_S)
                           if self._inflight or self._held or self._dns_waiting else wait)
        finally:
            if self._held:
                self.flush()
            self.release_waiting()
