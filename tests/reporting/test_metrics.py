"""The report's metrics (abtest.reporting.metrics) against values computed independently with
scipy and statsmodels, or by hand: Holm's family, drops and their worst-case bound, binary
rates and margins, pairwise diagnostics, the length-controlled share."""

from __future__ import annotations


import pytest

from abtest.core.models import Config
from support.sample_reports import CFG


def _jv(fa, fb, *, ans=None, abst=None):
    """Judge maps for compute_metrics from per-case faithfulness scores (None = no claims)."""
    jv = {("faithfulness", "A"): {}, ("faithfulness", "B"): {}}
    for cid, (x, y) in enumerate(zip(fa, fb)):
        for v, s in (("A", x), ("B", y)):
            jv[("faithfulness", v)][str(cid)] = {"verdict": "scored" if s is not None else
                                                 "no_claims", "score": s}
    return jv


def _length_data(rng, n, b_longer_share, win):
    """Decisive pairs: lengths, and a B win drawn by `win(len_a, len_b)`."""
    out = []
    for _ in range(n):
        la = rng.randint(100, 300)
        lb = la + rng.randint(40, 200) * (1 if rng.random() < b_longer_share else -1)
        out.append(("B" if rng.random() < win(la, lb) else "A", la, lb))
    return out


def _independent_lc(data):
    import numpy as np
    from statsmodels.discrete.discrete_model import Logit

    d = np.array([lb - la for _, la, lb in data], float)
    x = np.tanh(d / d.std(ddof=1))
    y = np.array([o == "B" for o, _, _ in data], float)
    fit = Logit(y, np.column_stack([np.ones(len(x)), x])).fit(disp=0)
    b0, se0 = fit.params[0], fit.bse[0]
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    return sig(b0), sig(b0 - 1.959963984540054 * se0), sig(b0 + 1.959963984540054 * se0), fit


def _sides(pairs):
    from abtest.reporting.metrics import length_bias

    return length_bias([o for o, _, _ in pairs], [a for _, a, _ in pairs],
                       [b for _, _, b in pairs], 0.05)


def test_holm_family_is_fixed_from_the_configuration_not_the_data():
    from statsmodels.stats.multitest import multipletests

    from abtest.reporting.metrics import compute_metrics

    rng = __import__("random").Random(3)
    fa = [rng.random() for _ in range(40)]
    fb = [min(1.0, max(0.0, x + 0.1 + rng.uniform(-0.2, 0.2))) for x in fa]
    ids = [str(i) for i in range(40)]
    m, _, holm = compute_metrics(ids, _jv(fa, fb), {}, {}, CFG, CFG.judges)
    # only faithfulness has data; the family is still the five configured members
    assert holm["family"] == ["pairwise", "faithfulness", "coverage", "abstention_answerable",
                              "abstention_unanswerable"]
    assert set(holm["without_data"]) == {"pairwise", "coverage", "abstention_answerable",
                                         "abstention_unanswerable"}
    p = m["faithfulness"]["p_value"]
    want = multipletests([1.0, p, 1.0, 1.0, 1.0], alpha=0.05, method="holm")[1][1]
    assert m["faithfulness"]["p_holm"] == pytest.approx(want) == pytest.approx(min(1.0, 5 * p))
    # a configuration without the pairwise judge has a family of four
    cfg4 = Config(judges=["faithfulness", "coverage", "abstention"])
    _, _, h4 = compute_metrics(ids, _jv(fa, fb), {}, {}, cfg4, cfg4.judges)
    assert len(h4["family"]) == 4


def test_a_perfectly_consistent_gain_is_significant_and_licensable():
    from abtest.reporting.metrics import compute_metrics

    import math

    ids = [str(i) for i in range(20)]
    m, _, _ = compute_metrics(ids, _jv([0.5] * 20, [1.0] * 20), {}, {}, CFG, ["faithfulness"])
    f = m["faithfulness"]
    # twenty equal gains carry no spread for a t: the betting interval, whose p-value is
    # 2/K⁺_n(½) for x = (0.5 + 1)/2 = 0.75 every time (from the definition, by hand)
    cap, ss, s2 = 1.0, 0.0, 0.25
    for t in range(1, 21):
        lam = math.sqrt(2 * math.log(2 / 0.05) / (s2 * 20))
        cap *= 1 + min(lam, 0.9 / 0.5) * 0.25
        ss += (0.75 - (0.5 + 0.75 * t) / (t + 1)) ** 2
        s2 = (0.25 + ss) / (t + 1)
    assert f["difference"] == 0.5 and f["p_value"] == pytest.approx(2 / cap)
    assert f["test"] == "betting" and f["significant"] is True and f["direction"] == "B"
    # twenty equal gains do not pin the difference: the interval has width, around 0.5
    assert 0 < f["ci_low"] < 0.5 < f["ci_high"] <= 1


def test_mde_never_leaves_the_scale():
    from abtest.reporting.metrics import continuous

    m = continuous("faithfulness", {"0": 0.0, "1": 1.0, "2": 0.2}, {"0": 1.0, "1": 0.0, "2": 0.9},
                   ["0", "1", "2"], 0.05, family_size=5)
    assert m["mde"]["mde"] is None and "no difference within the 0–1 scale" in m["mde"]["note"]
    assert -1 <= m["ci_low"] <= m["ci_high"] <= 1


def test_drops_are_counted_per_variant_and_reason():
    from abtest.reporting.metrics import compute_metrics

    fa = [1.0, None, 0.5, None, 1.0]
    fb = [None, 1.0, 1.0, None, 0.0]
    jv = _jv(fa, fb)
    jv[("abstention", "A")] = {str(i): {"verdict": "abstained" if i == 3 else "answered"}
                               for i in range(5)}
    jv[("abstention", "B")] = {str(i): {"verdict": "abstained" if i in (0, 3) else "answered"}
                               for i in range(5)}
    ids = [str(i) for i in range(5)]
    m, _, _ = compute_metrics(ids, jv, {c: True for c in ids}, {}, CFG, CFG.judges)
    dr = m["faithfulness"]["dropped"]
    assert (dr["a_only"], dr["b_only"], dr["both"]) == (["1"], ["0"], ["3"])
    assert dr["reasons"] == {"A": {"abstained": 1, "no factual claim": 1},
                             "B": {"abstained": 2}}
    b = m["faithfulness"]["drop_bound"]
    # worst case: case 0 counts B = 0 against A 1.0; case 1 counts A = 1 against B 1.0
    assert (b["imputed_a"], b["imputed_b"], b["n"]) == (1, 1, 4)
    assert b["difference"] == pytest.approx(((0 - 1.0) + (1.0 - 1.0) + (1.0 - 0.5) + (0 - 1.0)) / 4)


def test_coverage_noninferiority_needs_two_pairs():
    from abtest.reporting.metrics import noninferiority_continuous

    ni = noninferiority_continuous({"1": 0.5}, {"1": 0.9}, ["1"], 0.05, 0.05)
    assert ni["holds"] is False and ni["note"] == "fewer than 2 pairs"
    # one-sided missing scores are not pairs
    ni = noninferiority_continuous({"1": 0.5, "2": None}, {"1": 0.9, "2": 0.7}, ["1", "2"],
                                   0.05, 0.05)
    assert ni["holds"] is False


def test_length_controlled_share_matches_statsmodels_and_keeps_a_real_preference():
    import random

    from abtest.reporting.metrics import length_bias

    data = _length_data(random.Random(5), 80, 0.5, lambda la, lb: 0.8)  # B preferred, any length
    lb_ = length_bias([o for o, _, _ in data], [a for _, a, _ in data], [b for _, _, b in data], 0.05)
    share, lo, hi, fit = _independent_lc(data)
    assert lb_["separable"] is True
    assert lb_["lc_share_b"] == pytest.approx(share) and lb_["lc_ci_low"] == pytest.approx(lo)
    assert lb_["lc_ci_high"] == pytest.approx(hi)
    assert lb_["length_p_value"] == pytest.approx(fit.pvalues[1])
    assert lo > 0.5 and lb_["explained_by_length"] is False and lb_["caveat"] is None


def test_length_controlled_share_catches_wins_that_follow_length():
    import random

    from abtest.reporting.metrics import length_bias

    data = _length_data(random.Random(7), 80, 0.75, lambda la, lb: 0.85 if lb > la else 0.15)
    lb_ = length_bias([o for o, _, _ in data], [a for _, a, _ in data], [b for _, _, b in data], 0.05)
    share, lo, hi, _ = _independent_lc(data)
    assert sum(o == "B" for o, _, _ in data) > 40  # B "wins" overall
    assert lb_["separable"] is True and lo < 0.5 < hi
    assert lb_["explained_by_length"] is True
    assert lb_["caveat"].startswith("B's preference is not shown once length is controlled")


def test_length_bias_without_a_fit():
    from abtest.reporting.metrics import length_bias

    # wins follow length exactly: perfect separation, no estimate at equal length
    outs = ["B"] * 6 + ["A"] * 6
    la = [100] * 12
    lb = [200] * 6 + [50] * 6
    r = length_bias(outs, la, lb, 0.05)
    assert r["separable"] is False and "perfect separation" in r["note"]
    # all wins for one side: no fit either (one class)
    r = length_bias(["B"] * 12, la, lb, 0.05)
    assert r["lc_share_b"] is None and r["separable"] is False


@pytest.mark.parametrize("diff,p_holm,want", [(0.1, 0.01, "B"), (-0.1, 0.01, "A"),
                                              (0.1, 0.05, "B"), (0.1, 0.0500001, None),
                                              (0.0, 0.01, None), (0.1, None, None)])
def test_direction_is_the_significant_side(diff, p_holm, want):
    from abtest.reporting.metrics import direction

    assert direction({"difference": diff, "p_holm": p_holm}, 0.05) == want
    assert direction({}, 0.05) is None and direction({"difference": None, "p_holm": 0.01}, 0.05) is None


def test_continuous_values_against_scipy():
    """Means, drops and MDE of one metric, each computed independently."""
    import numpy as np
    from scipy import stats as sst
    from statsmodels.stats.power import TTestPower

    from abtest.reporting.metrics import continuous

    rng = np.random.default_rng(11)
    a = rng.uniform(0, 1, 20)
    b = np.clip(a + rng.normal(0.05, 0.2, 20), 0, 1)
    ids = [str(i) for i in range(23)]
    a_by = {str(i): float(x) for i, x in enumerate(a)}
    b_by = {str(i): float(x) for i, x in enumerate(b)}
    a_by["20"], b_by["21"] = 0.5, 0.5   # one-sided: B missing on 20, A missing on 21; 22 both
    m = continuous("faithfulness", a_by, b_by, ids, 0.05, family_size=5)
    assert (m["n"], m["n_dropped"]) == (20, 3)
    assert (m["dropped"]["b_only"], m["dropped"]["a_only"], m["dropped"]["both"]) == (["20"], ["21"], ["22"])
    assert m["a"] == pytest.approx(a.mean()) and m["b"] == pytest.approx(b.mean())
    assert m["significant"] is False  # until Holm says otherwise
    assert "bootstrap" not in m     # percentile bootstraps covered 0.56–0.92: dropped
    sd = float(np.std(b - a, ddof=1))
    dz = abs(float(np.ravel(TTestPower().solve_power(effect_size=None, nobs=20, alpha=0.01,
                                                      power=0.8))[0]))
    assert m["mde"]["alpha"] == pytest.approx(0.01) and m["mde"]["power"] == 0.8
    # 20 pairs are fewer than 30 effective units: the betting interval, wider than the t's,
    # so its detectable difference is larger than the t's d_z · sd
    assert m["test"] == "betting" and m["effective_units"] < 30
    assert m["mde"]["method"].startswith("betting") and m["mde"]["mde"] > dz * sd
    assert m["secondary"]["method"] == "asymptotic" or "exact" in m["secondary"]["test"]
    big = continuous("x", {str(i): 0.5 for i in range(40)},
                     {str(i): 0.5 + (0.1 if i % 2 else -0.05) for i in range(40)},
                     [str(i) for i in range(40)], 0.05)
    t = sst.ttest_rel([0.5 + (0.1 if i % 2 else -0.05) for i in range(40)], [0.5] * 40)
    assert big["test"] == "paired_t" and big["p_value"] == pytest.approx(t.pvalue)
    assert big["mde"]["mde"] == pytest.approx(
        abs(float(np.ravel(TTestPower().solve_power(effect_size=None, nobs=40, alpha=0.05,
                                                    power=0.8))[0])) * float(np.std(
            [0.1 if i % 2 else -0.05 for i in range(40)], ddof=1)))
    none = continuous("x", {"1": None}, {"1": None}, ["1"], 0.05)
    assert none["significant"] is False and none["n"] == 0 and none["n_dropped"] == 1


def test_drop_bound_edges():
    from abtest import stats as S
    from abtest.reporting.metrics import drop_bound

    # fewer than two pairs: no bound, never holds
    b1 = drop_bound({"1": 0.5}, {"1": None}, ["1"], {"1": True}, 0.05)
    assert b1["holds"] is False and b1["n"] == 1 and b1["imputed_b"] == 1
    # exactly two pairs: a test; an unknown answerability counts as answerable (worst case)
    b2 = drop_bound({"1": 0.2, "2": 0.9}, {"1": 0.9, "2": None}, ["1", "2"], {}, 0.05)
    want = S.paired([0.2, 0.9], [0.9, 0.0])
    assert b2["n"] == 2 and b2["imputed_b"] == 1 and b2["p_value"] == want.p_value
    assert b2["test"] == "betting"
    # an unanswerable one-sided drop stays out
    b3 = drop_bound({"1": 0.2, "2": 0.9, "3": 0.1}, {"1": 0.9, "2": None, "3": 0.8},
                    ["1", "2", "3"], {"2": False}, 0.05)
    assert b3["n"] == 2 and b3["imputed_b"] == 0


def test_binary_counts_rates_and_strict_margins():
    import numpy as np
    from scipy import stats as sst

    from abtest import stats as S
    from abtest.reporting.metrics import binary

    # B abstains alone on 3, A alone on 5, both on 4, neither on 20
    cells = [(True, True)] * 4 + [(False, True)] * 3 + [(True, False)] * 5 + [(False, False)] * 20
    ids = [str(i) for i in range(len(cells))]
    a = {c: x for c, (x, _) in zip(ids, cells)}
    b = {c: y for c, (_, y) in zip(ids, cells)}
    a["x"], b["y"] = True, False  # one side missing: not a pair
    m = binary("abstention_unanswerable", a, b, ids + ["x", "y"], 0.05, margin=0.3,
               higher_is_better=True)
    assert m["table"] == {"both": 4, "a_only": 5, "b_only": 3, "neither": 20}
    assert (m["n"], m["n_dropped"]) == (32, 2)
    assert (m["a"], m["b"]) == pytest.approx((9 / 32, 7 / 32))
    midp = sst.binomtest(3, 8, 0.5).pvalue - sst.binom.pmf(3, 8, 0.5)
    assert m["p_value"] == pytest.approx(midp) and m["difference"] == pytest.approx(-2 / 32)
    tg = S.tango_ci(4, 3, 5, 20)
    assert (m["ci_low"], m["ci_high"]) == pytest.approx((tg.ci_low, tg.ci_high))
    # non-inferiority reads the one-sided betting limits of the 32 differences, in the fixed
    # order paired() bets in
    d = [float(y) - float(x) for x, y in cells]
    low = S.betting_bound(S._ordered(np.array(d)), alpha=0.05, side="lower").limit
    high = S.betting_bound(S._ordered(np.array(d)), alpha=0.05, side="upper").limit
    assert m["noninferiority"]["lower"] == pytest.approx(low)
    # a limit exactly at the margin does not show non-inferiority (strict inequalities)
    at = binary("u", a, b, ids, 0.05, margin=-low, higher_is_better=True)
    assert at["noninferiority"]["holds"] is False
    assert binary("u", a, b, ids, 0.05, margin=-low + 1e-9,
                  higher_is_better=True)["noninferiority"]["holds"] is True
    at = binary("a", a, b, ids, 0.05, margin=high)
    assert at["noninferiority"]["holds"] is False
    assert binary("a", a, b, ids, 0.05, margin=high + 1e-9)["noninferiority"]["holds"]
    empty = binary("a", {}, {}, [], 0.05, margin=0.05)
    assert empty["noninferiority"]["holds"] is False and empty["significant"] is False
    # the CI's level is part of the JSON contract, and a table without discordant pairs says so
    assert m["conf_level"] == pytest.approx(0.95) and "note" not in m
    assert binary("a", a, b, ids, 0.01)["conf_level"] == pytest.approx(0.99)
    same = {c: c in ("1", "2") for c in ids}
    assert binary("a", same, dict(same), ids, 0.05)["note"] == "no discordant pairs"
    balanced = binary("a", {c: c == "2" for c in ids}, {c: c == "1" for c in ids}, ids, 0.05)
    assert "note" not in balanced and balanced["table"]["b_only"] == balanced["table"]["a_only"] == 1


def test_pairwise_diagnostics_by_hand():
    from abtest.reporting.metrics import pairwise

    ab = ["A", "A", "B", "tie", "B", None]   # A shown first
    ba = ["B", "A", "B", "tie", "A", "B"]    # B shown first
    m, out = pairwise([str(i) for i in range(6)], ab, ba, [10] * 6, [20] * 6, 0.05)
    # first-position wins: ab says A in 2, ba says B in 3 -> 5 of the 9 decided verdicts
    assert m["first_position_win_rate"] == pytest.approx(5 / 9)
    assert (m["b_wins"], m["a_wins"], m["no_preference"], m["judge_errors"]) == (1, 1, 4, 1)
    assert m["position_inconsistent"] == 2 and m["length_ratio_b_over_a"] == 2.0
    assert out == {"0": "tie", "1": "A", "2": "B", "3": "tie", "4": "tie", "5": "tie"}


def test_pairwise_rates_by_hand():
    from abtest.reporting.metrics import pairwise

    ab = ["B"] * 5 + ["A"] * 2 + ["tie"] * 3
    m, _ = pairwise([str(i) for i in range(10)], ab, list(ab), [30] * 10, [60] * 10, 0.05)
    wr = (5 + 3 / 2) / 10
    assert (m["a"], m["b"], m["difference"]) == pytest.approx((1 - wr, wr, 2 * wr - 1))
    assert m["conf_level"] == 0.95 and m["significant"] is False
    assert m["first_position_win_rate"] == pytest.approx(7 / 14)
    assert m["length_ratio_b_over_a"] == pytest.approx(2.0)


def test_length_sides_and_tolerance():
    # |len_B − len_A| at or under 5 % of the pair's mean length is "equal length"
    r = _sides([("B", 195, 205), ("B", 100, 106), ("A", 106, 100), ("B", 0, 0)])
    assert (r["equal_length"], r["b_longer"], r["b_shorter"]) == (2, 1, 1)


def test_length_caveat_for_either_side_and_none_without_a_favourite():
    # A preferred and A longer in every decisive pair: the caveat names A
    r = _sides([("A", 300, 100)] * 9 + [("B", 300, 100)])
    assert r["caveat"].startswith("A's preference cannot be separated from answer length: "
                                  "A's answer was the longer one in 10 of 10 decisive pairs")
    # B preferred but B shorter: length cannot explain it
    assert _sides([("B", 300, 100)] * 9 + [("A", 300, 100)])["caveat"] is None
    # no favourite: no caveat, however long B is
    assert _sides([("B", 100, 300)] * 5 + [("A", 100, 300)] * 5)["caveat"] is None
    # B preferred and B longer in a bare majority: still not separable below 10 % / 3 pairs
    r = _sides([("B", 100, 300)] * 18 + [("A", 300, 100)] * 2)
    assert r["separable"] is False and r["caveat"].startswith("B's preference cannot be separated")


def test_length_separability_thresholds():
    """Separable needs 8 decisive pairs and, on the rarer side of equal length, at least
    max(3, 10 %) of them."""
    mix = [("B", 100, 300), ("A", 100, 300), ("B", 300, 100), ("A", 300, 100)]
    r8 = _sides([mix[0]] * 3 + [mix[1]] * 2 + [mix[2]] * 2 + [mix[3]])   # 8 pairs, 3 B-shorter
    assert r8["n_decisive"] == 8 and r8["b_shorter"] == 3 and r8["separable"] is True
    r7 = _sides([mix[0]] * 2 + [mix[1]] * 2 + [mix[2]] * 2 + [mix[3]])   # 7 pairs
    assert r7["n_decisive"] == 7 and r7["separable"] is False
    two = _sides([mix[0]] * 4 + [mix[1]] * 4 + [mix[2]] + [mix[3]])      # 2 on the rare side
    assert two["b_shorter"] == 2 and two["separable"] is False
    # 40 pairs: the rare side needs 4 (10 %), 3 is not enough
    r40 = _sides([mix[0]] * 20 + [mix[1]] * 17 + [mix[2]] * 2 + [mix[3]] * 1)
    assert r40["b_shorter"] == 3 and r40["separable"] is False
    r40 = _sides([mix[0]] * 20 + [mix[1]] * 16 + [mix[2]] * 2 + [mix[3]] * 2)
    assert r40["b_shorter"] == 4 and r40["separable"] is True


def test_incident_threshold_is_strict():
    from abtest.core.models import Config as C
    from abtest.reporting.build import _incidents

    cfg = C()  # incident when faithfulness < 0.85
    jv = {("faithfulness", "A"): {"q1": {"score": 0.85}, "q2": {"score": 0.8499}},
          ("faithfulness", "B"): {"q1": {"score": None}, "q2": {"score": 1.0}}}
    inc = _incidents(["q1", "q2"], jv, [], {}, {}, cfg)
    assert [(i["case_id"], i["variant"]) for i in inc] == [("q2", "A")]


def test_a_flip_is_a_crossing_of_the_configured_incident_threshold():
    """A case flips when A and B fall on different sides of gates.incident_faithfulness, the
    threshold incidents use, not a fixed 0.85."""
    from abtest.reporting.build import _per_case

    jv = {("faithfulness", "A"): {"q1": {"score": 0.7}, "q2": {"score": 0.5}},
          ("faithfulness", "B"): {"q1": {"score": 0.9}, "q2": {"score": 0.55}}}

    def flipped(threshold: float) -> list[str]:
        rows = _per_case(["q1", "q2"], ["q1", "q2"], {}, {}, jv, {}, {}, {}, threshold)
        return [r["case_id"] for r in rows if r["flipped"]]

    assert flipped(0.85) == ["q1"]          # 0.7 below, 0.9 above
    assert flipped(0.6) == []               # both q1 values above, both q2 values below
    assert flipped(0.52) == ["q2"]          # 0.5 below, 0.55 above; q1 above on both sides


def test_length_caveat_needs_a_favoured_side_that_was_longer_more_often():
    """Ties are nobody's: equal wins favour no side, and a side longer in as many pairs as it
    was shorter was not 'the longer one'; lengths within 5 % (of at least 1) are equal."""
    from abtest.reporting.metrics import length_bias

    # 2 B wins, 2 A wins, B shorter in all four (unseparable): no side is favoured, no caveat
    lb = length_bias(["B", "B", "A", "A"], [200] * 4, [100] * 4, 0.05)
    assert lb["caveat"] is None and lb["b_shorter"] == 4
    # B wins 3 of 4, longer in 2 pairs and shorter in 2: not the longer side, no caveat
    lb = length_bias(["B", "B", "B", "A"], [100, 100, 300, 300], [200, 200, 200, 200], 0.05)
    assert (lb["b_longer"], lb["b_shorter"]) == (2, 2) and lb["caveat"] is None
    # A wins 3 of 4, A longer in 2 and shorter in 2: no caveat either
    lb = length_bias(["A", "A", "A", "B"], [100, 100, 300, 300], [200, 200, 200, 200], 0.05)
    assert lb["caveat"] is None
    # B longer in every pair and winning: the caveat names B
    lb = length_bias(["B", "B", "B", "A"], [100] * 4, [200] * 4, 0.05)
    assert lb["caveat"].startswith("B's preference cannot be separated from answer length")
    # lengths under one unit: the tolerance is 5 % of 1, so 0.08 apart is longer, 0.04 is not
    lb = length_bias(["B"] * 4, [0.0] * 4, [0.08, 0.08, 0.04, 0.04], 0.05)
    assert (lb["b_longer"], lb["equal_length"]) == (2, 2)


def test_length_bias_survives_a_quasi_separated_fit():
    """One B win among A wins, at a length difference four A wins share: the logit's
    standard error is ~5e4, its interval limits ~±1e5 on the logit scale (math.exp
    overflowed there and the report crashed, found by validity_sim --sequential); the
    share is reported with the uninformative interval it has, [0, 1]."""
    from abtest.reporting.metrics import length_bias

    d = [-200, 0, -100, 100, 100, 100, 0, 0, -105, 0, 0, 0, 0, -180, 100, -160]
    outcomes = ["A"] * 16
    outcomes[14] = "B"
    lb = length_bias(outcomes, [100] * 16, [100 + x for x in d], 0.05)
    assert lb["separable"] is True
    assert (lb["lc_ci_low"], lb["lc_ci_high"]) == (0.0, 1.0)
    assert lb["explained_by_length"] is True
