"""The revisit plan each partition owner makes and every worker uses.

The owner of a partition replans (workers/cluster/revisits.py): it estimates the change rate
of each URL in the partition's schedule and gives them to ``RevisitPlanner.replan`` with the
partition's share of the revisit budget. What the plan keeps is one number per policy (the
page count, Σwλ, Σ√(wλ) or μ: freshness/revisit.py), stored in the partition's ``rvp`` key,
so the worker that completes a URL's visit computes the URL's next interval from its own
history in O(1), with the owner's plan (:class:`PlanCache`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace

import redis

from freshness.adaptive import AdaptiveRule
from freshness.estimators import Prior
from freshness.revisit import RevisitPlanner, RevisitSettings
from frontier.config import CrawlConfig
from frontier.keys import Keys

log = logging.getLogger(__name__)

#: How long a worker uses a partition's plan before reading it again. Not a setting: the
#: owner replans every revisit_replan_s; reading at most this stale costs nothing measurable.
PLAN_READ_EVERY_S = 10.0


def planner_settings(cfg: CrawlConfig) -> RevisitSettings:
    """One partition's planner: its share of the budget, the crawl's bounds and policy, and a
    weak prior (one change per revisit_fixed_interval_s, as strong as one observed change):
    without one a page with no history yet has rate 0, which the estimator-driven policies
    never visit, so its rate would never be learned. Each replan then fits a prior to the
    partition's pages (``fitted_prior``, workers/cluster/revisits.py) and stores it with the
    plan. (A pooled prior per host or site section is not kept yet.)"""
    share = cfg.revisit_budget_pages_s / cfg.partitions
    return RevisitSettings(
        prior=Prior(1.0 / cfg.revisit_fixed_interval_s, 1.0),
        policy=cfg.revisit_policy, budget_per_s=share,
        fixed_interval_s=cfg.revisit_fixed_interval_s,
        min_interval_s=cfg.revisit_min_interval_s, max_interval_s=cfg.revisit_max_interval_s,
        adaptive=AdaptiveRule(0.4, 0.2, cfg.revisit_min_interval_s, cfg.revisit_max_interval_s),
        assumed_pages=max(1, cfg.revisit_expected_urls // cfg.partitions))


def plan_json(planner: RevisitPlanner) -> str:
    """The replanned normaliser, the partition's share of the budget and the prior the
    owner fitted (workers estimate with the same one), as stored in ``rvp``."""
    state = planner.plan_state()
    if state is None:
        return "{}"
    d: dict[str, object] = {"share": planner.settings.budget_per_s, "plan": state}
    prior = planner.prior
    if prior is not None:
        d["prior"] = [prior.rate, prior.strength]
    return json.dumps(d)


def planner_from(settings: RevisitSettings, raw: bytes | str | None) -> RevisitPlanner:
    """A planner holding the plan stored in ``rvp`` (none or unreadable: not replanned)."""
    planner = RevisitPlanner(settings)
    if raw:
        try:
            d = json.loads(raw)
            if d:
                # the partition's share when the owner planned (its schedule's share)
                planner = RevisitPlanner(replace(settings, budget_per_s=float(d["share"])))
                planner.restore(d["plan"])
                if "prior" in d:
                    rate, strength = (float(x) for x in d["prior"])
                    planner.use_prior(Prior(rate, strength))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("revisit plan unreadable, planning as before a replan: %s", exc)
    return planner


class PlanCache:
    """Each partition's planner as its owner last stored it, read at most every
    PLAN_READ_EVERY_S."""

    def __init__(self, client: redis.Redis, cfg: CrawlConfig) -> None:
        self.client, self.keys = client, Keys(cfg.namespace)
        self.settings = planner_settings(cfg)
        self._plans: dict[int, tuple[float, RevisitPlanner]] = {}

    def planner(self, partition: int) -> RevisitPlanner:
        now = time.monotonic()
        got = self._plans.get(partition)
        if got is None or now - got[0] > PLAN_READ_EVERY_S:
            raw = self.client.get(self.keys.revisit_plan(partition))
            got = self._plans[partition] = (now, planner_from(self.settings, raw))
        return got[1]
