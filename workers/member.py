"""A crawl member: owns partitions (leases with fencing tokens) and schedules them.

Every ``trawl worker`` (and ``trawl scheduler``) process runs one Member: a heartbeat thread
keeps it in the crawl's member set and claims exactly the partitions that balanced rendezvous
hashing assigns to it among the live members, and a scheduler thread dispatches the due hosts
of those partitions. A member that stops cleanly releases its partitions at once; one that dies
loses them when their TTL runs out (``partition_ttl_s``), and the new owner's reaper re-queues
its expired URL leases. Writes of an owner carry its fencing token, so a paused ex-owner is
rejected by Redis instead of corrupting the new owner's state.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping

import kombu.exceptions
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.ownership import assign
from workers.scheduler import Scheduler

log = logging.getLogger(__name__)


class Member:
    def __init__(self, client: redis.Redis, config: CrawlConfig, app: Celery,
                 name: str | None = None) -> None:
        self.client = client
        self.config = config
        self.id = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.scheduler = Scheduler(client, config, app)
        self.frontier = self.scheduler.frontier
        self.members_key = f"{config.namespace}:members"
        self._owned: dict[int, str] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.takeovers = 0

    @property
    def owned(self) -> Mapping[int, str]:
        return self._owned

    def live_members(self, now: float) -> list[str]:
        return [m.decode() for m in self.client.zrangebyscore(self.members_key, now, "+inf")]

    def heartbeat(self) -> None:
        """Announce ourselves, drop what is no longer ours, claim what is."""
        now = time.time()
        ttl = self.config.partition_ttl_s
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.members_key, {self.id: now + ttl})
        pipe.zremrangebyscore(self.members_key, "-inf", now)
        pipe.execute()
        target = set(assign(self.live_members(now), self.frontier.partitions).get(self.id, []))
        owned = dict(self._owned)
        lost = {p: v for p, v in owned.items() if p not in target or p in self.frontier.fenced}
        if lost:
            self.frontier.release_partitions(lost)
        tokens = self.frontier.claim_partitions(self.id, sorted(target), ttl)
        new = {p: f"{self.id}|{t}" for p, t in tokens.items()}
        self.takeovers += len(set(new) - set(owned))
        self._owned = new  # one assignment: the scheduler thread reads a consistent map

    def _heartbeat_loop(self) -> None:
        interval = self.config.partition_ttl_s / 3
        while not self._stop.is_set():
            try:
                self.heartbeat()
            except redis.RedisError as exc:  # Redis away: keep trying; the TTL decides
                log.warning("heartbeat failed: %s", exc)
                self._owned = {}
            except Exception:  # never let the member's heartbeat die with the process alive
                log.exception("heartbeat failed")
                self._owned = {}
            self._stop.wait(interval)

    def _schedule_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scheduler.run(self._stop.is_set, owners=lambda: self._owned)
            except (redis.RedisError, kombu.exceptions.KombuError, OSError) as exc:
                # Redis or the broker away: wait and go on; the heartbeat decides ownership.
                log.warning("scheduler: %s", exc)
                self._stop.wait(1.0)
            except Exception:  # a bug must not silently stop this member's partitions
                log.exception("scheduler step failed; retrying")
                self._stop.wait(1.0)

    def start(self, schedule: bool = True) -> Member:
        self.heartbeat()
        loops = [self._heartbeat_loop] + ([self._schedule_loop] if schedule else [])
        for target in loops:
            t = threading.Thread(target=target, name=f"trawl-{target.__name__}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        """Clean leave: stop scheduling, hand the partitions back, leave the member set."""
        self._stop.set()
        for t in self._threads:
            t.join(10)
        owned, self._owned = self._owned, {}
        try:
            self.frontier.release_partitions(owned)
            self.client.zrem(self.members_key, self.id)
        except redis.RedisError as exc:
            log.warning("could not release partitions cleanly (they expire): %s", exc)
