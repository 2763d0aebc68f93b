"""urllib3 connections and pools that connect to a given IP while keeping the URL's host name.

Why: politeness is enforced per IP and every address is checked before connecting (see
:mod:`workers.dns.resolver`), so the fetcher must connect to *the IP the frontier decided on*,
not to whatever urllib3's own ``getaddrinfo`` returns. The URL is not rewritten to the IP
(that would break the Host header, TLS SNI and certificate checks); instead these classes take
a ``connect_ip`` and open the TCP socket to it, while ``host`` (used for Host, SNI and hostname
verification) stays the URL's host. Pools are keyed by (scheme, host, port, connect_ip), so a
pooled keep-alive connection is never reused for a host after its IP changed.
"""

from __future__ import annotations

import socket
import sys
from typing import Any, NamedTuple

import urllib3.connection
import urllib3.connectionpool
import urllib3.exceptions
import urllib3.poolmanager
import urllib3.util

from frontier.memo import BoundedMemo

from .deadline import _WATCHDOG, _current, _Deadline


class _PinnedMixin:
    """Opens the TCP connection to ``connect_ip``; ``host`` (Host header, SNI, cert) unchanged."""

    _connect_ip: str | None

    def __init__(self, *args: Any, connect_ip: str | None = None, **kwargs: Any) -> None:
        self._connect_ip = connect_ip
        super().__init__(*args, **kwargs)

    def _new_conn(self) -> socket.socket:
        if self._connect_ip is None:  # not used by Fetcher; keeps the class usable alone
            return super()._new_conn()  # type: ignore[misc]
        this: Any = self
        try:
            sock = urllib3.util.connection.create_connection(
                (self._connect_ip, this.port),
                this.timeout,
                source_address=this.source_address,
                socket_options=this.socket_options,
            )
        except TimeoutError as e:
            raise urllib3.exceptions.ConnectTimeoutError(
                this, f"Connection to {this.host} ({self._connect_ip}) timed out"
            ) from e
        except OSError as e:
            raise urllib3.exceptions.NewConnectionError(
                this, f"Failed to establish a new connection to {self._connect_ip}: {e}"
            ) from e
        sys.audit("http.client.connect", self, this.host, this.port)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        deadline: _Deadline | None = getattr(_current, "deadline", None)
        if deadline is not None:
            with _WATCHDOG.lock:
                self._trawl_owner = deadline
                deadline.conn = self
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _PinnedHTTPConnection(_PinnedMixin, urllib3.connection.HTTPConnection):
    pass


class _PinnedHTTPSConnection(_PinnedMixin, urllib3.connection.HTTPSConnection):
    pass


class _PinnedHTTPConnectionPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _PinnedHTTPConnection


class _PinnedHTTPSConnectionPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _PinnedHTTPSConnection


def _make_key_class() -> Any:
    """urllib3's PoolKey plus ``key_connect_ip``: pools are per (host, IP)."""
    fields = [(f, Any) for f in urllib3.poolmanager.PoolKey._fields] + [
        ("key_connect_ip", Any)
    ]
    return NamedTuple("PinnedPoolKey", fields)  # type: ignore[misc]


_PinnedPoolKey = _make_key_class()


def _pinned_key(request_context: dict[str, Any]) -> Any:
    return urllib3.poolmanager._default_key_normalizer(_PinnedPoolKey, request_context)


class _PinnedPoolManager(urllib3.poolmanager.PoolManager):
    """A PoolManager whose pools connect to a given IP; one pool per (scheme, host, port, IP).

    :meth:`pool_for` is :meth:`connection_from_host` with ``pool_kwargs={"connect_ip": ip}``
    minus the per-call key normalization: the pool key of a (scheme, host, port, IP) is
    memoized (the manager's other pool kwargs are fixed at construction). Pools themselves stay
    in urllib3's LRU container (``num_pools``), so an evicted pool is closed and rebuilt as
    before.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool_classes_by_scheme = {
            "http": _PinnedHTTPConnectionPool,
            "https": _PinnedHTTPSConnectionPool,
        }
        self.key_fn_by_scheme = {"http": _pinned_key, "https": _pinned_key}
        self._keys: BoundedMemo[tuple[str, str, int, str], Any] = BoundedMemo(50_000)

    def pool_for(self, scheme: str, host: str, port: int, ip: str) -> Any:
        t = (scheme, host, port, ip)
        key = self._keys.get(t)
        if key is None:
            key = self._keys.put(t, _pinned_key(self._context(scheme, host, port, ip)))
        with self.pools.lock:
            pool = self.pools.get(key)
            if pool:
                return pool
        # new pool (or evicted): the ordinary path, which creates it under the lock
        return self.connection_from_pool_key(key, self._context(scheme, host, port, ip))

    def _context(self, scheme: str, host: str, port: int, ip: str) -> dict[str, Any]:
        ctx = self.connection_pool_kw.copy()
        ctx.update(scheme=scheme, host=host, port=port, connect_ip=ip)
        return ctx
