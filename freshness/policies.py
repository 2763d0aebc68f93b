"""Revisit policies: given change rates λᵢ, importance weights wᵢ and a budget B (visits per
unit time), each page's visit frequency fᵢ, and what the plan is expected to achieve.

- ``fixed``: every page every ``interval`` (the budget is whatever that costs).
- ``uniform``: fᵢ = B/n.
- ``proportional``: fᵢ ∝ wᵢλᵢ (worse than uniform on freshness: TODS 2003).
- ``sqrt``: fᵢ ∝ √(wᵢλᵢ): minimises the total delay Σ wᵢλᵢ/(2fᵢ) (Lagrange: wλ/(2f²) = μ).
- ``freshness`` / ``age``: the Lagrangian optima (freshness/solver.py).

A page that never changes (λ = 0) gets no visits from any policy but uniform and fixed; it
stays fresh. The crawl's adaptive baseline (Nutch) is a per-URL rule, in freshness/adaptive.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from freshness.closedform import Array, mean_age, mean_delay, mean_freshness
from freshness.solver import solve


class Policy(enum.Enum):
    FIXED = "fixed"
    UNIFORM = "uniform"
    PROPORTIONAL = "proportional"
    SQRT = "sqrt"
    FRESHNESS = "freshness"
    AGE = "age"


class PlanError(ValueError):
    """Rates, weights or budget the policies cannot plan with (the message says which)."""


@dataclass(frozen=True)
class Plan:
    """Per-page frequencies (visits per unit time) and the set's expected figures.

    ``mean_*`` are weighted by w (delay by wλ: per change). Age and delay are infinite when a
    changing page is never visited; ``mu`` is the Lagrange multiplier of the optimal policies.
    """

    policy: Policy
    rates: Array
    weights: Array
    frequencies: Array
    budget_used: float
    mean_freshness: float
    mean_age: float
    mean_delay: float
    mu: float | None = None

    def page_figures(self) -> tuple[Array, Array, Array]:
        """(freshness, age, delay) of each page, from the closed forms."""
        f, lam = self.frequencies, self.rates
        return mean_freshness(f, lam), mean_age(f, lam), mean_delay(f, lam)


def _inputs(rates: ArrayLike, weights: ArrayLike | None) -> tuple[Array, Array]:
    lam = np.asarray(rates, dtype=float).ravel()
    if lam.size == 0:
        raise PlanError("no pages: give at least one change rate")
    if not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise PlanError("change rates must be finite and >= 0")
    w = np.ones_like(lam) if weights is None else np.asarray(weights, dtype=float).ravel()
    if w.shape != lam.shape:
        raise PlanError(f"{w.size} weights for {lam.size} rates")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise PlanError("weights must be finite and >= 0")
    return lam, w


def _share(score: Array, budget: float) -> Array:
    total = score.sum()
    return budget * score / total if total > 0 else np.zeros_like(score)


def frequencies(policy: Policy, lam: Array, w: Array, budget: float | None,
                interval: float | None = None) -> tuple[Array, float | None]:
    """Each page's visit frequency under ``policy`` (and μ for the optimal ones)."""
    if policy is Policy.FIXED:
        if interval is None or not interval > 0:
            raise PlanError("the fixed policy needs an interval > 0")
        return np.full_like(lam, 1.0 / interval), None
    if budget is None or not np.isfinite(budget) or budget < 0:
        raise PlanError(f"the {policy.value} policy needs a budget >= 0 (visits per unit time)")
    if policy is Policy.UNIFORM:
        return np.full_like(lam, budget / lam.size), None
    if policy is Policy.PROPORTIONAL:
        return _share(w * lam, budget), None
    if policy is Policy.SQRT:
        return _share(np.sqrt(w * lam), budget), None
    f = np.zeros_like(lam)
    live = (lam > 0) & (w > 0)
    if budget == 0 or not live.any():
        return f, None
    solution = solve(lam[live], w[live], budget, policy.value)
    f[live] = solution.frequencies
    return f, solution.mu


def _weighted_mean(values: Array, weights: Array) -> float:
    total = weights.sum()
    if total == 0:
        return 0.0
    mask = weights > 0
    if np.isinf(values[mask]).any():
        return float("inf")
    return float((values[mask] * weights[mask]).sum() / total)


def plan(rates: ArrayLike, budget: float | None, policy: Policy | str = Policy.FRESHNESS,
         weights: ArrayLike | None = None, interval: float | None = None) -> Plan:
    """Plan the visits of pages changing at ``rates`` under ``budget`` visits per unit time."""
    policy = Policy(policy)
    lam, w = _inputs(rates, weights)
    f, mu = frequencies(policy, lam, w, budget, interval)
    return Plan(policy=policy, rates=lam, weights=w, frequencies=f,
                budget_used=float(f.sum()),
                mean_freshness=_weighted_mean(mean_freshness(f, lam), w),
                mean_age=_weighted_mean(mean_age(f, lam), w),
                mean_delay=_weighted_mean(mean_delay(f, lam), w * lam), mu=mu)
