"""The per-URL revisit planner (issue 19): when to visit a page next, from its visit history.

A crawl cannot re-plan a million pages at every fetch. So the planner splits the batch plan
(freshness/policies.py) in two: ``replan`` takes the current rate estimates of all tracked
pages now and then and keeps the one crawl-wide number each policy needs (uniform: the count
n; proportional: Σwλ; √λ: Σ√(wλ); freshness / age: the Lagrange multiplier μ); ``interval_s``
then gives any single page's next interval in O(1) from its own history. Between replans
the per-page frequencies are exactly those of ``plan()`` on the replanned rates.

Before the first ``replan`` the planner is uniform over ``RevisitSettings.assumed_pages``
pages (each page every assumed_pages/budget seconds), whatever the policy: it has no rates yet.

Rates: ``rate_of`` is the estimate a policy uses (``estimate_of`` says how it was reached):
Last-Modified where the history trusts the server's dates (``VisitHistory.lm_trusted``), else
the interval MLE; both shrunk toward the prior (the settings' or the one ``use_prior`` gave,
e.g. the host's pooled rate) as a gamma posterior mode. An estimate is trusted when its relative
standard error is at most ``estimators.MAX_REL_ERROR`` and it is not saturated; untrusted
estimates are still used (the prior is what makes them usable): the flag is for logs and counts.

Exploration (freshness/explore.py): with ``RevisitSettings.probe`` set, a rate-driven policy
(proportional, √λ, freshness, age) probes a page whose interval history is censored (changed
on every or nearly every visit): ``interval_s`` gives the shorter of the plan's interval and the
probe's, a geometric schedule down to ``min_interval_s``, until a visit sees no change, and
(after the first replan) only while the probe can still change the page's plan (the planned
intervals at the two ends of what the data allow differ by more than ``ProbeRule.min_gain``).
Last-Modified is then used only while the interval data do not contradict it (the interval
MLE's lower bound above the Last-Modified rate: dates too coarse for the page's rate), and a
saturated interval MLE (every visit saw a change) is not pulled down by any prior: √λ and
proportional plan on it as it is, a lower bound; freshness and age plan on the worst case for
their objective, the fastest rate the crawler can tell apart (``censored_cap``).

Units: whatever clock the caller keeps histories in (seconds); the budget is in visits per
second of that clock for the whole page set the planner covers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from freshness.adaptive import NUTCH, AdaptiveRule
from freshness.estimators import MAX_REL_ERROR, Estimate, Kind, Prior
from freshness.explore import ProbeRule, lower_bound, probe_interval_s
from freshness.history import VisitHistory
from freshness.policies import PlanError, Policy, frequencies
from freshness.solver import frequencies_at

#: A history's interval MLE for a prior (``VisitHistory.mle``, or one a replan solved).
Mle = Callable[[Prior | None], Estimate]


class RevisitPolicy(StrEnum):
    FIXED = "fixed"
    UNIFORM = "uniform"
    PROPORTIONAL = "proportional"
    SQRT = "sqrt"
    FRESHNESS = "freshness"
    AGE = "age"
    ADAPTIVE = "adaptive"  # Nutch / StormCrawler's multiply rule: no estimates


@dataclass(frozen=True)
class RevisitSettings:
    """How a crawl revisits. ``fixed_interval_s`` is required by the fixed policy; the
    adaptive policy starts a page at it too (default: the uniform interval n/budget)."""

    policy: RevisitPolicy = RevisitPolicy.FRESHNESS
    budget_per_s: float = 1.0
    fixed_interval_s: float | None = None
    min_interval_s: float = 60.0
    max_interval_s: float = 30 * 86400.0
    adaptive: AdaptiveRule = field(default=NUTCH)
    prior: Prior | None = None
    #: Pages the planner assumes before its first replan (uniform over them).
    assumed_pages: int = 1000
    #: Probe censored histories (freshness/explore.py); None: plan on the bounds as they are.
    probe: ProbeRule | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", RevisitPolicy(self.policy))
        if not (math.isfinite(self.budget_per_s) and self.budget_per_s > 0):
            raise ValueError(f"budget_per_s must be > 0, got {self.budget_per_s}")
        if not 0 < self.min_interval_s <= self.max_interval_s < math.inf:
            raise ValueError("need 0 < min_interval_s <= max_interval_s < inf, got "
                             f"{self.min_interval_s} and {self.max_interval_s}")
        if self.fixed_interval_s is not None and not self.fixed_interval_s > 0:
            raise ValueError(f"fixed_interval_s must be > 0, got {self.fixed_interval_s}")
        if self.policy is RevisitPolicy.FIXED and self.fixed_interval_s is None:
            raise ValueError("the fixed policy needs fixed_interval_s")
        if self.assumed_pages < 1:
            raise ValueError(f"assumed_pages must be >= 1, got {self.assumed_pages}")


@dataclass(frozen=True)
class _Norm:
    """What the last replan kept: the page count and the policy's crawl-wide number."""

    pages: int
    budget: float  # visits per second the plan spends (the budget less the probes' reserve)
    total: float = 0.0  # Σwλ (proportional) or Σ√(wλ) (sqrt)
    mu: float | None = None  # freshness / age: None when no page changes (nothing to visit)


#: The policies whose intervals follow rate estimates (the ones that probe).
RATE_DRIVEN = (RevisitPolicy.PROPORTIONAL, RevisitPolicy.SQRT, RevisitPolicy.FRESHNESS,
               RevisitPolicy.AGE)
#: The policies that plan a censored page at the worst case for their objective, the cap
#: (``RevisitPlanner._censored``): their frequency has a finite limit as λ grows.
WORST_CASE_CENSORED = (RevisitPolicy.FRESHNESS, RevisitPolicy.AGE)
#: Last-Modified is contradicted when the interval MLE minus this many standard errors is
#: still above the Last-Modified rate.
LM_CONTRADICTION_SIGMAS = 2.0


class RevisitPlanner:
    """Per-page revisit intervals under ``settings`` (see the module docstring)."""

    def __init__(self, settings: RevisitSettings) -> None:
        self.settings = settings
        self._norm: _Norm | None = None
        self._prior = settings.prior

    @property
    def replanned(self) -> bool:
        return self._norm is not None

    @property
    def pages(self) -> int:
        """The page count the uniform share is taken over."""
        return self._norm.pages if self._norm else self.settings.assumed_pages

    @property
    def mu(self) -> float | None:
        return self._norm.mu if self._norm else None

    def plan_state(self) -> dict[str, Any] | None:
        """The last replan as plain data, to store for other processes (None: none yet)."""
        n = self._norm
        return None if n is None else {"pages": n.pages, "budget": n.budget,
                                       "total": n.total, "mu": n.mu}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take a replan :meth:`plan_state` gave (made by another process, the owner)."""
        mu = state["mu"]
        self._norm = _Norm(int(state["pages"]), float(state["budget"]), float(state["total"]),
                           None if mu is None else float(mu))

    def use_prior(self, prior: Prior | None) -> None:
        """Shrink estimates toward ``prior`` from now on (None: the settings' prior)."""
        self._prior = prior if prior is not None else self.settings.prior

    @property
    def prior(self) -> Prior | None:
        """The prior estimates are shrunk toward now."""
        return self._prior

    # -- the crawl-wide step --------------------------------------------------------------
    def replan(self, rates: np.ndarray, weights: np.ndarray | None = None,
               reserve_per_s: float = 0.0) -> None:
        """Keep the normaliser of the policy for pages changing at ``rates`` (one per tracked
        page, e.g. ``rate_of`` of each history) with importance ``weights`` (default 1).
        ``reserve_per_s``: visits per second held back for probes (rate-driven policies with
        ``settings.probe``; at most its ``max_budget_share`` of the budget)."""
        lam = np.asarray(rates, dtype=float).ravel()
        w = np.ones_like(lam) if weights is None else np.asarray(weights, dtype=float).ravel()
        if lam.size == 0:
            raise PlanError("replan needs the rates of at least one page")
        if w.shape != lam.shape:
            raise PlanError(f"{w.size} weights for {lam.size} rates")
        if not (np.all(np.isfinite(lam)) and np.all(lam >= 0) and np.all(np.isfinite(w))
                and np.all(w >= 0)):
            raise PlanError("rates and weights must be finite and >= 0")
        s = self.settings
        policy, budget = s.policy, s.budget_per_s
        if not (math.isfinite(reserve_per_s) and reserve_per_s >= 0):
            raise PlanError(f"reserve_per_s must be finite and >= 0, got {reserve_per_s}")
        if s.probe is not None and policy in RATE_DRIVEN:
            budget -= min(reserve_per_s, s.probe.max_budget_share * budget)
        if policy is RevisitPolicy.PROPORTIONAL:
            self._norm = _Norm(lam.size, budget, total=float(np.sum(w * lam)))
        elif policy is RevisitPolicy.SQRT:
            self._norm = _Norm(lam.size, budget, total=float(np.sum(np.sqrt(w * lam))))
        elif policy in (RevisitPolicy.FRESHNESS, RevisitPolicy.AGE):
            _, mu = frequencies(Policy(policy.value), lam, w, budget)
            self._norm = _Norm(lam.size, budget, mu=mu)
        else:  # fixed, uniform, adaptive: only the count matters
            self._norm = _Norm(lam.size, budget)

    # -- one page ---------------------------------------------------------------------------
    def frequency(self, rate: float, weight: float = 1.0) -> float:
        """Visits per second of a page changing at ``rate`` with importance ``weight``, under
        the last replan (unclipped: what ``plan()`` gives that page). Adaptive: the uniform
        share (the rule sets intervals itself, see ``interval_s``)."""
        if not (math.isfinite(rate) and rate >= 0 and math.isfinite(weight) and weight >= 0):
            raise PlanError(f"rate and weight must be finite and >= 0, got {rate}, {weight}")
        return float(self.frequencies_of(np.array([rate], dtype=float),
                                         np.array([weight], dtype=float))[0])

    def frequencies_of(self, rates: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """``frequency`` of many pages at once (a replan moves every scheduled page)."""
        lam = np.asarray(rates, dtype=float)
        w = np.ones_like(lam) if weights is None else np.asarray(weights, dtype=float)
        if not (np.all(np.isfinite(lam)) and np.all(lam >= 0) and np.all(np.isfinite(w))
                and np.all(w >= 0)):
            raise PlanError("rates and weights must be finite and >= 0")
        s, norm = self.settings, self._norm
        if s.policy is RevisitPolicy.FIXED:
            assert s.fixed_interval_s is not None  # checked by the settings
            return np.full(lam.shape, 1.0 / s.fixed_interval_s)
        if norm is None or s.policy in (RevisitPolicy.UNIFORM, RevisitPolicy.ADAPTIVE):
            return np.full(lam.shape, s.budget_per_s / self.pages)
        if s.policy is RevisitPolicy.PROPORTIONAL:
            score = w * lam
        elif s.policy is RevisitPolicy.SQRT:
            score = np.sqrt(w * lam)
        else:
            return self._optimal(lam, w, norm.mu)
        return norm.budget * score / norm.total if norm.total > 0 else np.zeros(lam.shape)

    def _optimal(self, lam: np.ndarray, w: np.ndarray, mu: float | None) -> np.ndarray:
        f = np.zeros(lam.shape)
        visited = (lam > 0) & (w > 0)
        if mu is not None and visited.any():
            # freshness: 0 when μλ/w >= 1 (changes too fast to be worth a visit at this budget)
            f[visited] = frequencies_at(lam[visited], w[visited], mu, self.settings.policy.value)
        return f

    def estimate_of(self, history: VisitHistory | None, mle: Mle | None = None) -> Estimate:
        """The rate estimate of a page (see the module docstring for the rule). ``mle``: the
        history's interval MLE for a prior (default ``history.mle``; a replan passes
        estimates it solved for all its pages at once, freshness/batch.py)."""
        prior = self._prior
        if history is None or history.visits == 0:
            return (Estimate(prior.rate, Kind.NO_DATA, math.inf) if prior
                    else Estimate(0.0, Kind.NO_DATA, math.inf))
        mle = mle or history.mle
        if self.settings.probe is not None:
            own = mle(None)
            if own.kind is Kind.SATURATED:  # a lower bound: no prior may pull it down
                return self._censored(own)
        if history.lm_trusted() and not self._lm_contradicted(history, mle):
            alpha, beta = (prior.strength, prior.strength / prior.rate) if prior else (0.0, 0.0)
            changes, exposure = history.x_lm + alpha, history.lm_exposure_s + beta
            if exposure > 0 and changes > 0:
                kind = Kind.POINT if history.x_lm else Kind.NO_CHANGE
                return Estimate(changes / exposure, kind, 1.0 / math.sqrt(changes))
            if exposure > 0:
                return Estimate(0.0, Kind.NO_CHANGE, math.inf)
        return mle(prior)

    @property
    def censored_cap(self) -> float:
        """The fastest rate this crawler can tell apart (changes per second): a visit after
        ``min_interval_s`` sees no change with probability at most e^{−ratio}. (With probing
        off: 0, no cap.)"""
        p = self.settings.probe
        return p.ratio / self.settings.min_interval_s if p is not None else 0.0

    def _censored(self, bound: Estimate) -> Estimate:
        """The rate a censored page (every visit changed: ``bound`` is only a lower bound) is
        planned at. The freshness and age policies take the worst case for their objective
        over what the data allow, [bound, censored_cap]: F̄ falls and Ā grows with λ, so it is
        the cap. Both plans stay finite there (freshness drops the page, age visits it at its
        limit √(w/2μ)), and the bound would be the best case, which over-rates the page for
        freshness and under-visits it for age. Proportional and √λ have no limit as λ grows
        (the worst case is no plan), so they plan on the bound and probe for the rest."""
        if self.settings.policy in WORST_CASE_CENSORED:
            return Estimate(max(bound.rate, self.censored_cap), Kind.SATURATED, math.inf)
        return bound

    def _lm_contradicted(self, history: VisitHistory, mle: Mle) -> bool:
        """With probing on: the interval data put the rate surely above the Last-Modified
        estimate (a saturated MLE is itself a lower bound). Off: never (the old rule)."""
        if self.settings.probe is None or history.n_changed == 0:
            return False
        lm = history.last_modified_rate() or 0.0
        est = mle(None)
        if est.kind is Kind.SATURATED:
            return est.rate > lm
        low = est.rate * (1.0 - LM_CONTRADICTION_SIGMAS * est.rel_error)
        return est.kind is Kind.POINT and low > lm

    def probe_s(self, history: VisitHistory | None) -> float | None:
        """The probe interval of a censored page under a rate-driven policy (None: the page
        follows the plan). See freshness/explore.py."""
        s = self.settings
        if s.probe is None or s.policy not in RATE_DRIVEN:
            return None
        probe = probe_interval_s(history, s.probe, self.probe_floor_s)
        if probe is None or not self.replanned:
            return probe
        assert history is not None  # censored
        bound = lower_bound(history, s.probe.confidence)
        return probe if self._probe_may_change_plan(bound) else None

    def _probe_may_change_plan(self, bound: float) -> bool:
        """Whether what a probe can learn of a censored page (its rate is somewhere in
        [bound, censored_cap], ``bound`` a lower confidence bound, explore.lower_bound) can
        move its planned interval by more than the rule's ``min_gain`` factor: the intervals
        at both ends, under the last replan. Freshness: until the bound clears the drop
        threshold (both ends dropped); age: rarely (its frequency is near its limit once a
        page changes in every interval); proportional and √λ: until the floor (∝ λ and √λ
        never level off)."""
        s = self.settings
        assert s.probe is not None
        low, high = self.interval_at(bound), self.interval_at(max(bound, self.censored_cap))
        return max(low, high) > s.probe.min_gain * min(low, high)

    @property
    def probe_floor_s(self) -> float:
        """The shortest probe interval: ``min_interval_s``, or the interval at which the
        probes' share of the budget visits one page, if longer (probing a page more often
        than the budget can pay for only delays the probes, and a late probe measures a
        longer interval)."""
        s = self.settings
        share = s.probe.max_budget_share if s.probe is not None else 0.0
        return max(s.min_interval_s, 1.0 / (share * s.budget_per_s)) if share > 0 \
            else s.min_interval_s

    @property
    def probe_slots(self) -> int:
        """How many pages the probes' budget share can probe at once at ``probe_floor_s``
        (the caller keeps the set of pages under probing, e.g. in Redis, and admits a
        censored page to it only while there is a free slot; the others follow the plan)."""
        s = self.settings
        if s.probe is None:
            return 0
        return max(1, int(s.probe.max_budget_share * s.budget_per_s * self.probe_floor_s))

    def rate_of(self, history: VisitHistory | None) -> float:
        return self.estimate_of(history).rate

    def trusted(self, history: VisitHistory | None) -> bool:
        """Whether the page's estimate is good to ``MAX_REL_ERROR`` (for logs and counts)."""
        e = self.estimate_of(history)
        return e.kind is not Kind.SATURATED and e.rel_error <= MAX_REL_ERROR

    def interval_s(self, history: VisitHistory | None, weight: float = 1.0,
                   changed: bool | None = None) -> float:
        """Seconds until the page's next visit: 1/f clipped to [min_interval_s,
        max_interval_s]; a page the policy never visits (f = 0) gets max_interval_s.

        Adaptive: the rule needs the page's current interval (``history.interval_s``; 0 or no
        history: start at ``fixed_interval_s``, else the uniform interval) and whether the
        visit just made found it ``changed`` (None: no new visit, keep the interval). The
        caller stores the result back in ``history.interval_s`` (a float32 in the record).

        With ``settings.probe``, a rate-driven policy's censored page gets the shorter of the
        plan's interval and its probe interval (``probe_s``)."""
        s = self.settings
        if s.policy is RevisitPolicy.ADAPTIVE:
            current = history.interval_s if history is not None else 0.0
            if current <= 0:
                start = s.fixed_interval_s or self.pages / s.budget_per_s
                return self._clip(start)
            if changed is None:
                return self._clip(current)
            return self._clip(s.adaptive.next_interval(current, changed))
        return self._probed(self.interval_at(self.rate_of(history), weight), history)

    def _probed(self, planned: float, history: VisitHistory | None) -> float:
        """The plan's interval, or the probe's where a censored page is probed (shorter)."""
        probe = self.probe_s(history)
        return planned if probe is None else min(planned, self._clip(probe))

    def interval_at(self, rate: float, weight: float = 1.0) -> float:
        """``interval_s`` of a page whose rate is known (not the adaptive rule's): 1/f
        clipped, max_interval_s where f = 0."""
        f = self.frequency(rate, weight)
        return self._clip(1.0 / f) if f > 0 else self.settings.max_interval_s

    def intervals_of(self, histories: Sequence[VisitHistory | None],
                     rates: np.ndarray) -> np.ndarray:
        """``interval_s`` (weight 1, no new visit) of many pages at once, given each one's
        ``rate_of``: what a replan moves its scheduled pages by."""
        s = self.settings
        if s.policy is RevisitPolicy.ADAPTIVE:
            return np.array([self.interval_s(h) for h in histories], dtype=float)
        f = self.frequencies_of(rates)
        with np.errstate(divide="ignore"):
            planned = np.where(f > 0, np.clip(1.0 / f, s.min_interval_s, s.max_interval_s),
                               s.max_interval_s)
        if s.probe is not None and s.policy in RATE_DRIVEN:
            for i, history in enumerate(histories):
                planned[i] = self._probed(float(planned[i]), history)
        return planned

    def _clip(self, interval_s: float) -> float:
        return min(max(interval_s, self.settings.min_interval_s), self.settings.max_interval_s)

