"""One place that turns a URL into a Redis client: a single server or a Redis Cluster.

``redis://`` / ``rediss://`` / ``unix://`` give a client of one server; ``redis-cluster://`` and
``rediss-cluster://`` (any one node's address) give a cluster client. The frontier works on
both because every Lua script touches the keys of one hash tag. Celery's broker cannot be a
Redis Cluster (kombu does not support it), so a clustered crawl names a separate ``--broker``.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

CLUSTER_SCHEMES = {"redis-cluster://": "redis://", "rediss-cluster://": "rediss://"}
SCHEMES = ("redis://", "rediss://", "unix://", *CLUSTER_SCHEMES)


def is_cluster_url(url: str) -> bool:
    return url.startswith(tuple(CLUSTER_SCHEMES))


def client_from_url(url: str, **kw: Any) -> redis.Redis:
    """A client for ``url``; raises ValueError for an unknown scheme."""
    for scheme, plain in CLUSTER_SCHEMES.items():
        if url.startswith(scheme):
            return RedisCluster.from_url(plain + url[len(scheme):], **kw)  # type: ignore[return-value]
    if not url.startswith(SCHEMES):
        raise ValueError(f"not a redis://, rediss://, unix:// or redis-cluster:// URL: {url!r}")
    return redis.Redis.from_url(url, **kw)
