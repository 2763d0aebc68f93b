"""The partition owner's part of continuous crawling: promote due revisits into host queues
(frontier/revisits.py, within the budget's token buckets), from the scheduler's step; and
replan each owned partition every ``revisit_replan_s``, from a thread of the member's own.

Replanning a partition: read the histories of the URLs in its schedule, estimate each one's
change rate (``RevisitPlanner.rate_of``), ``replan`` with the partition's share of the
budget, store the plan for the workers (``rvp``, workers/runtime/revisit_plans.py), and move
each scheduled URL's due time to its last visit + its new interval (``ZADD XX``: a URL that
meanwhile left the schedule for its host queue is not put back, so the one-place invariant
holds). URLs in queues or leases at that moment are left out of the rates: a sample.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from freshness.batch import rates_of
from freshness.estimators import fitted_prior
from freshness.policies import PlanError
from freshness.revisit import RevisitPlanner
from frontier.frontier import Frontier
from frontier.revisits import member_entry
from workers.pipeline.revisit_state import VisitStore
from workers.runtime import metrics
from workers.runtime.revisit_plans import plan_json, planner_from, planner_settings

log = logging.getLogger(__name__)

#: How often the step promotes due revisits. Not a setting: the token bucket, not this, is
#: the budget; this only bounds the round trips of an idle scheduler.
PROMOTE_EVERY_S = 0.1
#: Most scheduled URLs one replan reads per partition (a sample beyond it).
REPLAN_MAX_URLS = 200_000
#: Scheduled URLs one ZADD of a replan moves.
ZADD_CHUNK = 1000
#: How often the partitions' shares of the budget are re-read (their schedules' sizes). Not
#: a setting: shares follow the schedules' slow growth; the sum is the budget at any time.
SHARES_EVERY_S = 5.0


class RevisitOwner:
    """Promotion and replanning for the partitions a scheduler owns."""

    def __init__(self, frontier: Frontier) -> None:
        self.frontier = frontier
        self.config = frontier.config
        self.store = VisitStore(frontier.r, frontier.config)
        self.settings = planner_settings(frontier.config)
        self._promoted_at = 0.0
        self._shares: dict[int, float] = {}
        self._shares_at = -SHARES_EVERY_S
        self._replanned: dict[int, float] = {}
        self.promoted = 0

    def step(self, now: float, owners: Mapping[int, str]) -> dict[int, float]:
        """Promote due revisits of the owned partitions; returns partition -> the time a host
        it woke is due (the scheduler acquires those partitions then)."""
        if now - self._promoted_at < PROMOTE_EVERY_S or not owners:
            return {}
        self._promoted_at = now
        if now - self._shares_at >= SHARES_EVERY_S:
            self._shares, self._shares_at = self.frontier.revisits.shares(), now
        woke: dict[int, float] = {}
        for p, reply in self.frontier.revisits.promote(owners, self._shares, now).items():
            self.promoted += reply.promoted
            if reply.promoted:
                woke[p] = reply.woke if reply.woke is not None else now
        return woke

    def replan_due(self, now: float, partitions: Iterable[int],
                   stop: threading.Event | None = None) -> int:
        """Replan each of ``partitions`` not replanned for ``revisit_replan_s``, one after
        another (until ``stop`` is set); returns how many were replanned. A member runs this
        on a thread of its own (workers/cluster/member.py): a partition of 200,000 scheduled
        URLs takes seconds, which the scheduler's leasing must not wait for."""
        done = 0
        for p in partitions:
            if stop is not None and stop.is_set():
                break
            if now - self._replanned.get(p, -math.inf) < self.config.revisit_replan_s:
                continue
            self._replanned[p] = now
            started = time.monotonic()
            try:
                self.replan(p)
                done += 1
            except Exception as exc:  # a plan must never stop the member
                log.warning("revisit replan of partition %d failed: %s", p, exc)
                continue
            counted = metrics.active()
            if counted is not None:
                counted.replan_seconds.observe(time.monotonic() - started)
        return done

    def replan(self, partition: int) -> int:
        """Replan one partition (see the module docstring); returns URLs rescheduled."""
        r, keys = self.frontier.r, self.frontier.keys
        members = [m.decode() if isinstance(m, bytes) else m
                   for m in r.zrange(keys.revisits(partition), 0, REPLAN_MAX_URLS - 1)]
        if not members:
            return 0
        urls = [member_entry(m).url for m in members]
        histories = self.store.history_store(partition).get_many(urls)
        share = self._shares.get(partition) or (
            self.config.revisit_budget_pages_s / self.config.partitions)
        planner = planner_from(replace(self.settings, budget_per_s=share), None)
        known = [(m, h) for m, h in zip(members, histories, strict=True) if h is not None]
        if not known:
            return 0
        kept = [h for _, h in known]
        # empirical Bayes (freshness/estimators.py fitted_prior): a prior fitted to the
        # partition's own rates, stored with the plan for the workers; the settings' weak
        # prior while no page has changed yet
        bare = RevisitPlanner(replace(planner.settings, prior=None))
        planner.use_prior(fitted_prior(rates_of(bare, kept),
                                       [h.unchanged_s + h.changed_s for h in kept]))
        rates = rates_of(planner, kept)
        try:
            planner.replan(rates)
        except PlanError as exc:
            log.warning("partition %d: no revisit plan: %s", partition, exc)
            return 0
        due = np.array([h.last_visit_s for h in kept], dtype=float) + \
            planner.intervals_of(kept, rates)
        pipe = r.pipeline(transaction=False)
        pipe.set(keys.revisit_plan(partition), plan_json(planner))
        for at in range(0, len(known), ZADD_CHUNK):
            chunk = known[at:at + ZADD_CHUNK]
            pipe.zadd(keys.revisits(partition),
                      {m: float(d) for (m, _), d in zip(chunk, due[at:at + ZADD_CHUNK],
                                                        strict=True)}, xx=True)
        pipe.execute()
        return len(known)
