"""The frontier in Redis: admission through the Bloom filter, leases of due hosts, completion.

Only the frontier (through its Lua scripts) changes queues, host politeness times and leases.
Every call that spans partitions is one pipeline: one round trip, one script per partition.
:class:`Frontier` is the one object workers and the scheduler hold; each of its parts lives
in a module of its own, with the encoders and decoders of its scripts:

  admission.py  links -> URL-seen test -> host queues          (lua/admit.lua)
  leases.py     acquire, begin, complete, reap                 (acquire, begin, complete, reap)
  budgets.py    per-registered-domain budgets                  (budget)
  ipgate.py     the per-IP politeness gate                     (ip_acquire, ip_release)
  partitions.py partition ownership and due hints              (claim, release_partition, take_due)
  hostcache.py  robots.txt and soft-404 caches per host
  partition_counters.py  the counters of each partition        (hget, hgetall, hincrby)
  revisits.py   continuous crawling's revisit schedules        (promote_revisits; complete)
  dropped.py    domains dropped by an operator, their queues   (drop_queued)

Invariants (checked by tests/frontier/test_frontier.py):
  * a host is in the ready heap ``r`` iff its queue is non-empty and it holds no lease;
  * a host holds at most one lease; a leased URL is in ``L``/``D`` and in no queue;
  * ``queued`` = total length of the host queues, ``inflight`` = number of leases;
  * a URL leaves its queue only into a lease, and a lease ends only by ``complete`` (which may
    put the entry back) or ``reap`` (which always puts it back).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import redis

from frontier.admission import Admission, AdmitBatch, resolve_bloom_backend
from frontier.bloom import BloomSpec, partition_layers
from frontier.budgets import Budgets
from frontier.config import CrawlConfig
from frontier.counters import COUNTERS
from frontier.dropped import Dropped
from frontier.hostcache import HostCacheKind, HostCaches, HostCacheWrite
from frontier.ipgate import IpGate
from frontier.keys import Keys, partition_of
from frontier.leases import Leases
from frontier.partition_counters import PartitionCounters
from frontier.partitions import Partitions
from frontier.records import AdmitLink, AdmitResult, Completion, Entry, Lease, ip_token
from frontier.revisits import Revisits
from frontier.scripts import QUEUE_MODE, Store
from frontier.slotpipe import SlotPipeline

__all__ = ["COUNTERS", "QUEUE_MODE", "AdmitBatch", "AdmitLink", "AdmitResult", "Completion",
           "Entry", "Frontier", "Lease", "ip_token", "resolve_bloom_backend"]



class Frontier:
    """One crawl's frontier: the facade over its parts (same calls as before the split)."""

    def __init__(self, client: redis.Redis, config: CrawlConfig) -> None:
        self.r = client
        # bloom_backend made concrete for this server ("auto"), or checked ("redisbloom").
        config = self.config = resolve_bloom_backend(client, config)
        self.keys = Keys(config.namespace)
        self.partitions = config.partitions
        self.mode = QUEUE_MODE[config.ordering]
        self.bloom_layers: list[BloomSpec] = partition_layers(
            config.bloom_capacity, config.bloom_error_rate, config.partitions
        )
        store = Store(client, config, self.keys)
        self._store = store
        self._admission = Admission(store, self.bloom_layers)
        self._leases = Leases(store)
        self._budgets = Budgets(store)
        self._ip_gate = IpGate(store)
        self._partitions = Partitions(store)
        self._caches = HostCaches(store)
        self._counters = PartitionCounters(store)
        #: Continuous crawling's revisit schedules (frontier/revisits.py).
        self.revisits = Revisits(store)
        #: Domains an operator dropped from the running crawl (frontier/dropped.py).
        self.dropped = Dropped(store)
        #: Due hints: partition -> a time from which it may have a due host that its last
        #: acquire did not see (a completion or an admission since). A ZSET of its own slot.
        self.due_key = self._partitions.due_key

    def pipeline(self) -> SlotPipeline:
        """A pipeline for this frontier's scripts (one round trip per Redis node)."""
        return self._store.pipeline()

    def partition(self, host: str) -> int:
        return partition_of(host, self.partitions)

    # -- admission (frontier/admission.py) -------------------------------------------------
    def queue_admit(
        self, pipe: Any, links: Iterable[AdmitLink], now: float | None = None,
        allowance: Mapping[str, int] | None = None,
        domain_of: Callable[[str], str] | None = None,
    ) -> AdmitBatch:
        """Add admission scripts for ``links`` to ``pipe``.

        ``allowance`` (registered domain -> URLs it may still admit, from
        :meth:`domain_allowance`) applies the per-domain budget; ``domain_of`` maps a host to
        its registered domain. Returns the partitions touched, in the order their replies
        will appear (see :meth:`AdmitBatch.totals`).
        """
        return self._admission.queue(pipe, links, now, allowance, domain_of)

    def admit(self, links: Iterable[AdmitLink], now: float | None = None) -> AdmitResult:
        return self._admission.admit(links, now)

    # -- per-domain budgets, IRLbot (frontier/budgets.py) -----------------------------------
    @property
    def budgets_on(self) -> bool:
        return self._budgets.on

    def domain_allowance(self, linkers: Mapping[str, Iterable[str]]) -> dict[str, int]:
        """URLs each target domain may still admit; records who links to it (one round trip).

        ``linkers`` maps a target registered domain to the registered domains of the pages
        linking to it in this batch (its own domain does not count towards its budget).
        """
        return self._budgets.allowance(linkers)

    def queue_domain_spent(self, pipe: Any, spent: Mapping[str, int]) -> None:
        """Count URLs admitted under their domains' budgets."""
        self._budgets.queue_spent(pipe, spent)

    # -- leases (frontier/leases.py) --------------------------------------------------------
    @property
    def fenced(self) -> set[int]:
        """Partitions whose ownership was lost, as of the last :meth:`acquire`."""
        return self._leases.fenced

    @fenced.setter
    def fenced(self, partitions: set[int]) -> None:
        """Callers clear it once they have acted on the partitions it named."""
        self._leases.fenced = partitions

    @property
    def next_due(self) -> dict[int, float | None]:
        """Partition -> earliest time a host of it is due, or None, as of the last acquire."""
        return self._leases.next_due

    def acquire(
        self, per_partition: int, now: float | None = None,
        partitions: Iterable[int] | Mapping[int, str] | None = None,
    ) -> tuple[list[Lease], float | None]:
        """Lease up to ``per_partition`` due hosts in each partition (one pipeline).

        ``partitions`` maps partition -> owner value ("member|token") for fenced calls by a
        partition owner, or lists partitions (unfenced; tests and single-scheduler setups).
        Returns the leases and the earliest next-allowed time of any host still waiting.
        Partitions whose ownership was lost are recorded in ``self.fenced``; the earliest
        next-allowed time of each partition's waiting hosts (None: none) in ``self.next_due``.
        """
        return self._leases.acquire(per_partition, now, partitions)

    def begin(self, leases: Sequence[Lease], budget_s: float,
              now: float | None = None, *, stagger: bool = True) -> list[bool]:
        """A worker is about to fetch ``leases``: which are still current.

        Each current lease's deadline is renewed to now + ``budget_s`` (``stagger``: the i-th,
        from 0, to now + (i+1) x ``budget_s``, for fetches run one after another). The fetch
        engine's lease keeper renews its fetches in progress the same way. One round trip.
        """
        return self._leases.begin(leases, budget_s, now, stagger=stagger)

    def queue_complete(self, pipe: Any, completions: Iterable[Completion]) -> int:
        """Add completion scripts to ``pipe``; returns how many replies they add."""
        return self._leases.queue_complete(pipe, completions)

    def complete(self, completions: Iterable[Completion]) -> int:
        """Finish leases; returns how many were stale (already expired and re-queued)."""
        return self._leases.complete(completions)

    def reap(self, now: float | None = None, max_per_partition: int = 1000,
             partitions: Iterable[int] | Mapping[int, str] | None = None) -> int:
        """Re-queue every expired lease (of the given partitions); returns how many."""
        return self._leases.reap(now, max_per_partition, partitions)

    def lease_alive(self, leases: Sequence[Lease]) -> list[bool]:
        """Whether each lease is still current (not reaped): checked before a fetch."""
        return self._leases.alive(leases)

    # -- due hints and partition ownership (frontier/partitions.py) --------------------------
    def queue_due_hints(self, pipe: Any, hints: Mapping[int, float]) -> None:
        """Tell the partitions' scheduler a host may be due from these times (one ZADD).

        Queued after the scripts that made the hosts due have replied (so on a cluster the
        hint cannot overtake them); the scheduler acquires only partitions it knows or is
        told have a due host, plus a sweep of all of them every ``partition_sweep_s``.
        """
        self._partitions.queue_due_hints(pipe, hints)

    def take_due(self, partitions: Iterable[int],
                 now: float | None = None) -> tuple[set[int], float | None]:
        """Hinted partitions among ``partitions`` with a hint time <= now (those hints are
        removed), and the earliest later hint time of one of them (None: none)."""
        return self._partitions.take_due(partitions, now)

    def claim_partitions(self, member: str, partitions: Iterable[int],
                         ttl_s: float) -> dict[int, int]:
        """Claim or renew ownership; returns partition -> fencing token for those now held."""
        return self._partitions.claim(member, partitions, ttl_s)

    def release_partitions(self, owners: Mapping[int, str]) -> int:
        return self._partitions.release(owners)

    def partition_owners(self) -> list[str | None]:
        return self._partitions.owners()

    # -- per-IP politeness (frontier/ipgate.py) ----------------------------------------------
    def ip_acquire(
        self, requests: Sequence[tuple[str, str]], now: float | None = None
    ) -> list[float]:
        """Gate (ip, token) pairs; returns per pair 0.0 (granted) or seconds to wait."""
        return self._ip_gate.acquire(requests, now)

    def queue_ip_release(self, pipe: Any, releases: Iterable[tuple[str, str, float]]) -> int:
        """Release (ip, token, next_allowed) tokens; returns how many replies they add."""
        return self._ip_gate.queue_release(pipe, releases)

    # -- host caches (frontier/hostcache.py) -------------------------------------------------
    def host_cache_get(self, host: str, kinds: Sequence[HostCacheKind]) -> list[bytes | None]:
        """The host's cached entries of ``kinds`` (one round trip)."""
        return self._caches.get(host, kinds)

    def queue_host_cache_writes(self, pipe: Any, writes: Iterable[HostCacheWrite]) -> int:
        """Queue host cache writes on ``pipe``; returns how many replies they add."""
        return self._caches.queue_set(pipe, writes)

    # -- counters (frontier/partition_counters.py) --------------------------------------------
    def partition_stats(self) -> list[dict[str, int]]:
        return self._counters.read()

    def stats(self) -> dict[str, int]:
        """The crawl's counters: every :data:`COUNTERS` entry (0 if never bumped) and any
        other counter a partition holds, summed over the partitions."""
        totals = dict.fromkeys(COUNTERS, 0)
        for part in self.partition_stats():
            for k, v in part.items():
                totals[k] = totals.get(k, 0) + v
        return totals

    def queue_counters(self, pipe: Any, partition: int, counters: Mapping[str, int]) -> None:
        """Add ``counters`` to one partition's counters: one script call for all of them."""
        self._counters.queue_add(pipe, partition, counters)

    def queue_inflight(self, pipe: Any, partitions: Iterable[int]) -> int:
        """Add reads of the partitions' in-flight counts to ``pipe`` (on one server, one
        batched command for all of them); returns how many replies they add."""
        return self._counters.queue_inflight(pipe, partitions)
