"""The interval MLE of many visit histories at once, for a partition owner's replan.

A replan estimates the rate of every scheduled URL of a partition (up to 200,000), twice:
once without a prior (to fit the partition's prior) and once with it. ``mle_rate`` solves
one history at a time with numpy on 24-element arrays and scipy's ``brentq``: ~75 us a
history, so a replan of 100,000 URLs took 23 s of the scheduler's thread (measured
2026-12-07; bench/replan_cost.py times the old per-page path beside the replan). Here every
history's score equation is solved together on an (N, 24) array, by Newton's method from the
left end of its bracket.

Same estimate as ``mle_rate`` (to its tolerance, tests/freshness/test_batch.py compares them
on random histories): the score S(λ) = Σ nₖtₖ/(e^{λtₖ} − 1) − Sᵤ + α/λ − β is decreasing and
convex in λ, so from a point left of the root (S > 0) each Newton step stays left of the root
and moves toward it: no step overshoots, and the bracket [lo, hi] of ``mle_rate`` holds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from freshness.estimators import Estimate, Kind, Prior, mle_rate
from freshness.history import BUCKETS, REPRESENTATIVE_S, VisitHistory

if TYPE_CHECKING:
    from freshness.revisit import RevisitPlanner

#: Newton steps before a history left unsolved goes to the scalar ``mle_rate``.
MAX_STEPS = 60
#: A root is taken when a step moves it by less than this, relative (``mle_rate``'s brentq
#: stops within rtol 1e-12 or an absolute 2e-12 per second, whichever is looser).
RTOL = 1e-13

_KINDS = (Kind.POINT, Kind.NO_CHANGE, Kind.SATURATED, Kind.NO_DATA)
_POINT, _NO_CHANGE, _SATURATED, _NO_DATA = range(4)


def mle_many(histories: Sequence[VisitHistory], prior: Prior | None = None) -> list[Estimate]:
    """``[h.mle(prior) for h in histories]``, solved together."""
    n = len(histories)
    if n == 0:
        return []
    counts = np.array([h.buckets for h in histories], dtype=float).reshape(n, BUCKETS)
    changed_s = np.array([h.changed_s for h in histories], dtype=float)
    u_sum = np.array([h.unchanged_s for h in histories], dtype=float)
    u_count = np.array([h.n_unchanged for h in histories], dtype=float)
    # changed_intervals(): representative lengths scaled to the exact total, within a bucket
    approx = counts @ REPRESENTATIVE_S
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(approx > 0, np.clip(changed_s / approx, 2**-0.5, 2**0.5), 1.0)
    t = scale[:, None] * REPRESENTATIVE_S[None, :]
    alpha, beta = (prior.strength, prior.strength / prior.rate) if prior else (0.0, 0.0)
    changes = counts.sum(axis=1)
    kind = np.where(changes > 0, _POINT, _NO_CHANGE)
    no_root = changes + alpha == 0
    kind = np.where(no_root, np.where(u_count > 0, _NO_CHANGE, _NO_DATA), kind)
    # the unchanged intervals' mean, as the information's extra term (before the correction)
    u_mean = np.divide(u_sum, u_count, out=np.zeros(n), where=u_count > 0)
    saturated = ~no_root & (u_sum + beta == 0)
    shortest = np.where(counts > 0, t, np.inf).min(axis=1)
    u_eff = np.where(saturated, 0.5 * shortest, u_sum)
    kind = np.where(saturated, _SATURATED, kind)
    lam = np.zeros(n)
    solve = ~no_root
    if solve.any():
        lam[solve] = _roots(t[solve], counts[solve], u_eff[solve], changes[solve], prior)
    rel = np.full(n, math.inf)
    if solve.any():
        rel[solve] = _rel_errors(lam[solve], t[solve], counts[solve], u_mean[solve],
                                 u_count[solve], alpha)
    return [Estimate(float(r), _KINDS[k], float(e)) for r, k, e in zip(lam, kind, rel,
                                                                        strict=True)]


def _score(lam: np.ndarray, t: np.ndarray, n: np.ndarray, u: np.ndarray, alpha: float,
           beta: float) -> tuple[np.ndarray, np.ndarray]:
    """S(λ) and S'(λ) per row (λ > 0)."""
    with np.errstate(over="ignore"):
        e = np.expm1(lam[:, None] * t)  # inf where e^{λt} overflows: those terms are 0
    nt_e = n * t / e
    value = nt_e.sum(axis=1) - u + alpha / lam - beta
    # d/dλ [t/(e^{λt} − 1)] = −t² (1/e + 1/e²) with e = e^{λt} − 1
    slope = -(nt_e * t * (1.0 + 1.0 / e)).sum(axis=1) - alpha / (lam * lam)
    return value, slope


def _roots(t: np.ndarray, n: np.ndarray, u: np.ndarray, changes: np.ndarray,
           prior: Prior | None) -> np.ndarray:
    """λ per row as ``mle_rate`` picks it: lo or hi when the root is not inside (lo, hi)."""
    alpha, beta = (prior.strength, prior.strength / prior.rate) if prior else (0.0, 0.0)
    lo = (changes + alpha) / (u + (n * t).sum(axis=1) / 2 + beta)
    hi = (changes + alpha) / (u + beta)
    s_lo, _ = _score(lo, t, n, u, alpha, beta)
    with np.errstate(divide="ignore", invalid="ignore"):
        s_hi, _ = _score(hi, t, n, u, alpha, beta)
    lam = np.where(s_lo <= 0, lo, np.where(s_hi >= 0, hi, np.nan))
    todo = np.flatnonzero(np.isnan(lam))
    x = lo[todo]
    for _ in range(MAX_STEPS):
        if todo.size == 0:
            break
        value, slope = _score(x, t[todo], n[todo], u[todo], alpha, beta)
        step = np.minimum(x - value / slope, hi[todo])
        done = (np.abs(step - x) <= RTOL * step) | (value <= 0)
        lam[todo[done]] = np.where(value[done] <= 0, x[done], step[done])
        keep = ~done
        todo, x = todo[keep], np.maximum(step[keep], x[keep])
    for i in todo:  # not settled in MAX_STEPS (not met in tests): the scalar solve
        k = n[i] > 0
        lam[i] = mle_rate(t[i][k], [u[i]], n[i][k], 1, prior).rate
    return lam


def _rel_errors(lam: np.ndarray, t: np.ndarray, n: np.ndarray, u_mean: np.ndarray,
                u_count: np.ndarray, alpha: float) -> np.ndarray:
    """``estimators._rel_error`` per row: 1/(λ√I), I the expected information."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        info = (n * t * t / np.expm1(lam[:, None] * t)).sum(axis=1)
        um = np.where(u_count > 0, u_mean, 1.0)
        info += np.where(u_count > 0, u_count * um * um / np.expm1(lam * um), 0.0)
        info += alpha / (lam * lam)
        rel = 1.0 / (lam * np.sqrt(info))
    return np.where((lam > 0) & (info > 0), rel, math.inf)


def rates_of(planner: RevisitPlanner, histories: Sequence[VisitHistory | None]) -> np.ndarray:
    """``[planner.rate_of(h) for h in histories]``, with the interval MLEs solved together
    (the rule that picks between them and Last-Modified stays ``estimate_of``'s). The MLE
    without a prior is solved only where the rule may ask for it: no prior, or probing on."""
    known = [h for h in histories if h is not None and h.visits]
    prior = planner.prior
    own = mle_many(known, None) if prior is None or planner.settings.probe is not None \
        else [None] * len(known)
    shrunk = mle_many(known, prior) if prior is not None else [None] * len(known)
    solved = iter(zip(own, shrunk, strict=True))
    rates = np.zeros(len(histories))
    for i, history in enumerate(histories):
        if history is None or not history.visits:
            rates[i] = planner.rate_of(history)
            continue
        mine, theirs = next(solved)
        rates[i] = planner.estimate_of(history, partial(_solved, mine, theirs, prior)).rate
    return rates


def _solved(own: Estimate | None, shrunk: Estimate | None, prior: Prior | None,
            asked: Prior | None) -> Estimate:
    """The MLE ``estimate_of`` asked for, of the ones solved: no prior, or the planner's."""
    found = own if asked is None else shrunk if asked == prior else None
    if found is None:
        raise ValueError(f"no MLE was solved for the prior {asked}")
    return found
