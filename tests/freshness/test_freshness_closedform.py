"""The closed forms against independent computations: numerical integration of the freshness
and age of one visit interval, a simulation of the delay, 50-digit arithmetic at extreme
ratios, and finite differences of the marginals."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from scipy.integrate import quad

from freshness.closedform import (
    age_gain,
    freshness_gain,
    mean_age,
    mean_delay,
    mean_freshness,
)
from freshness.solver import invert_g, invert_q

GRID = [(f, lam) for f in (0.01, 0.3, 1.0, 7.0, 500.0) for lam in (0.002, 0.5, 1.0, 4.0, 90.0)]


@pytest.mark.parametrize(("f", "lam"), GRID)
def test_freshness_and_age_are_the_time_averages_over_one_interval(f: float, lam: float) -> None:
    interval = 1.0 / f
    # fresh at time t after a visit: no change in (0, t]; age at t: t − (time of last change)
    fresh, _ = quad(lambda t: math.exp(-lam * t), 0, interval, limit=200)
    age, _ = quad(lambda t: t - (1 - math.exp(-lam * t)) / lam, 0, interval, limit=200)
    assert mean_freshness(f, lam) == pytest.approx(fresh / interval, rel=1e-9)
    assert mean_age(f, lam) == pytest.approx(age / interval, rel=1e-7)


def test_delay_is_half_the_interval_whatever_the_rate() -> None:
    rng = np.random.default_rng(3)
    f = 2.0
    for lam in (0.1, 3.0, 40.0):
        changes = np.cumsum(rng.exponential(1 / lam, size=20_000))
        waits = np.ceil(changes * f) / f - changes  # until the next visit at k/f
        assert waits.mean() == pytest.approx(float(mean_delay(f, lam)), rel=0.03)


def _reference(r: Decimal) -> tuple[Decimal, Decimal]:
    """(F̄, Ā·f) at ratio r in 50-digit arithmetic."""
    e = (-r).exp()
    return (1 - e) / r, Decimal("0.5") - 1 / r + (1 - e) / (r * r)


@pytest.mark.parametrize("r", [1e-12, 1e-7, 1e-3, 0.05, 0.0999, 0.1, 0.5, 3.0, 40.0, 1e6, 1e15])
def test_stable_at_extreme_ratios(r: float) -> None:
    getcontext().prec = 60
    fresh, age_f = _reference(Decimal(r))
    assert mean_freshness(1.0, r) == pytest.approx(float(fresh), rel=1e-13)
    assert mean_age(1.0, r) == pytest.approx(float(age_f), rel=1e-12)


def test_edges_never_visited_and_never_changing() -> None:
    assert mean_freshness(0.0, 2.0) == 0.0 and mean_age(0.0, 2.0) == math.inf
    assert mean_delay(0.0, 2.0) == math.inf
    assert mean_freshness(0.0, 0.0) == 1.0 and mean_age(0.0, 0.0) == 0.0
    assert mean_freshness(3.0, 0.0) == 1.0 and mean_delay(3.0, 0.0) == 0.0
    assert freshness_gain(0.0, 4.0) == pytest.approx(0.25)  # 1/λ at f = 0
    assert age_gain(0.0, 4.0) == math.inf
    with pytest.raises(ValueError):
        mean_freshness(-1.0, 1.0)


@pytest.mark.parametrize(("f", "lam"), GRID)
def test_marginals_are_the_derivatives(f: float, lam: float) -> None:
    h = f * 1e-5
    d_fresh = (mean_freshness(f + h, lam) - mean_freshness(f - h, lam)) / (2 * h)
    d_age = (mean_age(f + h, lam) - mean_age(f - h, lam)) / (2 * h)
    assert freshness_gain(f, lam) == pytest.approx(float(d_fresh), rel=1e-5, abs=1e-12)
    assert age_gain(f, lam) == pytest.approx(-float(d_age), rel=1e-5, abs=1e-12)


def test_inverse_marginals_round_trip() -> None:
    c = np.concatenate([np.logspace(-14, -0.01, 300), 1 - np.logspace(-1, -12, 100)])
    r = invert_g(c)
    fresh_gain_at_r = freshness_gain(1.0 / r, 1.0)  # g(r) with λ = 1, f = 1/r
    np.testing.assert_allclose(fresh_gain_at_r, c, rtol=1e-10)
    cq = np.logspace(-14, 12, 300)
    rq = invert_q(cq)
    np.testing.assert_allclose(age_gain(1.0 / rq, 1.0), cq, rtol=1e-10)
