"""Every Redis key of a crawl, and the functions that map a host to its partition.

All keys of partition p carry the hash tag ``{p}``, so each Lua script touches one slot and the
same code runs on one Redis and on Redis Cluster. Per-IP politeness keys are partitioned the
same way, by a hash of the IP, with the tag ``{i<n>}``; per-domain budget keys by a hash of
the registered domain, with the tag ``{d<n>}``. Crawl-wide keys have no tag (one slot each).

The Lua scripts build a partition's per-host keys (``q:<host>``, ...) from its prefix, as a
script cannot be told every host's key in advance; :meth:`Keys.prefix` lists every suffix.
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


def host_name(host: str) -> str:
    """The name part of a politeness key ``name[:port]`` (an IPv6 literal ``[..]`` is kept
    whole, with its brackets)."""
    if host.endswith("]") or ":" not in host:
        return host
    return host.rsplit(":", 1)[0]


def task_queue(namespace: str) -> str:
    """The Celery queue carrying crawl ``namespace``'s fetch tasks (the broker's keys for it
    start with this name)."""
    return f"{namespace}.fetch"


def member_task_queue(namespace: str, member_id: str) -> str:
    """The Celery queue of one member's own fetch tasks (``fetch_affinity``): only that
    member's worker consumes it. Its name starts with :func:`task_queue`'s, so whatever
    clears a crawl's queues clears it too."""
    return f"{task_queue(namespace)}.{member_id}"


class Keys:
    """Key names of one crawl (``namespace``)."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace

    def prefix(self, partition: int) -> str:
        """Prefix of partition ``partition``'s keys; Lua scripts append the suffixes below.

        Suffixes (all under one slot), with the scripts that write them:
          r        ZSET host -> next allowed fetch time, hosts with queued URLs and no lease
                   (admit, acquire, complete, reap)
          pr       ZSET host -> best queued score, due hosts (priority orderings only)
          q:<host> LIST of queue entries of the host (FIFO, bfs), or for the priority
                   orderings a ZSET url -> -priority (admit, acquire, complete, reap)
          qe       HASH url -> entry head "depth[.attempts.hops]" (priority orderings only)
          hn       HASH host -> next allowed fetch time (kept when the host's queue is empty)
          hb       HASH host -> lease id, while a URL of the host is leased
          hc       HASH host -> URLs admitted (only with max_pages_per_host)
          qv       HASH host+path -> distinct queries admitted (query-explosion defence)
          L        HASH lease id -> "<host>\\t<entry>\\t<score>"
          D        ZSET lease id -> lease deadline (acquire, begin, complete, reap)
          b<l>     STRING layer l of the Lua Bloom filter's bitmaps (URL-seen, bloom_backend lua)
          bf       RedisBloom scalable filter (URL-seen, bloom_backend redisbloom)
          s        HASH counters (queued, inflight, admitted, fetched, ...) and bookkeeping
                   (seq: last lease id; bloom_layer, bloom_fill: the Lua filter's state)
          own      STRING "member|token": the partition's owner (claim, release_partition;
                   read by acquire and reap, which refuse a caller that is not the owner)
          epoch    STRING last fencing token handed out (claim)
          rb:<host> STRING serialized robots.txt policy, with a TTL
          sp:<host> STRING the host's soft-404 probe (workers/pipeline/soft404.py), with a TTL
          lm:<host> HASH url -> its sitemap lastmod (workers/pipeline/sitemaps.py), with a TTL
          bfprobe:<uuid> a process's short-lived probe for RedisBloom (frontier/redisbloom.py)
          rv       ZSET "depth url" (or "host\tdepth url" when the host queue is not the
                   URL's own host: frontier/revisits.py) -> next visit time: the schedule of
                   continuous crawling (complete adds, promote_revisits moves due ones
                   into host queues; frontier/revisits.py)
          rvb      HASH the revisit token bucket: tokens, at (promote_revisits)
          rvp      STRING the owner's revisit plan for the partition's workers (JSON)
          fh:<n>   HASH 4 bytes of the URL hash -> 52-byte visit history (freshness/store.py)
          fv:<n>   HASH 4 bytes of the URL hash -> validators and text sketch of the last visit
                   (workers/pipeline/revisit_state.py); fvx the same for long ETags
        """
        return f"{self.ns}:{{{partition}}}:"

    def ready(self, partition: int) -> str:
        return self.prefix(partition) + "r"

    def due_heap(self, partition: int) -> str:
        return self.prefix(partition) + "pr"

    def busy_hosts(self, partition: int) -> str:
        """HASH host -> lease id of the hosts leased now (``hb``)."""
        return self.prefix(partition) + "hb"

    def stats(self, partition: int) -> str:
        return self.prefix(partition) + "s"

    def owner(self, partition: int) -> str:
        return self.prefix(partition) + "own"

    def epoch(self, partition: int) -> str:
        return self.prefix(partition) + "epoch"

    def robots(self, partition: int, host: str) -> str:
        return self.prefix(partition) + "rb:" + host

    def soft404(self, partition: int, host: str) -> str:
        return self.prefix(partition) + "sp:" + host

    def sitemap_lastmod(self, partition: int, host: str) -> str:
        return self.prefix(partition) + "lm:" + host

    def revisits(self, partition: int) -> str:
        """ZSET of the partition's revisit schedule (``rv``)."""
        return self.prefix(partition) + "rv"

    def revisit_plan(self, partition: int) -> str:
        return self.prefix(partition) + "rvp"

    def bloom(self, partition: int) -> str:
        """Prefix of the Lua Bloom filter's layer bitmaps (append the layer number)."""
        return self.prefix(partition) + "b"

    def ip_prefix(self, ip_partition: int) -> str:
        """Per-IP keys: ``ipl:<ip>`` ZSET token -> deadline (in flight), ``ipn`` HASH ip -> next
        allowed time (lua/ip_acquire.lua, ip_release.lua)."""
        return f"{self.ns}:{{i{ip_partition}}}:"

    def ip_next(self, ip_partition: int) -> str:
        return self.ip_prefix(ip_partition) + "ipn"

    def domain_prefix(self, domain_partition: int) -> str:
        """Per-registered-domain budget keys: ``dc`` HASH domain -> URLs admitted,
        ``in:<domain>`` HyperLogLog of the other registered domains linking to it."""
        return f"{self.ns}:{{d{domain_partition}}}:"

    def domain_spent(self, domain_partition: int) -> str:
        return self.domain_prefix(domain_partition) + "dc"

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
    def due(self) -> str:
        """ZSET partition -> time from which it may have a due host (the scheduler's due
        hints: Frontier.queue_due_hints, lua/take_due.lua)."""
        return f"{self.ns}:due"

    @property
    def members(self) -> str:
        """ZSET member id -> liveness deadline of the crawl's workers
        (workers/cluster/member.py)."""
        return f"{self.ns}:members"

    @property
    def gone_members(self) -> str:
        """ZSET member id -> time until which the queue of a member found dead is swept
        (``fetch_affinity``: workers/cluster/member.py)."""
        return f"{self.ns}:gone_members"

    @property
    def task_queue(self) -> str:
        """Celery queue carrying this crawl's fetch tasks."""
        return task_queue(self.ns)

    @property
    def dropped(self) -> str:
        """SET of domains an operator dropped from the crawl (``trawl drop``,
        frontier/dropped.py)."""
        return f"{self.ns}:dropped"

    def drop_sweep(self, domain: str) -> str:
        """STRING: the worker sweeping the queues of newly dropped ``domain`` (a claim with a
        TTL, frontier/dropped.py)."""
        return f"{self.ns}:dropsweep:{domain}"

    @property
    def engines(self) -> str:
        """Hash worker id -> JSON figures of its fetch engine (workers/runtime/engine.py)."""
        return f"{self.ns}:engines"
