"""Revisit policies on the changing sandbox web (issue 19), over real HTTP on loopback: one
budget, three seeds (three webs driven at once, one module-scoped run), the figures measured
against each web's ground truth over a scored window after a shared warm-up and an unscored
learning span (bench/freshness.py does the same at a larger scale).

The policies run twice from the same warm-up: planned on the rates estimated from their own
visit histories (probing censored ones, freshness/explore.py), and (``+oracle``) on the web's
true rates. The theory's claims hold, with a margin across the seeds, for the true rates. With
the estimated rates, uniform still beats proportional; probing lets the freshness optimum drop
fast pages that no unprobed estimate could; √λ beats the adaptive rule's delay on every seed,
and freshness- and age-optimal beat it on their objectives on seeds 1 and 3 and over the
seeds, but on seed 2 only draw level (docs/freshness.md, "The test", has every run's margins).
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
from freshness.policies import plan
from freshness.revisit import RevisitPolicy

SEEDS = (1, 2, 3)
ORACLES = [RevisitPolicy.PROPORTIONAL, RevisitPolicy.SQRT, RevisitPolicy.FRESHNESS,
           RevisitPolicy.AGE]
POLICIES = [RevisitPolicy.UNIFORM, RevisitPolicy.PROPORTIONAL, RevisitPolicy.SQRT,
            RevisitPolicy.FRESHNESS, RevisitPolicy.AGE, RevisitPolicy.ADAPTIVE]
#: 30 pages, 42 simulated hours in 42 wall seconds; every page every 3 simulated hours on
#: average (8 visits a day). The first 20% is a shared uniform warm-up; then every policy runs
#: its own rule, the next 30% unscored (the estimators and the adaptive rule's intervals
#: learn), the last 50% (21 h) scored.
SPEC = {"pages": 30, "sim_days": 1.75, "accel": 3600.0, "budget_per_sim_h": 10.0,
        "replan_sim_h": 3.0, "warmup_share": 0.2, "unscored_share": 0.3}

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
    """With the true rates: on every seed, by 1% in freshness, 5% in age and 10% in delay
    (over nine unstarved runs the smallest margins were 3.6%, 9.6% and 19%, all on seed 2)."""
    fresh = _margin(table, "freshness+oracle", "adaptive", "mean_freshness", True)
    age = _margin(table, "age+oracle", "adaptive", "mean_age_s", False)
    delay = _margin(table, "sqrt+oracle", "adaptive", "mean_delay_s", False)
    print(f"\noracle margins over adaptive per seed: freshness {np.round(fresh, 3)}, age "
          f"{np.round(age, 3)}, delay {np.round(delay, 3)}")
    assert min(fresh) > 0.01 and min(age) > 0.05 and min(delay) > 0.1, (fresh, age, delay)


def test_estimated_rate_policies_beat_adaptive_on_their_own_objective(table: Table) -> None:
    """Planned on the rates each policy estimated from its own visits, measured over the
    scored window. √λ beats the adaptive rule's delay on every seed. Freshness-optimal and
    age-optimal beat it on seeds 1 and 3 and over the seeds; on seed 2 (22 of 30 pages
    changing, 7 of them faster than the freshness optimum keeps, so the most probing) they
    are level with it in freshness (asserted not to lose by more than 4%) and all over the
    place in age, -27% to +4% (docs/freshness.md, "The test", has the margins of every run)."""
    fresh = _margin(table, "freshness", "adaptive", "mean_freshness", True)
    age = _margin(table, "age", "adaptive", "mean_age_s", False)
    delay = _margin(table, "sqrt", "adaptive", "mean_delay_s", False)
    print(f"\nestimated-rate margins over adaptive per seed: freshness {np.round(fresh, 3)}, "
          f"age {np.round(age, 3)}, delay {np.round(delay, 3)}")
    # Margins: the smallest seen over nine unstarved runs, less some room
    # (the runs are driven by the wall clock at 3600x, so load moves them): delay 2.8%, and
    # on seeds 1 and 3 freshness 1.9%, age 16.6%. Seed 2 went down to -2.2% in freshness, and
    # its age margin spread from -27% to +4% (on a quiet machine): it is not asserted alone.
    assert min(delay) > 0.01, delay
    by_seed = dict(zip(table, zip(fresh, age, strict=True), strict=True))
    for seed in (1, 3):
        assert by_seed[seed][0] > 0.005 and by_seed[seed][1] > 0.1, (seed, by_seed[seed])
    assert by_seed[2][0] > -0.04, by_seed[2]
    assert np.mean(fresh) > 0.005 and np.mean(age) > 0.05, (fresh, age)


# -- the estimator-driven policies: probing censored histories (freshness/explore.py) ----------
def _estimates(result: DriveResult, name: str) -> np.ndarray:
    run = result.runs[name]
    return np.array([run.planner.rate_of(p.history) for p in run.pages])


def test_probing_lets_the_freshness_optimum_drop_the_fast_pages(runs: Runs) -> None:
    """Without probes every page changing more than ~12 times per uniform interval saw a change
    on every visit, and no interval estimate from those visits exceeds ln(2n+1) changes per
    interval: the plan on them drops none of the pages the true plan drops (negative control:
    the uniform run's histories, no prior, on the same web). With probing on (a censored page
    planned at the worst case for freshness, and probed while that can change its plan), the
    plan on the final estimates drops some of them on every seed, for a share of the visits."""
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
            # age probes only where a probe can move its plan, which may be nowhere
            least = 0 if name == "age" else 1
            assert least <= run.probes <= 0.3 * len(run.visits), (name, run.probes,
                                                                  len(run.visits))
