"""The per-URL revisit planner: each page's interval alone equals the batch plan's frequency,
the budget is spent, intervals are clipped, the adaptive rule multiplies, and rate estimates
come from the history (Last-Modified only while the server's dates are trusted)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from freshness.adaptive import AdaptiveRule
from freshness.estimators import Kind, Prior
from freshness.history import VisitHistory
from freshness.policies import PlanError, plan
from freshness.revisit import RevisitPlanner, RevisitPolicy, RevisitSettings

#: Rates over four orders of magnitude (changes per second), unequal weights.
RATES = np.array([1e-5, 2e-4, 1e-3, 5e-3, 2e-2, 0.1, 0.0])
WEIGHTS = np.array([1.0, 3.0, 1.0, 2.0, 1.0, 0.5, 1.0])
BUDGET = 0.02
PLANNED = [RevisitPolicy.UNIFORM, RevisitPolicy.PROPORTIONAL, RevisitPolicy.SQRT,
           RevisitPolicy.FRESHNESS, RevisitPolicy.AGE]
#: Wide enough that nothing in these examples is clipped.
WIDE = {"min_interval_s": 1e-6, "max_interval_s": 1e12}


def _planner(policy: RevisitPolicy, **kw: object) -> RevisitPlanner:
    return RevisitPlanner(RevisitSettings(policy=policy, budget_per_s=BUDGET,
                                          **{**WIDE, **kw}))  # type: ignore[arg-type]


def _history(interval_s: int, pattern: str, start: int = 1_000_000) -> VisitHistory:
    """Visits every ``interval_s`` after a first one; 'c' changed, '.' not."""
    h = VisitHistory().observe(start, changed=False)
    for i, c in enumerate(pattern, 1):
        h = h.observe(start + i * interval_s, changed=c == "c")
    return h


@pytest.mark.parametrize("policy", PLANNED)
@pytest.mark.parametrize("weighted", [False, True])
def test_per_page_frequencies_equal_the_batch_plan(policy: RevisitPolicy, weighted: bool) -> None:
    weights = WEIGHTS if weighted else None
    planner = _planner(policy)
    planner.replan(RATES, weights)
    batch = plan(RATES, BUDGET, policy.value, weights)
    w = WEIGHTS if weighted else np.ones_like(RATES)
    alone = np.array([planner.frequency(lam, wi) for lam, wi in zip(RATES, w, strict=True)])
    np.testing.assert_allclose(alone, batch.frequencies, rtol=1e-9, atol=1e-15)
    assert alone.sum() == pytest.approx(BUDGET, rel=1e-8)  # the budget is spent, not more


@pytest.mark.parametrize("policy", PLANNED)
def test_intervals_from_histories_follow_the_plan_of_their_estimates(
        policy: RevisitPolicy) -> None:
    histories = [_history(600, p) for p in
                 ("..........", "c.........", "c..c...c..", "cc.c.cc.c.", "cccccccccc")]
    planner = _planner(policy)
    rates = np.array([planner.rate_of(h) for h in histories])
    assert rates[0] == 0 and np.all(np.diff(rates) > 0)  # more changes, higher estimate
    planner.replan(rates)
    batch = plan(rates, BUDGET, policy.value)
    intervals = np.array([planner.interval_s(h) for h in histories])
    expected = np.where(batch.frequencies > 0, 1 / np.where(batch.frequencies > 0,
                                                             batch.frequencies, 1), 1e12)
    np.testing.assert_allclose(intervals, expected, rtol=1e-9)
    # a known rate takes the same path as an estimated one
    np.testing.assert_allclose([planner.interval_at(r) for r in rates], intervals, rtol=1e-12)


def test_the_freshness_optimum_drops_the_fastest_page_and_gives_it_the_longest_interval() -> None:
    planner = _planner(RevisitPolicy.FRESHNESS, min_interval_s=1.0, max_interval_s=86400.0)
    fast = _history(1, "cccccccccc")  # changed at every visit a second apart
    assert planner.estimate_of(fast).kind is Kind.SATURATED
    rates = np.array([1e-3, 2e-3, planner.rate_of(fast)])
    assert rates[2] > 10 * BUDGET  # changes far faster than the budget can follow
    planner.replan(rates)
    assert planner.frequency(rates[2]) == 0.0
    assert planner.frequency(1e-3) > 0
    assert planner.interval_s(fast) == 86400.0


def test_intervals_are_clipped_to_the_settings_bounds() -> None:
    planner = RevisitPlanner(RevisitSettings(RevisitPolicy.PROPORTIONAL, budget_per_s=1.0,
                                             min_interval_s=10.0, max_interval_s=1000.0))
    planner.replan(np.array([1.0, 1e-6, 1e-9]))
    f = [planner.frequency(r) for r in (1.0, 1e-6, 1e-9)]
    assert 1 / f[0] < 10.0 and 1 / f[1] > 1000.0  # unclipped, both sides are out of bounds
    fast, slow = _history(1, "cccccccccc"), _history(10_000, "..........")
    planner.replan(np.array([planner.rate_of(fast), planner.rate_of(slow)]))
    assert planner.interval_s(fast) == 10.0
    assert planner.interval_s(slow) == 1000.0  # rate 0: never visited by the plan


def test_before_any_replan_the_planner_is_uniform_over_the_assumed_count() -> None:
    for policy in [*PLANNED, RevisitPolicy.ADAPTIVE]:
        planner = RevisitPlanner(RevisitSettings(policy, budget_per_s=2.0, assumed_pages=500,
                                                 **WIDE))  # type: ignore[arg-type]
        assert not planner.replanned
        assert planner.interval_s(_history(60, "c.c.c")) == pytest.approx(250.0)
        assert planner.interval_s(None) == pytest.approx(250.0)


def test_fixed_policy_ignores_rates_and_budget() -> None:
    planner = _planner(RevisitPolicy.FIXED, fixed_interval_s=3600.0)
    planner.replan(RATES)
    assert {planner.interval_s(_history(60, p)) for p in ("....", "cccc")} == {3600.0}
    with pytest.raises(ValueError, match="fixed_interval_s"):
        RevisitSettings(RevisitPolicy.FIXED, budget_per_s=1.0)


def test_adaptive_multiplies_the_interval_up_when_unchanged_down_when_changed() -> None:
    rule = AdaptiveRule(inc_rate=0.5, dec_rate=0.5, min_interval_s=1.0, max_interval_s=1e9)
    planner = RevisitPlanner(RevisitSettings(RevisitPolicy.ADAPTIVE, budget_per_s=0.5,
                                             min_interval_s=100.0, max_interval_s=1000.0,
                                             adaptive=rule))
    planner.replan(np.zeros(200))  # 200 pages at 0.5/s: start every 400 s
    h = VisitHistory().observe(1_000_000, changed=False)
    first = planner.interval_s(h, changed=False)
    assert first == pytest.approx(400.0)  # no interval yet: the uniform one, not multiplied
    h = VisitHistory(interval_s=first)
    assert planner.interval_s(h) == first  # no new visit: unchanged
    assert planner.interval_s(h, changed=False) == pytest.approx(600.0)
    assert planner.interval_s(h, changed=True) == pytest.approx(200.0)
    # the settings' bounds clip the rule's result
    assert planner.interval_s(VisitHistory(interval_s=900.0), changed=False) == 1000.0
    assert planner.interval_s(VisitHistory(interval_s=150.0), changed=True) == 100.0
    # it ignores rates: the same history with many changes gets the same interval
    assert planner.interval_s(_history(60, "ccccc").__class__(interval_s=400.0),
                              changed=False) == pytest.approx(600.0)


def test_prior_gives_unvisited_pages_a_rate_and_shrinks_few_visits() -> None:
    prior = Prior(rate=1e-3, strength=2.0)
    planner = RevisitPlanner(RevisitSettings(RevisitPolicy.SQRT, prior=prior))
    assert planner.rate_of(None) == 1e-3
    assert planner.estimate_of(None).kind is Kind.NO_DATA
    quiet = _history(100, "...")  # no change in 300 s: pulled toward the prior, not 0
    assert 0 < planner.rate_of(quiet) < 1e-3
    assert not planner.trusted(quiet)
    planner.use_prior(None)  # back to the settings' prior (the same here)
    assert planner.rate_of(quiet) > 0
    bare = RevisitPlanner(RevisitSettings(RevisitPolicy.SQRT))
    assert bare.rate_of(quiet) == 0.0 and bare.rate_of(None) == 0.0


def test_last_modified_is_used_only_while_trusted() -> None:
    """Regular 1000 s visits; each change happened 100 s before the visit that saw it. The
    interval MLE sees ~1 change per interval; Last-Modified knows the waits were 900 s + 100 s."""
    start, step = 1_000_000, 1000
    good = VisitHistory().observe(start, changed=False, last_modified_s=start - 5000)
    bad = good
    for i in range(1, 9):
        now = start + i * step
        good = good.observe(now, changed=True, last_modified_s=now - 100)
        bad = bad.observe(now, changed=True, last_modified_s=now + 3600)  # in the future
    planner = RevisitPlanner(RevisitSettings(RevisitPolicy.FRESHNESS))
    assert good.lm_trusted() and not bad.lm_trusted()
    assert planner.rate_of(good) == pytest.approx(8 / 800)  # X / exposure
    assert planner.rate_of(bad) == pytest.approx(bad.mle().rate)  # negative control: MLE
    assert planner.rate_of(bad) != pytest.approx(planner.rate_of(good), rel=0.1)


def test_bad_input_is_refused_with_a_reason() -> None:
    planner = _planner(RevisitPolicy.SQRT)
    with pytest.raises(PlanError, match="at least one"):
        planner.replan(np.array([]))
    with pytest.raises(PlanError, match="weights for"):
        planner.replan(RATES, np.ones(2))
    with pytest.raises(PlanError, match="finite"):
        planner.replan(np.array([1.0, math.nan]))
    with pytest.raises(PlanError, match="finite"):
        planner.frequency(-1.0)
    with pytest.raises(ValueError, match="budget_per_s"):
        RevisitSettings(budget_per_s=0.0)
    with pytest.raises(ValueError, match="min_interval_s"):
        RevisitSettings(min_interval_s=10.0, max_interval_s=1.0)
    assert RevisitSettings(policy="age").policy is RevisitPolicy.AGE  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", PLANNED)
def test_a_stored_plan_restored_elsewhere_gives_the_same_frequencies(
        policy: RevisitPolicy) -> None:
    """The partition owner stores its replan (plan_state, JSON in Redis); a worker's planner
    restores it and gives each page the owner's frequency without replanning."""
    import json

    owner = _planner(policy)
    owner.replan(RATES, WEIGHTS)
    worker = _planner(policy)
    assert worker.plan_state() is None
    worker.restore(json.loads(json.dumps(owner.plan_state())))
    for lam, w in zip(RATES, WEIGHTS, strict=True):
        assert worker.frequency(lam, w) == pytest.approx(owner.frequency(lam, w), rel=1e-12)
