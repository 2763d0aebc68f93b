"""A pipeline that works on one Redis and on Redis Cluster, Lua scripts included.

redis-py's cluster pipeline refuses EVALSHA, but the frontier's scripts each touch one hash
tag, i.e. one slot, i.e. one node. So on a cluster we keep one plain pipeline per node (the
node that serves each call's first key), run them, and hand the replies back in call order.
On a single server it is just one pipeline: one round trip.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster


class SlotPipeline:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.cluster = isinstance(client, RedisCluster)
        self._pipes: dict[str, Any] = {}
        self._order: list[tuple[str, int]] = []
        self._sizes: dict[str, int] = {}

    def _pipe(self, key: str) -> tuple[str, Any]:
        if not self.cluster:
            name = "_"
            if name not in self._pipes:
                self._pipes[name] = self.client.pipeline(transaction=False)
        else:
            node = self.client.get_node_from_key(key)  # type: ignore[attr-defined]
            name = node.name
            if name not in self._pipes:
                conn = self.client.get_redis_connection(node)  # type: ignore[attr-defined]
                self._pipes[name] = conn.pipeline(transaction=False)
        return name, self._pipes[name]

    def _record(self, name: str) -> None:
        n = self._sizes.get(name, 0)
        self._order.append((name, n))
        self._sizes[name] = n + 1

    def script(self, script: Any, keys: list[str], args: list[Any]) -> None:
        name, pipe = self._pipe(keys[0])
        script(keys=keys, args=args, client=pipe)
        self._record(name)

    def command(self, name: str, key: str, *args: Any) -> None:
        node, pipe = self._pipe(key)
        getattr(pipe, name)(key, *args)
        self._record(node)

    def __len__(self) -> int:
        return len(self._order)

    def execute(self) -> list[Any]:
        replies = {name: pipe.execute() for name, pipe in self._pipes.items()}
        out = [replies[name][i] for name, i in self._order]
        self._pipes.clear()
        self._order.clear()
        self._sizes.clear()
        return out
