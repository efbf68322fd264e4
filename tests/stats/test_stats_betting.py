"""abtest's intervals for bounded means (abtest.stats: betting_ci, betting_bound, anytime,
paired), checked against computations made another way: a slow reference written from the
definitions of Waudby-Smith & Ramdas (JRSS-B 2024) with plain Python loops and a grid of
candidate means (tests/support/betting_reference.py), closed forms for tied data, and the level each
construction promises."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from support import betting_reference as ref
from abtest import stats as S

C = S.BETTING_TRUNCATION


DATA = [0.0, 0.25, 0.0, -0.5, 0.0, 1.0, 0.0, 0.0, 0.25, 0.0, 0.75, 0.0, -0.25, 0.0, 0.5, 0.0,
        0.0, 0.25]


@pytest.mark.parametrize("conf", [0.95, 0.90])
def test_betting_ci_is_the_paper_s_set_computed_by_a_slow_reference(conf):
    alpha = 1 - conf
    r = S.betting_ci(DATA, conf_level=conf)
    lo, hi, p = ref.ci(DATA, alpha)
    step = 2 / 4000
    assert lo - step <= r.ci_low <= lo + 1e-12 and hi - 1e-12 <= r.ci_high <= hi + step
    assert r.estimate == pytest.approx(np.mean(DATA)) and r.p_value == pytest.approx(p)
    # tuned to another n, the bets change and so does the set
    r2 = S.betting_ci(DATA, conf_level=conf, n_star=60)
    lo2, hi2, _ = ref.ci(DATA, alpha, n_star=60)
    assert lo2 - step <= r2.ci_low <= lo2 + 1e-12 and hi2 - 1e-12 <= r2.ci_high <= hi2 + step


def test_one_sided_bound_is_the_paper_s_one_sided_set():
    b = S.betting_bound(DATA, alpha=0.05, side="lower", null=-0.05)
    lo, p_lo = ref.bound(DATA, 0.05, "lower", -0.05)
    assert lo - 2 / 4000 <= b.limit <= lo + 1e-12 and b.p_value == pytest.approx(p_lo)
    u = S.betting_bound(DATA, alpha=0.05, side="upper", null=0.05)
    hi, p_hi = ref.bound(DATA, 0.05, "upper", 0.05)
    assert hi - 1e-12 <= u.limit <= hi + 2 / 4000 and u.p_value == pytest.approx(p_hi)


def _tied_lower(n: int, alpha_side: float, thr: float) -> float:
    """Lower limit for n differences all exactly 0, in closed form: every x is ½, so μ̂ = ½
    and σ̂²_{t−1} = ¼/t, λ_t = √(8 t log(1/alpha_side)/n); K⁺_t(m) = Π_{i≤t}(1 + min(λ_i, c/m)(½ − m))
    rises with t for m < ½, so its sup is K⁺_n and the limit solves log K⁺_n(m) = log(1/thr)."""
    lam = [math.sqrt(8 * t * math.log(1 / alpha_side) / n) for t in range(1, n + 1)]

    def f(m):
        return sum(math.log(1 + min(lt, C / m) * (0.5 - m)) for lt in lam) - math.log(1 / thr)

    if f(1e-12) < 0:
        return -1.0
    return 2 * optimize.brentq(f, 1e-12, 0.5 - 1e-15, xtol=1e-15) - 1


@pytest.mark.parametrize("n", [10, 30, 200])
def test_tied_pairs_give_an_interval_of_width_in_closed_form(n):
    r = S.betting_ci(np.zeros(n))
    want = _tied_lower(n, 0.025, 0.025)
    assert r.ci_low == pytest.approx(want, abs=1e-9) and r.ci_high == pytest.approx(-want, abs=1e-9)
    assert r.ci_high - r.ci_low > 0.04 and r.p_value == 1.0    # never a zero-width interval
    if n == 10:
        assert r.ci_high > 0.3     # ten tied pairs cannot rule out a difference of 0.3


def test_the_noninferiority_floor_is_where_tied_pairs_first_clear_the_margin():
    for margin in (0.05, 0.10):
        n = S.min_n_noninferiority(margin, 0.05)
        assert _tied_lower(n, 0.05, 0.05) > -margin >= _tied_lower(n - 1, 0.05, 0.05)
        # and it stays cleared: more agreeing cases never undo it
        assert all(_tied_lower(k, 0.05, 0.05) > -margin for k in range(n, n + 40))
    assert S.min_n_noninferiority(0.05) == 68 and S.min_n_noninferiority(0.10) == 33
    assert S.min_n_noninferiority(0.0) is None


def test_p_value_and_interval_agree_and_the_p_value_is_one_over_the_capital():
    rng = np.random.default_rng(4)
    for _ in range(20):
        d = np.clip(rng.normal(rng.uniform(-0.2, 0.3), 0.3, rng.integers(5, 80)), -1, 1)
        r = S.betting_ci(d)
        assert (r.p_value <= 0.05) == (r.ci_low > 0 or r.ci_high < 0)
        b = S.betting_bound(d, alpha=0.05, side="lower", null=-0.05)
        assert (b.p_value <= 0.05) == (b.limit > -0.05)


def test_betting_interval_holds_its_level_on_rare_and_tied_data():
    """Coverage over 400 draws each: 1 success in 20 on average, and 90 % exact ties."""
    from abtest.stats import _bets, _betting_limit

    rng = np.random.default_rng(11)
    for n, gen, mean in ((30, lambda: (rng.random((400, 30)) < 0.05) * 1.0, 0.05),
                         (50, lambda: np.where(rng.random((400, 50)) < 0.9, 0.0,
                                               rng.choice([-0.5, 0.5, 1.0], (400, 50))),
                          0.1 * (1.0 / 3))):
        d = gen()
        x = (d + 1) / 2
        lam = _bets(x, math.log(40), n)
        lo = 2 * _betting_limit(x, lam, +1, math.log(40), C) - 1
        hi = 2 * _betting_limit(x, lam, -1, math.log(40), C) - 1
        assert np.mean((lo <= mean) & (mean <= hi)) >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 400)


def test_anytime_bound_keeps_its_level_over_every_look_on_rare_events():
    """Refusals: A never refuses, B refuses 5 % of the time (the margin), 400 units. The
    upper one-sided sequence of B − A is below 0.05 at some n (the bound clears the margin,
    a false "no more refusals") exactly when sup_t K⁻_t(m₀) ≥ 1/α at m₀ = (1 + 0.05)/2."""
    from abtest.stats import _bets, _log_wealth

    rng = np.random.default_rng(12)
    d = (rng.random((2000, 400)) < 0.05) * 1.0
    x = (d + 1) / 2
    lam = _bets(x, math.log(20), 300)
    crossed = _log_wealth(x, lam, np.full(2000, 0.525), -1, C).max(axis=1) >= math.log(20)
    assert crossed.mean() <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)


def test_anytime_looks_are_the_betting_set_on_each_prefix():
    rng = np.random.default_rng(2)
    d = np.clip(rng.normal(0.1, 0.4, 120), -1, 1)
    looks = [20, 40, 60, 80, 100, 120]
    got = S.anytime(d, looks=looks, n_star=120)
    for lk in got:
        ci = S.betting_ci(d[:lk.n], n_star=120)
        assert (lk.ci_low, lk.ci_high, lk.p_value) == pytest.approx((ci.ci_low, ci.ci_high,
                                                                       ci.p_value), abs=1e-12)
        assert lk.lower == pytest.approx(S.betting_bound(d[:lk.n], alpha=0.05, side="lower",
                                                         n_star=120).limit, abs=1e-12)
        assert lk.mean == pytest.approx(d[:lk.n].mean())
    # the sequence only narrows and the always-valid p only falls
    assert all(b.ci_low >= a.ci_low - 1e-12 and b.ci_high <= a.ci_high + 1e-12
               and b.p_value <= a.p_value for a, b in zip(got, got[1:]))
    assert S.anytime(d, looks=[0])[0].mean is None
    with pytest.raises(ValueError):
        S.anytime([0.5, 2.0], looks=[2])
    with pytest.raises(ValueError):
        S.anytime([0.5, 0.0], looks=[2], kind="binary")
    with pytest.raises(ValueError):
        S.anytime([0.5, 0.0], looks=[2, 1])


def test_effective_units_count_the_informative_pairs():
    # 0/1 with k ones of n: γ² = (1 − 2p)²/(p(1 − p)), κ = (1 − 6p(1 − p))/(p(1 − p))
    for k, n in ((15, 200), (60, 200), (100, 200)):
        p = k / n
        d = np.r_[np.ones(k), np.zeros(n - k)]
        g2 = (1 - 2 * p) ** 2 / (p * (1 - p))
        kurt = (1 - 6 * p * (1 - p)) / (p * (1 - p))
        assert S.effective_units(d) == pytest.approx(n / max(1, g2, kurt))
    assert S.effective_units(np.zeros(50)) == 0.0 and S.effective_units([0.3]) == 0.0
    assert S.effective_units(np.linspace(-1, 1, 101)) == 101


def test_paired_uses_the_t_only_where_the_units_carry_enough():
    rng = np.random.default_rng(5)
    a = rng.uniform(0.2, 1.0, 200)
    b = np.clip(a + rng.normal(0.05, 0.15, 200), 0, 1)
    r = S.paired(a, b)
    t = S.paired_t(a, b, limits=(-1, 1))
    assert r.method == S.PAIRED_T and (r.ci_low, r.ci_high, r.p_value) == (t.ci_low, t.ci_high,
                                                                         t.p_value)
    # ten pairs, nine tied: the betting interval, never zero width, in the seeded order
    a10 = np.ones(10)
    b10 = np.r_[np.ones(9), 0.75]
    r10 = S.paired(a10, b10)
    assert r10.method == S.BETTING and r10.ci_low < -0.025 < r10.ci_high and r10.ci_high > 0
    lo, hi, p = ref.ci(ref.ordered(b10 - a10))
    assert lo - 1e-3 <= r10.ci_low <= lo and hi <= r10.ci_high <= hi + 1e-3
    assert r10.p_value == pytest.approx(p)
    allzero = S.paired(np.ones(10), np.ones(10))
    assert allzero.ci_high - allzero.ci_low > 0.1
    assert S.paired([], []).estimate is None


def test_paired_noninferiority_is_the_betting_bound_with_the_floors():
    a = np.ones(100)
    b = np.ones(100)
    r = S.paired(a, b, margin=0.05)
    assert r.noninferior is True and r.ni_limit == pytest.approx(
        S.betting_bound(np.zeros(100), alpha=0.05, side="lower").limit)
    short = S.paired(np.ones(60), np.ones(60), margin=0.05)
    assert short.noninferior is False and short.min_n == 68
    # refusals (lower is better): B refusing 20 more in 100 is not non-inferior
    ra, rb = np.zeros(100), np.r_[np.ones(20), np.zeros(80)]
    ref = S.paired(ra, rb, kind="binary", margin=0.05, better="lower")
    assert ref.noninferior is False and ref.ni_limit > 0.05
    tg = S.tango_ci(0, 20, 0, 80)
    mp = S.mcnemar(0, 20)
    assert (ref.ci_low, ref.ci_high, ref.p_value) == (tg.ci_low, tg.ci_high, mp.p_value)
    assert S.paired(a, b).noninferior is None
    with pytest.raises(ValueError):
        S.paired([0, 0.5], [1, 1], kind="binary")
    with pytest.raises(ValueError):
        S.paired([0, 1.5], [1, 1])


def test_paired_with_few_groups_bets_on_the_group_means():
    rng = np.random.default_rng(8)
    g = np.repeat(np.arange(8), 5)
    a = rng.uniform(0.5, 1, 40)
    b = np.clip(a + rng.normal(0.1, 0.1, 8)[g], 0, 1)
    r = S.paired(a, b, groups=g.tolist())
    gm = np.bincount(g, weights=b - a) / 5
    want = S.betting_ci(S._ordered(gm))
    assert r.method.startswith(S.BETTING) and r.n_groups == 8 and r.n_units == 8
    assert (r.ci_low, r.ci_high) == (want.ci_low, want.ci_high)
    assert any("a claim needs at least 20" in x for x in r.notes)
    big = np.repeat(np.arange(60), 3)
    a2 = rng.uniform(0.3, 1, 180)
    b2 = np.clip(a2 + rng.normal(0.05, 0.2, 60)[big], 0, 1)
    r2 = S.paired(a2, b2, groups=big.tolist())
    if r2.effective_units >= S.CLT_MIN_UNITS:
        ct = S.clustered_paired_t(a2, b2, big.tolist(), limits=(-1, 1))
        assert r2.method == S.CR2_T and (r2.ci_low, r2.p_value) == (ct.ci_low, ct.p_value)
