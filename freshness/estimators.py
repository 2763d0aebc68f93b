"""Change-rate estimators from a page's visit history (Cho & Garcia-Molina, "Estimating
frequency of change", TOIT 2003), a prior for pages with few visits, and the trust rule.

Notation: n visits after the first, X of which found the page changed; intervals tᵢ.

- ``naive_rate``: X / Σt. Biased low: a visit sees at most one change per interval, so X/n
  never exceeds 1 change per interval.
- ``bias_reduced_rate``: r̂ = −ln((n − X + 0.5)/(n + 0.5)) changes per (mean) interval;
  n = 10, X = 3 gives 0.34 where the naive gives 0.30. X = n gives its range limit ln(2n + 1).
- ``mle_rate``: for irregular intervals, the λ with Σ_changed tᵢ/(e^{λtᵢ} − 1) = Σ_unchanged tⱼ
  (the score of the likelihood Π(1 − e^{−λtᵢ}) Π e^{−λtⱼ}). No change seen: 0. Always changed:
  no finite root, so we add half an unchanged visit of the shortest interval, the continuity
  correction behind the bias-reduced estimator (it gives exactly ln(2n + 1)/t on regular
  intervals), and mark the estimate ``SATURATED``: the true rate is at least about that. (The
  shortest, not the mean: on the irregular intervals of probes (freshness/explore.py) a
  pseudo-visit as long as the mean of hours-long and minutes-long intervals would claim a
  rate the short intervals already contradict.)
- ``last_modified_rate``: where Last-Modified gives the time τᵢ from the last change to a visit
  that saw a change, each visit is a censored exponential wait: the likelihood
  λ^X e^{−λ(Στᵢ + Σtⱼ)} gives λ̂ = X / (Στᵢ + Σ_unchanged tⱼ). (Our derivation for this
  observation model; more exposure per visit than the interval data, hence less variance.)

Prior: a ``Prior(rate, strength)`` (e.g. the host's or site section's pooled rate) acts as
``strength`` pseudo-changes over strength/rate pseudo-seconds (a gamma prior); the MLE becomes
the posterior mode, which is the prior's rate with no data and finite for every history.
Trust: an estimate is trusted when its relative standard error (Fisher information at the
estimate) is at most ``max_rel_error`` and it is not saturated.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq

#: A relative standard error at or below this makes an estimate trusted (≈ 4+ expected
#: changes in the history).
MAX_REL_ERROR = 0.5


class Kind(enum.Enum):
    POINT = "point"  # an interior maximum of the likelihood
    NO_CHANGE = "no_change"  # nothing changed: rate 0 (the MLE), or the prior's pull
    SATURATED = "saturated"  # always changed: a lower bound at the range limit
    NO_DATA = "no_data"  # no interval observed (and no prior)


@dataclass(frozen=True)
class Prior:
    """A rate to shrink toward (changes per second) and its weight in pseudo-changes."""

    rate: float
    strength: float = 2.0

    def __post_init__(self) -> None:
        if not (self.rate > 0 and self.strength > 0):
            raise ValueError(f"a prior needs rate > 0 and strength > 0: {self}")


@dataclass(frozen=True)
class Estimate:
    """A rate (changes per second), how it was reached, and its relative standard error."""

    rate: float
    kind: Kind
    rel_error: float

    @property
    def trusted(self) -> bool:
        return self.kind is not Kind.SATURATED and self.rel_error <= MAX_REL_ERROR


def naive_rate(changes: int, visits: int, interval_s: float) -> float:
    """X / (n·I): changes seen per second of monitoring."""
    _check_counts(changes, visits)
    return changes / (visits * interval_s) if visits else 0.0


def bias_reduced_ratio(changes: int, visits: int) -> float:
    """r̂ = −ln((n − X + 0.5)/(n + 0.5)): changes per visit interval."""
    _check_counts(changes, visits)
    return -math.log((visits - changes + 0.5) / (visits + 0.5))


def bias_reduced_rate(changes: int, visits: int, interval_s: float) -> float:
    return bias_reduced_ratio(changes, visits) / interval_s if visits else 0.0


def range_limit(visits: int) -> float:
    """The largest ratio the bias-reduced estimator can give: ln(2n + 1) changes per interval."""
    return math.log(2 * visits + 1)


def last_modified_rate(changes: int, exposure_s: float) -> float:
    """X / E, E = Σ (time from the last change to each visit that saw one) + Σ unchanged
    intervals."""
    return changes / exposure_s if exposure_s > 0 else 0.0


def _check_counts(changes: int, visits: int) -> None:
    if not 0 <= changes <= visits:
        raise ValueError(f"need 0 <= changes <= visits, got {changes} of {visits}")


def _score(lam: float, t: np.ndarray, n: np.ndarray, unchanged_s: float, alpha: float,
           beta: float) -> float:
    with np.errstate(over="ignore"):  # e^{λt} = inf: the term is 0, as it should be
        changed = float(np.sum(n * t / np.expm1(lam * t)))
    return changed - unchanged_s + alpha / lam - beta


def _rel_error(lam: float, t_all: np.ndarray, n_all: np.ndarray, alpha: float) -> float:
    """1/(λ√I): I = Σ tᵢ²/(e^{λtᵢ} − 1) over all intervals (expected information), plus
    the prior's curvature α/λ²."""
    if lam <= 0:
        return math.inf
    with np.errstate(over="ignore", divide="ignore"):
        info = float(np.sum(n_all * t_all * t_all / np.expm1(lam * t_all))) + alpha / lam**2
    return 1.0 / (lam * math.sqrt(info)) if info > 0 else math.inf


def mle_rate(changed_s: ArrayLike, unchanged_s: ArrayLike, changed_counts: ArrayLike | None = None,
             unchanged_count: int | None = None, prior: Prior | None = None) -> Estimate:
    """The maximum-likelihood (with ``prior``, posterior-mode) rate from irregular intervals.

    ``changed_s``: the intervals (seconds) that ended in a changed page, optionally as
    representative lengths with ``changed_counts``; ``unchanged_s``: the unchanged intervals,
    or their sum with ``unchanged_count`` (only the sum enters the likelihood).
    """
    t = np.atleast_1d(np.asarray(changed_s, dtype=float))
    n = np.ones_like(t) if changed_counts is None else np.asarray(changed_counts, dtype=float)
    t, n = t[n > 0], n[n > 0]
    u = np.atleast_1d(np.asarray(unchanged_s, dtype=float))
    u_sum = float(u.sum())
    u_count = int(unchanged_count if unchanged_count is not None else u.size)
    if np.any(t <= 0) or u_sum < 0:
        raise ValueError("intervals must be > 0 seconds")
    changes = float(n.sum())
    alpha, beta = (prior.strength, prior.strength / prior.rate) if prior else (0.0, 0.0)
    t_all = np.concatenate([t, [u_sum / u_count] if u_count else []])
    n_all = np.concatenate([n, [u_count] if u_count else []])
    if changes + alpha == 0:
        kind = Kind.NO_CHANGE if u_count else Kind.NO_DATA
        return Estimate(0.0, kind, math.inf)
    kind = Kind.POINT if changes else Kind.NO_CHANGE
    if u_sum + beta == 0:  # always changed, no prior: the continuity-corrected bound
        u_sum, kind = 0.5 * float(t.min()), Kind.SATURATED
    # the root lies in [(X+α)/(S_u + S_c/2 + β), (X+α)/(S_u + β)] (x/(eˣ−1) ∈ [1 − x/2, 1])
    lo = (changes + alpha) / (u_sum + float((n * t).sum()) / 2 + beta)
    hi = (changes + alpha) / (u_sum + beta)
    args = (t, n, u_sum, alpha, beta)
    lam = lo if _score(lo, *args) <= 0 else hi if _score(hi, *args) >= 0 else \
        brentq(_score, lo, hi, args=args, rtol=1e-12)
    return Estimate(lam, kind, _rel_error(lam, t_all, n_all, alpha))


def pooled_prior(changes: float, exposure_s: float, strength: float = 2.0) -> Prior | None:
    """A host's or site section's prior: the ratio of its pages' total changes to their total
    observed time (None until some change was seen)."""
    return Prior(changes / exposure_s, strength) if changes > 0 and exposure_s > 0 else None


#: Bounds of a fitted prior's strength (its gamma shape): below the floor the prior's rate
#: means nothing; above the ceiling it would outweigh a page's own first changes.
FITTED_STRENGTH_MIN, FITTED_STRENGTH_MAX = 0.05, 2.0


def fitted_prior(rates: ArrayLike, exposures_s: ArrayLike) -> Prior | None:
    """An empirical-Bayes prior for a set of pages (a host, a section, a crawl): the gamma
    distribution whose mean and variance match those of the pages' own rates rᵢ (estimated
    without a prior, as the policy plans with them) over Sᵢ seconds observed, by the method
    of moments: m = ΣSᵢrᵢ/ΣSᵢ, between-page variance v = ΣSᵢ(rᵢ − m)²/ΣSᵢ − n·m/ΣSᵢ (less
    the Poisson noise of each estimate, about m/Sᵢ), strength (gamma shape) a = m²/v,
    clipped to [FITTED_STRENGTH_MIN, FITTED_STRENGTH_MAX]. A page's estimate with it is its
    posterior mean (Xᵢ + a)/(Sᵢ + a/m).

    Why: a prior of fixed strength around the pooled mean says every page changes about as
    often as the average one. On a web whose rates span orders of magnitude and where many
    pages never change, that makes a page that showed no change in a day look like one that
    changes every few hours, and the age and √λ policies spend visits on it. With spread
    rates the fitted shape is small, and so is the pull toward the mean.
    """
    r = np.asarray(rates, dtype=float).ravel()
    s = np.asarray(exposures_s, dtype=float).ravel()
    if r.shape != s.shape or not (np.all(r >= 0) and np.all(s >= 0)
                                  and np.all(np.isfinite(r)) and np.all(np.isfinite(s))):
        raise ValueError("need as many finite rates >= 0 as exposures >= 0")
    keep = s > 0
    r, s = r[keep], s[keep]
    total = float(s.sum())
    if total <= 0 or not np.any(r > 0):
        return None
    m = float(np.sum(s * r) / total)
    v = float(np.sum(s * (r - m) ** 2) / total) - r.size * m / total
    a = m * m / v if v > 0 else FITTED_STRENGTH_MAX
    return Prior(m, float(np.clip(a, FITTED_STRENGTH_MIN, FITTED_STRENGTH_MAX)))
