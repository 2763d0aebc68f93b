"""The frontier in Redis: admission through the Bloom filter, leases of due hosts, completion.

Only this module (through its Lua scripts) changes queues, host politeness times and leases.
Every call that spans partitions is one pipeline: one round trip, one script per partition.

Invariants (checked by tests/test_frontier.py):
  * a host is in the ready heap ``r`` iff its queue is non-empty and it holds no lease;
  * a host holds at most one lease; a leased URL is in ``L``/``D`` and in no queue;
  * ``queued`` = total length of the host queues, ``inflight`` = number of leases;
  * a URL leaves its queue only into a lease, and a lease ends only by ``complete`` (which may
    put the entry back) or ``reap`` (which always puts it back).
"""

from __future__ import annotations

import functools
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, NamedTuple

import redis

from frontier.bloom import BloomSpec, partition_layers, url_hash
from frontier.config import CrawlConfig
from frontier.counters import COUNTERS
from frontier.keys import Keys, domain_partition_of, ip_partition_of, partition_of
from frontier.outcomes import Outcome
from frontier.redisbloom import EXPANSION, RESERVE_RATE_FACTOR, resolve_backend
from frontier.slotpipe import LuaScript, SlotPipeline

#: Host-queue mode of each ordering: FIFO lists, priority ZSETs, or ZSETs whose queued URLs
#: gain priority from every further link to them.
QUEUE_MODE = {"bfs": "l", "random": "z", "indegree": "a", "opic": "a"}


@functools.cache
def _script(name: str) -> LuaScript:
    return LuaScript(name, resources.files("frontier").joinpath("lua", f"{name}.lua").read_text())


def _load_script(client: redis.Redis, name: str) -> LuaScript:
    """The script ``name`` (frontier/lua/NAME.lua), sent by :class:`SlotPipeline` as EVALSHA."""
    return _script(name)


@dataclass(frozen=True, slots=True)
class Entry:
    """A queued URL with its crawl depth, failed attempts so far and redirect hops."""

    url: str
    depth: int = 0
    attempts: int = 0
    hops: int = 0

    def encode(self) -> str:
        if self.attempts == 0 and self.hops == 0:
            return f"{self.depth} {self.url}"
        return f"{self.depth}.{self.attempts}.{self.hops} {self.url}"

    @classmethod
    def decode(cls, text: str) -> Entry:
        head, _, url = text.partition(" ")
        if "." in head:
            depth, attempts, hops = head.split(".")
            return cls(url, int(depth), int(attempts), int(hops))
        return cls(url, int(head))


@dataclass(frozen=True, slots=True)
class Lease:
    partition: int
    lease_id: str
    host: str
    entry: Entry
    #: The URL's queue score when it was leased (priority orderings: -priority; OPIC: -cash).
    score: float = 0.0

    @property
    def priority(self) -> float:
        return -self.score


def ip_token(lease: Lease) -> str:
    """The per-IP in-flight token of a lease (unique crawl-wide)."""
    return f"{lease.partition}:{lease.lease_id}"


@dataclass(frozen=True, slots=True)
class Completion:
    """How a lease ends. ``outcome`` (frontier.outcomes.Outcome) is also the counter the
    completion bumps."""

    lease: Lease
    next_allowed: float
    outcome: Outcome
    requeue: Entry | None = None
    at_head: bool = False


@dataclass(slots=True)
class AdmitResult:
    admitted: int = 0
    rejected: int = 0
    #: Registered domain -> URLs admitted under its budget (only when budgets were given).
    by_domain: dict[str, int] = field(default_factory=dict)


class AdmitLink(NamedTuple):
    """A link to admit. ``priority`` is what the link adds to its target under the indegree
    (1 per link) and opic (a share of the linking page's cash) orderings; bfs ignores it and
    random draws its own."""

    host: str
    url: str
    entry: Entry
    priority: float = 1.0


class AdmitBatch(list[int]):
    """Partitions touched by ``queue_admit``, in reply order, and the budget domains of each."""

    def __init__(self) -> None:
        super().__init__()
        self.domains: list[list[str]] = []

    def woken(self, replies: Sequence[Any]) -> dict[int, float]:
        """Partition -> earliest next-allowed time of a host the admission put into its
        time heap (for :meth:`Frontier.queue_due_hints`)."""
        out: dict[int, float] = {}
        for p, reply in zip(self, replies, strict=True):
            t = float(reply[7])
            if t >= 0:
                out[p] = t
        return out

    def totals(self, replies: Sequence[Any]) -> AdmitResult:
        result = AdmitResult()
        for reply, domains in zip(replies, self.domains, strict=True):
            result.admitted += int(reply[0])
            result.rejected += int(reply[1])
            for d, spent in zip(domains, reply[8:], strict=True):
                if int(spent):
                    result.by_domain[d] = result.by_domain.get(d, 0) + int(spent)
        return result


def resolve_bloom_backend(client: redis.Redis, config: CrawlConfig) -> CrawlConfig:
    """``config`` with a concrete ``bloom_backend`` for the Redis behind ``client``; raises
    ConfigError if it names RedisBloom and the server has none (checked by every process)."""
    if config.bloom_backend == "lua":
        return config
    keys = Keys(config.namespace)
    # A key of this process's own: workers starting at once must not share a probe filter.
    tag = f"bfprobe:{uuid.uuid4().hex}"
    probes = [keys.prefix(p) + tag for p in range(config.partitions)]
    backend = resolve_backend(client, config.bloom_backend, config.bloom_error_rate, probes)
    return config.replace(bloom_backend=backend)


class Frontier:
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
        # lua/admit.lua's filter arguments: the layers of the Lua filter, or RedisBloom's
        # BF.RESERVE rate and capacity (frontier/redisbloom.py: why twice the rate).
        self._bloom_args: list[Any]
        if config.bloom_backend == "redisbloom":
            self._bloom_args = ["bf", repr(config.bloom_error_rate * RESERVE_RATE_FACTOR),
                                self.bloom_layers[0].capacity, EXPANSION]
        else:
            self._bloom_args = ["lua", len(self.bloom_layers)]
            for spec in self.bloom_layers:
                self._bloom_args += [spec.bits, spec.k, spec.capacity]
        self._admit = _load_script(client, "admit")
        self._acquire = _load_script(client, "acquire")
        self._complete = _load_script(client, "complete")
        self._reap = _load_script(client, "reap")
        self.fenced: set[int] = set()
        #: Partition -> earliest time a host of it is due, or None, as of the last acquire.
        self.next_due: dict[int, float | None] = {}
        #: Due hints: partition -> a time from which it may have a due host that its last
        #: acquire did not see (a completion or an admission since). A ZSET of its own slot.
        self.due_key = f"{config.namespace}:due"
        self._begin = _load_script(client, "begin")
        self._claim = _load_script(client, "claim")
        self._release_partition = _load_script(client, "release_partition")
        self._ip_acquire = _load_script(client, "ip_acquire")
        self._ip_release = _load_script(client, "ip_release")
        self._budget = _load_script(client, "budget")
        self._hget = _load_script(client, "hget")
        self._hincrby = _load_script(client, "hincrby")
        self._hgetall = _load_script(client, "hgetall")
        self._take_due = _load_script(client, "take_due")

    def pipeline(self) -> SlotPipeline:
        """A pipeline for this frontier's scripts (one round trip per Redis node)."""
        return SlotPipeline(self.r)

    # -- keys ---------------------------------------------------------------------------
    def partition(self, host: str) -> int:
        return partition_of(host, self.partitions)

    # -- admission ------------------------------------------------------------------------
    def queue_admit(
        self, pipe: Any, links: Iterable[AdmitLink | tuple[str, str, Entry]],
        now: float | None = None,
        allowance: Mapping[str, int] | None = None,
        domain_of: Callable[[str], str] | None = None,
    ) -> AdmitBatch:
        """Add admission scripts for ``links`` to ``pipe``.

        ``allowance`` (registered domain -> URLs it may still admit, from
        :meth:`domain_allowance`) applies the per-domain budget; ``domain_of`` maps a host to
        its registered domain. Returns the partitions touched, in the order their replies
        will appear (see :meth:`AdmitBatch.totals`).
        """
        now = time.time() if now is None else now
        cfg = self.config
        groups: dict[int, list[Any]] = defaultdict(list)
        budget_ix: dict[int, dict[str, int]] = defaultdict(dict)
        short = self.mode == "l" and allowance is None
        stride = 3 if short else ADMIT_STRIDE
        for link in links:
            host, url, entry, prio = link if len(link) == 4 else (*link, 1.0)
            if self.mode == "z":
                prio = random.random()
            h1, h2 = url_hash(url)
            p = partition_of(host, self.partitions)
            bi: Any = ""
            if allowance is not None and domain_of is not None:
                dom = domain_of(host)
                if dom in allowance:
                    ix = budget_ix[p]
                    bi = ix.setdefault(dom, len(ix) + 1)
            # One link = ADMIT_STRIDE arguments of lua/admit.lua (hashes as 2 x 7 bytes), or
            # the first 3 of them when neither priority nor budget matters (bfs, no budgets).
            hashes = h1.to_bytes(7, "big") + h2.to_bytes(7, "big")
            if short:
                groups[p].extend((host, entry.encode(), hashes))
            else:
                groups[p].extend((host, entry.encode(), hashes, repr(prio), bi))
        shares = _split_allowance(allowance, budget_ix, groups) if budget_ix else {}
        batch = AdmitBatch()
        for p, args in groups.items():
            doms = list(budget_ix.get(p, {}))
            budgets = [shares[(p, d)] for d in doms]
            pipe.script(self._admit, [self.keys.ready(p)],
                        [self.keys.prefix(p), now, self.mode, cfg.max_pages_per_host,
                         cfg.max_query_variants_per_path, stride, len(budgets), *budgets,
                         *self._bloom_args, *args])
            batch.append(p)
            batch.domains.append(doms)
        return batch

    def admit(
        self, links: Iterable[AdmitLink | tuple[str, str, Entry]], now: float | None = None
    ) -> AdmitResult:
        pipe = self.pipeline()
        batch = self.queue_admit(pipe, links, now)
        return batch.totals(pipe.execute()[: len(batch)])

    @staticmethod
    def admit_totals(replies: Iterable[Any]) -> AdmitResult:
        result = AdmitResult()
        for reply in replies:
            result.admitted += int(reply[0])
            result.rejected += int(reply[1])
        return result

    # -- per-domain budgets (IRLbot) -----------------------------------------------------------
    @property
    def budgets_on(self) -> bool:
        return bool(self.config.domain_budget_base or self.config.max_pages_per_domain)

    def domain_allowance(self, linkers: Mapping[str, Iterable[str]]) -> dict[str, int]:
        """URLs each target domain may still admit; records who links to it (one round trip).

        ``linkers`` maps a target registered domain to the registered domains of the pages
        linking to it in this batch (its own domain does not count towards its budget).
        """
        cfg = self.config
        groups: dict[int, list[str]] = defaultdict(list)
        for dom in linkers:
            groups[domain_partition_of(dom, self.partitions)].append(dom)
        pipe = self.pipeline()
        for dp, doms in groups.items():
            args: list[Any] = [self.keys.domain_prefix(dp), cfg.domain_budget_base,
                               cfg.domain_budget_per_linking_domain, cfg.max_pages_per_domain]
            for dom in doms:
                others = sorted({d for d in linkers[dom] if d != dom})
                args += [dom, len(others), *others]
            pipe.script(self._budget, [self.keys.domain_prefix(dp) + "dc"], args)
        out: dict[str, int] = {}
        for doms, reply in zip(groups.values(), pipe.execute(), strict=True):
            out.update({d: int(n) for d, n in zip(doms, reply, strict=True)})
        return out

    def queue_domain_spent(self, pipe: Any, spent: Mapping[str, int]) -> None:
        """Count URLs admitted under their domains' budgets."""
        for dom, n in spent.items():
            dp = domain_partition_of(dom, self.partitions)
            pipe.command("hincrby", self.keys.domain_prefix(dp) + "dc", dom, n)

    # -- leases -----------------------------------------------------------------------------
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
        now = time.time() if now is None else now
        owners = _owners(range(self.partitions) if partitions is None else partitions)
        pipe = self.pipeline()
        for p, owner in owners.items():
            pipe.script(self._acquire, [self.keys.ready(p)],
                        [self.keys.prefix(p), now, per_partition, self.config.lease_ttl_s, owner,
                         self.mode])
        leases: list[Lease] = []
        earliest: float | None = None
        self.fenced = set()
        self.next_due = {}
        for p, reply in zip(owners, pipe.execute(), strict=True):
            first = float(reply[0])
            if first == -2:
                self.fenced.add(p)
                continue
            self.next_due[p] = first if first >= 0 else None
            if first >= 0 and (earliest is None or first < earliest):
                earliest = first
            for i in range(1, len(reply), 4):
                leases.append(Lease(p, _text(reply[i]), _text(reply[i + 1]),
                                    Entry.decode(_text(reply[i + 2])), float(reply[i + 3])))
        return leases, earliest

    def begin(self, leases: Sequence[Lease], budget_s: float,
              now: float | None = None, *, stagger: bool = True) -> list[bool]:
        """A worker is about to fetch ``leases``: which are still current.

        Each current lease's deadline is renewed to now + ``budget_s`` (``stagger``: the i-th,
        from 0, to now + (i+1) x ``budget_s``, for fetches run one after another). The fetch
        engine's lease keeper renews its fetches in progress the same way. One round trip.
        """
        now = time.time() if now is None else now
        groups: dict[int, list[int]] = defaultdict(list)
        for i, lease in enumerate(leases):
            groups[lease.partition].append(i)
        pipe = self.pipeline()
        for p, idx in groups.items():
            args: list[Any] = [self.keys.prefix(p), now, budget_s]
            for i in idx:
                args += [leases[i].lease_id, leases[i].host, i + 1 if stagger else 1]
            pipe.script(self._begin, [self.keys.ready(p)], args)
        ok = [False] * len(leases)
        for idx, reply in zip(groups.values(), pipe.execute(), strict=True):
            for i, flag in zip(idx, reply, strict=True):
                ok[i] = bool(int(flag))
        return ok

    def queue_complete(self, pipe: Any, completions: Iterable[Completion]) -> int:
        """Add completion scripts to ``pipe``; returns how many replies they add."""
        groups: dict[int, list[Any]] = defaultdict(list)
        for c in completions:
            groups[c.lease.partition].extend([
                c.lease.lease_id, c.lease.host, repr(c.next_allowed), c.outcome,
                c.requeue.encode() if c.requeue else "", "h" if c.at_head else "t",
                repr(c.lease.score),
            ])
        for p, args in groups.items():
            pipe.script(self._complete, [self.keys.ready(p)],
                        [self.keys.prefix(p), self.mode, *args])
        return len(groups)

    def complete(self, completions: Iterable[Completion]) -> int:
        """Finish leases; returns how many were stale (already expired and re-queued)."""
        pipe = self.pipeline()
        n = self.queue_complete(pipe, completions)
        return sum(int(x) for x in pipe.execute()[:n])

    def reap(self, now: float | None = None, max_per_partition: int = 1000,
             partitions: Iterable[int] | Mapping[int, str] | None = None) -> int:
        """Re-queue every expired lease (of the given partitions); returns how many."""
        now = time.time() if now is None else now
        owners = _owners(range(self.partitions) if partitions is None else partitions)
        pipe = self.pipeline()
        for p, owner in owners.items():
            pipe.script(self._reap, [self.keys.ready(p)],
                        [self.keys.prefix(p), now, max_per_partition, owner, self.mode])
        return sum(max(0, int(x)) for x in pipe.execute())

    # -- due hints for the scheduler ---------------------------------------------------------
    def queue_due_hints(self, pipe: Any, hints: Mapping[int, float]) -> None:
        """Tell the partitions' scheduler a host may be due from these times (one ZADD).

        Queued after the scripts that made the hosts due have replied (so on a cluster the
        hint cannot overtake them); the scheduler acquires only partitions it knows or is
        told have a due host, plus a sweep of all of them every ``SWEEP_S``.
        """
        if hints:
            args: list[Any] = []
            for p, t in hints.items():
                args += [repr(t), p]
            pipe.command("ZADD", self.due_key, "LT", *args)

    def take_due(self, partitions: Iterable[int],
                 now: float | None = None) -> tuple[set[int], float | None]:
        """Hinted partitions among ``partitions`` with a hint time <= now (those hints are
        removed), and the earliest later hint time of one of them (None: none)."""
        now = time.time() if now is None else now
        pipe = self.pipeline()
        pipe.script(self._take_due, [self.due_key], [repr(now), *partitions])
        hinted, nxt = pipe.execute()[0]
        later = float(nxt)
        return {int(p) for p in hinted}, (later if later >= 0 else None)

    # -- partition ownership ------------------------------------------------------------------
    def claim_partitions(self, member: str, partitions: Iterable[int],
                         ttl_s: float) -> dict[int, int]:
        """Claim or renew ownership; returns partition -> fencing token for those now held."""
        parts = list(partitions)
        pipe = self.pipeline()
        for p in parts:
            pre = self.keys.prefix(p)
            pipe.script(self._claim, [pre + "own", pre + "epoch"], [member, int(ttl_s * 1000)])
        return {p: int(t) for p, t in zip(parts, pipe.execute(), strict=True) if int(t) > 0}

    def release_partitions(self, owners: Mapping[int, str]) -> int:
        pipe = self.pipeline()
        for p, owner in owners.items():
            pipe.script(self._release_partition, [self.keys.prefix(p) + "own"], [owner])
        return sum(int(x) for x in pipe.execute()) if owners else 0

    def partition_owners(self) -> list[str | None]:
        pipe = self.pipeline()
        for p in range(self.partitions):
            pipe.command("get", self.keys.prefix(p) + "own")
        return [_text(v).split("|")[0] if v else None for v in pipe.execute()]

    def lease_alive(self, leases: Sequence[Lease]) -> list[bool]:
        """Whether each lease is still current (not reaped): checked before a fetch."""
        pipe = self.pipeline()
        for lease in leases:
            pipe.command("hget", self.keys.prefix(lease.partition) + "hb", lease.host)
        return [_text(v) == lease.lease_id if v is not None else False
                for v, lease in zip(pipe.execute(), leases, strict=True)]

    # -- per-IP politeness --------------------------------------------------------------------
    def ip_acquire(
        self, requests: Sequence[tuple[str, str]], now: float | None = None
    ) -> list[float]:
        """Gate (ip, token) pairs; returns per pair 0.0 (granted) or seconds to wait."""
        if self.config.ip_concurrency <= 0 or not requests:
            return [0.0] * len(requests)
        now = time.time() if now is None else now
        groups: dict[int, list[int]] = defaultdict(list)
        for i, (ip, _token) in enumerate(requests):
            groups[ip_partition_of(ip, self.partitions)].append(i)
        pipe = self.pipeline()
        for ipp, idx in groups.items():
            prefix = self.keys.ip_prefix(ipp)
            args: list[Any] = [prefix, now, self.config.ip_concurrency, self.config.lease_ttl_s]
            for i in idx:
                args.extend(requests[i])
            pipe.script(self._ip_acquire, [prefix + "ipn"], args)
        waits = [0.0] * len(requests)
        for idx, reply in zip(groups.values(), pipe.execute(), strict=True):
            for i, w in zip(idx, reply, strict=True):
                waits[i] = float(w)
        return waits

    def queue_ip_release(self, pipe: Any, releases: Iterable[tuple[str, str, float]]) -> int:
        if self.config.ip_concurrency <= 0:
            return 0
        groups: dict[int, list[Any]] = defaultdict(list)
        for ip, token, next_allowed in releases:
            groups[ip_partition_of(ip, self.partitions)].extend([ip, token, repr(next_allowed)])
        for ipp, args in groups.items():
            prefix = self.keys.ip_prefix(ipp)
            pipe.script(self._ip_release, [prefix + "ipn"], [prefix, *args])
        return len(groups)

    # -- robots cache ---------------------------------------------------------------------------
    def robots_get(self, host: str) -> bytes | None:
        return self.r.get(self.keys.robots(self.partition(host), host))

    def robots_set(self, host: str, data: bytes, ttl_s: float) -> None:
        self.r.set(self.keys.robots(self.partition(host), host), data,
                   px=max(1, int(ttl_s * 1000)))

    def soft404_get(self, host: str) -> bytes | None:
        return self.r.get(self.keys.soft404(self.partition(host), host))

    def soft404_set(self, host: str, data: bytes, ttl_s: float) -> None:
        self.r.set(self.keys.soft404(self.partition(host), host), data,
                   px=max(1, int(ttl_s * 1000)))

    # -- status -----------------------------------------------------------------------------------
    def partition_stats(self) -> list[dict[str, int]]:
        pipe = self.pipeline()
        for p in range(self.partitions):
            pipe.script(self._hgetall, [self.keys.stats(p)], [])
        out = []
        for raw in pipe.execute():
            pairs = zip(raw[::2], raw[1::2], strict=True)
            out.append({_text(k): int(v) for k, v in pairs if _text(k) not in _INTERNAL})
        return out

    def stats(self) -> dict[str, int]:
        totals = dict.fromkeys(COUNTERS, 0)
        for part in self.partition_stats():
            for k, v in part.items():
                totals[k] = totals.get(k, 0) + v
        return totals

    def increment(self, pipe: Any, host: str, counter: str, amount: int = 1) -> None:
        pipe.command("hincrby", self.keys.stats(self.partition(host)), counter, amount)

    def queue_counters(self, pipe: Any, partition: int, counters: Mapping[str, int]) -> None:
        """Add ``counters`` to one partition's counters: one script call for all of them."""
        args: list[Any] = []
        for name, amount in counters.items():
            args += [name, amount]
        if args:
            pipe.script(self._hincrby, [self.keys.stats(partition)], args)

    def queue_inflight(self, pipe: Any, partitions: Iterable[int]) -> int:
        """Add reads of the partitions' in-flight counts to ``pipe`` (on one server, one
        batched command for all of them); returns how many replies they add."""
        n = 0
        for p in partitions:
            pipe.script(self._hget, [self.keys.stats(p)], ["inflight"])
            n += 1
        return n


#: Arguments per link of lua/admit.lua: host, entry, hashes, priority, budget index.
ADMIT_STRIDE = 5


def _split_allowance(allowance: Mapping[str, int] | None,
                     budget_ix: Mapping[int, Mapping[str, int]],
                     groups: Mapping[int, list[Any]]) -> dict[tuple[int, str], int]:
    """Split each domain's allowance over the partitions its links go to, in proportion to
    their links, so one batch cannot overshoot a budget once per partition. (Rounding may
    admit a little less; a URL refused for budget is not marked seen and comes back.)"""
    assert allowance is not None
    counts: dict[str, dict[int, int]] = defaultdict(dict)
    for p, ix in budget_ix.items():
        args = groups[p]
        for dom, k in ix.items():
            counts[dom][p] = sum(1 for j in range(ADMIT_STRIDE - 1, len(args), ADMIT_STRIDE)
                                 if args[j] == k)
    shares: dict[tuple[int, str], int] = {}
    for dom, per_part in counts.items():
        total, left = sum(per_part.values()), allowance[dom]
        for p, n in sorted(per_part.items(), key=lambda kv: -kv[1]):
            share = min(left, -(-allowance[dom] * n // total))
            shares[(p, dom)] = share
            left -= share
    return shares


def _owners(partitions: Iterable[int] | Mapping[int, str]) -> dict[int, str]:
    if isinstance(partitions, Mapping):
        return dict(partitions)
    return dict.fromkeys(partitions, "")


_INTERNAL = frozenset({"seq", "bloom_layer", "bloom_fill"})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
