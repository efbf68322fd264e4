"""abtest.stats with groups (docs/CLAIM_STATISTICS.md §10): the reference vectors of the statistics
specification, STATS_SPEC.md §9, and values computed independently here — statsmodels' cluster
covariance, the general CR2 matrix formula, the Bell–McCaffrey eigenvalues, a t-test on
group means — never by the function under test. With one case per group every result
equals the iid function's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import linalg
from scipy import stats as st

from abtest import stats as S

# STATS_SPEC.md §9 (the project's statistics specification, shared copy), "Vector (12 cases,
# 4 groups)". Not in tests/data/stats_vectors.json: that file is a verbatim copy of the
# specification's vector file (tests/stats/test_stats.py checks it holds exactly its 18 vectors),
# which does not carry these.
G12 = [1, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4, 4]
D12 = [0.5, 0.25, 0.5, 0, -0.25, 0, 0.25, 1, 0.75, -0.5, 0, 0.25]
ZERO12 = [0.0] * 12
# STATS_SPEC.md §9, Durkalski et al. (Stat Med 2003) clustered McNemar vector
DURK_B = [4, 3, 0, 5, 1]
DURK_C = [0, 1, 2, 0, 1]


def test_stats_md_vector_cr1_with_g_minus_1_df():
    r = S.clustered_paired_t(ZERO12, D12, G12, method="CR1", df_method="G-1")
    assert r.mean_diff == pytest.approx(0.229167, abs=1e-6)
    assert r.se_iid == pytest.approx(0.120990, abs=1e-6)
    assert r.se == pytest.approx(0.185192, abs=1e-6)
    assert r.t == pytest.approx(1.2375, abs=1e-4)
    assert r.df == 3 and r.n_groups == 4
    assert r.p_value == pytest.approx(0.3039, abs=1e-4)
    assert r.design_effect == pytest.approx(2.3429, abs=1e-4)
    assert r.effective_n == pytest.approx(12 / 2.3429, abs=1e-3)
    # the iid paired t on the same differences: p 0.0848
    assert S.paired_t(ZERO12, D12).p_value == pytest.approx(0.0848, abs=1e-4)


def test_stats_md_vector_cr2_with_g_minus_1_df():
    r = S.clustered_paired_t(ZERO12, D12, G12, method="CR2", df_method="G-1")
    assert r.se == pytest.approx(0.183641, abs=1e-6)
    assert r.p_value == pytest.approx(0.3006, abs=1e-4)


def test_cr1_is_statsmodels_cluster_covariance_with_g_minus_1_df():
    d = np.array(D12)
    fit = sm.OLS(d, np.ones(12)).fit(cov_type="cluster", cov_kwds={"groups": np.array(G12)},
                                     use_t=True)
    r = S.clustered_paired_t(ZERO12, D12, G12, method="CR1", df_method="G-1")
    assert r.se == pytest.approx(float(fit.bse[0]), rel=1e-12)
    assert r.p_value == pytest.approx(float(fit.pvalues[0]), rel=1e-10)
    lo, hi = fit.conf_int(alpha=0.05)[0]
    assert (r.ci_low, r.ci_high) == (pytest.approx(lo, rel=1e-10), pytest.approx(hi, rel=1e-10))


def _cr2_general(d, g):
    """CR2 from its definition (Bell & McCaffrey 2002): V = (X'X)^-1 Σ X_g' A_g e_g e_g' A_g X_g
    (X'X)^-1 with A_g = (I − H_gg)^(-1/2), X a column of ones; and the Bell–McCaffrey df from
    the eigenvalues of the G × G matrix of the quadratic form."""
    d = np.asarray(d, float)
    g = np.asarray(g)
    n = d.size
    e = d - d.mean()
    keys = list(dict.fromkeys(g.tolist()))
    meat = 0.0
    u = []
    m = np.eye(n) - np.full((n, n), 1.0 / n)       # residual maker of the intercept model
    for k in keys:
        idx = np.flatnonzero(g == k)
        h = np.full((idx.size, idx.size), 1.0 / n)
        a = np.real(linalg.sqrtm(np.linalg.inv(np.eye(idx.size) - h)))
        meat += float(np.ones(idx.size) @ a @ e[idx]) ** 2
        # the contrast vector whose square is group k's term: u_k' y
        sel = np.zeros((n, idx.size))
        sel[idx, np.arange(idx.size)] = 1.0
        u.append((np.ones(idx.size) @ a @ sel.T @ m) / n)
    u = np.array(u)
    lam = np.linalg.eigvalsh(u @ u.T)
    return math.sqrt(meat) / n, lam.sum() ** 2 / np.sum(lam ** 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cr2_and_bell_mccaffrey_df_match_the_general_matrix_formulas(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, size=9)
    g = np.repeat([f"g{i}" for i in range(9)], sizes)
    d = rng.normal(size=g.size) + np.repeat(rng.normal(size=9), sizes)
    se, df = _cr2_general(d, g)
    r = S.clustered_paired_t(np.zeros(g.size), d, g.tolist())
    assert r.se == pytest.approx(se, rel=1e-9)
    assert r.df == pytest.approx(df, rel=1e-9)
    assert r.p_value == pytest.approx(2 * st.t.sf(abs(d.mean() / se), df), rel=1e-9)


def test_equal_groups_cr2_is_the_t_test_on_group_means():
    """With equal group sizes CR2 with Bell–McCaffrey df is exactly a one-sample t on the
    G group means (df G − 1): the group is the unit."""
    rng = np.random.default_rng(5)
    g = np.repeat(np.arange(15), 4)
    a = rng.random(60)
    b = np.clip(a + rng.normal(0.05, 0.2, 60) + np.repeat(rng.normal(0, 0.2, 15), 4), 0, 1)
    r = S.clustered_paired_t(a, b, g.tolist(), conf_level=0.9)
    means = (b - a).reshape(15, 4).mean(axis=1)
    ref = st.ttest_1samp(means, 0.0)
    assert r.df == pytest.approx(14)
    assert r.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    ci = ref.confidence_interval(0.9)
    assert (r.ci_low, r.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    ni = S.noninferiority_clustered_t(a, b, g.tolist(), margin=0.05, alpha=0.05)
    assert ni.p_value == pytest.approx(st.ttest_1samp(means, -0.05, alternative="greater").pvalue,
                                       rel=1e-10)
    assert ni.ci_low == pytest.approx(ci.low) and ni.noninferior == (ci.low > -0.05)


def test_singletons_give_the_iid_paired_t():
    rng = np.random.default_rng(1)
    a, b = rng.random(30), rng.random(30)
    r = S.clustered_paired_t(a, b, list(range(30)))
    t = S.paired_t(a, b)
    assert r.df == pytest.approx(29) and r.design_effect == pytest.approx(1.0)
    assert r.p_value == pytest.approx(t.p_value, rel=1e-12)
    assert (r.ci_low, r.ci_high) == (pytest.approx(t.ci_low), pytest.approx(t.ci_high))
    assert r.icc is None and r.effective_n == pytest.approx(30)
    ni = S.noninferiority_clustered_t(a, b, list(range(30)), margin=0.05)
    ref = S.noninferiority_paired_t(a, b, margin=0.05)
    assert ni.p_value == pytest.approx(ref.p_value, rel=1e-12)
    assert ni.ci_low == pytest.approx(ref.ci_low) and ni.noninferior == ref.noninferior


def test_design_effect_icc_and_effective_n_are_the_standard_errors_ratio():
    rng = np.random.default_rng(9)
    sizes = np.array([3, 5, 2, 6, 4, 4, 1, 7])
    g = np.repeat(np.arange(8), sizes)
    d = rng.normal(size=g.size) + np.repeat(rng.normal(0, 1.0, 8), sizes)
    r = S.clustered_paired_t(np.zeros(g.size), d, g.tolist())
    se, _ = _cr2_general(d, g)
    se_iid = d.std(ddof=1) / math.sqrt(d.size)
    deff = (se / se_iid) ** 2
    m = float(np.sum(sizes ** 2)) / sizes.sum()
    assert r.design_effect == pytest.approx(deff)
    assert r.effective_n == pytest.approx(d.size / deff)
    assert r.icc == pytest.approx((deff - 1) / (m - 1))


def test_degenerate_groups():
    # every group's mean difference equal and positive: the exact sign test on the 6 groups
    g = np.repeat(np.arange(6), 3).tolist()
    d = [0.1, 0.2, 0.3] * 6
    r = S.clustered_paired_t([0.0] * 18, d, g)
    assert r.p_value == pytest.approx(2 * 0.5 ** 6) and r.ci_low == r.ci_high == pytest.approx(0.2)
    ni = S.noninferiority_clustered_t([0.0] * 18, d, g, margin=0.05)
    assert ni.p_value == pytest.approx(0.5 ** 6) and ni.noninferior
    # every group's mean zero though cases differ: nothing to test
    z = S.clustered_paired_t([0.0] * 4, [0.5, -0.5, 0.25, -0.25], [1, 1, 2, 2])
    assert z.p_value == 1.0 and z.ci_low == z.ci_high == 0.0
    # one group: no between-group variance
    one = S.clustered_paired_t([0.0, 0.0, 0.0], [0.1, 0.5, 0.2], ["x"] * 3)
    assert one.p_value is None and one.mean_diff == pytest.approx(0.8 / 3) and one.n_groups == 1
    assert "one group" in one.note
    with pytest.raises(ValueError, match="no group label"):
        S.clustered_paired_t([0.0, 0.0], [1.0, 0.0], ["a", None])
    with pytest.raises(ValueError, match="one label per pair"):
        S.clustered_paired_t([0.0, 0.0], [1.0, 0.0], ["a"])
    with pytest.raises(ValueError, match="Bell–McCaffrey"):
        S.clustered_paired_t(ZERO12, D12, G12, method="CR1")


def test_stats_md_vector_durkalski_clustered_mcnemar():
    r = S.clustered_mcnemar(DURK_B, DURK_C)
    assert (r.b, r.c, r.n_groups) == (13, 4, 5)
    assert r.statistic == pytest.approx(1.6531, abs=1e-4)
    assert r.p_value == pytest.approx(0.1985, abs=1e-4)
    # McNemar ignoring the groups: 4.7647, p 0.0290
    m = S.mcnemar(13, 4, method="chi2")
    assert m.statistic == pytest.approx(4.7647, abs=1e-4) and m.p_value == pytest.approx(0.0290,
                                                                                        abs=1e-4)
    assert r.design_effect == pytest.approx(m.statistic / r.statistic)


def test_durkalski_with_singletons_is_mcnemar_and_degenerate_tables():
    b_g = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0]
    c_g = [0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    r = S.clustered_mcnemar(b_g, c_g)
    m = S.mcnemar(sum(b_g), sum(c_g), method="chi2")
    assert r.statistic == pytest.approx(m.statistic) and r.p_value == pytest.approx(m.p_value)
    assert r.design_effect == pytest.approx(1.0)
    assert S.clustered_mcnemar([0, 0], [0, 0]).p_value == 1.0
    bal = S.clustered_mcnemar([2, 1], [2, 1])
    assert bal.p_value == 1.0 and bal.statistic == 0.0


def test_clustered_sign_test_votes_once_per_group():
    w = [1, 1, -1, 0, 0, 0, 1, 1, 1, -1, -1, 1, 0, 1, 1]
    g = ["a", "a", "a", "b", "b", "c", "c", "c", "d", "d", "d", "e", "e", "f", "f"]
    r = S.clustered_sign_test(w, g)
    # per-group sums: a +1, b 0, c +2, d −1, e +1, f +2 -> 4 groups for B, 1 for A, 1 none
    assert (r.group_wins, r.group_losses, r.group_ties) == (4, 1, 1)
    assert r.p_value == pytest.approx(st.binomtest(4, 5, 0.5).pvalue)
    assert (r.wins, r.losses, r.ties) == (8, 3, 4)
    sums = np.array([1, 0, 2, -1, 1, 2])
    assert r.chi2 == pytest.approx(5 ** 2 / np.sum(sums ** 2))
    assert r.p_chi2 == pytest.approx(st.chi2.sf(25 / 11, 1))
    assert r.design_effect == pytest.approx(np.sum(sums ** 2) / 11)
    # singletons: the sign test itself
    s1 = S.clustered_sign_test(w, list(range(len(w))))
    ref = S.sign_test(8, 3)
    assert (s1.p_value, s1.midp, s1.ci_low, s1.ci_high) == (ref.p_value, ref.midp, ref.ci_low,
                                                            ref.ci_high)
    with pytest.raises(ValueError):
        S.clustered_sign_test([2, 0], ["a", "b"])


def test_rao_scott_tango_is_tango_on_the_effective_table():
    # DEFF 1 is Tango's interval itself (STATS_SPEC.md vector tango_table7: 4/9/3/16)
    one = S.rao_scott_tango_ci(4, 9, 3, 16, 1.0)
    ref = S.tango_ci(4, 9, 3, 16)
    assert (one.ci_low, one.ci_high) == (ref.ci_low, ref.ci_high)
    assert ref.ci_low == pytest.approx(-0.027, abs=5e-4) and ref.ci_high == pytest.approx(0.39,
                                                                                          abs=5e-4)
    # every case written 3 times, DEFF 3: the interval of the distinct cases
    tripled = S.rao_scott_tango_ci(12, 27, 9, 48, 3.0)
    assert (tripled.ci_low, tripled.ci_high) == (pytest.approx(ref.ci_low),
                                                 pytest.approx(ref.ci_high))
    assert tripled.estimate == pytest.approx(ref.estimate)
    with pytest.raises(ValueError):
        S.rao_scott_tango_ci(1, 1, 1, 1, 0.0)


def test_kish_units_and_group_means():
    assert S.kish_units([1] * 7) == pytest.approx(7)
    assert S.kish_units([4] * 10) == pytest.approx(10)
    assert S.kish_units([3, 6]) == pytest.approx(81 / 45)
    assert S.group_means([1.0, 2.0, 4.0, 0.0], ["x", "y", "x", "y"]) == [2.5, 1.0]


def test_mde_clustered_t_has_the_power_it_claims():
    r = S.mde_clustered_t(40.0, 19.0, sd_d=0.3, alpha=0.01)
    crit = st.t.isf(0.005, 19)
    nc = r.d_z * math.sqrt(40)
    power = st.nct.sf(crit, 19, nc) + st.nct.cdf(-crit, 19, nc)
    assert power == pytest.approx(0.8, abs=1e-8)
    assert r.mde == pytest.approx(0.3 * r.d_z)
    # with df = n − 1 it is the iid paired MDE (G*Power matched pairs)
    assert S.mde_clustered_t(50, 49).d_z == pytest.approx(S.mde_paired_t(50).d_z, rel=1e-6)


def test_cluster_bootstrap_resamples_whole_groups():
    g = np.repeat(np.arange(12), 3).tolist()
    rng = np.random.default_rng(3)
    d = np.repeat(rng.normal(0.1, 0.3, 12), 3)       # identical within each group
    r1 = S.cluster_bootstrap_mean_diff_ci(np.zeros(36), d, g, n_boot=4000, seed=7)
    r2 = S.cluster_bootstrap_mean_diff_ci(np.zeros(36), d, g, n_boot=4000, seed=7)
    assert (r1.ci_low, r1.ci_high) == (r2.ci_low, r2.ci_high)
    # repeats add nothing: the same draws on the 12 distinct values give the same interval
    rng2 = np.random.default_rng(7)
    draw = rng2.integers(0, 12, size=(4000, 12))
    means = d[::3][draw].mean(axis=1)
    assert r1.ci_low == pytest.approx(np.quantile(means, 0.025))
    assert r1.ci_high == pytest.approx(np.quantile(means, 0.975))
