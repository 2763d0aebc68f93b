"""Closed forms of a page visited at a fixed interval 1/f while it changes as a Poisson process
of rate λ (Cho & Garcia-Molina, "Effective page refresh policies for web crawlers", TODS 2003).

With r = λ/f, the expected changes per visit interval:

- mean freshness  F̄(f, λ) = (1 − e^{−r}) / r
- mean age        Ā(f, λ) = (1/f) · [½ − 1/r + (1 − e^{−r})/r²]
- mean delay      D̄(f, λ) = 1/(2f): a change arrives uniformly inside an interval (Poisson) and
  waits for the interval's end, whatever λ is.

The marginals the optimal policies equalise (``freshness_gain``, ``age_gain``) and their
inverses are here too. Every function takes numpy arrays (or floats) and is written to stay
accurate for r from 1e-300 to 1e300: the small-r branches use power series where the direct
formula cancels (1 − (1+r)e^{−r} is about r²/2 for small r), expm1 elsewhere.
Edge cases: λ = 0 (never changes) is always fresh, of age 0 and delay 0; f = 0 (never visited)
with λ > 0 has freshness 0 and infinite age and delay.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

#: Below this r the power series are used (their truncation error is then below 1e-16).
SERIES_BELOW = 0.1
#: Coefficients of r^k, k = 2, 3, ...: g(r) = 1 − (1+r)e^{−r} = Σ (−1)^k (k−1) r^k / k!.
_G = [(-1) ** k * (k - 1) / math.factorial(k) for k in range(2, 16)]
#: q(r) = r²/2 − g(r) = Σ_{k≥3} −(−1)^k (k−1) r^k / k! (the age marginal's numerator).
_Q = [-c for c in _G[1:]]
#: a(r) = ½ − 1/r + (1 − e^{−r})/r² = Σ_{k≥3} −(−1)^k r^{k−2} / k! (the age per unit interval).
_A = [-((-1) ** k) / math.factorial(k) for k in range(3, 17)]


def poly_series(r: Array, coeffs: list[float], first_power: int) -> Array:
    """Σ coeffs[i] r^(first_power + i), by Horner."""
    acc = np.zeros_like(r)
    for c in reversed(coeffs):
        acc = acc * r + c
    return acc * r ** first_power


def pick_series(r: Array, coeffs: list[float], first_power: int, direct: Array) -> Array:
    """``direct``, with the power series at the small r (evaluated there only)."""
    out = np.array(direct, dtype=float)
    small = r < SERIES_BELOW
    if small.any():
        out[small] = poly_series(r[small], coeffs, first_power)
    return out


def freshness_of_ratio(r: ArrayLike) -> Array:
    """F̄ as a function of r = λ/f: (1 − e^{−r})/r, 1 at r = 0."""
    r = np.asarray(r, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -np.expm1(-r) / r
    return np.where(r == 0, 1.0, out)


def age_factor(r: ArrayLike) -> Array:
    """a(r) = ½ − 1/r + (1 − e^{−r})/r², so that Ā = a(λ/f)/f; a → r/6 for small r, ½ for
    large r."""
    r = np.asarray(r, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        direct = 0.5 - 1.0 / r - np.expm1(-r) / (r * r)
    direct = np.where(np.isinf(r), 0.5, direct)
    return pick_series(r, _A, 1, direct)


def g_ratio(r: ArrayLike) -> Array:
    """g(r) = 1 − (1+r)e^{−r}: λ·∂F̄/∂f. Increasing from 0 (r = 0) to 1 (r → ∞)."""
    r = np.asarray(r, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        direct = -np.expm1(-r) - r * np.exp(-r)
    direct = np.where(np.isinf(r), 1.0, direct)
    return pick_series(r, _G, 2, direct)


def q_ratio(r: ArrayLike) -> Array:
    """q(r) = r²/2 − g(r): −λ²·∂Ā/∂f. Increasing from 0 to ∞ (≈ r³/3 small, r²/2 large)."""
    r = np.asarray(r, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        direct = 0.5 * r * r - g_ratio(r)
    return pick_series(r, _Q, 3, direct)


def _rates(f: ArrayLike, lam: ArrayLike) -> tuple[Array, Array, Array]:
    f_arr = np.asarray(f, dtype=float)
    lam_arr = np.asarray(lam, dtype=float)
    if np.any(f_arr < 0) or np.any(lam_arr < 0) or np.any(np.isnan(f_arr + lam_arr)):
        raise ValueError("visit frequencies and change rates must be >= 0 (no NaN)")
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(lam_arr == 0, 0.0, lam_arr / f_arr)  # f = 0, λ > 0 -> inf
    return f_arr, lam_arr, r


def mean_freshness(f: ArrayLike, lam: ArrayLike) -> Array:
    """F̄(f, λ) = (f/λ)(1 − e^{−λ/f}): the expected fraction of time the copy is current."""
    _, _, r = _rates(f, lam)
    return freshness_of_ratio(r)


def mean_age(f: ArrayLike, lam: ArrayLike) -> Array:
    """Ā(f, λ) = (1/f)[½ − f/λ + (f/λ)²(1 − e^{−λ/f})]: expected time the copy has been
    out of date (0 while it is current), in the unit of 1/λ."""
    f_arr, lam_arr, r = _rates(f, lam)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = age_factor(r) / f_arr
    out = np.where(lam_arr == 0, 0.0, out)
    return np.where((f_arr == 0) & (lam_arr > 0), np.inf, out)


def mean_delay(f: ArrayLike, lam: ArrayLike) -> Array:
    """Expected wait of a change until the next visit sees it: 1/(2f) (0 if λ = 0)."""
    f_arr, lam_arr, _ = _rates(f, lam)
    with np.errstate(divide="ignore"):
        out = 0.5 / f_arr
    return np.where(lam_arr == 0, 0.0, out)


def freshness_gain(f: ArrayLike, lam: ArrayLike) -> Array:
    """∂F̄/∂f = g(λ/f)/λ: freshness bought by one more visit per unit time. 1/λ at f = 0;
    0 for λ = 0."""
    _, lam_arr, r = _rates(f, lam)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = g_ratio(r) / lam_arr
    return np.where(lam_arr == 0, 0.0, out)


def age_gain(f: ArrayLike, lam: ArrayLike) -> Array:
    """−∂Ā/∂f = q(λ/f)/λ²: age removed by one more visit per unit time (∞ at f = 0)."""
    _, lam_arr, r = _rates(f, lam)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = q_ratio(r) / (lam_arr * lam_arr)
    return np.where(lam_arr == 0, 0.0, out)
