"""The completer's half of continuous crawling: each tracked URL's new visit history, its
next visit time, and the counters, for the completion round trip.

For each finished lease of a batch (before its records are written and its completion
queued, workers/runtime/completion.py):
  * a visit (workers/pipeline/revisit.py ``Visit``): the history observes it
    (freshness/history.py), the partition's plan gives the next interval
    (workers/runtime/revisit_plans.py), the completion carries the next visit time, which
    lua/complete.lua puts in the schedule as it ends the lease; the history and the state
    are written in the same pipeline;
  * a revisit that failed: back in the schedule at the longest interval;
  * a revisit that found the page gone, redirected or now disallowed: dropped.
A revisit's lease always ends as ``revisits`` (frontier.counters.Outcome.REVISITED).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from freshness.history import VisitHistory
from freshness.revisit import RevisitPolicy
from frontier.counters import Outcome
from workers.pipeline.lease import LeaseResult
from workers.pipeline.revisit import Basis, Visit
from workers.pipeline.revisit_state import VisitState

log = logging.getLogger(__name__)

_UNCHANGED_BY = {Basis.NOT_MODIFIED: "revisit_not_modified", Basis.SIMILAR: "revisit_similar"}


@dataclass
class VisitWrites:
    """The histories and states to write in the completion pipeline."""

    rows: list[tuple[int, str, VisitHistory, VisitState]] = field(default_factory=list)

    def queue(self, ctx: Any, pipe: Any) -> None:
        for partition, url, history, state in self.rows:
            ctx.visits.queue_write(pipe, partition, url, history, state)


def plan_visits(ctx: Any, results: list[tuple[LeaseResult, str | None]],
                now: float | None = None) -> VisitWrites:
    """Set each tracked URL's next visit on its completion; the writes to queue."""
    now = time.time() if now is None else now
    cfg = ctx.config
    writes = VisitWrites()
    for res, _ip in results:
        c = res.completion
        entry = c.lease.entry
        visit: Visit | None = res.visit
        if visit is not None:
            history = _observed(visit)
            planner = ctx.plans.planner(c.lease.partition)
            adaptive = planner.settings.policy is RevisitPolicy.ADAPTIVE
            # the adaptive rule reads the interval the history carries (observe keeps it)
            interval = planner.interval_s(history,
                                          changed=visit.decision.changed if adaptive else None)
            history = replace(history, interval_s=interval)
            res.completion = replace(c, revisit_at=now + interval)
            writes.rows.append((c.lease.partition, entry.url, history, visit.state))
            if res.record is not None:
                res.record["next_visit_s"] = round(interval, 1)
            if visit.revisit:
                _count(res, visit)
        elif entry.revisit and (c.outcome.final or c.outcome is Outcome.REVISITED):
            failed = c.outcome is Outcome.FAILED
            res.completion = replace(c, outcome=Outcome.REVISITED,
                                     revisit_at=now + cfg.revisit_max_interval_s
                                     if failed else None)
            res.counters["revisit_failed" if failed else "revisit_dropped"] += 1
            if res.record is not None:
                res.record["revisit"] = True
    return writes


def _observed(visit: Visit) -> VisitHistory:
    prior = visit.prior.history if visit.prior is not None else None
    base = prior or VisitHistory()
    # A clock behind the last visit (another worker's): the visit counts at the last time.
    at = max(visit.fetched_s, base.last_visit_s)
    return base.observe(at, visit.decision.changed, visit.last_modified_s, visit.digest)


def _count(res: LeaseResult, visit: Visit) -> None:
    d = visit.decision
    if d.changed:
        res.counters["revisit_changed"] += 1
        return
    res.counters["revisit_unchanged"] += 1
    extra = _UNCHANGED_BY.get(d.basis)
    if extra:
        res.counters[extra] += 1
