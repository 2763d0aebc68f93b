"""A crawl member: owns partitions (leases with fencing tokens) and schedules them.

Every ``trawl worker`` (and ``trawl scheduler``) process runs one Member: a heartbeat thread
keeps it in the crawl's member set and claims exactly the partitions that balanced rendezvous
hashing assigns to it among the live members, and a scheduler thread dispatches the due hosts
of those partitions. A member that stops cleanly releases its partitions at once; one that dies
loses them when their TTL runs out (``partition_ttl_s``), and the new owner's reaper re-queues
its expired URL leases. Writes of an owner carry its fencing token, so a paused ex-owner is
rejected by Redis instead of corrupting the new owner's state.

Cut off from Redis, a member does not wait for Redis to tell it: its claims are known to hold
until ``partition_ttl_s`` after the last heartbeat that *started* before they were renewed, so
it stops scheduling a margin before that (``OWNERSHIP_MARGIN``) and retries the heartbeat every
second. When Redis answers again it is a new member for everyone else (its member entry has
expired) and rejoins like one: the others hand back its share at their next heartbeat. An
acquire that Redis fences (the partition has a newer owner) drops that partition at once and
is counted as ``fenced`` in the partition's counters (``Frontier.stats()``).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping

import kombu.exceptions
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.keys import Keys, member_task_queue
from frontier.ownership import assign
from workers.app.celery_app import visibility_timeout_s
from workers.cluster.scheduler import Scheduler
from workers.runtime.figures import process_worker_id

log = logging.getLogger(__name__)

# The timing of membership follows from partition_ttl_s (the setting); the constants below
# are safety margins and retry pacing of this module's loops, not crawl behaviour.

#: Stop acting as owner this fraction of ``partition_ttl_s`` before the claims can expire.
#: Not a setting: smaller risks two owners at once (clock rates, a late heartbeat).
OWNERSHIP_MARGIN = 0.1
#: Heartbeat retry interval while Redis does not answer (seconds). Not a setting: ownership
#: is decided by partition_ttl_s; this only paces the retries.
RETRY_S = 1.0
#: A heartbeat runs this long after another member's entry expires (its claims were renewed a
#: few ms after it), so a dead member's partitions move one TTL after its last heartbeat, not
#: up to one heartbeat interval later. Not a setting: it covers a few ms of script latency.
EXPIRY_SLACK_S = 0.25
#: While some of its partitions are still held by others (a handover or expiry under way), a
#: member retries its claims this often instead of once per heartbeat interval. Not a
#: setting: a claim of a partition still held costs one script and changes nothing.
CLAIM_RETRY_S = 1.0
#: While failing, repeat the warning at most this often (seconds). Logging only.
LOG_EVERY_S = 10.0
#: A scheduler thread that failed (Redis or the broker away, a bug) waits this long before
#: it tries again. Not a setting: the heartbeat decides ownership meanwhile.
SCHEDULER_RETRY_S = 1.0
#: How often the replanning thread looks for an owned partition due for its replan.
REPLAN_POLL_S = 1.0


class Member:
    def __init__(self, client: redis.Redis, config: CrawlConfig, app: Celery,
                 name: str | None = None, fetches_here: bool = False) -> None:
        self.client = client
        self.config = config
        # Unique per process even with a fixed name: a worker restarted under the same name
        # (a container keeps its hostname) must not renew the dead process's claims as its
        # own, or that process's undispatched leases wait out lease_ttl_s (lua/claim.lua).
        incarnation = uuid.uuid4().hex[:6]
        self.id = (f"{name}-{incarnation}" if name
                   else f"{process_worker_id()}-{incarnation}")
        #: fetch_affinity, in a member that runs in a worker (``fetches_here``): the queue its
        #: scheduler sends to, which only this process's worker consumes. None: the shared one.
        self.direct_queue = (member_task_queue(config.namespace, self.id)
                             if fetches_here and config.fetch_affinity else None)
        # Its tasks all go to this process's engine: the backlog gate counts that one alone.
        self.scheduler = Scheduler(client, config, app, queue=self.direct_queue,
                                   engine=process_worker_id() if self.direct_queue else None)
        self.frontier = self.scheduler.frontier
        self.members_key = Keys(config.namespace).members
        self.gone_key = Keys(config.namespace).gone_members
        #: a sweep of dead members' queues is under way (one at a time: _sweep_gone)
        self._sweeping = threading.Lock()
        self._owned: dict[int, str] = {}
        self._valid_until = 0.0  # time.monotonic() until which every claim in _owned holds
        self._lock = threading.Lock()
        self._fenced_unreported: Counter[int] = Counter()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.takeovers = 0
        #: time.time() when the earliest other member's entry expires (None: no other member),
        #: and whether the last heartbeat got every partition assigned to us.
        self._others_expire: float | None = None
        self._claimed_all = True
        #: Times ownership was dropped because no heartbeat succeeded within the TTL.
        self.lapses = 0
        #: Times the heartbeat succeeded again after failing.
        self.rejoins = 0
        #: Partitions whose acquire Redis rejected with the fencing token (newer owner).
        self.fenced = 0

    @property
    def task_queues(self) -> list[str]:
        """The queues this member's worker consumes: the shared one, and its own."""
        shared = self.frontier.keys.task_queue
        return [shared, self.direct_queue] if self.direct_queue else [shared]

    @property
    def owned(self) -> Mapping[int, str]:
        return self._owned

    def live_members(self, now: float) -> list[str]:
        live = self.client.zrangebyscore(self.members_key, now, "+inf", withscores=True)
        others = [score for m, score in live if m.decode() != self.id]
        self._others_expire = min(others) if others else None
        return [m.decode() for m, _ in live]

    def next_heartbeat_in(self, interval: float) -> float:
        """Seconds to the next heartbeat: the interval, or sooner when another member's entry
        is about to expire (it stopped renewing) or partitions we should own are still held."""
        wait = interval if self._claimed_all else min(interval, CLAIM_RETRY_S)
        if self._others_expire is not None:
            wait = min(wait, max(0.05, self._others_expire - time.time() + EXPIRY_SLACK_S))
        return wait

    def heartbeat(self) -> None:
        """Announce ourselves, drop what is no longer ours, claim what is."""
        started = time.monotonic()
        now = time.time()
        ttl = self.config.partition_ttl_s
        with self._lock:
            fenced = Counter(self._fenced_unreported)
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.members_key, {self.id: now + ttl})
        pipe.zrangebyscore(self.members_key, "-inf", now)
        pipe.zremrangebyscore(self.members_key, "-inf", now)
        pipe.zremrangebyscore(self.gone_key, "-inf", now)
        pipe.zrange(self.gone_key, 0, -1)
        for p, n in fenced.items():
            pipe.hincrby(self.frontier.keys.stats(p), "fenced", n)
        replies = pipe.execute()
        expired = [m.decode() for m in replies[1]]
        gone = [m.decode() for m in replies[4]]
        with self._lock:
            self._fenced_unreported.subtract(fenced)
            self._fenced_unreported = +self._fenced_unreported  # drop the zeros
        live = self.live_members(now)
        target = set(assign(live, self.frontier.partitions).get(self.id, []))
        owned = dict(self._owned)
        lost = {p: v for p, v in owned.items() if p not in target}
        if lost:
            # Stop scheduling them before handing them over, or the scheduler thread could
            # still acquire with a token that was just released (and be fenced for it).
            with self._lock:
                self._owned = {p: v for p, v in self._owned.items() if p not in lost}
            self.frontier.release_partitions(lost)
        tokens = self.frontier.claim_partitions(self.id, sorted(target), ttl)
        self._claimed_all = len(tokens) == len(target)
        new = {p: f"{self.id}|{t}" for p, t in tokens.items()}
        with self._lock:
            self.takeovers += len(set(new) - set(owned))
            # One assignment: the scheduler thread reads a consistent map. Every claim in it
            # was renewed after `started`, so Redis keeps it at least until started + ttl.
            self._owned = new
            self._valid_until = started + ttl * (1.0 - OWNERSHIP_MARGIN)
        dead = sorted(set(expired + gone) - set(live))
        if dead and self.config.fetch_affinity and self._sweeping.acquire(blocking=False):
            # off the heartbeat thread: a broker that is slow to answer must not delay the
            # renewal of our claims
            threading.Thread(target=self._sweep_gone, args=(expired, dead), daemon=True,
                             name="trawl-take-queues").start()

    def wait_for_sweep(self) -> None:
        """Return once no sweep of dead members' queues (started by a heartbeat, on a
        thread of its own) is running."""
        with self._sweeping:
            pass

    def _sweep_gone(self, expired: list[str], dead: list[str]) -> int:
        """Note the members just found dead, then empty the queues of all dead ones. A dead
        worker's unacked (prefetched) tasks come back to its queue only after the broker's
        visibility timeout: its queue is swept at every heartbeat until then."""
        try:
            if expired:
                keep_until = (time.time() + visibility_timeout_s(self.config.lease_ttl_s)
                              + self.config.partition_ttl_s)
                self.client.zadd(self.gone_key, dict.fromkeys(expired, keep_until))
            return self._take_queues_of(dead)
        except redis.RedisError as exc:
            self._log_failure(exc, "could not note the members found dead")
            return 0
        finally:
            self._sweeping.release()

    def _take_queues_of(self, members: list[str]) -> int:
        return sum(self._take_queue_of(m) for m in members)

    def _take_queue_of(self, member: str) -> int:
        """A member whose entry expired (killed, or cut off) leaves the tasks in its own queue,
        which no worker consumes any more: move them to the shared queue. Most find their
        leases gone (its partitions' next owners re-queue the leases it had not seen begun:
        lua/claim.lua, lua/reap.lua) and are skipped; one still current is fetched now. The
        member that removed the entry does it (a second mover finds the queue empty)."""
        moved = self._move_to_shared(member_task_queue(self.config.namespace, member),
                                     f"the tasks left by member {member}")
        if moved:
            log.warning("member %s: moved %d tasks left by member %s (gone) to the shared "
                        "queue", self.id, moved, member)
        return moved

    def _drop_if_lapsed(self) -> dict[int, str]:
        """Forget every claim once it may have expired in Redis; returns what is still held.
        Call with ``self._lock`` held."""
        owned = self._owned
        if owned and time.monotonic() >= self._valid_until:
            log.warning("member %s: no heartbeat reached Redis within the partition TTL "
                        "(%.0f s): stopped scheduling its %d partitions until it rejoins",
                        self.id, self.config.partition_ttl_s, len(owned))
            self.lapses += 1
            owned = self._owned = {}
        return owned

    def owners(self) -> Mapping[int, str]:
        """The partitions the scheduler may act on now (read before every scheduler step)."""
        with self._lock:
            owned = self._drop_if_lapsed()
            # Every rejected acquire counts, also of a partition the heartbeat thread has
            # meanwhile dropped (its claim failed): Redis refused a stale write either way.
            fenced = self.frontier.fenced
            if fenced:
                log.warning("member %s: acquire fenced in partitions %s (a newer owner holds "
                            "them): dropped", self.id, sorted(fenced))
                self.fenced += len(fenced)
                self._fenced_unreported.update(fenced)
                owned = self._owned = {p: v for p, v in owned.items() if p not in fenced}
            self.frontier.fenced = set()
            return owned

    def _heartbeat_loop(self) -> None:
        interval = self.config.partition_ttl_s / 3
        failing_since: float | None = None
        logged = 0.0
        while not self._stop.is_set():
            with self._lock:
                self._drop_if_lapsed()
            wait = interval
            try:
                self.heartbeat()
                wait = self.next_heartbeat_in(interval)
                if failing_since is not None:
                    self.rejoins += 1
                    log.warning("member %s: Redis answers again after %.1f s; rejoined, holding "
                                "%d partitions (more come back as the others hand them over)",
                                self.id, time.monotonic() - failing_since, len(self._owned))
                    failing_since = None
            except Exception as exc:  # Redis away (or a bug): keep trying; the TTL decides
                t = time.monotonic()
                if failing_since is None:
                    failing_since = logged = t
                    self._log_failure(exc, "heartbeat failed")
                elif t - logged >= LOG_EVERY_S:
                    logged = t
                    self._log_failure(exc, f"heartbeat still failing after "
                                           f"{t - failing_since:.0f} s")
                wait = min(RETRY_S, interval)
            with self._lock:  # wake up when the claims lapse, even if the scheduler is stuck
                if self._drop_if_lapsed():
                    wait = min(wait, max(0.0, self._valid_until - time.monotonic()))
            self._stop.wait(wait)

    def _log_failure(self, exc: Exception, what: str) -> None:
        if isinstance(exc, redis.RedisError | OSError):
            log.warning("member %s: %s: %s: %s", self.id, what, type(exc).__name__, exc)
        else:  # never let the member's heartbeat die with the process alive
            log.exception("member %s: %s", self.id, what)

    def _schedule_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scheduler.run(self._stop.is_set, owners=self.owners)
            except (redis.RedisError, kombu.exceptions.KombuError, OSError) as exc:
                # Redis or the broker away: wait and go on; the heartbeat decides ownership.
                log.warning("scheduler: %s: %s", type(exc).__name__, exc)
                self._stop.wait(SCHEDULER_RETRY_S)
            except Exception:  # a bug must not silently stop this member's partitions
                log.exception("scheduler step failed; retrying")
                self._stop.wait(SCHEDULER_RETRY_S)

    def _replan_loop(self) -> None:
        """Continuous crawling: replan the owned partitions, apart from the scheduler's
        thread (workers/cluster/revisits.py ``replan_due``)."""
        revisits = self.scheduler.revisits
        assert revisits is not None
        while not self._stop.is_set():
            with self._lock:  # not owners(): the scheduler's thread takes the fenced reports
                held = list(self._drop_if_lapsed())
            try:
                revisits.replan_due(time.time(), held, self._stop)
            except Exception:  # a bug: the next round retries
                log.exception("revisit replanning failed; retrying")
            self._stop.wait(REPLAN_POLL_S)

    def start(self, schedule: bool = True) -> Member:
        try:
            self.heartbeat()
        except redis.RedisError as exc:  # Redis away at start: the heartbeat loop retries
            self._log_failure(exc, "first heartbeat failed")
        loops = [self._heartbeat_loop] + ([self._schedule_loop] if schedule else [])
        if schedule and self.scheduler.revisits is not None:
            loops.append(self._replan_loop)
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
        with self._lock:
            owned, self._owned = self._owned, {}
            self._valid_until = 0.0
        self.hand_back_tasks()
        try:
            released = self.frontier.release_partitions(owned)
            self.client.zrem(self.members_key, self.id)
            # Warning: shown at the default log level, a member leaving is a cluster event.
            log.warning("member %s left: released %d of its %d partitions", self.id, released,
                        len(owned))
        except redis.RedisError as exc:
            log.warning("could not release partitions cleanly (they expire): %s", exc)

    def hand_back_tasks(self) -> int:
        """Move the tasks left in this member's own queue to the shared one, at its consuming
        end, oldest first: their leases are current, so another worker fetches them now
        instead of after ``lease_ttl_s``. Called once this worker consumes no more (Celery
        sends ``worker_shutdown`` after its consumer stopped and gave back what it held).
        A member killed without a stop leaves them to the others (``_take_queue_of``)."""
        if self.direct_queue is None:
            return 0
        moved = self._move_to_shared(self.direct_queue, "the tasks left in its queue")
        if moved:
            log.warning("member %s: handed %d queued tasks to the shared queue", self.id, moved)
        return moved

    def _move_to_shared(self, queue: str, what: str) -> int:
        """Move ``queue``'s messages to the shared queue's consuming end, oldest first (as many
        as it held at the start: no one feeds it any more). Returns how many moved; a broker
        error is logged and ends the move (the rest wait for their leases to expire)."""
        shared = self.frontier.keys.task_queue
        moved = 0
        try:
            with (self.scheduler.app.connection_for_write() as conn,
                  conn.default_channel.conn_or_acquire() as broker):
                for _ in range(broker.llen(queue)):
                    if broker.lmove(queue, shared, "LEFT", "RIGHT") is None:
                        break
                    moved += 1
        except (redis.RedisError, kombu.exceptions.KombuError, OSError) as exc:
            log.warning("member %s: could not hand %s to the shared queue (%d moved; the "
                        "others' leases expire after lease_ttl_s): %s", self.id, what, moved,
                        exc)
        return moved
