"""Revisit policies: the TODS 2003 worked example, the Lagrangian's optimality conditions,
random feasible plans that never beat the optimum, the ordering of policies on their own
objectives, and the adaptive baseline rule."""

from __future__ import annotations

import numpy as np
import pytest

from freshness.adaptive import NUTCH, STORMCRAWLER, AdaptiveRule
from freshness.closedform import age_gain, freshness_gain, mean_age, mean_delay, mean_freshness
from freshness.policies import PlanError, Policy, plan
from freshness.solver import frequencies_at, solve

#: TODS 2003: pages changing 1..5 times a day, 5 visits a day; the paper's optimal frequencies.
PAPER_RATES = [1.0, 2.0, 3.0, 4.0, 5.0]
PAPER_FRESHNESS_OPTIMAL = [1.15, 1.36, 1.35, 1.14, 0.0]
#: Our five-page example: rates over three orders of magnitude, unequal weights.
RATES = np.array([0.02, 0.3, 1.0, 6.0, 40.0])
WEIGHTS = np.array([1.0, 3.0, 1.0, 2.0, 1.0])


def test_the_papers_worked_example() -> None:
    fresh = plan(PAPER_RATES, 5.0, Policy.FRESHNESS)
    np.testing.assert_allclose(fresh.frequencies, PAPER_FRESHNESS_OPTIMAL, atol=0.006)
    uniform = plan(PAPER_RATES, 5.0, Policy.UNIFORM)
    proportional = plan(PAPER_RATES, 5.0, Policy.PROPORTIONAL)
    assert uniform.mean_freshness > proportional.mean_freshness  # 0.365 against 0.317
    assert fresh.mean_freshness > uniform.mean_freshness


def _freshness_conditions(f: np.ndarray, lam: np.ndarray, w: np.ndarray, rtol: float) -> bool:
    """KKT: equal weighted marginal on visited pages, no higher marginal at 0 elsewhere."""
    visited = f > 0
    gains = w * freshness_gain(f, lam)
    mu = gains[visited].mean()
    return bool(np.allclose(gains[visited], mu, rtol=rtol)
                and np.all(w[~visited] / lam[~visited] <= mu * (1 + rtol)))


def test_freshness_optimum_satisfies_the_optimality_conditions() -> None:
    result = plan(RATES, 4.0, Policy.FRESHNESS, WEIGHTS)
    f = result.frequencies
    assert f.sum() == pytest.approx(4.0, rel=1e-9)
    assert (f == 0).any() and (f > 0).sum() >= 3  # some dropped, some kept: both conditions bite
    assert _freshness_conditions(f, RATES, WEIGHTS, rtol=1e-6)
    assert result.mu == pytest.approx(float((WEIGHTS * freshness_gain(f, RATES))[f > 0][0]))
    # negative control: a plan that is not optimal fails the same check
    assert not _freshness_conditions(plan(RATES, 4.0, Policy.SQRT, WEIGHTS).frequencies, RATES,
                                     WEIGHTS, rtol=1e-6)


def test_age_optimum_satisfies_the_optimality_conditions() -> None:
    f = plan(RATES, 4.0, Policy.AGE, WEIGHTS).frequencies
    assert np.all(f > 0)  # the marginal at f = 0 is infinite: every page is visited
    gains = WEIGHTS * age_gain(f, RATES)
    np.testing.assert_allclose(gains, gains.mean(), rtol=1e-6)


def test_no_random_feasible_plan_beats_the_optima() -> None:
    rng = np.random.default_rng(11)
    budget = 4.0
    trials = budget * rng.dirichlet(np.full(RATES.size, 0.7), size=5000)
    fresh = (WEIGHTS * mean_freshness(trials, RATES)).sum(axis=1)
    age = (WEIGHTS * mean_age(trials, RATES)).sum(axis=1)
    best_fresh = (WEIGHTS * plan(RATES, budget, "freshness", WEIGHTS).page_figures()[0]).sum()
    best_age = (WEIGHTS * plan(RATES, budget, "age", WEIGHTS).page_figures()[1]).sum()
    assert fresh.max() <= best_fresh + 1e-12 and fresh.max() > 0.95 * best_fresh
    assert age.min() >= best_age - 1e-12


def test_each_policy_wins_its_own_objective() -> None:
    rng = np.random.default_rng(5)
    lam = 10 ** rng.uniform(-2, 2, 300)
    plans = {p: plan(lam, 60.0, p) for p in Policy if p is not Policy.FIXED}
    assert max(plans.values(), key=lambda p: p.mean_freshness).policy is Policy.FRESHNESS
    assert min(plans.values(), key=lambda p: p.mean_age).policy is Policy.AGE
    assert min(plans.values(), key=lambda p: p.mean_delay).policy is Policy.SQRT
    assert plans[Policy.UNIFORM].mean_freshness > plans[Policy.PROPORTIONAL].mean_freshness
    for p in plans.values():
        assert p.budget_used == pytest.approx(60.0, rel=1e-8)


def test_summary_figures_are_the_closed_forms() -> None:
    result = plan([0.5, 1.0, 2.0], 3.0, Policy.SQRT, [1.0, 2.0, 1.0])
    f, lam, w = result.frequencies, result.rates, result.weights
    np.testing.assert_allclose(f, 3.0 * np.sqrt(w * lam) / np.sqrt(w * lam).sum())
    assert result.mean_freshness == pytest.approx((w * mean_freshness(f, lam)).sum() / w.sum())
    assert result.mean_age == pytest.approx((w * mean_age(f, lam)).sum() / w.sum())
    assert result.mean_delay == pytest.approx((w * lam * mean_delay(f, lam)).sum()
                                              / (w * lam).sum())


def test_a_large_plan_spends_the_budget_at_equal_marginals() -> None:
    rng = np.random.default_rng(2)
    lam = 10 ** rng.uniform(-4, 4, 200_000)
    w = rng.uniform(0.5, 2.0, lam.size)
    solution = solve(lam, w, 5000.0, "freshness")
    f = solution.frequencies
    assert f.sum() == pytest.approx(5000.0, rel=1e-8)
    gains = (w * freshness_gain(f, lam))[f > 0]
    np.testing.assert_allclose(gains, solution.mu, rtol=1e-6)
    assert np.all((w / lam)[f == 0] <= solution.mu * (1 + 1e-9))
    # partitions plan apart with the crawl-wide μ and get the same frequencies
    half = lam.size // 2
    parts = [frequencies_at(lam[s], w[s], solution.mu, "freshness")
             for s in (slice(0, half), slice(half, None))]
    np.testing.assert_allclose(np.concatenate(parts), f, rtol=1e-9, atol=1e-12)


def test_extreme_rates_weights_and_budgets_spend_the_budget() -> None:
    rng = np.random.default_rng(41)
    for trial in range(30):
        n = int(rng.integers(1, 2000))
        lam = 10 ** rng.uniform(rng.uniform(-12, 0), rng.uniform(0, 12), n)
        w = 10 ** rng.uniform(-3, 3, n) if trial % 2 else None
        budget = float(10 ** rng.uniform(-9, 9))
        for policy in (Policy.FRESHNESS, Policy.AGE):
            f = plan(lam, budget, policy, w).frequencies
            assert np.all(np.isfinite(f)) and np.all(f >= 0)
            assert f.sum() == pytest.approx(budget, rel=1e-6), (trial, policy)
    # a budget so small that μ is beyond float64 (1 − μλ/w < 1e-16): the slow page gets it all
    tiny = plan([1e-6, 1e3], 2e-9, Policy.FRESHNESS).frequencies
    assert tiny[1] == 0 and tiny[0] == pytest.approx(2e-9)


def test_pages_that_never_change_and_bad_input() -> None:
    result = plan([0.0, 1.0, 0.0], 2.0, Policy.FRESHNESS)
    assert result.frequencies.tolist() == [0.0, 2.0, 0.0]
    assert plan([0.0, 0.0], 1.0, Policy.AGE).frequencies.tolist() == [0.0, 0.0]
    assert plan([1.0, 2.0], None, Policy.FIXED, interval=4.0).budget_used == 0.5
    for bad in (dict(rates=[], budget=1.0), dict(rates=[1.0, -1.0], budget=1.0),
                dict(rates=[1.0, float("nan")], budget=1.0), dict(rates=[1.0], budget=None),
                dict(rates=[1.0], budget=1.0, weights=[1.0, 2.0])):
        with pytest.raises(PlanError):
            plan(policy=Policy.FRESHNESS, **bad)


def test_adaptive_rule_multiplies_up_and_down_within_bounds() -> None:
    assert NUTCH.next_interval(100.0, changed=False) == pytest.approx(140.0)
    assert NUTCH.next_interval(100.0, changed=True) == pytest.approx(80.0)
    assert NUTCH.next_interval(70.0, changed=True) == 60.0  # floor
    assert STORMCRAWLER.next_interval(13 * 86400.0, changed=False) == 14 * 86400.0  # ceiling
    intervals, changed = np.array([100.0, 100.0, 70.0]), np.array([False, True, True])
    assert NUTCH.next_intervals(intervals, changed).tolist() == [
        NUTCH.next_interval(i, c) for i, c in zip(intervals, changed, strict=True)]
    with pytest.raises(ValueError):
        AdaptiveRule(dec_rate=1.0)
