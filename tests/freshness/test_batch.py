"""The replan's batch path (freshness/batch.py, ``RevisitPlanner.intervals_of``) gives what the
per-page path gives: the same estimate kinds, rates to the scalar solver's tolerance, and the
same intervals, for every policy, with and without a prior, probing and Last-Modified."""

from __future__ import annotations

import random

import numpy as np
import pytest

from freshness.batch import mle_many, rates_of
from freshness.estimators import Kind, Prior
from freshness.explore import ProbeRule
from freshness.history import VisitHistory
from freshness.revisit import RevisitPlanner, RevisitPolicy, RevisitSettings

#: brentq in ``mle_rate`` stops within an absolute 2e-12 per second of the root (its xtol),
#: which for a page changing once in months is ~2e-5 of its rate; the batch solve stops at
#: 1e-13 relative (it lands on the root: tested on such a page, its score was 0.0 against
#: -16.8 at brentq's answer).
RATE = {"rel": 1e-9, "abs": 5e-12}
#: An interval follows its rate (1/λ for proportional), so it inherits that 2e-5.
INTERVAL_REL = 1e-4


def _histories(seed: int, count: int) -> list[VisitHistory | None]:
    """Pages of every kind: never visited, one visit, never changed, always changed,
    mixed, with trusted, wrong or no Last-Modified dates."""
    rnd = random.Random(seed)
    out: list[VisitHistory | None] = [None, VisitHistory(), VisitHistory().observe(10**6, True)]
    while len(out) < count:
        h, t = VisitHistory(), 1_000_000
        p_change = rnd.choice([0.0, 0.05, 0.3, 0.7, 1.0])
        lm_mode = rnd.choice(["none", "true", "wrong"])
        mean = rnd.choice([30, 600, 20_000, 200_000])
        last_change = t
        for _ in range(rnd.randint(1, 45)):
            prev, t = t, t + int(rnd.expovariate(1 / mean)) + 1
            changed = rnd.random() < p_change
            if changed:
                last_change = rnd.randint(prev + 1, t)
            lm = None if lm_mode == "none" else last_change if lm_mode == "true" \
                else t + 10_000
            h = h.observe(t, changed, lm)
        out.append(h)
    return out


@pytest.mark.parametrize("prior", [None, Prior(1e-4, 0.5), Prior(3e-6, 2.0)])
def test_mle_many_matches_the_scalar_mle(prior: Prior | None) -> None:
    histories = [h for h in _histories(5, 2500) if h is not None]
    scalar = [h.mle(prior) for h in histories]
    batch = mle_many(histories, prior)
    # the histories reach every kind the estimator gives (with a prior there is no
    # NO_DATA nor SATURATED: the prior's pseudo-seconds close both)
    kinds = {e.kind for e in scalar}
    assert kinds >= ({Kind.POINT, Kind.NO_CHANGE, Kind.SATURATED, Kind.NO_DATA} if prior is None
                     else {Kind.POINT, Kind.NO_CHANGE})
    for h, a, b in zip(histories, scalar, batch, strict=True):
        assert b.kind is a.kind, h
        assert b.rate == pytest.approx(a.rate, **RATE), h
        assert b.rel_error == pytest.approx(a.rel_error, rel=1e-5), h


def _settings(policy: RevisitPolicy, probe: bool) -> RevisitSettings:
    return RevisitSettings(policy=policy, budget_per_s=0.05, fixed_interval_s=3600.0,
                           min_interval_s=60.0, max_interval_s=30 * 86400.0,
                           prior=Prior(1 / 86400, 1.0), assumed_pages=500,
                           probe=ProbeRule() if probe else None)


@pytest.mark.parametrize("probe", [False, True])
@pytest.mark.parametrize("policy", list(RevisitPolicy))
def test_replan_batch_matches_the_per_page_path(policy: RevisitPolicy, probe: bool) -> None:
    histories = _histories(11, 600)
    planner = RevisitPlanner(_settings(policy, probe))
    rates = rates_of(planner, histories)
    assert rates == pytest.approx([planner.rate_of(h) for h in histories], **RATE)
    planner.replan(rates)
    intervals = planner.intervals_of(histories, rates)
    per_page = [planner.interval_s(h) for h in histories]
    assert intervals == pytest.approx(per_page, rel=INTERVAL_REL)
    if policy in (RevisitPolicy.FRESHNESS, RevisitPolicy.AGE, RevisitPolicy.SQRT,
                  RevisitPolicy.PROPORTIONAL):
        # the rates differ enough between pages that intervals spread, and some pages are
        # clipped at either end: a comparison of constants would prove nothing
        assert len(set(np.round(intervals, 3))) > 50
    if probe and policy in (RevisitPolicy.FRESHNESS, RevisitPolicy.AGE):
        # some censored pages are probed: their interval is shorter than the plan's
        assert any(planner.probe_s(h) is not None for h in histories)


def test_rates_of_uses_last_modified_where_the_history_trusts_it() -> None:
    """The batch keeps ``estimate_of``'s rule: a page with trusted dates is rated from them,
    not from its intervals (so a batch that solved only the MLE would fail here)."""
    histories = _histories(13, 400)
    planner = RevisitPlanner(_settings(RevisitPolicy.FRESHNESS, probe=False))
    trusted = [i for i, h in enumerate(histories)
               if h is not None and h.visits and h.lm_trusted() and h.x_lm]
    assert len(trusted) > 20
    rates = rates_of(planner, histories)
    mles = {i: histories[i].mle(planner.prior).rate for i in trusted}  # type: ignore[union-attr]
    assert sum(rates[i] != pytest.approx(mles[i], rel=1e-3) for i in trusted) > 10
    for i in trusted:
        assert rates[i] == pytest.approx(planner.rate_of(histories[i]), **RATE)
