"""The anytime-valid sequences of sequential runs (abtest.stats.looks): each look reads
abtest.stats.anytime (the betting confidence sequences, checked against the paper's
definitions in test_stats_betting.py), with bets tuned to each condition's own units."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from abtest.stats import looks as sq
from abtest.store import sequential_record as sr
from abtest import stats as S
from abtest.core.models import Config


def test_peeking_at_a_fixed_n_test_is_what_the_sequences_replace():
    """STATS_SPEC.md §10: a z-test looked at every 20 of 1,000 null N(0, 1) units rejects in 32 %
    of streams; the betting sequence on the same streams (mapped into [−1, 1]) at most α."""
    from abtest.stats import _bets, _log_wealth

    rng = np.random.default_rng(20210)
    x = rng.standard_normal((2000, 1000))
    n = np.arange(1, 1001)
    z = np.abs(np.cumsum(x, axis=1) / n * np.sqrt(n))
    assert abs(float((z[:, 19::20] > norm.ppf(0.975)).any(axis=1).mean()) - 0.32) < 0.03
    u = (np.clip(x / 4, -1, 1) + 1) / 2                    # bounded, mean ½ (symmetric)
    lam = _bets(u, math.log(40), 1000)
    up = _log_wealth(u, lam, np.full(2000, 0.5), +1, S.BETTING_TRUNCATION).max(axis=1)
    down = _log_wealth(u, lam, np.full(2000, 0.5), -1, S.BETTING_TRUNCATION).max(axis=1)
    assert float((np.maximum(up, down) >= math.log(40)).mean()) <= 0.05


def test_each_look_is_stats_anytime_on_the_units_so_far():
    """One truth: a look's sequence for a metric is abtest.stats.anytime on that metric's
    unit differences in the order taken, read at the look, bets tuned to its n_star."""
    rng = np.random.default_rng(4)
    n = 120
    ids = [f"c{i:03d}" for i in range(n)]
    groups = {c: f"g{i // 2}" for i, c in enumerate(ids) if i < 40}   # 20 pairs, 80 singles
    faith = {c: float(np.clip(rng.normal(0.1, 0.3), -1, 1)) for c in ids}
    refuse = {c: float(rng.choice([0.0, 0.0, 0.0, 1.0, -1.0])) for c in ids[::2]}
    diffs = {"faithfulness": faith, "abstention_answerable": refuse}
    stars = {"faithfulness": 100.0, "abstention_answerable": 50.0}
    units = sr.unit_order(ids, groups, seed=3)
    looks = sq.replay(units, [20, 40, 60, 100], diffs, groups, Config(),
                      family=["faithfulness", "abstention_answerable"], n_stars=stars)
    for metric, d in diffs.items():
        every = sq.unit_differences(d, sr.taken_cases(units, 100), groups)
        want = S.anytime(every, looks=[lk.sequences[metric].n for lk in looks],
                         kind="binary" if metric != "faithfulness" else "score",
                         n_star=stars[metric])
        for lk, w in zip(looks, want):
            got = lk.sequences[metric]
            assert got.n_star == stars[metric]
            assert (got.mean, got.ci_low, got.ci_high, got.lower, got.upper, got.p_value) == \
                pytest.approx((w.mean, w.ci_low, w.ci_high, w.lower, w.upper, w.p_value))


def test_each_condition_is_tuned_to_its_own_units_in_the_fixture():
    ids = [f"c{i}" for i in range(10)]
    cases = {c: {"answerable": i < 6, "key_points": ["k"] if i < 3 else [],
                 "reference_answer": "yes" if i == 4 else None} for i, c in enumerate(ids)}
    units = [[c] for c in ids]
    got = sq.expected_units(units, 10, cases)
    assert got == {"faithfulness": 10, "drop_bound": 10, "pairwise": 10, "coverage": 4,
                   "abstention_answerable": 6, "abstention_unanswerable": 4}
    assert sq.expected_units(units, 5, cases)["abstention_unanswerable"] == 1   # within the cap


def test_units_are_group_means_in_the_order_taken():
    diffs = {"a": 1.0, "b": 0.0, "c": -1.0, "d": 0.5}
    groups = {"a": "g1", "b": "g1", "c": "g2"}
    assert sq.unit_differences(diffs, ["c", "a", "d", "b", "e"], groups) == [-1.0, 0.5, 0.5]
    assert sq.unit_differences(diffs, ["d", "a"], None) == [0.5, 1.0]


def _look(diffs: dict[str, dict[str, float]], n: int) -> sq.Look:
    order = [f"c{i}" for i in range(n)]
    return sq.look(1, order, diffs, None, Config(), family=list(sq.METRICS[:1]) + [
        "coverage", "abstention_answerable", "abstention_unanswerable", "pairwise"],
        n_star=n)


def test_a_clear_gain_with_no_side_effect_is_decided_licensable():
    rng = np.random.default_rng(3)
    n = 200
    ids = [f"c{i}" for i in range(n)]
    gain = {c: float(np.clip(rng.normal(0.3, 0.2), -1, 1)) for c in ids}
    zero = {c: 0.0 for c in ids}
    lk = _look({"faithfulness": gain, "drop_bound": gain, "coverage": zero,
                "abstention_answerable": zero, "abstention_unanswerable": zero,
                "pairwise": {c: 1.0 for c in ids}}, n)
    assert lk.conditions == dict.fromkeys(lk.conditions, "holds") and lk.licensable
    assert lk.stop == "decision"


def test_refusals_shown_to_rise_stop_the_run_unlicensed():
    n = 60
    ids = [f"c{i}" for i in range(n)]
    lk = _look({"faithfulness": {c: 0.3 for c in ids},
                "abstention_answerable": {c: 1.0 if i % 2 else 0.0 for i, c in enumerate(ids)}},
               n)
    assert lk.conditions["abstention_answerable"] == "fails" and lk.stop == "decision"
    assert not lk.licensable


def test_a_tiny_difference_stops_for_futility_and_few_units_decide_nothing():
    rng = np.random.default_rng(5)
    n = 4000
    ids = [f"c{i}" for i in range(n)]
    tiny = {c: float(rng.choice([-0.05, 0.05])) for c in ids}
    lk = _look({"faithfulness": tiny, "drop_bound": tiny}, n)
    assert lk.stop == "futility" and lk.conditions["faithfulness"] == "open"
    few = _look({"faithfulness": {c: 1.0 for c in ids[:10]}}, 10)
    assert few.stop is None and few.conditions["faithfulness"] == "open"
    # non-inferiority needs the same floor as the fixed-N claim: 68 independent cases
    ok = {c: 0.0 for c in ids[:60]}
    lk = _look({"coverage": ok}, 60)
    assert lk.conditions["coverage"] == "open" and "needs ≥ 68" in lk.why["coverage"]


def test_case_differences_are_the_fixed_metrics_differences():
    """Per-case differences averaged over singleton units give the fixed-N metrics' own
    differences (reporting.metrics, another code path) on a simulated world."""
    import validity_sim as V
    from abtest.reporting.metrics import compute_metrics

    cfg = Config()
    sc = {s.name: s for s in V.SCENARIOS}["soft_refusal"]
    w = V.World(sc, 120, 11)
    jv, lengths, ids, answerable = V.judgments(w, sc, 11, cfg)
    m, _, _ = compute_metrics(ids, jv, answerable, lengths, cfg, cfg.judges)
    d = sq.case_differences(ids, jv, answerable)

    def mean(xs):
        return sum(xs) / len(xs)

    assert mean(list(d["faithfulness"].values())) == pytest.approx(m["faithfulness"]["difference"])
    db = m["faithfulness"]["drop_bound"]
    assert len(d["drop_bound"]) == db["n"]
    assert mean(list(d["drop_bound"].values())) == pytest.approx(db["difference"])
    assert mean(list(d["coverage"].values())) == pytest.approx(m["coverage"]["difference"])
    for key in ("answerable", "unanswerable"):
        got = d[f"abstention_{key}"]
        assert mean(list(got.values())) == pytest.approx(m["abstention"][key]["difference"])
    pw = m["pairwise"]
    assert mean(list(d["pairwise"].values())) == pytest.approx(
        (pw["b_wins"] - pw["a_wins"]) / pw["n"])
