"""Probing censored histories (freshness/explore.py, RevisitPlanner with ``probe``): a page that
changed on every visit is probed on a geometric schedule down to the floor until a visit sees
no change, and the interval MLE on the irregular intervals then estimates a rate far above the
regular-interval range limit. Simulated Poisson pages, the planner's own schedule."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from freshness.estimators import Kind, Prior, mle_rate, range_limit
from freshness.explore import (
    ProbeRule,
    censored,
    lower_bound,
    probe_interval_s,
    probes_left,
)
from freshness.history import VisitHistory
from freshness.revisit import RevisitPlanner, RevisitPolicy, RevisitSettings

START = 1_000_000
#: Visits every 3 h (the uniform interval), probes down to 60 s.
UNIFORM_S, FLOOR_S = 10_800, 60.0


def _planner(policy: RevisitPolicy = RevisitPolicy.FRESHNESS, probe: ProbeRule | None = None,
             budget: float = 1.0) -> RevisitPlanner:
    return RevisitPlanner(RevisitSettings(policy=policy, budget_per_s=budget,
                                          min_interval_s=FLOOR_S, max_interval_s=1e7,
                                          probe=probe or ProbeRule()))


def _regular(pattern: str, interval_s: int = UNIFORM_S) -> VisitHistory:
    h = VisitHistory().observe(START, changed=False)
    for i, c in enumerate(pattern, 1):
        h = h.observe(START + i * interval_s, changed=c == "c")
    return h


def _explore(rate: float, seed: int, planner: RevisitPlanner) -> tuple[VisitHistory, int]:
    """Four regular visits of a Poisson page, then the planner's probes until it stops."""
    rng = random.Random(seed)
    h, now, probes = VisitHistory().observe(START, changed=False), START, 0
    gaps = [float(UNIFORM_S)] * 4
    while gaps:
        gap = gaps.pop(0)
        now += int(gap)
        h = h.observe(now, changed=rng.random() < -math.expm1(-rate * int(gap)))
        probe = planner.probe_s(h)
        if not gaps and probe is not None and probes < 50:
            gaps.append(probe)
            probes += 1
    return h, probes


def test_a_page_that_always_changed_is_censored_and_probed_geometrically_to_the_floor() -> None:
    rule, planner = ProbeRule(factor=8.0), _planner(probe=ProbeRule(factor=8.0))
    h = _regular("cccc")
    assert censored(h, rule) and h.mle(None).kind is Kind.SATURATED
    schedule = []
    now = START + 4 * UNIFORM_S
    while (nxt := probe_interval_s(h, rule, FLOOR_S)) is not None:
        schedule.append(nxt)
        now += int(nxt)
        h = h.observe(now, changed=True)
    # 10 800 s → ÷8 per step (of each bucket's representative) → the floor, 3 times
    assert schedule[0] < UNIFORM_S / 4 and all(
        b <= a for a, b in itertools.pairwise(schedule))
    assert schedule[-3:] == [FLOOR_S] * 3 and len(schedule) <= 7
    # a page that saw no change, or a change now and then, is not probed
    assert not censored(_regular("...."), rule) and not censored(_regular(".c.."), rule)
    assert probes_left(_regular("...."), rule, FLOOR_S) == 0
    # the planner gives the probe interval only to rate-driven policies
    assert planner.interval_s(_regular("cccc")) < UNIFORM_S / 4
    for policy in (RevisitPolicy.UNIFORM, RevisitPolicy.ADAPTIVE):
        assert _planner(policy).probe_s(_regular("cccc")) is None


def test_probing_estimates_fast_pages_far_above_the_regular_range_limit() -> None:
    """A page changing once a minute, visited every 3 h: the regular-interval estimate cannot
    exceed ln(2n+1)/3 h (≈ 0.6 per hour, 1.7% of the rate); after probing, the MLE is within a
    factor 3 of the truth, for a handful of probes. Negative control: probing off."""
    rate = 1 / 60
    limit = range_limit(4) / UNIFORM_S
    planner = _planner(RevisitPolicy.SQRT)  # plans on the estimate itself (no worst case)
    ratios, costs = [], []
    for seed in range(20):
        h, probes = _explore(rate, seed, planner)
        ratios.append(planner.rate_of(h) / rate)
        costs.append(probes)
    assert np.median(ratios) > 1 / 3 and min(ratios) > 10 * limit / rate, ratios
    assert max(costs) <= 8 and np.mean(costs) <= 6, costs
    off = RevisitPlanner(RevisitSettings(policy=RevisitPolicy.FRESHNESS, min_interval_s=FLOOR_S))
    h, probes = _explore(rate, 0, off)
    assert probes == 0 and off.rate_of(h) <= limit * 1.0001


def test_a_slow_page_that_happened_to_change_costs_one_probe() -> None:
    planner = _planner()
    costs = [_explore(1 / 86_400, seed, planner)[1] for seed in range(40)]
    assert np.mean(costs) < 1.0, costs


def test_saturated_irregular_intervals_take_the_shortest_interval_for_the_correction() -> None:
    """On regular intervals the bound is ln(2n+1)/t either way; on irregular ones the half
    pseudo-visit at the mean interval (hours, from the regular visits) would put the bound
    below what the three 60-s changed intervals already show."""
    est = mle_rate([60.0] * 4, [], None, None)
    assert est.kind is Kind.SATURATED and est.rate == pytest.approx(range_limit(4) / 60)
    mixed = mle_rate([10_800.0] * 4 + [60.0] * 3, [])
    assert mixed.kind is Kind.SATURATED and mixed.rate > 1 / 60
    # what half a pseudo-visit at the mean interval would give: far below
    mean = (4 * 10_800 + 180) / 7
    assert mle_rate([10_800.0] * 4 + [60.0] * 3, [mean / 2]).rate < mixed.rate / 5


def test_a_saturated_bound_is_not_shrunk_by_the_prior_only_with_probing() -> None:
    h = _regular("cccc")
    prior = Prior(rate=1 / 86_400, strength=1.0)
    on = _planner(RevisitPolicy.SQRT)
    off = RevisitPlanner(RevisitSettings(RevisitPolicy.SQRT, min_interval_s=FLOOR_S, prior=prior))
    on.use_prior(prior)
    assert on.rate_of(h) == pytest.approx(range_limit(4) / UNIFORM_S)
    assert off.rate_of(h) < on.rate_of(h) / 3


def test_last_modified_contradicted_by_the_intervals_is_not_used() -> None:
    """Dates an hour coarse say 'changed ~30 min ago' on a page the probes show changes every
    minute: the interval MLE's lower bound is above the Last-Modified rate, so it wins."""
    h, now = VisitHistory().observe(START, changed=False, last_modified_s=START - 1800), START
    for gap, changed, ago in [(UNIFORM_S, True, 1800)] * 4 + [(600, True, 300)] * 2 + \
            [(60, True, 30)] * 10 + [(60, False, 90)] * 5:
        now += gap
        h = h.observe(now, changed=changed, last_modified_s=now - ago)
    assert h.lm_trusted()
    lm = h.last_modified_rate()
    assert lm is not None and lm < 1 / 300  # the truth: 1/60
    on = _planner(RevisitPolicy.SQRT)
    off = RevisitPlanner(RevisitSettings(RevisitPolicy.SQRT, min_interval_s=FLOOR_S))
    assert off.rate_of(h) == pytest.approx(lm)
    assert on.rate_of(h) > 3 * lm


def test_the_probe_share_sets_the_floor_slots_and_the_plan_budget() -> None:
    rule = ProbeRule(max_budget_share=0.5)
    small = _planner(budget=10 / 3600, probe=rule)  # 10 visits per hour: one probe slot
    assert small.probe_floor_s == pytest.approx(720.0) and small.probe_slots == 1
    big = _planner(budget=100.0, probe=rule)  # a real crawl: the floor is min_interval_s
    assert big.probe_floor_s == FLOOR_S and big.probe_slots == 3000
    rates = np.array([1e-5, 1e-4, 1e-3])
    planner = _planner(RevisitPolicy.SQRT, budget=0.01, probe=rule)
    planner.replan(rates, reserve_per_s=0.002)
    spent = sum(1 / planner.interval_at(r) for r in rates)
    assert spent == pytest.approx(0.008)
    planner.replan(rates, reserve_per_s=1.0)  # capped at the share
    assert sum(1 / planner.interval_at(r) for r in rates) == pytest.approx(0.005)
    with pytest.raises(ValueError, match="max_budget_share"):
        ProbeRule(max_budget_share=1.0)



# -- what a policy plans a censored page at, and when a probe is worth its visit --------------
def _replanned(policy: RevisitPolicy) -> RevisitPlanner:
    """10 visits an hour for 30 pages, rates from one a week to one a minute (per second)."""
    planner = _planner(policy, budget=10 / 3600)
    planner.replan(np.geomspace(1 / 604_800, 1 / 60, 30))
    return planner


def test_a_censored_page_is_planned_at_its_objectives_worst_case() -> None:
    """Every visit changed: the rate is at least the bound, at most what the crawler can tell
    apart (the cap). Freshness and age plan at the cap (the worst case: freshness drops the
    page, age visits it at its limit), √λ and proportional on the bound. Negative control:
    without probing every policy plans on the bound."""
    h = _regular("cccc")
    bound = range_limit(4) / UNIFORM_S
    cap = ProbeRule().ratio / FLOOR_S
    fresh, age, sqrt = (_replanned(p) for p in (RevisitPolicy.FRESHNESS, RevisitPolicy.AGE,
                                                  RevisitPolicy.SQRT))
    assert fresh.censored_cap == pytest.approx(cap) and cap > 100 * bound
    assert fresh.rate_of(h) == pytest.approx(cap) and fresh.frequency(cap) == 0
    assert fresh.frequency(bound) > 0  # the bound would keep it: the best case
    assert age.rate_of(h) == pytest.approx(cap)
    assert age.frequency(cap) > 1.2 * age.frequency(bound)
    assert age.frequency(cap) == pytest.approx(age.frequency(1e3 * cap), rel=0.02)  # its limit
    assert sqrt.rate_of(h) == pytest.approx(bound)
    off = RevisitPlanner(RevisitSettings(RevisitPolicy.AGE, budget_per_s=10 / 3600,
                                         min_interval_s=FLOOR_S))
    assert off.rate_of(h) == pytest.approx(bound)


def test_the_lower_bound_of_a_censored_history_is_a_confidence_bound() -> None:
    """All n intervals changed: at the bound that outcome has probability 5%. One changed
    12-minute probe after three changed 3-h visits: the saturated MLE says more than 5 an
    hour, the bound less than one an hour (a page changing once an hour does that 1 time in
    5)."""
    h = _regular("ccc")
    lo = lower_bound(h, 0.95)
    assert (1 - math.exp(-lo * UNIFORM_S)) ** 3 == pytest.approx(0.05, rel=1e-6)
    assert lo < h.mle(None).rate
    probed = h.observe(START + 3 * UNIFORM_S + 720, changed=True)
    assert probed.mle(None).rate * 3600 > 5 and lower_bound(probed, 0.95) * 3600 < 1
    point = _regular("c.c.")
    assert lower_bound(point, 0.95) == pytest.approx(point.mle(None).rate)


def test_a_page_is_probed_only_while_a_probe_can_change_its_plan() -> None:
    """Freshness: a censored page whose bound is low is probed (the plan at the bound would
    keep it, at the cap drop it); once three floor probes all changed the bound clears the
    drop threshold... or the floor quota ends probing. Age: a page that changed in every one
    of many 3-h intervals is near the age plan's limit at its bound, and is not probed (the
    probe could not move its interval by 25%), though √λ probes the same page."""
    fresh, age, sqrt = (_replanned(p) for p in (RevisitPolicy.FRESHNESS, RevisitPolicy.AGE,
                                                  RevisitPolicy.SQRT))
    assert fresh.probe_s(_regular("cc")) is not None
    many = _regular("c" * 40)
    low, high = age.interval_at(lower_bound(many, 0.95)), age.interval_at(age.censored_cap)
    assert max(low, high) <= 1.25 * min(low, high)
    assert age.probe_s(many) is None and sqrt.probe_s(many) is not None
    # before any replan there is no plan to compare: probe as before
    assert _planner(RevisitPolicy.AGE).probe_s(many) is not None
