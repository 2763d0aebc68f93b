"""Revisit policies on the changing sandbox web (issue 19), over real HTTP on loopback: one
budget, three seeds (three webs driven at once, one module-scoped run), the figures measured
against each web's ground truth (bench/freshness.py does the same at a larger scale).

The policies run twice from the same warm-up: planned on the rates estimated from their own
visit histories (probing censored ones, freshness/explore.py), and (``+oracle``) on the web's
true rates. The theory's claims hold, with a margin across the seeds, for the true rates. With
the estimated rates, uniform still beats proportional; probing lets the freshness optimum drop
fast pages that no unprobed estimate could; and the plans the freshness and √λ policies learn
beat the adaptive rule in steady state; measured over the short run they do not on every seed,
and docs/freshness.md ("The bench") gives the numbers why.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.freshness import BenchSpec, run_benches
from bench.freshness_driver import DriveResult
from bench.freshness_report import table_md
from bench.freshness_truth import Changes
from freshness.closedform import mean_age, mean_freshness
from freshness.policies import plan
from freshness.revisit import RevisitPolicy

SEEDS = (1, 2, 3)
ORACLES = [RevisitPolicy.PROPORTIONAL, RevisitPolicy.SQRT, RevisitPolicy.FRESHNESS,
           RevisitPolicy.AGE]
POLICIES = [RevisitPolicy.UNIFORM, RevisitPolicy.PROPORTIONAL, RevisitPolicy.SQRT,
            RevisitPolicy.FRESHNESS, RevisitPolicy.AGE, RevisitPolicy.ADAPTIVE]
#: 30 pages, one simulated day in 24 wall seconds; every page every 3 simulated hours on
#: average (8 visits a day), the first quarter a shared uniform warm-up.
SPEC = {"pages": 30, "sim_days": 1.0, "accel": 3600.0, "budget_per_sim_h": 10.0,
        "replan_sim_h": 3.0}

Table = dict[int, dict[str, dict[str, Any]]]
Runs = list[tuple[DriveResult, dict[str, Any], Changes]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    logs: Path = tmp_path_factory.mktemp("fresh-webs")
    out = run_benches([BenchSpec(seed=s, **SPEC) for s in SEEDS], POLICIES, logs, ORACLES)
    for _result, numbers, _changes in out:
        print(f"\nseed {numbers['spec']['seed']}: {numbers['pages']}, server "
              f"{numbers['server']}\n" + table_md(numbers["policies"]))
    return out


@pytest.fixture(scope="module")
def table(runs: Runs) -> Table:
    return {numbers["spec"]["seed"]: numbers["policies"] for _r, numbers, _c in runs}


def _margin(table: Table, better: str, worse: str, key: str, higher: bool) -> list[float]:
    """Per seed, how much ``better`` beats ``worse`` on ``key`` (relative, > 0: it does)."""
    out = []
    for rows in table.values():
        b, w = rows[better][key], rows[worse][key]
        out.append((b - w) / abs(w) if higher else (w - b) / abs(w))
    return out


def test_every_policy_got_about_the_same_visits_and_no_errors(table: Table) -> None:
    """The comparison is fair only if the driver kept up with every policy's budget."""
    for rows in table.values():
        for name, row in rows.items():
            assert row["errors"] == {}, (name, row["errors"])
            assert 0.8 < row["budget_used"] <= 1.02, (name, row["budget_used"])
            assert math.isfinite(row["mean_age_s"]) and row["changes"] > 0


# -- the theory's claims, with the true rates (the same visit loop, HTTP and ground truth) -----
def test_freshness_optimal_has_the_highest_mean_freshness(table: Table) -> None:
    for other in ("uniform", "proportional+oracle", "sqrt+oracle", "adaptive", "freshness",
                  "sqrt", "age"):
        assert min(_margin(table, "freshness+oracle", other, "mean_freshness", True)) > 0.01, \
            other
    # age-optimal is 1.8% behind in closed form on seed 3 (0.819 against 0.834), about the
    # run-to-run noise of the measurement (±1%): ahead over the seeds, never clearly behind
    margins = _margin(table, "freshness+oracle", "age+oracle", "mean_freshness", True)
    assert np.mean(margins) > 0.01 and min(margins) > -0.01, margins


def test_sqrt_has_the_lowest_mean_delay(table: Table) -> None:
    for other in ("uniform", "proportional+oracle", "freshness+oracle", "age+oracle",
                  "adaptive"):
        assert min(_margin(table, "sqrt+oracle", other, "mean_delay_s", False)) > 0.05, other


def test_uniform_beats_proportional_on_freshness(table: Table) -> None:
    assert min(_margin(table, "uniform", "proportional+oracle", "mean_freshness", True)) > 0.1
    # with estimated (and probed) rates too
    assert min(_margin(table, "uniform", "proportional", "mean_freshness", True)) > 0.03


def test_rate_driven_policies_beat_adaptive_on_their_own_objective(table: Table) -> None:
    # 0.01: on seed 3 the adaptive rule measured 0.763-0.797 over nine runs (it reacts within
    # a minute of simulated time, so it gains when the machine is idle), the oracle 0.811-0.822
    assert min(_margin(table, "freshness+oracle", "adaptive", "mean_freshness", True)) > 0.01
    assert min(_margin(table, "age+oracle", "adaptive", "mean_age_s", False)) > 0.2
    assert min(_margin(table, "sqrt+oracle", "adaptive", "mean_delay_s", False)) > 0.2


# -- the estimator-driven policies: probing censored histories (freshness/explore.py) ----------
def _estimates(result: DriveResult, name: str) -> np.ndarray:
    run = result.runs[name]
    return np.array([run.planner.rate_of(p.history) for p in run.pages])


def test_probing_lets_the_freshness_optimum_drop_the_fast_pages(runs: Runs) -> None:
    """Without probes every page changing more than ~12 times per uniform interval saw a change
    on every visit, and no interval estimate from those visits exceeds ln(2n+1) changes per
    interval: the plan on them drops none of the pages the true plan drops (negative control:
    the uniform run's histories, no prior, on the same web). With probes it drops some on every
    seed, for a share of the visits."""
    for result, numbers, changes in runs:
        budget = numbers["spec"]["budget_per_sim_h"] / 3600
        lam = changes.sim_rates
        dropped = (plan(lam, budget, "freshness").frequencies == 0) & (lam > 0)
        assert dropped.sum() >= 2
        probed = plan(_estimates(result, "freshness"), budget, "freshness").frequencies
        regular = np.array([p.history.mle(None).rate for p in result.runs["uniform"].pages])
        unprobed = plan(regular, budget, "freshness").frequencies
        assert np.all(unprobed[dropped] > 0)
        assert np.sum(probed[dropped] == 0) >= 1, (probed[dropped], lam[dropped])
        for name in ("proportional", "sqrt", "freshness", "age"):
            run = result.runs[name]
            assert 0 < run.probes <= 0.3 * len(run.visits), (name, run.probes, len(run.visits))


def _steady(result: DriveResult, name: str, lam: np.ndarray) -> tuple[float, float, float]:
    """Closed-form mean freshness, age and delay (per change) at the true rates of the
    intervals the run's planner gives at the end (its last replan, its final estimates)."""
    run = result.runs[name]
    rates = lam if run.oracle else _estimates(result, name)
    f = np.array([1.0 / run.planner.interval_at(float(r)) for r in rates])
    ch = lam > 0
    return (float(np.mean(mean_freshness(f, lam))), float(np.mean(mean_age(f, lam))),
            float(np.sum(lam[ch] / (2 * f[ch])) / np.sum(lam[ch])))


def test_the_learned_plans_beat_adaptive_in_steady_state(runs: Runs) -> None:
    """What the estimator-driven freshness and √λ plans learned by the end of the run would
    give from then on (closed form at the true rates; the oracle rows show the closed form
    matches the measurement within 5%) against what the adaptive rule measured. √λ's delay
    beats it on every seed. The freshness plan beats it over the seeds, but on seed 2 (22 of
    30 pages changing, 7 faster than the true plan keeps) only within the run-to-run noise of
    the measurement (about ±2%), so per seed it is only asserted not to lose by more.
    Measured over this run's 18 simulated hours neither beats it on every seed: the run
    starts from 2 warm-up visits per page, the estimates are learned during it, and the probes
    take a share of its visits (docs/freshness.md, "The bench")."""
    learned, adaptive = [], []
    for result, numbers, changes in runs:
        lam, rows = changes.sim_rates, numbers["policies"]
        oracle = _steady(result, "freshness+oracle", lam)[0]
        assert abs(oracle - rows["freshness+oracle"]["mean_freshness"]) < 0.05 * oracle
        fresh, _, _ = _steady(result, "freshness", lam)
        _, _, delay = _steady(result, "sqrt", lam)
        measured = rows["adaptive"]
        print(f"seed {numbers['spec']['seed']}: learned freshness plan F {fresh:.3f}, √λ plan "
              f"delay {delay / 3600:.2f} h; adaptive measured F "
              f"{measured['mean_freshness']:.3f}, delay {measured['mean_delay_s'] / 3600:.2f} h")
        assert delay < 0.95 * measured["mean_delay_s"]
        assert fresh > 0.97 * measured["mean_freshness"]
        learned.append(fresh)
        adaptive.append(measured["mean_freshness"])
    assert np.mean(learned) > 1.01 * np.mean(adaptive), (learned, adaptive)
