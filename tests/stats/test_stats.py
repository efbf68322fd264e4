"""abtest.stats reproduces published reference values and survives the pitfalls in docs/STATS_SPEC.md."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

from abtest import stats as S

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "stats_vectors.json").read_text())

SLEEP_G1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_G2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


# ----------------------------------------------------------------- vector -> abtest.stats mapping

def _sign(i):
    return {"p_value": S.sign_test(i["wins"], i["losses"]).p_value}


def _paired_t(i):
    # R's t.test(extra ~ group, paired=TRUE) reports x - y; abtest reports b - a, so a = y.
    r = S.paired_t(a=i["y"], b=i["x"], conf_level=i["conf_level"])
    return {"t": r.t, "df": r.df, "p_value": r.p_value, "mean_diff": r.mean_diff,
            "ci_low": r.ci_low, "ci_high": r.ci_high}


def _wilcoxon_exact(i):
    d = i["d"]
    zeros = [0.0] * len(d)
    two = S.wilcoxon(zeros, d, zero_method=i["zero_method"], method=i["method"])
    gt = S.wilcoxon(zeros, d, zero_method=i["zero_method"], method=i["method"], alternative="greater")
    return {"statistic_two_sided_min": two.statistic_min, "p_two_sided": two.p_value,
            "statistic_greater_Wplus": gt.statistic, "p_greater": gt.p_value}


def _wilcoxon_r(i):
    d = i["d"]
    r = S.wilcoxon([0.0] * len(d), d, zero_method=i["zero_method"], correction=i["correction"],
                   method=i["method"])
    return {"V_Wplus": r.statistic, "p_two_sided": r.p_value}


def _mcnemar(i):
    (_, b), (c, _) = i["table"]
    assert (b, c) == (i["b"], i["c"])
    r = S.mcnemar(b, c)
    assert S.mcnemar(b, c, method="chi2", correction=True).p_value == r.p_chi2_cc
    return {"p_asymptotic": r.p_chi2, "p_cc": r.p_chi2_cc, "p_exact": r.p_exact, "p_midp": r.p_midp}


def _pp(method):
    def run(i):
        r = S.paired_proportion_diff_ci(i["a"], i["b"], i["c"], i["d"], method=method,
                                        conf_level=i["conf_level"])
        return {"estimate": r.estimate, "ci_low": r.ci_low, "ci_high": r.ci_high}
    return run


def _holm(i):
    r = S.holm(i["p_values"], alpha=i["alpha"])
    return {"reject": list(r.reject), "p_adjusted": list(r.p_adjusted)}


def _kappa(i):
    r = S.cohen_kappa_table(i["table"])
    return {"p_observed": r.p_observed, "p_expected": r.p_expected, "kappa": r.kappa}


def _power_paired(i):
    return {"power": S.power_paired_t(i["d_z"], i["n_pairs"], alpha=i["alpha"],
                                      alternative=i["alternative"]).power}


def _n_paired(i):
    return {"n_required": S.required_n(d_z=i["d_z"], alpha=i["alpha"], power=i["power"],
                                       alternative=i["alternative"]).n}


def _power_two(i):
    return {"power": S.power_two_sample_t(i["d"], i["n_per_group"], alpha=i["alpha"],
                                          alternative=i["alternative"]).power}


def _connor(i):
    assert i["alternative"] == "two-sided"
    return {"n_required": S.n_mcnemar_connor(i["p10"], i["p01"], alpha=i["alpha"], power=i["power"]).n}


def _win_rate(i):
    r = S.win_rate(i["wins"], i["losses"], i["ties"], conf_level=i["conf_level"])
    return {"win_rate": r.estimate, "ci_low": r.ci_low, "ci_high": r.ci_high}


MAPPING = {
    "sign_test_exact_two_sided": _sign,
    "paired_t_test": _paired_t,
    "wilcoxon_signed_rank_exact": _wilcoxon_exact,
    "wilcoxon_signed_rank_asymptotic_zero_wilcox_cc": _wilcoxon_r,
    "mcnemar_exact_midp_asymptotic_cc": _mcnemar,
    "ci_paired_diff_newcombe10": _pp("newcombe"),
    "ci_paired_diff_newcombe_uncorrected_phi": _pp("newcombe8"),
    "ci_paired_diff_tango_score": _pp("tango"),
    "holm_adjustment": _holm,
    "cohens_kappa": _kappa,
    "power_paired_t": _power_paired,
    "sample_size_paired_t": _n_paired,
    "power_two_sample_t": _power_two,
    "sample_size_mcnemar_connor1987": _connor,
    "win_rate_ties_half_t_ci": _win_rate,
}


def _close(got, want, tol):
    if isinstance(want, bool):
        return got is want or got == want
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            _close(g, w, tol) for g, w in zip(got, want))
    return got is not None and math.isfinite(got) and abs(got - want) <= tol


@pytest.mark.parametrize("vec", VECTORS, ids=[v["id"] for v in VECTORS])
def test_reference_vector(vec):
    fn = MAPPING.get(vec["method"])
    if fn is None:
        pytest.fail(f"no abtest.stats mapping for method {vec['method']!r}")
    got = fn(vec["inputs"])
    bad = {k: (got.get(k), w) for k, w in vec["expected"].items()
           if not _close(got.get(k), w, vec["tolerance"])}
    assert not bad, f"{vec['id']} (tol {vec['tolerance']}): got vs expected {bad}"


def test_every_vector_is_checked():
    assert len(VECTORS) == 18
    assert {v["method"] for v in VECTORS} <= set(MAPPING)


# ----------------------------------------------------------------- pitfalls

def test_mcnemar_no_discordant_pairs_is_p_one_for_every_method():
    for method in ("midp", "exact", "chi2"):
        for corr in (False, True):
            r = S.mcnemar(0, 0, method=method, correction=corr)
            assert r.p_value == 1.0
            assert (r.p_exact, r.p_midp, r.p_chi2, r.p_chi2_cc) == (1.0, 1.0, 1.0, 1.0)


def test_mcnemar_equal_discordant_counts_midp_is_one():
    # exact p is capped at 1 when b == c; the proper mid-p is 1 too, not 1 - pmf.
    r = S.mcnemar(3, 3)
    assert r.p_exact == 1.0 and r.p_midp == 1.0


def test_sign_test_without_decisive_pairs():
    r = S.sign_test(0, 0)
    assert r.p_value == 1.0 and r.midp == 1.0 and r.estimate == 0.5
    assert r.ci_low is None and r.ci_high is None


def test_win_rate_empty_and_degenerate():
    empty = S.win_rate(0, 0, 0)
    assert empty.estimate == 0.5 and empty.ci_low is None and empty.ci_high is None
    all_ties = S.win_rate(0, 0, 7)
    assert (all_ties.estimate, all_ties.ci_low, all_ties.ci_high) == (0.5, 0.5, 0.5)
    all_wins = S.win_rate(5, 0, 0)
    assert (all_wins.estimate, all_wins.ci_low, all_wins.ci_high) == (1.0, 1.0, 1.0)


def test_sign_test_midp_and_wilson():
    r = S.sign_test(8, 2)
    assert r.midp == pytest.approx(0.109375 - st.binom.pmf(2, 10, 0.5))
    assert r.estimate == 0.8 and r.ci_low < 0.8 < r.ci_high


def test_paired_t_not_welch_on_sleep_data():
    paired = S.paired_t(SLEEP_G1, SLEEP_G2)
    welch = st.ttest_ind(SLEEP_G2, SLEEP_G1, equal_var=False)
    assert paired.p_value == pytest.approx(0.0028, abs=5e-5)
    assert welch.pvalue == pytest.approx(0.079, abs=5e-4)
    assert paired.mean_diff == pytest.approx(1.58) and paired.estimate == paired.mean_diff
    assert paired.d_z == pytest.approx(1.58 / np.std(np.subtract(SLEEP_G2, SLEEP_G1), ddof=1))


def test_paired_t_degenerate_cases_never_nan():
    zero = S.paired_t([0.5, 0.7, 0.9], [0.5, 0.7, 0.9])
    assert (zero.p_value, zero.t, zero.ci_low, zero.ci_high, zero.d_z) == (1.0, 0.0, 0.0, 0.0, 0.0)
    const = S.paired_t([0.1, 0.2, 0.3], [0.2, 0.3, 0.4])
    # zero variance with a non-zero difference is the strongest evidence, not none: the exact
    # sign test on n same-signed differences (2 * 0.5**n)
    assert const.p_value == pytest.approx(st.binomtest(3, 3).pvalue) and const.note
    assert const.t is None and const.d_z is None
    assert const.ci_low == pytest.approx(0.1) and const.ci_high == pytest.approx(0.1)
    ten = S.paired_t([0.2] * 10, [1.0] * 10)
    assert ten.p_value == pytest.approx(st.binomtest(10, 10).pvalue) and ten.p_value < 0.01
    down = S.paired_t([1.0] * 6, [0.5] * 6)
    assert down.mean_diff == pytest.approx(-0.5) and down.p_value == pytest.approx(2 * 0.5 ** 6)
    one = S.paired_t([0.1], [0.4])
    assert one.estimate == pytest.approx(0.3) and one.p_value is None and one.ci_low is None
    empty = S.paired_t([], [])
    assert empty.n == 0 and empty.estimate is None and empty.p_value is None


def test_wilcoxon_all_zero_differences():
    r = S.wilcoxon([0.5, 0.2, 1.0], [0.5, 0.2, 1.0])
    assert r.p_value == 1.0 and r.statistic == 0.0 and r.n_used == 0 and r.note


def test_wilcoxon_pratt_differs_from_wilcox():
    d = VECTORS[3]["inputs"]["d"]
    pratt = S.wilcoxon([0] * len(d), d, zero_method="pratt", correction=False)
    assert pratt.p_value == pytest.approx(0.0102, abs=5e-4)


def test_holm_six_boundary_is_rejected_under_le_rule():
    r = S.holm([0.01, 0.04, 0.20, 0.03, 0.005, 0.07], alpha=0.05)
    assert r.p_adjusted[0] == pytest.approx(0.05, abs=1e-15)
    assert r.reject[0] is True
    assert r.reject == (True, False, False, False, True, False)


def test_tango_zero_off_diagonal_cells():
    r = S.paired_proportion_diff_ci(10, 0, 0, 5, method="tango")
    assert r.estimate == 0.0
    assert -1 < r.ci_low < 0 < r.ci_high < 1
    assert r.ci_low == pytest.approx(-r.ci_high)
    # closed form for b = c = 0: z^2 / (N + z^2)
    z2 = st.norm.ppf(0.975) ** 2
    assert r.ci_high == pytest.approx(z2 / (15 + z2), abs=1e-9)
    for method in ("newcombe", "newcombe8"):
        n = S.paired_proportion_diff_ci(10, 0, 0, 5, method=method)
        assert n.estimate == 0.0 and n.ci_low <= 0 <= n.ci_high


def test_tango_all_discordant_one_way_stays_in_bounds():
    r = S.paired_proportion_diff_ci(0, 6, 0, 0, method="tango")
    assert r.estimate == 1.0 and r.ci_high == 1.0 and 0 < r.ci_low < 1


def test_paired_proportion_orientation():
    r = S.paired_proportion_diff_ci(4, 9, 3, 16, method="tango")
    flipped = S.paired_proportion_diff_ci(4, 3, 9, 16, method="tango")
    assert r.estimate == pytest.approx((9 - 3) / 32)
    assert flipped.estimate == pytest.approx(-r.estimate)
    assert flipped.ci_low == pytest.approx(-r.ci_high) and flipped.ci_high == pytest.approx(-r.ci_low)


def test_tango_score_test_matches_interval():
    # At delta0 equal to the 95% lower limit, the score z equals z_{0.975}.
    ci = S.paired_proportion_diff_ci(4, 9, 3, 16, method="tango")
    t = S.tango_score_test(4, 9, 3, 16, delta0=ci.ci_low)
    assert t.z == pytest.approx(st.norm.ppf(0.975), abs=1e-6)
    assert t.p_greater == pytest.approx(0.025, abs=1e-6)
    ni = S.tango_score_test(4, 9, 3, 16, delta0=-0.1)
    assert ni.z > 0 and ni.p_greater < 0.05 and ni.p_greater + ni.p_less == pytest.approx(1.0)


def test_position_consistency_counts():
    ab = ["A", "B", "tie", "A", "B", "A", "tie", None, "B"]
    ba = ["A", "B", "tie", "B", "A", "tie", "B", "A", "B"]
    r = S.position_consistency(ab, ba)
    assert r.errors == 1 and r.n == 8
    assert r.consistent == 4                 # A/A, B/B, tie/tie, B/B
    assert r.biased_to_first == 1            # run1 A (shown first), run2 B (shown first)
    assert r.biased_to_second == 1           # run1 B (shown second), run2 A (shown second)
    assert r.other_inconsistent == 2
    assert r.estimate == 0.5 and r.ci_low < 0.5 < r.ci_high
    assert S.position_consistency([None], ["A"]).estimate is None


@pytest.mark.parametrize("ab,ba,out", [
    ("B", "B", "B"), ("A", "A", "A"), ("A", "B", "tie"), ("B", "A", "tie"),
    ("tie", "tie", "tie"), ("B", "tie", "tie"), ("tie", "A", "tie"),
    (None, "B", "tie"), ("A", None, "tie"), (None, None, "tie"),
])
def test_pairwise_outcome_rule(ab, ba, out):
    assert S.pairwise_outcome(ab, ba) == out


def test_pairwise_outcomes_counts_and_bad_label():
    r = S.pairwise_outcomes(["B", "B", "A", "A", None, "tie"], ["B", "A", "A", "tie", "B", "tie"])
    assert (r.wins, r.losses, r.ties, r.n) == (1, 1, 4, 6)
    assert r.inconsistent == 2 and r.errors == 1
    with pytest.raises(ValueError):
        S.pairwise_outcome("b", "B")


def test_cohen_kappa_from_labels_matches_table():
    x = ["y"] * 12 + ["y"] * 2 + ["n"] * 4 + ["n"] * 2
    y = ["y"] * 12 + ["n"] * 2 + ["y"] * 4 + ["n"] * 2
    r = S.cohen_kappa(x + [None], y + ["y"])
    assert r.n == 20 and r.kappa == pytest.approx(0.2105263, abs=1e-6)
    assert r.ci_low < r.kappa < r.ci_high
    assert S.cohen_kappa(["a", "a"], ["a", "a"]).kappa is None


def test_power_helpers_are_consistent():
    n = S.required_n(0.1, 0.2, alpha=0.05, power=0.8)
    assert S.power_paired_t(0.5, n.n).power >= 0.8 > S.power_paired_t(0.5, n.n - 1).power
    m = S.mde_paired_t(n.n, sd_d=0.2)
    assert m.mde <= 0.1 and m.d_z == pytest.approx(m.mde / 0.2)


def test_noninferiority_paired_t():
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 1.0, 40)
    b = a + rng.normal(0.0, 0.05, 40)
    r = S.noninferiority_paired_t(a, b, margin=0.05)
    d = b - a
    assert r.p_value == pytest.approx(st.ttest_1samp(d, -0.05, alternative="greater").pvalue)
    assert r.ci_low == pytest.approx(st.ttest_rel(b, a).confidence_interval(0.90).low)
    assert r.noninferior == (r.ci_low > -0.05) == (r.p_value < 0.05)
    worse = S.noninferiority_paired_t(a, a - 0.2 + rng.normal(0, 0.01, 40), margin=0.05)
    assert not worse.noninferior


def test_bootstrap_is_seeded_and_brackets_mean():
    a = [0.2, 0.5, 0.9, 0.4, 0.7, 0.1, 0.6, 0.8]
    b = [0.3, 0.7, 0.9, 0.6, 0.6, 0.4, 0.7, 0.9]
    r1 = S.bootstrap_mean_diff_ci(a, b, n_boot=2000, seed=3)
    r2 = S.bootstrap_mean_diff_ci(a, b, n_boot=2000, seed=3)
    assert r1 == r2 and r1.ci_low < r1.estimate < r1.ci_high
    flat = S.bootstrap_mean_diff_ci(a, a)
    assert (flat.estimate, flat.ci_low, flat.ci_high) == (0.0, 0.0, 0.0)


def test_summary():
    s = S.summary([0.9, 0.8, 0.7, 0.6, 0.5, None, float("nan")])
    assert s.n == 5 and s.n_missing == 2
    assert (s.high, s.medium, s.low) == (2, 2, 1)
    assert s.median == 0.7 and s.p25 == pytest.approx(0.6) and s.p75 == pytest.approx(0.8)
    assert s.average == pytest.approx(0.7) and (s.min, s.max) == (0.5, 0.9)
    assert S.summary([]).average is None


def test_holm_result_is_the_adjusted_pvalues_in_input_order():
    h = S.holm([0.01, 0.04, 0.03, 0.005])
    assert list(h) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert h.reject == (True, False, False, True)


def test_required_n_usable_as_a_number():
    assert int(S.required_n(d_z=1.5, power=0.95)) == 8


def test_wilcoxon_default_is_r_exact_below_50_without_ties_or_zeros():
    """R's wilcox.test: exact when n < 50 and no ties or zeros (the Darwin vector, exact p
    0.041259765625); with a tie or a zero, the normal approximation with correction."""
    d = VECTORS[2]["inputs"]["d"]
    r = S.wilcoxon([0.0] * len(d), d)
    assert r.method == "exact" and r.p_value == pytest.approx(0.041259765625, abs=1e-12)
    tied = list(d[:-1]) + [d[0]]
    r2 = S.wilcoxon([0.0] * len(tied), tied)
    want = st.wilcoxon(tied, zero_method="wilcox", correction=True, method="asymptotic").pvalue
    assert r2.method == "asymptotic" and r2.p_value == pytest.approx(want)
    big = list(range(1, 51))
    assert S.wilcoxon([0.0] * 50, big).method == "asymptotic"  # n = 50 is not < 50


def test_wilcoxon_ranks_equal_differences_as_ties_despite_float_noise():
    a = [0.1, 0.2, 0.7, 0.4, 0.5]
    b = [0.2, 0.3, 0.8, 0.2, 0.9]   # differences 0.1 (three times, in float noise), -0.2, 0.4
    exact_d = [0.1, 0.1, 0.1, -0.2, 0.4]
    assert len(set(np.subtract(b, a))) > len(set(exact_d))  # the noise is real
    r = S.wilcoxon(a, b)
    want = st.wilcoxon(exact_d, zero_method="wilcox", correction=True, method="asymptotic")
    assert r.method == "asymptotic" and r.p_value == pytest.approx(want.pvalue)


def test_intervals_stay_inside_their_scale():
    t = S.paired_t([0.0, 0.0, 0.5], [1.0, 1.0, 1.0], limits=(-1.0, 1.0))
    raw = st.ttest_rel([1.0, 1.0, 1.0], [0.0, 0.0, 0.5]).confidence_interval(0.95)
    assert raw.high > 1 and t.ci_high == 1.0 and t.ci_low == pytest.approx(max(-1.0, raw.low))
    w = S.win_rate(19, 0, 1)
    assert st.ttest_1samp([1.0] * 19 + [0.5], 0.5).confidence_interval(0.95).high > 1
    assert w.ci_high == 1.0 and 0 <= w.ci_low <= w.estimate


@pytest.mark.parametrize("n", [60, 72, 81, 89, 101, 133])
def test_mde_is_a_positive_number_at_every_n(n):
    """solve_power returns a 1-element array at these N (it crashed the report) and may land
    on the negative root: the MDE is the positive d_z with 80% power."""
    m = S.mde_paired_t(n, sd_d=0.3, alpha=0.01)
    assert m.d_z > 0 and isinstance(m.d_z, float)
    assert S.power_paired_t(m.d_z, n, alpha=0.01).power == pytest.approx(0.8, abs=1e-6)


def test_noninferiority_with_zero_variance_is_a_sign_test():
    """All differences equal: the t statistic is undefined; the one-sided sign test on
    d + margin decides (p = 0.5**n when every shifted difference is positive)."""
    r = S.noninferiority_paired_t([0.5] * 10, [0.5] * 10, margin=0.05)
    assert r.noninferior is True and r.p_value == pytest.approx(st.binomtest(10, 10, 0.5,
                                                                              alternative="greater").pvalue)
    assert (r.ci_low, r.ci_high, r.df) == (0.0, 0.0, 9)
    four = S.noninferiority_paired_t([0.5] * 4, [0.5] * 4, margin=0.05)
    assert four.p_value == pytest.approx(0.0625) and four.noninferior is False
    worse = S.noninferiority_paired_t([0.5] * 10, [0.4] * 10, margin=0.05)
    assert worse.p_value == 1.0 and worse.noninferior is False
    at = S.noninferiority_paired_t([0.5] * 10, [0.45] * 10, margin=0.05)  # d = −margin exactly
    assert at.noninferior is False
    one = S.noninferiority_paired_t([0.5], [0.9], margin=0.05)
    assert one.noninferior is False and one.p_value is None
    with pytest.raises(ValueError):
        S.noninferiority_paired_t([0.5, 0.6], [0.5, 0.7], margin=-0.01)
    assert S.noninferiority_paired_t([0.5, 0.6], [0.5, 0.7], margin=0.0).n == 2


def test_position_consistency_each_kind_of_inconsistency():
    r = S.position_consistency(["A", "A", "B", "tie", "B"], ["B", "B", "A", "A", "tie"])
    # A-first says A, B-first says B: biased to the first position (twice); the reverse once
    assert (r.biased_to_first, r.biased_to_second, r.other_inconsistent) == (2, 1, 2)
    assert (r.n, r.consistent, r.errors) == (5, 0, 0)


def test_empty_preference_counts():
    s = S.sign_test(0, 0)
    assert (s.p_value, s.midp, s.estimate, s.n) == (1.0, 1.0, 0.5, 0) and s.ci_low is None
    w = S.win_rate(0, 0, 0)
    assert (w.estimate, w.n, w.ci_low) == (0.5, 0, None)
    t = S.win_rate(0, 0, 4)
    assert (t.estimate, t.ci_low, t.ci_high) == (0.5, 0.5, 0.5)


def test_defaults_and_input_checks():
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
    from statsmodels.stats.power import TTestPower

    # McNemar's chi2 method defaults to no continuity correction
    plain = sm_mcnemar([[0, 9], [3, 0]], exact=False, correction=False).pvalue
    assert S.mcnemar(9, 3, method="chi2").p_value == pytest.approx(plain)
    assert S.mcnemar(4, 4).p_value == 1.0 and S.mcnemar(0, 0).note
    # Holm takes p in [0, 1] and nothing else
    assert S.holm([0.0, 0.5]).reject == (True, False)
    for bad in ([1.5], [-0.1], [float("nan")]):
        with pytest.raises(ValueError):
            S.holm(bad)
    # kappa needs a square table of counts
    for bad in ([[1, 2, 3]], [[1, -1], [0, 1]], [[1, 2], [3, 4], [5, 6]]):
        with pytest.raises(ValueError):
            S.cohen_kappa_table(bad)
    empty = S.cohen_kappa_table([[0, 0], [0, 0]])
    assert empty.n == 0 and empty.kappa is None and empty.note == "no items"
    const = S.cohen_kappa_table([[5, 0], [0, 0]])
    assert const.kappa is None and const.p_observed == 1.0
    # the MDE's default alpha is 0.05
    dz = TTestPower().solve_power(effect_size=None, nobs=50, alpha=0.05, power=0.8)
    assert S.mde_paired_t(50).d_z == pytest.approx(abs(float(np.ravel(dz)[0])))
    assert S.tango_ci(4, 9, 3, 16).conf_level == 0.95


def test_kappa_interval_stays_inside_minus_one_to_one():
    """A small sample's Wald interval runs past ±1; kappa's scale ends there."""
    from statsmodels.stats.inter_rater import cohens_kappa

    near_one = [[9, 1], [0, 1]]
    raw = cohens_kappa(np.asarray(near_one, float))
    assert raw.kappa + 1.959963984540054 * raw.std_kappa > 1  # the unclipped limit
    assert S.cohen_kappa_table(near_one).ci_high == 1.0
    near_minus_one = [[0, 4], [5, 1]]
    raw = cohens_kappa(np.asarray(near_minus_one, float))
    assert raw.kappa - 1.959963984540054 * raw.std_kappa < -1
    assert S.cohen_kappa_table(near_minus_one).ci_low == -1.0


def test_paired_t_with_two_pairs_is_a_test_with_one_degree_of_freedom():
    r = S.paired_t([0.0, 0.0], [0.5, 0.51])
    want = st.ttest_rel([0.5, 0.51], [0.0, 0.0])
    assert r.df == 1 and r.p_value == pytest.approx(want.pvalue) and r.p_value < 0.05


def test_position_consistency_interval_ends_exactly_at_zero_and_one():
    from statsmodels.stats.proportion import proportion_confint

    none = S.position_consistency(["A"] * 12, ["B"] * 12)
    assert none.ci_low == 0.0 and none.ci_high == pytest.approx(
        proportion_confint(0, 12, alpha=0.05, method="wilson")[1])
    every = S.position_consistency(["A"] * 12, ["A"] * 12)
    assert every.ci_high == 1.0 and every.ci_low == pytest.approx(
        proportion_confint(12, 12, alpha=0.05, method="wilson")[0])
    some = S.position_consistency(["A"] * 6 + ["B"] * 6, ["A"] * 12)
    want = proportion_confint(6, 12, alpha=0.05, method="wilson")
    assert (some.ci_low, some.ci_high) == pytest.approx(want)
