"""Name resolution that never blocks the scheduler: answers from the cache at once, lookups of
new names on a small thread pool.

The scheduler resolves each leased host before dispatch (per-IP politeness needs the IP). A
broad crawl meets a thousand new hosts a minute; one slow name server answering in 300 ms
must not hold up the hosts whose IP is known. A lease whose host is being looked up waits in
the scheduler (its lease deadline is lease_ttl_s, minutes) and goes out in a later step.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from frontier.config import CrawlConfig
from workers.dns import CachingResolver, DNSError, nameserver_lookup

#: Lookups at once (each mostly waits on a name server).
LOOKUP_THREADS = 16


@dataclass(frozen=True, slots=True)
class Pending:
    """A lookup started by :meth:`ResolverPool.lookup_nowait`."""

    name: str
    since: float


class ResolverPool:
    def __init__(self, resolver: CachingResolver, timeout_s: float) -> None:
        self.resolver = resolver
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="trawl-dns")
        self._running: dict[str, Future[str]] = {}

    def lookup_nowait(self, name: str) -> str | DNSError | Pending:
        """The IP (or the DNS failure) if known now, else a :class:`Pending` lookup."""
        known = self.resolver.cached(name)
        if known is not None:
            return known
        if name not in self._running:
            self._running[name] = self._pool.submit(self.resolver.resolve, name)
        return Pending(name, time.monotonic())

    def result(self, pending: Pending) -> str | DNSError | None:
        """The lookup's answer once it ended (a lookup past timeout_s is a failure), else
        None."""
        future = self._running.get(pending.name)
        if future is None:  # ended, collected for another lease of the same host: cached
            known = self.resolver.cached(pending.name)
            return known if known is not None else DNSError("lookup lost", pending.name)
        if not future.done():
            if time.monotonic() - pending.since > self.timeout_s:
                return DNSError(f"no answer within {self.timeout_s} s", pending.name,
                                "temporary")
            return None
        del self._running[pending.name]
        try:
            return future.result()
        except DNSError as exc:
            return exc
        except Exception as exc:  # a broken lookup must not stop the scheduler
            return DNSError(f"lookup failed: {exc!r}", pending.name)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def worker_resolver(config: CrawlConfig) -> CachingResolver:
    """The crawl's resolver: the static map, a TTL cache, then its dns_servers or the
    system resolver."""
    kw: dict[str, object] = {}
    if config.dns_servers:
        kw["lookup"] = nameserver_lookup(config.dns_servers, config.dns_timeout_s)
    return CachingResolver(ttl_s=config.dns_ttl_s, static=config.static_hosts,
                           allow_private=config.allow_private_ips, **kw)
