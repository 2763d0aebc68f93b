"""One place that turns a URL into a Redis client: a single server or a Redis Cluster.

``redis://`` / ``rediss://`` / ``unix://`` give a client of one server; ``redis-cluster://`` and
``rediss-cluster://`` (any one node's address) give a cluster client. The frontier works on
both because every Lua script touches the keys of one hash tag. Celery's broker cannot be a
Redis Cluster (kombu does not support it), so a clustered crawl names a separate ``--broker``.

Every client made here is a *state connection* and fails fast (``STATE_OPTIONS``): a socket
timeout on connect and on every reply, TCP keepalive, a health check of idle connections, and
no retries. Retries are off on purpose, not only for speed: a pipeline of Lua scripts that
timed out may already have run on the server, and running it again would count a completion
twice or admit links twice; the callers' loops (member heartbeat, scheduler, task) decide what
to do next. With these options a cut-off member notices within ``socket_timeout_s`` (instead
of after redis-py's exponential retries) and stops scheduling before its partition lease TTL
runs out (``workers/cluster/member.py``). The socket timeout also bounds how late a worker can learn
that ``begin`` renewed a URL lease: ``fetch_lease_s`` (2 x ``total_timeout_s`` + 5) covers a
reply that took the whole ``STATE_SOCKET_TIMEOUT_S`` (5 s) plus one fetch, so a worker never
fetches a host whose lease may already have moved on. Keyword arguments (and query parameters
of the URL, which redis-py lets win) override any of these.
"""

from __future__ import annotations

import functools
import re
import socket
from typing import Any
from urllib.parse import urlsplit

import hiredis
import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.connection import (
    AbstractConnection,
    Connection,
    HiredisRespSerializer,
    SSLConnection,
)
from redis.retry import Retry

CLUSTER_SCHEMES = {"redis-cluster://": "redis://", "rediss-cluster://": "rediss://"}
SCHEMES = ("redis://", "rediss://", "unix://", *CLUSTER_SCHEMES)

#: Seconds to wait for any reply; at most 5 s (see the module docstring on ``fetch_lease_s``).
STATE_SOCKET_TIMEOUT_S = 5.0
#: Seconds to wait for a new connection (a cut link makes connects hang, not fail).
STATE_CONNECT_TIMEOUT_S = 3.0
#: PING a pooled connection before use if it was idle this long (finds connections that died
#: during an outage before a real command is sent on them).
STATE_HEALTH_CHECK_S = 10
#: TCP keepalive: probe after 5 s idle, every 2 s, give up after 3 (a dead idle connection is
#: known dead ~11 s into an outage).
KEEPALIVE = {name: value for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2),
                                             ("TCP_KEEPCNT", 3)) if hasattr(socket, name)}


def state_options(cluster: bool = False) -> dict[str, Any]:
    """Fast-failure options of a state connection (a fresh ``Retry`` each call).

    On a cluster the ``retry`` is the cluster client's own (its node connections never retry):
    one retry, after redis-py refreshed the slot map, so a failed-over master is found.
    """
    return {
        "socket_timeout": STATE_SOCKET_TIMEOUT_S,
        "socket_connect_timeout": STATE_CONNECT_TIMEOUT_S,
        "socket_keepalive": True,
        "socket_keepalive_options": {getattr(socket, k): v for k, v in KEEPALIVE.items()},
        "health_check_interval": STATE_HEALTH_CHECK_S,
        "retry": Retry(NoBackoff(), 1 if cluster else 0),
    }


class FastPacker:
    """Packs a command's arguments straight with ``hiredis.pack_command``.

    redis-py's own packer runs ``Encoder.encode`` in Python on every argument before handing
    them to hiredis: ~0.55 us an argument, and the frontier's admission scripts send ~230
    arguments per page (136 us against 18 us for a 236-argument EVALSHA, bench: issue 7).
    hiredis encodes str (UTF-8), int, float and bytes itself, byte for byte as redis-py does
    (float via repr); anything else (bool, None, memoryview...) goes to redis-py's packer,
    which raises the same ``DataError`` as before or handles the buffer.
    """

    def __init__(self, fallback: HiredisRespSerializer) -> None:
        self._fallback = fallback

    def pack(self, *args: Any) -> list[bytes]:
        first = args[0]
        # redis-py splits a multi-word command name ("SCRIPT LOAD") into its words; so do we.
        if isinstance(first, str):
            if " " in first:
                args = (*first.split(), *args[1:])
        elif isinstance(first, bytes) and b" " in first:
            args = (*first.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:
            return self._fallback.pack(*args)


class _FastPacking:
    """Mixin of a redis-py connection class: :class:`FastPacker` replaces hiredis's packer."""

    _command_packer: Any

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        if isinstance(self._command_packer, HiredisRespSerializer):
            self._command_packer = FastPacker(self._command_packer)


@functools.cache
def fast_packing(base: type[AbstractConnection]) -> type[AbstractConnection]:
    """``base`` (a redis-py connection class) with :class:`FastPacker` as its packer."""
    if issubclass(base, _FastPacking):
        return base
    return type(f"FastPacking{base.__name__}", (_FastPacking, base), {})


#: What ``redacted`` puts in place of a password.
MASK = "***"
_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|ssl_password)=)[^&#]*")


def redacted(url: str) -> str:
    """``url`` fit for a message or a log: its password (``user:PASSWORD@`` or a
    ``password=`` query parameter) replaced by ``***``, the rest as it was."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return MASK if "@" in url else url
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        url = url.replace(netloc, f"{userinfo.partition(':')[0]}:{MASK}@{hostport}", 1)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, url)


def is_cluster_url(url: str) -> bool:
    return url.startswith(tuple(CLUSTER_SCHEMES))


def client_from_url(url: str, max_connections: int | None = None, **kw: Any) -> redis.Redis:
    """A fail-fast client for ``url`` (``state_options`` plus ``kw``); raises ValueError for an
    unknown scheme. ``max_connections`` (one server only): at most that many connections, a
    caller waits for a free one (a worker's thousand fetcher threads must not open a thousand
    connections)."""
    for scheme, plain in CLUSTER_SCHEMES.items():
        if url.startswith(scheme):
            base = SSLConnection if plain == "rediss://" else Connection
            opts = {"connection_class": fast_packing(base), **state_options(cluster=True), **kw}
            return RedisCluster.from_url(plain + url[len(scheme):], **opts)  # type: ignore[return-value]
    if not url.startswith(SCHEMES):
        raise ValueError("not a redis://, rediss://, unix:// or redis-cluster:// URL: "
                         f"{redacted(url)!r}")
    opts = {**state_options(), **kw}
    if url.startswith("unix://"):  # no TCP socket: keepalive options do not apply
        opts.pop("socket_keepalive", None)
        opts.pop("socket_keepalive_options", None)
    if max_connections:
        blocking = redis.BlockingConnectionPool.from_url(url, max_connections=max_connections,
                                                         **opts)
        client = redis.Redis(connection_pool=blocking)
        client.auto_close_connection_pool = True
    else:
        client = redis.Redis.from_url(url, **opts)
    pool = client.connection_pool
    pool.connection_class = fast_packing(pool.connection_class)
    return client
