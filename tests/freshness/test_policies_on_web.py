"""Revisit policies on the changing sandbox web (issue 19), over real HTTP on loopback: one
budget, three seeds (three webs driven at once, one module-scoped run), the figures measured
against each web's ground truth over a scored window after a shared warm-up and an unscored
learning span (bench/freshness.py does the same at a larger scale). The driver owns simulated
time (bench/freshness_driver.py), so each seed's figures are the same on every run.

The policies run twice from the same warm-up: planned on the rates estimated from their own
visit histories (probing censored ones, freshness/explore.py), and (``+oracle``) on the web's
true rates. The theory's claims hold, with a margin across the seeds, for the true rates. With
the estimated rates, uniform still beats proportional; probing lets the freshness optimum drop
fast pages that no unprobed estimate could; and √λ, freshness- and age-optimal beat the
adaptive rule on their own objectives on every seed (docs/freshness.md, "The test", has the
margins of seeds 1-12).
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
#: 60 pages, 4 simulated days on the driver's own clock (bench/freshness_driver.py: a run is a
#: function of its seed, whatever the machine's load); every page every 3 simulated hours on
#: average (8 visits a day). The first 15% is a shared uniform warm-up; then every policy runs
#: its own rule, the next 25% unscored (the estimators and the adaptive rule's intervals
#: learn), the last 60% (58 h) scored. HTTP dates keep a resolution of one simulated hour.
SPEC = {"pages": 60, "sim_days": 4.0, "accel": 3600.0, "budget_per_sim_h": 20.0,
        "replan_sim_h": 3.0, "warmup_share": 0.15, "unscored_share": 0.25}

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
    for other in ("uniform", "proportional+oracle", "sqrt+oracle", "age+oracle", "adaptive",
                  "sqrt", "age"):
        assert min(_margin(table, "freshness+oracle", other, "mean_freshness", True)) > 0.01, \
            other
    # the same policy on its estimates comes within 1% on some seeds: ahead, not by 1%
    assert min(_margin(table, "freshness+oracle", "freshness", "mean_freshness", True)) > 0


def test_sqrt_has_the_lowest_mean_delay(table: Table) -> None:
    for other in ("uniform", "proportional+oracle", "freshness+oracle", "age+oracle",
                  "adaptive"):
        assert min(_margin(table, "sqrt+oracle", other, "mean_delay_s", False)) > 0.05, other


def test_uniform_beats_proportional_on_freshness(table: Table) -> None:
    assert min(_margin(table, "uniform", "proportional+oracle", "mean_freshness", True)) > 0.1
    # with estimated (and probed) rates too
    assert min(_margin(table, "uniform", "proportional", "mean_freshness", True)) > 0.03


def test_rate_driven_policies_beat_adaptive_on_their_own_objective(table: Table) -> None:
    """With the true rates: on every seed, by 3% in freshness, 20% in age and 20% in delay
    (seeds 1-12 gave at least 5.3%, 36% and 25%)."""
    fresh = _margin(table, "freshness+oracle", "adaptive", "mean_freshness", True)
    age = _margin(table, "age+oracle", "adaptive", "mean_age_s", False)
    delay = _margin(table, "sqrt+oracle", "adaptive", "mean_delay_s", False)
    print(f"\noracle margins over adaptive per seed: freshness {np.round(fresh, 3)}, age "
          f"{np.round(age, 3)}, delay {np.round(delay, 3)}")
    assert min(fresh) > 0.03 and min(age) > 0.2 and min(delay) > 0.2, (fresh, age, delay)


def test_estimated_rate_policies_beat_adaptive_on_their_own_objective(table: Table) -> None:
    """Planned on the rates each policy estimated from its own visits (probing censored ones),
    measured over the scored window: on every seed freshness-optimal beats the adaptive rule's
    freshness by 2%, age-optimal its age by 10% and √λ its delay by 10% (seeds 1-12 gave at
    least 3.3%, 12.8% and 18.7%; docs/freshness.md, "The test")."""
    fresh = _margin(table, "freshness", "adaptive", "mean_freshness", True)
    age = _margin(table, "age", "adaptive", "mean_age_s", False)
    delay = _margin(table, "sqrt", "adaptive", "mean_delay_s", False)
    print(f"\nestimated-rate margins over adaptive per seed: freshness {np.round(fresh, 3)}, "
          f"age {np.round(age, 3)}, delay {np.round(delay, 3)}")
    assert min(fresh) > 0.02 and min(age) > 0.1 and min(delay) > 0.1, (fresh, age, delay)


def test_with_estimated_rates_freshness_optimal_is_freshest_and_sqrt_quickest(
        table: Table) -> None:
    """The first two claims among the estimated-rate policies too, on every seed: by 0.5% in
    freshness and 10% in delay over the other policies (seeds 1-12 gave at least 1.2% and
    16.9%)."""
    for other in ("uniform", "proportional", "sqrt", "age", "adaptive"):
        assert min(_margin(table, "freshness", other, "mean_freshness", True)) > 0.005, other
    for other in ("uniform", "proportional", "freshness", "age", "adaptive"):
        assert min(_margin(table, "sqrt", other, "mean_delay_s", False)) > 0.1, other


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
