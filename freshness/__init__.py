"""Keeping a crawl fresh (issue 19): the closed forms of freshness, age and delay, change-rate
estimators from visit histories, compact per-URL history records in Redis, and revisit
policies (uniform, proportional, √λ, the freshness- and age-optimal Lagrangians, Nutch's
adaptive rule). docs/freshness.md explains them and how the crawl uses them."""

from freshness.adaptive import NUTCH, STORMCRAWLER, AdaptiveRule
from freshness.closedform import mean_age, mean_delay, mean_freshness
from freshness.estimators import Estimate, Kind, Prior, mle_rate, pooled_prior
from freshness.explore import ProbeRule
from freshness.history import RECORD_BYTES, VisitHistory
from freshness.policies import Plan, PlanError, Policy, plan

__all__ = ["NUTCH", "RECORD_BYTES", "STORMCRAWLER", "AdaptiveRule", "Estimate", "Kind", "Plan",
           "PlanError", "Policy", "Prior", "ProbeRule", "VisitHistory", "mean_age", "mean_delay",
           "mean_freshness", "mle_rate", "plan", "pooled_prior"]
