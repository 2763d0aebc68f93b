"""Revisit policies on the changing sandbox web (issue 19), over real HTTP on loopback: one
budget, three seeds (three webs driven at once, one module-scoped run), the figures measured
against each web's ground truth (bench/freshness.py does the same at a larger scale).

The policies run twice from the same warm-up: planned on the rates estimated from their own
visit histories, and (``+oracle``) on the web's true rates. The theory's claims hold, with a
margin across the seeds, for the true rates; with the estimated rates most do not, and the last
test asserts why (docs/freshness.md, "The bench").
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
    for other in ("uniform", "proportional+oracle", "sqrt+oracle", "age+oracle", "adaptive",
                  "freshness", "sqrt", "age"):
        assert min(_margin(table, "freshness+oracle", other, "mean_freshness", True)) > 0.01, \
            other


def test_sqrt_has_the_lowest_mean_delay(table: Table) -> None:
    for other in ("uniform", "proportional+oracle", "freshness+oracle", "age+oracle",
                  "adaptive"):
        assert min(_margin(table, "sqrt+oracle", other, "mean_delay_s", False)) > 0.05, other


def test_uniform_beats_proportional_on_freshness(table: Table) -> None:
    assert min(_margin(table, "uniform", "proportional+oracle", "mean_freshness", True)) > 0.1
    # with estimated rates too, by less: saturated estimates hide how fast the fast pages are
    assert min(_margin(table, "uniform", "proportional", "mean_freshness", True)) > 0.005


def test_rate_driven_policies_beat_adaptive_on_their_own_objective(table: Table) -> None:
    assert min(_margin(table, "freshness+oracle", "adaptive", "mean_freshness", True)) > 0.03
    assert min(_margin(table, "age+oracle", "adaptive", "mean_age_s", False)) > 0.2
    assert min(_margin(table, "sqrt+oracle", "adaptive", "mean_delay_s", False)) > 0.2


# -- why the estimated-rate policies fall short of those claims here ---------------------------
def test_interval_estimates_saturate_on_the_pages_the_optimum_drops(runs: Runs) -> None:
    """The freshness optimum drops the pages changing more than ~12 times per uniform visit
    interval. From visits that far apart every visit sees a change, and an interval estimate
    cannot exceed about ln(2n + 1) changes per interval; Last-Modified, which could tell, has
    a resolution of one wall second, i.e. ``accel`` simulated seconds (an hour here). So the
    planner's rates of the fast pages are far below the truth and the plan on them drops
    nothing that the plan on the true rates drops."""
    for result, numbers, changes in runs:
        run = result.runs["freshness"]
        budget = numbers["spec"]["budget_per_sim_h"] / 3600
        interval = len(result.urls) / budget
        lam = changes.sim_rates
        est = np.array([run.planner.rate_of(p.history) for p in run.pages])
        fast = lam * interval > 12
        assert fast.sum() >= 2
        assert np.all(est[fast] < lam[fast] / 2), (est[fast], lam[fast])
        truth_plan, est_plan = plan(lam, budget, "freshness"), plan(est, budget, "freshness")
        dropped = (truth_plan.frequencies == 0) & (lam > 0)
        assert dropped.sum() >= 2
        assert np.all(est_plan.frequencies[dropped] > 0)
