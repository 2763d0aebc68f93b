"""Every Redis key of a crawl, and the one function that maps a host to its partition.

All keys of partition p carry the hash tag ``{p}``, so each Lua script touches one slot and the
same code runs on one Redis and on Redis Cluster. Per-IP politeness keys are partitioned the
same way, by a hash of the IP, with the tag ``{i<n>}``.
"""

from __future__ import annotations

import xxhash


def partition_of(host: str, partitions: int) -> int:
    """Partition owning ``host`` (a politeness key such as ``example.com:8080``).

    A stable 64-bit hash (not Python's salted ``hash``), so every process agrees.
    """
    return xxhash.xxh64_intdigest(host.encode()) % partitions


def ip_partition_of(ip: str, partitions: int) -> int:
    return xxhash.xxh64_intdigest(("ip:" + ip).encode()) % partitions


def domain_partition_of(domain: str, partitions: int) -> int:
    return xxhash.xxh64_intdigest(("d:" + domain).encode()) % partitions


class Keys:
    """Key names of one crawl (``namespace``)."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace

    def prefix(self, partition: int) -> str:
        """Prefix of partition ``partition``'s keys; Lua scripts append the suffixes below.

        Suffixes (all under one slot):
          r        ZSET host -> next allowed fetch time, hosts with queued URLs and no lease
          q:<host> LIST of queue entries of the host (FIFO, bfs), or for the priority
                   orderings a ZSET url -> -priority
          hn       HASH host -> next allowed fetch time (kept when the host's queue is empty)
          hb       HASH host -> lease id, while a URL of the host is leased
          pr       ZSET host -> best queued score, due hosts (priority orderings only)
          qe       HASH url -> entry head "depth[.attempts.hops]" (priority orderings only)
          hc       HASH host -> URLs admitted (only with max_pages_per_host)
          qv       HASH host+path -> distinct queries admitted (query-explosion defence)
          L        HASH lease id -> "<host>\\t<entry>\\t<score>"
          D        ZSET lease id -> lease deadline
          b<l>     STRING layer l of the Lua Bloom filter's bitmaps (URL-seen, bloom_backend lua)
          bf       RedisBloom scalable filter (URL-seen, bloom_backend redisbloom)
          s        HASH counters (queued, inflight, admitted, fetched, ...)
          rb:<host> STRING serialized robots.txt policy, with a TTL
          sp:<host> STRING the host's soft-404 probe (workers/soft404.py), with a TTL
        """
        return f"{self.ns}:{{{partition}}}:"

    def ready(self, partition: int) -> str:
        return self.prefix(partition) + "r"

    def stats(self, partition: int) -> str:
        return self.prefix(partition) + "s"

    def robots(self, partition: int, host: str) -> str:
        return self.prefix(partition) + "rb:" + host

    def soft404(self, partition: int, host: str) -> str:
        return self.prefix(partition) + "sp:" + host

    def host_queue(self, partition: int, host: str) -> str:
        return self.prefix(partition) + "q:" + host

    def bloom(self, partition: int) -> str:
        return self.prefix(partition) + "b"

    def ip_prefix(self, ip_partition: int) -> str:
        """Per-IP keys: ``ipl:<ip>`` ZSET token -> deadline (in flight), ``ipn`` HASH ip -> next."""
        return f"{self.ns}:{{i{ip_partition}}}:"

    def domain_prefix(self, domain_partition: int) -> str:
        """Per-registered-domain budget keys: ``dc`` HASH domain -> URLs admitted,
        ``in:<domain>`` HyperLogLog of the other registered domains linking to it."""
        return f"{self.ns}:{{d{domain_partition}}}:"

    # Crawl-wide keys (one slot each; read rarely).
    @property
    def config(self) -> str:
        return f"{self.ns}:config"

    @property
    def started(self) -> str:
        """Crawl start time (time.time()), for rates in ``trawl status``."""
        return f"{self.ns}:started"

    @property
    def admitted_total(self) -> str:
        return f"{self.ns}:admitted"

    @property
    def events(self) -> str:
        return f"{self.ns}:events"

    @property
    def task_queue(self) -> str:
        """Celery queue carrying this crawl's fetch tasks."""
        return f"{self.ns}.fetch"

    @property
    def engines(self) -> str:
        """Hash worker id -> JSON figures of its fetch engine (workers/engine.py)."""
        return f"{self.ns}:engines"
