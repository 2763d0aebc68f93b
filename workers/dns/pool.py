"""Name resolution that never blocks the scheduler: known names are answered from the cache at
once, new ones are looked up on a few background threads.

The scheduler needs a host's IP before dispatch (per-IP politeness). A broad crawl meets a
thousand new hosts a minute; one name server answering in 300 ms must not hold up the hosts
whose IP is known. So a lease whose host is being looked up waits in the scheduler (its lease
deadline is lease_ttl_s, minutes) and goes out in a later step, when :meth:`ResolverPool.collect`
reports the name. Also here: the crawl's resolver (:func:`worker_resolver`, the same for the
scheduler and the workers) and its optional name-server lookup (``dns_servers``, dnspython).
"""

from __future__ import annotations

import ipaddress
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from frontier.config import CrawlConfig
from workers.dns.resolver import CachingResolver, DNSError, normalize_host

__all__ = [
    "LOOKUP_THREADS",
    "Answer",
    "Pending",
    "ResolverPool",
    "nameserver_lookup",
    "parse_dns_server",
    "worker_resolver",
]

log = logging.getLogger(__name__)

#: Lookups at once. Each mostly waits on a name server: 32 threads at 300 ms a name make
#: ~100 names a second, six times a broad crawl's thousand new hosts a minute.
LOOKUP_THREADS = 32

#: What a lookup ends with: an IP, or the failure (the worker resolves again and records it).
Answer = str | DNSError


@dataclass(frozen=True, slots=True)
class Pending:
    """A lookup in progress; ``name`` (normalized) is the key :meth:`ResolverPool.collect`
    reports it under."""

    name: str


@dataclass(slots=True)
class _Lookup:
    name: str
    deadline: float


class ResolverPool:
    """Non-blocking front of a :class:`CachingResolver`.

    :meth:`lookup_nowait` answers from the cache (or static map, or an IP literal) or starts a
    background lookup, one per name however many ask (coalesced), on up to ``threads`` daemon
    threads started as needed. :meth:`collect` returns the lookups that ended since the last
    call; one still running ``timeout_s`` after it was asked for (queueing included) is
    reported as a failure then, and a later answer only fills the resolver's cache.
    ``threads=0`` resolves inline in ``lookup_nowait`` (blocking: the old behaviour, kept as
    the baseline the tests measure against).
    """

    def __init__(self, resolver: CachingResolver, timeout_s: float,
                 threads: int = LOOKUP_THREADS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if threads < 0:
            raise ValueError("threads must be >= 0")
        self.resolver = resolver
        self.timeout_s = timeout_s
        self.max_threads = threads
        self._clock = clock
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Lookup | None] = queue.SimpleQueue()
        #: name -> lookup not yet reported; insertion order is deadline order
        self._running: dict[str, _Lookup] = {}
        self._finished: dict[str, Answer] = {}
        self._threads: list[threading.Thread] = []
        #: lookups queued or being resolved (a thread is started while this exceeds them)
        self._outstanding = 0
        #: lookups started, askers that joined one in progress, lookups past timeout_s
        self.started = 0
        self.coalesced = 0
        self.timeouts = 0

    def __len__(self) -> int:
        """Lookups started and not yet reported by :meth:`collect`."""
        with self._lock:
            return len(self._running) + len(self._finished)

    def lookup_nowait(self, host: str) -> Answer | Pending:
        """The IP (or the DNS failure) if known now, else the :class:`Pending` lookup."""
        name = normalize_host(host)
        known = self.resolver.cached(name)
        if known is not None:
            return known
        if self.max_threads == 0:
            return self._resolve(name)
        with self._lock:
            if name in self._running or name in self._finished:
                self.coalesced += 1
                return Pending(name)
            lookup = _Lookup(name, self._clock() + self.timeout_s)
            self._running[name] = lookup
            self.started += 1
            self._outstanding += 1
            spawn = (self._outstanding > len(self._threads)
                     and len(self._threads) < self.max_threads)
            if spawn:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"trawl-dns-{len(self._threads)}")
                self._threads.append(thread)
        self._queue.put(lookup)
        if spawn:
            thread.start()
        return Pending(name)

    def collect(self) -> dict[str, Answer]:
        """Lookups that ended since the last call (name -> IP or failure), including those
        that ran past ``timeout_s`` (a failure of kind "temporary")."""
        now = self._clock()
        with self._lock:
            out, self._finished = self._finished, {}
            while self._running:
                name = next(iter(self._running))
                if self._running[name].deadline > now:
                    break
                del self._running[name]
                self.timeouts += 1
                out[name] = DNSError(f"no answer within {self.timeout_s} s", name, "temporary")
        return out

    def close(self) -> None:
        """Stop the threads once their current lookup ends (lookups not started are dropped)."""
        with self._lock:
            self._running.clear()
            threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(None)

    def _resolve(self, name: str) -> Answer:
        try:
            return self.resolver.resolve(name)
        except DNSError as exc:
            return exc
        except Exception as exc:  # a broken lookup must not stop the scheduler
            log.exception("lookup of %s failed", name)
            return DNSError(f"lookup failed: {exc!r}", name)

    def _work(self) -> None:
        while True:
            lookup = self._queue.get()
            if lookup is None:
                return
            with self._lock:
                live = self._running.get(lookup.name) is lookup  # else timed out in the queue
            answer = self._resolve(lookup.name) if live else None
            with self._lock:
                if answer is not None and self._running.get(lookup.name) is lookup:
                    del self._running[lookup.name]
                    self._finished[lookup.name] = answer
                self._outstanding -= 1


def parse_dns_server(server: str) -> tuple[str, int]:
    """``(ip, port)`` of a ``dns_servers`` entry: "ip", "ip:port", a bare IPv6 address or
    "[ipv6]:port". Raises ValueError: a crawl must not start with a resolver it cannot use."""
    text = server.strip()
    port = ""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"bad DNS server {server!r}")
        port = rest[1:]
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host = text
    try:
        ipaddress.ip_address(host)
        number = int(port) if port else 53
    except ValueError as exc:
        raise ValueError(f"bad DNS server {server!r}: want an IP address, optional :port") from exc
    if not 0 < number < 65536:
        raise ValueError(f"bad DNS server {server!r}: port out of range")
    return host, number


def nameserver_lookup(servers: list[str], timeout_s: float) -> Callable[[str], list[str]]:
    """A lookup asking ``servers`` directly with dnspython instead of the system resolver (a
    crawl's own resolver, as broad crawlers run): A first, AAAA only for a name without A
    records, both queries together within ``timeout_s``. No dnspython cache: the
    :class:`CachingResolver` in front is the cache. Raises ValueError for a bad server."""
    import dns.exception
    import dns.name
    import dns.nameserver
    import dns.resolver

    if not servers:
        raise ValueError("no DNS servers given")
    res = dns.resolver.Resolver(configure=False)
    res.nameservers = [dns.nameserver.Do53Nameserver(*parse_dns_server(s)) for s in servers]
    # A silent server costs one try's timeout per query (UDP has no refusal to notice), so
    # the budget is shared: every server gets a try, a lone server gets a second one.
    res.timeout = timeout_s / max(2, len(servers))
    res.lifetime = timeout_s

    def lookup(name: str) -> list[str]:
        deadline = time.monotonic() + timeout_s
        out: list[str] = []
        for rdtype in ("A", "AAAA"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise DNSError(f"no answer within {timeout_s} s", name, "temporary")
            try:
                answer = res.resolve(name, rdtype, search=False, lifetime=left,
                                     raise_on_no_answer=False)
            except dns.resolver.NXDOMAIN as exc:
                raise DNSError("name does not exist", name, "nxdomain") from exc
            except dns.exception.Timeout as exc:
                raise DNSError(f"no answer within {timeout_s} s", name, "temporary") from exc
            except dns.resolver.NoNameservers as exc:  # SERVFAIL/REFUSED from every server
                raise DNSError("name servers failed", name, "temporary") from exc
            except (dns.name.NameTooLong, dns.name.LabelTooLong, dns.name.EmptyLabel,
                    dns.name.BadEscape, UnicodeError, ValueError) as exc:
                raise DNSError(f"invalid host name: {exc}", name, "invalid") from exc
            except dns.exception.DNSException as exc:
                raise DNSError(f"{type(exc).__name__}: {exc}", name, "error") from exc
            out += [str(r.address) for r in answer if str(r.address) not in out]
            if out:
                break
        return out

    return lookup


def worker_resolver(config: CrawlConfig) -> CachingResolver:
    """The crawl's resolver, the same in the scheduler and the workers: the static map, a TTL
    cache (failures cached a minute), then the crawl's ``dns_servers`` or the system
    resolver."""
    kw: dict[str, object] = {}
    if config.dns_servers:
        kw["lookup"] = nameserver_lookup(config.dns_servers, config.dns_timeout_s)
    return CachingResolver(ttl_s=config.dns_ttl_s, static=config.static_hosts,
                           allow_private=config.allow_private_ips,
                           allowed_networks=config.allowed_networks, **kw)
