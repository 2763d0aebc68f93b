"""Exploring censored histories: probe a page whose visits all (or nearly all) saw a change.

From visits every t, a page changing far faster than 1/t changes in every interval, and no
interval estimator can say more than about ln(2n + 1) changes per interval: the history is
*censored*, its estimate only a lower bound (freshness/estimators.py, ``SATURATED``). A planner
that trusts that bound under-rates the fastest pages: the freshness optimum cannot drop them,
√λ allocations get compressed. A crawler learns the rate only by looking closer, so a censored
page is *probed*: its next interval is its shortest changed interval divided by
``ProbeRule.factor`` (a geometric schedule), down to the planner's ``min_interval_s``, until a
visit sees no change. The intervals are then irregular and the interval MLE (Cho &
Garcia-Molina, TOIT 2003) has an interior root far above the regular-interval range limit.

Censored means: the interval MLE (no prior) is saturated, or it expects at least
``ProbeRule.ratio`` changes in the page's shortest changed interval (a visit that short would
see no change with probability at most e^{−ratio}: the data cannot tell the rate). Probing stops
at the floor after ``ProbeRule.max_at_floor`` changed intervals there: the page changes faster
than the crawler may look, and the estimate is the floor's range limit. Probes are ordinary
visits: they come out of the same budget (the caller counts them), and ``replan`` can hold
back the part of the budget that the pages under probing will need (``probes_left``), at most
``ProbeRule.max_budget_share``, so that the plan and the probes together fit the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from freshness.estimators import Kind
from freshness.history import BUCKETS, REPRESENTATIVE_S, VisitHistory, bucket_of


@dataclass(frozen=True)
class ProbeRule:
    #: Each probe's interval is the shortest changed interval so far divided by this.
    factor: float = 16.0
    #: Censored when the estimate expects this many changes in the shortest changed interval
    #: (3: a visit that short would see no change with probability < 5%).
    ratio: float = 3.0
    #: Changed intervals at the floor (up to twice min_interval_s) after which probing stops.
    max_at_floor: int = 3
    #: At most this share of the budget goes to probes (held back from the plan, and the
    #: cap on probe visits); it also sets the shortest probe interval the budget can pay.
    max_budget_share: float = 0.5
    #: A page is probed only while its planned intervals at the two ends of what its data
    #: allow (the bound, the fastest rate the crawler can tell apart) differ by more than this
    #: factor: a probe that cannot change the plan is a visit wasted.
    min_gain: float = 1.25
    #: The lower bound that decides whether a probe may still change the plan is one-sided
    #: at this confidence (``lower_bound``).
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not (self.factor > 1 and self.ratio > 0 and self.max_at_floor >= 1
                and 0 < self.max_budget_share < 1 and self.min_gain >= 1
                and 0 < self.confidence < 1):
            raise ValueError("need factor > 1, ratio > 0, max_at_floor >= 1, "
                             f"0 < max_budget_share < 1, min_gain >= 1, 0 < confidence < 1: {self}")


def shortest_changed_s(history: VisitHistory) -> float | None:
    """The representative length of the shortest bucket holding a changed interval."""
    for k in range(BUCKETS):
        if history.buckets[k]:
            return float(REPRESENTATIVE_S[k])
    return None


def censored(history: VisitHistory | None, rule: ProbeRule) -> bool:
    """Whether the page's interval data only bound its rate from below (module docstring)."""
    if history is None or history.n_changed == 0:
        return False
    est = history.mle(None)
    if est.kind is Kind.SATURATED:
        return True
    shortest = shortest_changed_s(history)
    return shortest is not None and est.rate * shortest >= rule.ratio


def lower_bound(history: VisitHistory, confidence: float) -> float:
    """A one-sided lower confidence bound on the rate of a page (changes per second): for a
    saturated history (every interval tᵢ changed), the λ at which that outcome has probability
    1 − confidence, Π(1 − e^{−λtᵢ}) = 1 − confidence; otherwise the interval MLE. The
    saturated MLE is no bound for this: its continuity correction puts one changed 12-minute
    probe at about 5 changes an hour, which a page changing once an hour shows one time in
    five."""
    est = history.mle(None)
    if est.kind is not Kind.SATURATED:
        return est.rate
    lengths, counts = history.changed_intervals()
    t, n = lengths[counts > 0], counts[counts > 0]
    target = math.log1p(-confidence)

    def excess(lam: float) -> float:
        return float(np.sum(n * np.log(-np.expm1(-lam * t)))) - target

    hi = est.rate
    if excess(hi) <= 0:
        return hi
    lo = hi
    while excess(lo) > 0:
        lo /= 4
    return float(brentq(excess, lo, hi, rtol=1e-9))


def probe_interval_s(history: VisitHistory | None, rule: ProbeRule,
                     floor_s: float) -> float | None:
    """The next interval of a censored page (None: not censored, or resolved at the floor)."""
    if history is None or not censored(history, rule):
        return None
    at_floor = sum(history.buckets[:bucket_of(2 * floor_s) + 1])
    if at_floor >= rule.max_at_floor:
        return None
    shortest = shortest_changed_s(history)
    assert shortest is not None  # censored implies a changed interval
    return max(floor_s, shortest / rule.factor)


def probes_left(history: VisitHistory | None, rule: ProbeRule, floor_s: float) -> int:
    """How many more probes a censored page needs at most if every one sees a change: the
    geometric steps down to the floor, then the floor's quota (0: not probing)."""
    if probe_interval_s(history, rule, floor_s) is None:
        return 0
    assert history is not None
    shortest = shortest_changed_s(history) or floor_s
    steps = max(math.ceil(math.log(max(shortest / floor_s, 1.0)) / math.log(rule.factor)), 0)
    at_floor = sum(history.buckets[:bucket_of(2 * floor_s) + 1])
    return steps + rule.max_at_floor - at_floor
