"""A slow reference of the betting confidence sets of Waudby-Smith & Ramdas (JRSS-B 2024),
written from the paper's definitions one observation at a time with plain Python floats, so
tests can check abtest.stats (vectorised numpy, bisection) against a computation made another
way. Convention shared with abtest.stats.paired (documented there): the units are bet on in
the order of numpy's default_rng(20240131).permutation(n)."""

from __future__ import annotations

import math

import numpy as np

C = 0.9             # the truncation: a bet risks at most this share of the capital
ORDER_SEED = 20240131


def ordered(d):
    d = list(d)
    return [d[i] for i in np.random.default_rng(ORDER_SEED).permutation(len(d))]


def bets(xs: list[float], alpha_side: float, n_star: float) -> list[float]:
    """λ_t = √(2 log(1/alpha_side) / (σ̂²_{t−1} n*)); μ̂_t = (½ + Σx)/(t + 1),
    σ̂²_t = (¼ + Σ(x_i − μ̂_i)²)/(t + 1), σ̂²_0 = ¼."""
    out, s, ss, s2 = [], 0.0, 0.0, 0.25
    for t, x in enumerate(xs, 1):
        out.append(math.sqrt(2 * math.log(1 / alpha_side) / (s2 * n_star)))
        s += x
        mu = (0.5 + s) / (t + 1)
        ss += (x - mu) ** 2
        s2 = (0.25 + ss) / (t + 1)
    return out


def sup_capital(xs: list[float], lam: list[float], m: float, side: int) -> float:
    """sup over t of K⁺_t(m) = Π(1 + min(λ, c/m)(x − m)) (side +1) or K⁻_t(m) = Π(1 −
    min(λ, c/(1 − m))(x − m)) (side −1)."""
    k = best = 1.0
    for x, lt in zip(xs, lam):
        den = m if side > 0 else 1 - m
        bet = lt if den == 0 else min(lt, C / den)
        k *= 1 + side * bet * (x - m)
        best = max(best, k)
    return best


def ci(d, alpha: float = 0.05, n_star: float | None = None, grid: int = 4000
       ) -> tuple[float, float, float]:
    """(low, high, p) of the two-sided set {m : sup K⁺ < 2/α and sup K⁻ < 2/α} on a grid of
    candidate means, on the d = 2x − 1 scale; p = 2/max(sup K⁺(½), sup K⁻(½))."""
    xs = [(v + 1) / 2 for v in d]
    lam = bets(xs, alpha / 2, n_star or len(xs))
    kept = [j / grid for j in range(grid + 1)
            if sup_capital(xs, lam, j / grid, +1) < 2 / alpha
            and sup_capital(xs, lam, j / grid, -1) < 2 / alpha]
    p = min(1.0, 2 / max(sup_capital(xs, lam, 0.5, +1), sup_capital(xs, lam, 0.5, -1)))
    return 2 * kept[0] - 1, 2 * kept[-1] - 1, p


def bound(d, alpha: float, side: str, null: float, n_star: float | None = None,
          grid: int = 4000) -> tuple[float, float]:
    """(limit, p) of the one-sided set at level α: the lower limit (side "lower") or the upper
    one, and p = 1/sup K(null) for the mean at `null` on the wrong side."""
    xs = [(v + 1) / 2 for v in d]
    lam = bets(xs, alpha, n_star or len(xs))
    s = +1 if side == "lower" else -1
    kept = [j / grid for j in range(grid + 1) if sup_capital(xs, lam, j / grid, s) < 1 / alpha]
    lim = kept[0] if s > 0 else kept[-1]
    return 2 * lim - 1, min(1.0, 1 / sup_capital(xs, lam, (null + 1) / 2, s))
