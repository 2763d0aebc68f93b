"""Admission: the URL-seen test of each link and, for new URLs, their host queues.

Encoder and decoder of lua/admit.lua. Links are grouped by partition; each partition's group
is one script call, so a batch is one pipeline whatever its size.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from frontier.bloom import BloomSpec, url_hash
from frontier.config import CrawlConfig
from frontier.keys import Keys, partition_of
from frontier.records import AdmitLink, AdmitResult
from frontier.redisbloom import EXPANSION, RESERVE_RATE_FACTOR, resolve_backend
from frontier.scripts import Store, load_script

_ADMIT = load_script("admit")


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


def bloom_args(config: CrawlConfig, layers: Sequence[BloomSpec]) -> list[Any]:
    """The filter section of lua/admit.lua's ARGV: 'lua', n_layers, (bits, k, capacity) per
    layer of our bitmaps; or 'bf', rate, capacity, expansion for RedisBloom (whose rate is
    twice the crawl's: frontier/redisbloom.py says why)."""
    if config.bloom_backend == "redisbloom":
        return ["bf", repr(config.bloom_error_rate * RESERVE_RATE_FACTOR), layers[0].capacity,
                EXPANSION]
    out: list[Any] = ["lua", len(layers)]
    for spec in layers:
        out += [spec.bits, spec.k, spec.capacity]
    return out


#: One link's run in lua/admit.lua's ARGV: host, entry (Entry.encode), hashes (the URL's two
#: 52-bit hashes, frontier/bloom.py url_hash, 7 bytes big-endian each), then, unless the call
#: is short (bfs without budgets), priority (repr) and budget ('' = none, else the 1-based
#: index of the link's domain in the call's budgets). Plain tuples: a batch has thousands.
LinkArgs = tuple[str, str, bytes] | tuple[str, str, bytes, str, int | str]


@dataclass(frozen=True, slots=True)
class AdmitCall:
    """The arguments of one lua/admit.lua call (one partition)."""

    prefix: str
    now: float
    mode: str
    host_cap: int
    query_cap: int
    budgets: Sequence[int]
    bloom: Sequence[Any]
    links: Sequence[LinkArgs]
    short: bool

    def encode(self) -> list[Any]:
        """ARGV: prefix, now, mode, host_cap, query_cap, stride, n_budgets, budgets..., the
        filter, then per link its :data:`LinkArgs` (3 or 5 of them: the stride)."""
        argv: list[Any] = [self.prefix, self.now, self.mode, self.host_cap, self.query_cap,
                           3 if self.short else 5, len(self.budgets), *self.budgets,
                           *self.bloom]
        for link in self.links:
            argv += link
        return argv


class AdmitReply(NamedTuple):
    """lua/admit.lua's reply for one partition."""

    admitted: int
    rejected: int
    #: Per link '1' (admitted) or '0'.
    flags: str
    over_host_cap: int
    over_query_cap: int
    over_budget: int
    reprioritized: int
    #: Earliest next-allowed time of a host the call put into the time heap, or None.
    woke: float | None
    #: Per budget of the call, the URLs admitted under it.
    spent: tuple[int, ...]

    @classmethod
    def decode(cls, raw: Sequence[Any]) -> AdmitReply:
        woke = float(raw[7])
        flags = raw[2].decode() if isinstance(raw[2], bytes) else str(raw[2])
        return cls(int(raw[0]), int(raw[1]), flags, int(raw[3]), int(raw[4]), int(raw[5]),
                   int(raw[6]), woke if woke >= 0 else None, tuple(int(x) for x in raw[8:]))


class AdmitBatch(list[int]):
    """Partitions touched by ``queue_admit``, in reply order, and the budget domains of each."""

    def __init__(self) -> None:
        super().__init__()
        self.domains: list[list[str]] = []

    def woken(self, replies: Sequence[Any]) -> dict[int, float]:
        """Partition -> earliest next-allowed time of a host the admission put into its
        time heap (for :meth:`DueHints.queue`)."""
        out: dict[int, float] = {}
        for p, raw in zip(self, replies, strict=True):
            woke = AdmitReply.decode(raw).woke
            if woke is not None:
                out[p] = woke
        return out

    def totals(self, replies: Sequence[Any]) -> AdmitResult:
        result = AdmitResult()
        for raw, domains in zip(replies, self.domains, strict=True):
            reply = AdmitReply.decode(raw)
            result.admitted += reply.admitted
            result.rejected += reply.rejected
            for d, spent in zip(domains, reply.spent, strict=True):
                if spent:
                    result.by_domain[d] = result.by_domain.get(d, 0) + spent
        return result


class Admission:
    """Adds links to the frontier (lua/admit.lua)."""

    def __init__(self, store: Store, bloom_layers: Sequence[BloomSpec]) -> None:
        self.store = store
        self._bloom = bloom_args(store.config, bloom_layers)

    def queue(
        self, pipe: Any, links: Iterable[AdmitLink], now: float | None = None,
        allowance: Mapping[str, int] | None = None,
        domain_of: Callable[[str], str] | None = None,
    ) -> AdmitBatch:
        """Add admission scripts for ``links`` to ``pipe`` (see Frontier.queue_admit)."""
        now = time.time() if now is None else now
        store, cfg = self.store, self.store.config
        mode, partitions = store.mode, store.partitions
        short = mode == "l" and allowance is None
        groups: dict[int, list[LinkArgs]] = defaultdict(list)
        budget_ix: dict[int, dict[str, int]] = defaultdict(dict)
        #: (partition, registered domain) -> links there that count against its budget.
        budget_links: Counter[tuple[int, str]] = Counter()
        for host, url, entry, prio in links:
            h1, h2 = url_hash(url)
            p = partition_of(host, partitions)
            hashes = h1.to_bytes(7, "big") + h2.to_bytes(7, "big")
            if short:
                groups[p].append((host, entry.encode(), hashes))
                continue
            bi: int | str = ""
            if allowance is not None and domain_of is not None:
                dom = domain_of(host)
                if dom in allowance:
                    ix = budget_ix[p]
                    bi = ix.setdefault(dom, len(ix) + 1)
                    budget_links[(p, dom)] += 1
            if mode == "z":
                prio = random.random()
            groups[p].append((host, entry.encode(), hashes, repr(prio), bi))
        shares = _split_allowance(allowance, budget_ix, budget_links) if budget_ix else {}
        batch = AdmitBatch()
        for p, rows in groups.items():
            doms = list(budget_ix.get(p, {}))
            call = AdmitCall(store.keys.prefix(p), now, mode, cfg.max_pages_per_host,
                             cfg.max_query_variants_per_path, [shares[(p, d)] for d in doms],
                             self._bloom, rows, short)
            pipe.script(_ADMIT, [store.keys.ready(p)], call.encode())
            batch.append(p)
            batch.domains.append(doms)
        return batch

    def admit(self, links: Iterable[AdmitLink], now: float | None = None) -> AdmitResult:
        pipe = self.store.pipeline()
        batch = self.queue(pipe, links, now)
        return batch.totals(pipe.execute()[: len(batch)])


def _split_allowance(allowance: Mapping[str, int] | None,
                     budget_ix: Mapping[int, Mapping[str, int]],
                     budget_links: Mapping[tuple[int, str], int]) -> dict[tuple[int, str], int]:
    """Split each domain's allowance over the partitions its links go to, in proportion to
    their links, so one batch cannot overshoot a budget once per partition. (Rounding may
    admit a little less; a URL refused for budget is not marked seen and comes back.)"""
    assert allowance is not None
    counts: dict[str, dict[int, int]] = defaultdict(dict)
    for p, ix in budget_ix.items():
        for dom in ix:
            counts[dom][p] = budget_links[(p, dom)]
    shares: dict[tuple[int, str], int] = {}
    for dom, per_part in counts.items():
        total, left = sum(per_part.values()), allowance[dom]
        for p, n in sorted(per_part.items(), key=lambda kv: -kv[1]):
            share = min(left, -(-allowance[dom] * n // total))
            shares[(p, dom)] = share
            left -= share
    return shares
