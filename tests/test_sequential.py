"""The anytime-valid sequences of sequential runs (abtest.sequential), against published
reference values and independent numerical integration of the mixtures they come from."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from abtest import sequential as sq
from abtest.shapes import Config


def test_the_two_sided_sequence_holds_its_level_where_peeking_does_not():
    # docs/STATISTICS.md §10 (shared/STATS.md §10): 4,000 null N(0, 1) streams, σ² = 1,
    # τ² = 0.05 (ρ = σ²/τ² = 20), every n up to 1,000, α = 0.05: the sequence is ever
    # crossed in 3.6 % of them; a z-test looked at every 20 units rejects in 32 %
    rng = np.random.default_rng(20210)
    x = rng.standard_normal((4000, 1000))
    n = np.arange(1, 1001)
    mean = np.cumsum(x, axis=1) / n
    radius = np.array([sq.two_sided_radius(int(k), 1.0, 0.05, 20.0) for k in n])
    crossed = float((np.abs(mean) > radius).any(axis=1).mean())
    assert abs(crossed - 0.036) < 0.01          # 3 Monte Carlo standard errors
    z = np.abs(mean * np.sqrt(n))
    peeking = float((z[:, 19::20] > norm.ppf(0.975)).any(axis=1).mean())
    assert abs(peeking - 0.32) < 0.025


def _mixture(s: float, n: float, rho: float, half: bool) -> float:
    """∫ exp(λS − λ²n/2) dF(λ), F = N(0, 1/ρ) (or its positive half, renormalised), by
    quadrature: the likelihood ratio the boundaries are solved from, computed another way."""
    sd = 1 / math.sqrt(rho)

    def f(lam: float) -> float:
        return math.exp(lam * s - lam * lam * n / 2) * norm.pdf(lam, scale=sd) * (2 if half
                                                                                   else 1)
    lo = 0.0 if half else -np.inf
    return integrate.quad(f, lo, np.inf, limit=200)[0]


@pytest.mark.parametrize("n,rho", [(20, 5.0), (100, 25.0), (400, 25.0)])
def test_boundaries_are_where_the_mixture_reaches_one_over_alpha(n, rho):
    alpha = 0.05
    r2 = sq.two_sided_radius(n, 1.0, alpha, rho)
    assert _mixture(n * r2, n, rho, half=False) == pytest.approx(1 / alpha, rel=1e-6)
    r1 = sq.one_sided_radius(n, 1.0, alpha, rho)
    assert _mixture(n * r1, n, rho, half=True) == pytest.approx(1 / alpha, rel=1e-6)
    assert r1 < r2    # one side alone is tighter
    # the always-valid p-value is 1/Λ at the observed mean
    mean, sd = 0.7 * r2, 1.0
    assert sq.mixture_p(n, mean, sd, rho) == pytest.approx(
        1 / _mixture(n * mean / sd, n, rho, half=False), rel=1e-6)


def test_one_sided_bound_holds_its_level_on_a_stream():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4000, 400))
    n = np.arange(1, 401)
    mean = np.cumsum(x, axis=1) / n
    r1 = np.array([sq.one_sided_radius(int(k), 1.0, 0.05, 25.0) for k in n])
    assert float((mean > r1).any(axis=1).mean()) <= 0.05


def test_units_are_group_means_in_the_order_taken():
    diffs = {"a": 1.0, "b": 0.0, "c": -1.0, "d": 0.5}
    groups = {"a": "g1", "b": "g1", "c": "g2"}
    assert sq.unit_differences(diffs, ["c", "a", "d", "b", "e"], groups) == [-1.0, 0.5, 0.5]
    assert sq.unit_differences(diffs, ["d", "a"], None) == [0.5, 1.0]


def _look(diffs: dict[str, dict[str, float]], n: int) -> sq.Look:
    order = [f"c{i}" for i in range(n)]
    return sq.look(1, order, diffs, None, Config(), family=list(sq.METRICS[:1]) + [
        "coverage", "abstention_answerable", "abstention_unanswerable", "pairwise"],
        n_star=n / 2)


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
    # non-inferiority needs the same floor as the fixed-N claim: 52 independent cases
    ok = {c: 0.0 for c in ids[:40]}
    lk = _look({"coverage": ok}, 40)
    assert lk.conditions["coverage"] == "open" and "needs ≥ 52" in lk.why["coverage"]


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
