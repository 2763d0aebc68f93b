"""The Lagrangian of the freshness- and age-optimal policies, solved for a million pages at once.

Maximise Σ wᵢ F̄(fᵢ, λᵢ) (or minimise Σ wᵢ Ā(fᵢ, λᵢ)) subject to Σ fᵢ = B, fᵢ ≥ 0. Both
objectives are concave in f, so the optimum is where every visited page has the same marginal
μ and an unvisited page's marginal at f = 0 is at most μ (Cho & Garcia-Molina, TODS 2003):

- freshness: g(λ/f)/λ · w = μ  ⇔  g(r) = μλ/w, r = λ/f. A page with w/λ ≤ μ gets f = 0: the
  fastest-changing pages are dropped first.
- age: q(r)/λ² · w = μ. The marginal at f = 0 is infinite, so every changing page is visited.

For a given μ each page's r solves a convex increasing equation (freshness as
h(r) = r − ln(1+r) = −ln(1 − c), age as q(r) = c), so a vectorised Newton iteration started
right of the root falls onto it monotonically; analytic brackets catch the rest (scipy's root
finders are scalar, or vectorised without a bracket, so this loop is ours). The total Σ λ/r(μ)
falls as μ grows; μ is found by Newton on log μ with its analytic derivative, bisecting where
a step would leave the bracket, each step starting the pages from their previous roots. Past
50,000 pages a strided sample of 10,000 gives μ to a few per cent first. Each step is O(n)
numpy work and a solve takes a few of them (a handful of Newton passes each), so n pages cost
O(n) with no sort: the visited set is the mask w/λ > μ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from freshness.closedform import Array, freshness_gain, pick_series, q_ratio

#: Relative tolerance of the per-page roots.
RTOL = 1e-12
#: The plan spends the budget to this relative precision.
BUDGET_RTOL = 1e-9
MAX_INNER = 100
MAX_OUTER = 200
#: Larger problems first solve μ on an evenly strided sample of about this size.
SAMPLE_ABOVE = 50_000
SAMPLE_SIZE = 10_000
#: max (1+r)e^{−r/2} over r ≥ 0 (at r = 1): bounds g from below, 1 − g ≤ this · e^{−r/2}.
_G_TAIL = 2.0 / np.sqrt(np.e)
#: h(r) = r − ln(1+r) = Σ_{k≥2} (−1)^k r^k / k.
_H = [(-1) ** k / k for k in range(2, 18)]


@dataclass(frozen=True)
class Solution:
    """Frequencies of the optimum and its multiplier μ (the common marginal)."""

    frequencies: Array
    mu: float
    iterations: int


def _newton_convex(value: Callable[[Array], Array], slope: Callable[[Array], Array],
                   target: Array, lo: Array, hi: Array, start: Array) -> Array:
    """r with value(r) = target for an increasing convex ``value``, lo ≤ r ≤ hi per element.

    Newton on a convex increasing function falls monotonically onto the root from the right,
    and one step from the left lands right of it; steps are clipped into the bracket, which
    tightens as signs are seen. Converged elements leave the working set."""
    r = np.clip(start, lo, hi)
    todo = np.arange(r.size)
    rr, tt, ll, hh = r, target, lo, hi
    for _ in range(MAX_INNER):
        err = value(rr) - tt
        ll = np.where(err < 0, rr, ll)
        hh = np.where(err > 0, rr, hh)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = rr - err / slope(rr)
        new = np.clip(np.where(np.isfinite(step), step, hh), ll, hh)
        done = (np.abs(new - rr) <= RTOL * np.abs(new)) | (err == 0)
        r[todo] = new
        if done.all():
            break
        keep = ~done
        todo, rr, tt, ll, hh = todo[keep], new[keep], tt[keep], ll[keep], hh[keep]
    return r


def h_ratio(r: Array) -> Array:
    """h(r) = r − ln(1+r) = −ln(1 − g(r)): g(r) = c as a convex equation, h(r) = −ln(1−c)."""
    with np.errstate(invalid="ignore"):
        direct = r - np.log1p(r)
    return pick_series(r, _H, 2, direct)


def invert_g(c: Array, start: Array | None = None) -> Array:
    """r with 1 − (1+r)e^{−r} = c, for 0 < c < 1 (solved as h(r) = −ln(1−c))."""
    target = -np.log1p(-c)
    lo = np.maximum(target, np.sqrt(2.0 * target))  # h(r) ≤ r and h(r) ≤ r²/2
    hi = 2.0 * (np.log(_G_TAIL) + target)  # g(r) ≥ 1 − 1.213 e^{−r/2}
    hi = np.where(6.0 * target <= 1.0, np.minimum(hi, np.sqrt(6.0 * target)), hi)  # h ≥ r²/6
    return _newton_convex(h_ratio, lambda r: r / (1.0 + r), target, lo, hi,
                          hi if start is None else start)


def invert_q(c: Array, start: Array | None = None) -> Array:
    """r with r²/2 − 1 + (1+r)e^{−r} = c, for c > 0."""
    lo = np.maximum(np.sqrt(2.0 * c), np.cbrt(3.0 * c))  # q ≤ r²/2 and q ≤ r³/3
    hi = np.sqrt(2.0 * (c + 1.0))  # q ≥ r²/2 − 1
    hi = np.where(6.0 * c <= 64.0 / 27.0, np.minimum(hi, np.cbrt(6.0 * c)), hi)  # q ≥ r³/6
    return _newton_convex(q_ratio, lambda r: r * -np.expm1(-r), c, lo, hi,
                          hi if start is None else start)


class _Objective:
    """One of the two Lagrangians: per page, f for a multiplier μ and df/d log μ."""

    def __init__(self, lam: Array, w: Array, kind: str) -> None:
        self.lam, self.w, self.kind = lam, w, kind
        self.r: Array | None = None  # the last roots: the next solve starts from them

    def frequencies(self, mu: float) -> tuple[Array, Array]:
        """(f, df/d log μ) at μ."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self._frequencies(mu)

    def _frequencies(self, mu: float) -> tuple[Array, Array]:
        lam, w = self.lam, self.w
        start = self.r
        if self.kind == "freshness":
            c = mu * lam / w
            active = c < 1.0
            cc = np.where(active, c, 0.5)
            r = invert_g(cc, None if start is None else np.where(active, start, 0.0))
            drdlog = ((1.0 + r) / r) * cc / (1.0 - cc)  # r = h⁻¹(−ln(1 − c))
        else:
            active = np.ones(lam.shape, dtype=bool)
            cc = mu * lam * lam / w
            r = invert_q(cc, start)
            drdlog = cc / (r * -np.expm1(-r))
        self.r = np.where(active, r, 0.0)
        f = np.where(active, lam / r, 0.0)
        return f, np.where(active, -(lam / (r * r)) * drdlog, 0.0)

    def first_mu(self, budget: float) -> tuple[float, float, float]:
        """(lower, upper, first guess) of log μ; the bounds may be infinite."""
        lam, w = self.lam, self.w
        if self.kind == "freshness":
            # the marginals of a uniform plan: the optimum's μ is among them
            guess = float(np.median(w * freshness_gain(budget / lam.size, lam)))
            return -np.inf, float(np.log(np.max(w / lam))), np.log(guess)
        guess = (np.sum(np.sqrt(w / 2.0)) / budget) ** 2  # small-f asymptote f ≈ √(w/2μ)
        return -np.inf, np.inf, float(np.log(guess))


def solve(lam: Array, w: Array, budget: float, kind: str) -> Solution:
    """Optimal frequencies of pages with rates ``lam`` > 0, weights ``w`` > 0, Σ f = budget.

    Over ``SAMPLE_ABOVE`` pages, μ is first solved on an evenly strided sample with the budget
    scaled to it: its μ is within a few per cent, so the full solve takes two or three steps."""
    objective = _Objective(lam, w, kind)
    log_lo, log_hi, log_mu = objective.first_mu(budget)
    if lam.size > SAMPLE_ABOVE:
        stride = lam.size // SAMPLE_SIZE
        sample = solve(lam[::stride], w[::stride], budget * lam[::stride].size / lam.size, kind)
        log_mu = float(np.clip(np.log(sample.mu), log_lo, log_hi))
    f = np.zeros_like(lam)
    for it in range(1, MAX_OUTER + 1):
        f, dlog = objective.frequencies(float(np.exp(log_mu)))
        err = f.sum() - budget
        if abs(err) <= BUDGET_RTOL * budget:
            return Solution(f, float(np.exp(log_mu)), it)
        if err > 0:
            log_lo = log_mu
        else:
            log_hi = log_mu
        if log_hi - log_lo < 1e-14:
            return Solution(_spend_exactly(f, budget), float(np.exp(log_mu)), it)
        slope = dlog.sum()
        step = log_mu - err / slope if slope < 0 else np.nan
        if not log_lo < step < log_hi:
            step = (0.5 * (log_lo + log_hi) if np.isfinite(log_lo + log_hi)
                    else log_hi - 2.0 if np.isfinite(log_hi) else log_lo + 2.0)
        log_mu = step
    return Solution(_spend_exactly(f, budget), float(np.exp(log_mu)), MAX_OUTER)


def _spend_exactly(f: Array, budget: float) -> Array:
    """Scale the last iterate to spend the budget when float64 cannot resolve μ further.

    That happens when the budget is so small that the visited pages change hundreds of times
    per visit: 1 − μλ/w is then below 1e-16. There F̄ ≈ f/λ, the marginal is flat, and
    scaling those pages' visits is optimal to first order."""
    total = f.sum()
    return f * (budget / total) if total > 0 else f


def frequencies_at(lam: Array, w: Array, mu: float, kind: str) -> Array:
    """The optimum's frequencies for a known multiplier ``mu``: each page's f depends only on
    its own λ, w and the crawl-wide μ, so partitions can plan their pages apart once μ is
    known (solved crawl-wide, e.g. on a sample of all partitions' rates)."""
    return _Objective(lam, w, kind).frequencies(mu)[0]
