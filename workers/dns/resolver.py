"""Host name resolution for the fetch path: a static map, a TTL cache, and an address guard.

The crawler resolves names itself (instead of letting urllib3 call ``getaddrinfo`` on every new
connection) so that politeness can be enforced per IP, the sandbox web can plug in its own
host -> IP map, and every address is checked against the address policy before any
connection is made (SSRF guard: a page must not make the crawler fetch from 10.0.0.1 or ::1;
the rules are :mod:`workers.dns.policy`).

``DNSError`` subclasses :class:`OSError`, so code that treats "network problems" as ``OSError``
catches it too; its ``kind`` attribute is a short machine-readable class.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from workers.dns.policy import AddressPolicy

__all__ = [
    "CachingResolver",
    "DNSError",
    "ForbiddenAddressError",
    "Resolver",
    "is_forbidden_ip",
    "normalize_host",
    "system_lookup",
]


class DNSError(OSError):
    """A name could not be resolved to a usable address.

    ``kind`` is one of ``"nxdomain"`` (name or address family does not exist), ``"temporary"``
    (resolver said try again), ``"no_address"`` (no usable A/AAAA record), ``"forbidden"``
    (only forbidden addresses, see :class:`ForbiddenAddressError`), ``"invalid"`` (not a host
    name), ``"error"`` (anything else).
    """

    def __init__(self, reason: str, host: str = "", kind: str = "error") -> None:
        super().__init__(reason)
        self.reason = reason
        self.host = host
        self.kind = kind

    def __str__(self) -> str:
        return f"{self.reason} ({self.host})" if self.host else self.reason


class ForbiddenAddressError(DNSError):
    """The name resolved only to addresses the crawler must not connect to (``ip``: the
    first of them)."""

    def __init__(self, reason: str, host: str = "", ip: str = "") -> None:
        super().__init__(reason, host, kind="forbidden")
        self.ip = ip


def is_forbidden_ip(ip: str, allow_private: bool,
                    allowed_networks: Iterable[str] = ()) -> bool:
    """True if the crawler must not connect to ``ip``: see :class:`AddressPolicy` (the
    reason is its ``refusal``). Unparsable strings are forbidden; ``allow_private=True``
    allows everything that parses."""
    return AddressPolicy.of(allow_private, allowed_networks).refusal(ip) is not None


def normalize_host(host: str) -> str:
    """Lower-case, strip one trailing dot and IPv6 brackets: the cache key for a host."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.endswith("."):
        host = host[:-1]
    return host


def system_lookup(host: str) -> list[str]:
    """All addresses the system resolver returns for ``host``, IPv4 first, duplicates removed.

    Raises :class:`DNSError`. ``getaddrinfo`` has no timeout argument: its time is bounded by
    the system resolver configuration (``/etc/resolv.conf`` ``timeout``/``attempts``).
    """
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        kind = {
            socket.EAI_NONAME: "nxdomain",
            socket.EAI_AGAIN: "temporary",
        }.get(e.errno, "error")
        if getattr(socket, "EAI_NODATA", None) == e.errno:
            kind = "nxdomain"
        raise DNSError(f"lookup failed: {e.strerror or e}", host, kind) from e
    except (UnicodeError, ValueError) as e:
        raise DNSError(f"invalid host name: {e}", host, "invalid") from e
    except OSError as e:
        raise DNSError(f"lookup failed: {e}", host) from e
    v4: list[str] = []
    v6: list[str] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        ip = str(sockaddr[0])
        target = v4 if family == socket.AF_INET else v6
        if family in (socket.AF_INET, socket.AF_INET6) and ip not in target:
            target.append(ip)
    return v4 + v6


class Resolver:
    """Interface of a resolver: ``resolve(host)`` returns one IP string or raises DNSError."""

    def resolve(self, host: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass
class _Entry:
    expires: float
    ip: str | None
    error: DNSError | None


@dataclass
class _Pending:
    """A lookup in progress; later askers for the same name wait on it (coalescing)."""

    done: threading.Event = field(default_factory=threading.Event)
    ip: str | None = None
    error: DNSError | None = None


class CachingResolver(Resolver):
    """Static map, then a TTL/LRU cache in front of ``lookup`` (the system resolver, or the
    crawl's name servers: ``workers.dns.pool.nameserver_lookup``).

    * ``static`` entries (the sandbox web's host -> IP map) never expire and are not counted
      as cache entries; a ``*.example.test`` key answers for every subdomain of example.test.
    * Successful answers live ``ttl_s``, failures ``negative_ttl_s`` (negative caching).
      The cache holds at most ``max_entries`` names (least recently used evicted).
    * Thread-safe; concurrent lookups of one uncached name make one system lookup.
    * Of the returned addresses the first allowed one is used, IPv4 preferred; if all are
      refused by the address policy (``allow_private``, ``allowed_networks``: see
      :class:`~workers.dns.policy.AddressPolicy`) a :class:`ForbiddenAddressError` is raised,
      its reason the policy's (e.g. "private address 10.0.0.1").
      IP literals are returned as they are, after the same check.
    * Counters: ``hits`` (static or cached answers, including cached failures), ``misses``
      (system lookups made), ``failures`` (system lookups that failed), ``coalesced``
      (callers that waited on another thread's lookup).

    ``clock`` and ``lookup`` are injectable for tests.
    """

    def __init__(
        self,
        ttl_s: float = 300.0,
        negative_ttl_s: float = 60.0,
        max_entries: int = 100_000,
        static: dict[str, str] | None = None,
        allow_private: bool = False,
        allowed_networks: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        lookup: Callable[[str], list[str]] = system_lookup,
    ) -> None:
        self.ttl_s = ttl_s
        self.negative_ttl_s = negative_ttl_s
        self.max_entries = max_entries
        #: which answers may be used (allow_private_ips, allowed_networks)
        self.policy = AddressPolicy.of(allow_private, allowed_networks)
        self._clock = clock
        self._lookup = lookup
        self._static: dict[str, str] = {}
        self._has_wildcards = False
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self.add_static(static or {})
        self.hits = 0
        self.misses = 0
        self.failures = 0
        self.coalesced = 0

    # -- configuration -------------------------------------------------------------------
    def add_static(self, mapping: dict[str, str]) -> None:
        """Add or replace static entries (never expire)."""
        with self._lock:
            for h, ip in mapping.items():
                if h.startswith("*."):
                    self._static["*." + normalize_host(h[2:])] = ip
                    self._has_wildcards = True
                else:
                    self._static[normalize_host(h)] = ip

    def _wildcard(self, name: str) -> str | None:
        """``*.example.test`` entries of the static map answer every subdomain of it."""
        dot = name.find(".")
        while dot >= 0:
            ip = self._static.get("*" + name[dot:])
            if ip is not None:
                return ip
            dot = name.find(".", dot + 1)
        return None

    def invalidate(self, host: str) -> None:
        """Forget the cached answer for ``host`` (static entries are kept)."""
        with self._lock:
            self._cache.pop(normalize_host(host), None)

    def clear(self) -> None:
        """Forget all cached answers (static entries are kept)."""
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)

    # -- resolution ----------------------------------------------------------------------
    def cached(self, host: str) -> str | DNSError | None:
        """The answer for ``host`` if it needs no lookup (an IP literal, a static entry or a
        fresh cache entry: an IP, or the cached failure), else None. Never blocks on DNS.
        A cache answer counts as a hit and as a use for the LRU order, as in :meth:`resolve`
        (the scheduler's resolver is asked only this way)."""
        name = normalize_host(host)
        try:
            ipaddress.ip_address(name.split("%", 1)[0])
        except ValueError:
            pass
        else:
            try:
                return self._checked(name, name)
            except DNSError as exc:
                return exc
        with self._lock:
            static = self._static.get(name)
            if static is None and self._has_wildcards:
                static = self._wildcard(name)
            if static is None:
                entry = self._cache.get(name)
                if entry is None or entry.expires <= self._clock():
                    return None
                self._cache.move_to_end(name)
                self.hits += 1
                return _fresh(entry.error) if entry.error is not None else entry.ip
        try:
            return self._checked(name, static)
        except DNSError as exc:
            return exc

    def _checked(self, host: str, ip: str) -> str:
        refusal = self.policy.refusal(ip)
        if refusal is not None:
            raise ForbiddenAddressError(refusal, host, ip)
        return ip

    def _choose(self, host: str, addresses: list[str]) -> str:
        if not addresses:
            raise DNSError("no address records", host, "no_address")
        for ip in addresses:
            if self.policy.allows(ip):
                return ip
        raise ForbiddenAddressError(str(self.policy.refusal(addresses[0])), host, addresses[0])

    def resolve(self, host: str) -> str:
        """One IP string for ``host``; raises :class:`DNSError` (or its Forbidden subclass)."""
        name = normalize_host(host)
        if not name:
            raise DNSError("empty host name", host, "invalid")
        try:
            ipaddress.ip_address(name.split("%", 1)[0])
        except ValueError:
            pass
        else:
            return self._checked(name, name)

        with self._lock:
            static = self._static.get(name)
            if static is None and self._has_wildcards:
                static = self._wildcard(name)
            if static is not None:
                self.hits += 1
            else:
                now = self._clock()
                entry = self._cache.get(name)
                if entry is not None and entry.expires > now:
                    self._cache.move_to_end(name)
                    self.hits += 1
                    if entry.error is not None:
                        raise _fresh(entry.error)
                    assert entry.ip is not None
                    return entry.ip
                pending = self._pending.get(name)
                owner = pending is None
                if pending is None:
                    pending = _Pending()
                    self._pending[name] = pending
                    self.misses += 1
                else:
                    self.coalesced += 1
        if static is not None:
            return self._checked(name, static)

        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise _fresh(pending.error)
            assert pending.ip is not None
            return pending.ip

        return self._look_up(name, pending)

    def _look_up(self, name: str, pending: _Pending) -> str:
        """The one lookup of ``name`` its waiters share: cached (or its failure, for
        ``negative_ttl_s``), then handed to them."""
        ip: str | None = None
        error: DNSError | None = None
        try:
            ip = self._choose(name, self._lookup(name))
        except DNSError as e:
            error = e
        except Exception as e:  # a broken injected lookup must not wedge waiters
            error = DNSError(f"lookup failed: {e!r}", name)
        with self._lock:
            if error is not None and not isinstance(error, ForbiddenAddressError):
                self.failures += 1
            ttl = self.negative_ttl_s if error is not None and error.kind != "forbidden" else (
                self.ttl_s
            )
            self._cache[name] = _Entry(self._clock() + ttl, ip, error)
            self._cache.move_to_end(name)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
            pending.ip, pending.error = ip, error
            del self._pending[name]
        pending.done.set()
        if error is not None:
            raise _fresh(error)
        assert ip is not None
        return ip


def _fresh(error: DNSError) -> DNSError:
    """A new exception equal to a cached one (re-raising one instance grows its traceback)."""
    if isinstance(error, ForbiddenAddressError):
        return ForbiddenAddressError(error.reason, error.host, error.ip)
    return DNSError(error.reason, error.host, error.kind)
