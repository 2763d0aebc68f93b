"""Ground truth of a freshness bench run: freshness F(t), age A(t) and the delay of each change,
from the changing web's ChangeModel and the times each policy fetched each page; and the rate
estimators' errors against the true rates.

The rule: only real (content) changes make a copy stale. The changing web's cosmetic pages,
whose changes touch only the "Updated … views" line, never go stale (the driver's detection
treats those changes as unchanged too, bench/freshness_detect.py). Any successful visit (200 or
304) renews the copy: it is the version current at the visit. Times are simulated seconds.

- F(t): share of pages whose copy is current at t (measured on a grid after the warm-up).
- A(t): mean over pages of t − (first real change after the copy was fetched), 0 when current.
- delay: for each real change after the warm-up, the time until the policy's next visit; a
  change no visit saw before the end counts with the time to the end (a lower bound) and is
  counted as censored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.freshness_driver import DriveResult, PolicyRun
from freshness.history import VisitHistory
from freshness.revisit import RevisitPlanner
from sandbox.change_model import ChangeModel

GRID = 400
#: Buckets of the true mean time between changes (simulated seconds) for estimator errors.
BUCKETS = [("1-10 min", 60.0, 600.0), ("10-60 min", 600.0, 3600.0),
           ("1-6 h", 3600.0, 21600.0), ("6-24 h", 21600.0, 86400.0),
           ("1-7 d", 86400.0, 7 * 86400.0 + 1)]


@dataclass(frozen=True)
class Changes:
    """Each page's real change times (simulated) over the run, and its true rate."""

    times: list[np.ndarray]
    sim_rates: np.ndarray


def changes_of(model: ChangeModel, result: DriveResult) -> Changes:
    times, rates = [], []
    w0, w1 = model.wall_time(result.start_sim - 1.0), model.wall_time(result.end_sim)
    for url in result.urls:
        times.append(np.array([model.sim_time(t) for t in model.change_times(url, w0, w1)]))
        rates.append(model.rate(url) / model.acceleration)
    return Changes(times, np.array(rates))


def visit_times(result: DriveResult, run: PolicyRun) -> list[np.ndarray]:
    """Sorted simulated times of each page's successful visits: the warm-up's, then the
    policy's own."""
    per: list[list[float]] = [[] for _ in result.urls]
    for i, t, _ in result.warmup.visits:
        per[i].append(t)
    if run is not result.warmup:
        for i, t, _ in run.visits:
            per[i].append(t)
    return [np.sort(np.array(v)) for v in per]


@dataclass(frozen=True)
class Measures:
    grid: np.ndarray
    freshness: np.ndarray  # F(t) on the grid
    age: np.ndarray  # A(t) on the grid (simulated s)
    change_at: np.ndarray  # every real change after the fork ...
    delay: np.ndarray  # ... and its delay (censored ones: the time to the end)
    censored: int

    def summary(self) -> dict[str, float]:
        return {"mean_freshness": float(self.freshness.mean()),
                "mean_age_s": float(self.age.mean()),
                "mean_delay_s": float(self.delay.mean()) if self.delay.size else 0.0,
                "changes": int(self.delay.size), "censored_changes": self.censored}


def measure(result: DriveResult, run: PolicyRun, changes: Changes) -> Measures:
    grid = np.linspace(result.score_sim, result.end_sim, GRID, endpoint=False)
    fresh = np.zeros(GRID)
    age = np.zeros(GRID)
    change_at, delay, censored = [], [], 0
    for vt, ct in zip(visit_times(result, run), changes.times, strict=True):
        k = np.searchsorted(vt, grid, side="right") - 1
        fetched = np.where(k >= 0, vt[np.maximum(k, 0)], -math.inf)
        j = np.searchsorted(ct, fetched, side="right")
        first = np.where(j < ct.size, ct[np.minimum(j, max(ct.size - 1, 0))], math.inf) \
            if ct.size else np.full(GRID, math.inf)
        stale = first <= grid
        fresh += ~stale
        age += np.where(stale, grid - np.where(stale, first, grid), 0.0)
        after = ct[ct > result.score_sim]
        m = np.searchsorted(vt, after, side="right")
        seen = m < vt.size
        d = np.where(seen, vt[np.minimum(m, max(vt.size - 1, 0))] - after, result.end_sim - after)
        censored += int((~seen).sum())
        change_at.append(after)
        delay.append(d)
    n = len(changes.times)
    return Measures(grid, fresh / n, age / n, np.concatenate(change_at), np.concatenate(delay),
                    censored)


def binned_delay(m: Measures, grid: np.ndarray, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Mean delay of the changes in each of ``bins`` equal spans of the grid's range."""
    edges = np.linspace(grid[0], grid[-1], bins + 1)
    idx = np.clip(np.searchsorted(edges, m.change_at, side="right") - 1, 0, bins - 1)
    sums = np.bincount(idx, weights=m.delay, minlength=bins)
    counts = np.bincount(idx, minlength=bins)
    with np.errstate(invalid="ignore"):
        return 0.5 * (edges[:-1] + edges[1:]), sums / counts


# -- estimators ---------------------------------------------------------------------------------
def estimates(history: VisitHistory, planner: RevisitPlanner) -> dict[str, float]:
    """Each estimator's rate (changes per simulated second) from one page's history."""
    return {"naive": history.naive_rate(), "bias_reduced": history.bias_reduced_rate(),
            "mle": history.mle().rate, "planner": planner.rate_of(history)}


def estimator_errors(runs: list[PolicyRun], rates: np.ndarray) -> dict[str, dict[str, float]]:
    """Per bucket of the true rate: mean relative error |r̂ − λ|/λ of each estimator over the
    pages of ``runs`` (their final histories), and the page count; pages that never really
    change: the mean estimate in changes per simulated day."""
    rows: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for page, lam in zip(run.pages, rates, strict=True):
            if page.history.visits == 0:
                continue
            est = estimates(page.history, run.planner)
            key = "never" if lam == 0 else next(
                (name for name, lo, hi in BUCKETS if lo <= 1 / lam < hi), "other")
            row = rows.setdefault(key, {})
            for name, value in est.items():
                err = value * 86400 if lam == 0 else abs(value - lam) / lam
                row.setdefault(name, []).append(err)
    order = [b[0] for b in BUCKETS] + ["never", "other"]
    return {k: {**{name: float(np.mean(v)) for name, v in rows[k].items()},
                "pages": len(next(iter(rows[k].values())))} for k in order if k in rows}

