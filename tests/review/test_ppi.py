"""Prediction-powered inference: means and differences with human labels correcting the judge,
against hand-computed values and a biased judge whose judge-only interval misses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from abtest import review as R
from support.review_data import (CLAIMS, PAIRWISE, RUN)
from support.review_data import _blind, _items
from support.review_data import _write_jsonl


def test_ppi_mean_ci_hand_computed():
    # judge on N = 6: mean 4/6; var(ddof=1) = (4*(1/3)^2 + 2*(2/3)^2)/5 = 4/15
    # labelled n = 3: judge - human = [0, -1, 0], mean -1/3; var(ddof=1) = 1/3
    # theta = 2/3 + 1/3 = 1; se^2 = (4/15)/6 + (1/3)/3 = 2/45 + 1/9 = 7/45
    est, lo, hi = R.ppi_mean_ci([1, 0, 1, 1, 0, 1], [1, 0, 1], [1, 1, 1], alpha=0.05)
    half = 1.959963984540054 * math.sqrt(7 / 45)
    assert est == pytest.approx(1.0)
    assert lo == pytest.approx(1.0 - half) and hi == pytest.approx(1.0 + half)
    assert (lo, hi) == pytest.approx((0.226980, 1.773020), abs=1e-6)
    # alpha is honoured (ppi_py's default would be 0.1)
    _, lo90, hi90 = R.ppi_mean_ci([1, 0, 1, 1, 0, 1], [1, 0, 1], [1, 1, 1], alpha=0.1)
    assert hi90 - lo90 == pytest.approx(2 * 1.6448536269514722 * math.sqrt(7 / 45))
    est1, lo1, hi1 = R.ppi_mean_ci([1, 0], [1], [0])
    assert est1 == pytest.approx(-0.5) and lo1 is None and hi1 is None
    with pytest.raises(ValueError):
        R.ppi_mean_ci([1, 0], [1, 0], [1])


def test_ppi_difference_uses_per_case_differences():
    ja, jb = [0.2, 0.4, 0.6, 0.8], [0.5, 0.5, 0.9, 0.9]
    r = R.ppi_difference(ja, jb, [0.2, 0.6], [0.5, 0.9], [0.0, 0.5], [0.5, 1.0])
    d = R.ppi_mean_ci(np.subtract(jb, ja), [0.3, 0.3], [0.5, 0.5])
    assert r == pytest.approx(d)
    # theta = mean([.3,.1,.3,.1]) - mean([.3-.5, .3-.5]) = 0.2 + 0.2
    assert r.estimate == pytest.approx(0.4)


def test_ppi_fixes_a_biased_judge_where_judge_only_ci_misses():
    rng = np.random.default_rng(7)
    truth = rng.binomial(1, 0.6, size=1000).astype(float)
    judge = truth + 0.2                          # noise-free bias on every case
    lab = rng.choice(1000, size=50, replace=False)
    est, lo, hi = R.ppi_mean_ci(judge, judge[lab], truth[lab], alpha=0.05)
    j_est, j_lo, j_hi = R.mean_ci(judge, alpha=0.05)
    for target in (truth.mean(), 0.6):           # the sample's and the population's mean
        assert lo <= target <= hi
        assert not (j_lo <= target <= j_hi)
    assert est == pytest.approx(truth.mean())
    assert j_est == pytest.approx(truth.mean() + 0.2)


def test_ppi_coverage_with_a_noisy_biased_judge():
    rng = np.random.default_rng(11)
    hits, reps = 0, 400
    for _ in range(reps):
        truth = rng.normal(0.5, 0.2, size=600)
        judge = truth + 0.15 + rng.normal(0, 0.1, size=600)
        lab = rng.choice(600, size=60, replace=False)
        _, lo, hi = R.ppi_mean_ci(judge, judge[lab], truth[lab])
        hits += lo <= 0.5 <= hi
    assert 0.91 <= hits / reps <= 0.985


def test_ppi_stratified_single_stratum_and_census():
    f = np.arange(20, dtype=float) % 3
    idx = [0, 4, 9, 13]
    y = f[idx] - np.array([0.5, 0.0, 0.25, 0.75])
    est, lo, hi = R.ppi_stratified_ci(f, ["s"] * 20, idx, y)
    est0, _, _ = R.ppi_mean_ci(f, f[idx], y)
    assert est == pytest.approx(est0)            # same point estimate; CI adds the fpc
    # every case labelled: the estimate is the human mean and only the judge term is left
    est_c, lo_c, hi_c = R.ppi_stratified_ci(f, ["s"] * 20, range(20), f - 1.0)
    assert est_c == pytest.approx((f - 1.0).mean())
    jm, jlo, jhi = R.mean_ci(f)
    assert hi_c - lo_c == pytest.approx(jhi - jlo)


def test_ppi_headlines_pairwise_hand_computed(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)
    by_case = {it["case_id"]: it for it in _items(store).values() if it["judge"] == "pairwise"}
    chosen = {"c03": "B", "c06": "A", "c02": "A", "c09": "B", "c01": "B", "c05": "A", "c04": "tie"}
    rows = [{"item_id": by_case[c]["item_id"], "label": _blind(by_case[c], lab)}
            for c, lab in chosen.items()]
    R.import_labels(store, RUN, _write_jsonl(tmp_path / "l.jsonl", rows), reviewer="ann")
    h = R.ppi_headlines(store, RUN)["pairwise"]
    # judge scores (B=1, tie=.5, A=0) over c01..c10: 1 0 .5 .5 1 .5 1 .5 0 1 -> mean .6
    # var(ddof=1) = 1.4/9; judge term 1.4/90. Strata (r = (f - y)/10):
    # flagged c03 c06 c08 (N=3): c03 (.5-1)/10, c06 (.5-0)/10 -> mean 0; var .005;
    #   9 * (1 - 2/3) * .005 / 2 = .0075
    # agreed A: c02 c09 (N=2, all labelled): 0, (0-1)/10 -> mean -.05, x2 = -.1, var term 0
    # agreed B: c01 c05 c07 c10 (N=4): 0, .1 -> mean .05, x4 = .2; 16 * (1/2) * .005 / 2 = .02
    # agreed tie: c04 (N=1, labelled): 0
    # win rate = .6 - (0 - .1 + .2 + 0) = .5; difference = .5 - .5 = 0
    half = 1.959963984540054 * math.sqrt(1.4 / 90 + 0.0075 + 0.02)
    assert h["N"] == 10 and h["n_labelled"] == 7
    assert h["judge_only"]["estimate"] == pytest.approx(0.1)
    assert h["judge_only"]["ci_high"] - h["judge_only"]["ci_low"] == pytest.approx(
        2 * 1.959963984540054 * math.sqrt(1.4 / 90))
    assert h["ppi"]["estimate"] == pytest.approx(0.0, abs=1e-12)
    assert h["ppi"]["ci_low"] == pytest.approx(-half) and h["ppi"]["ci_high"] == pytest.approx(half)
    assert half == pytest.approx(0.406689, abs=1e-6)


def test_ppi_headlines_faithfulness(store, tmp_path):
    assert R.ppi_headlines(store, RUN)["faithfulness"]["ppi"]["estimate"] is None
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)
    items = _items(store)
    # humans agree with the judge on a few claims of each stratum: no correction
    rows, seen = [], {"supported": 0, "unsupported": 0}
    for iid in sorted(items):
        it = items[iid]
        if it["judge"] == "faithfulness" and seen[it["judge_label"]] < 3:
            seen[it["judge_label"]] += 1
            rows.append({"item_id": iid, "label": it["judge_label"]})
    R.import_labels(store, RUN, _write_jsonl(tmp_path / "l.jsonl", rows), reviewer="ann")
    fa = R.ppi_headlines(store, RUN)["faithfulness"]
    assert fa["N"] == 10 and fa["n_labelled"] == 6
    assert fa["ppi"]["estimate"] == pytest.approx(fa["judge_only"]["estimate"])
    assert fa["ppi"]["ci_low"] == pytest.approx(fa["judge_only"]["ci_low"])
    # judge-only = mean over cases of (supported share of B - of A)
    scores = {k: sum(v == "supported" for v, _ in cl) / 2 for k, cl in CLAIMS.items()}
    assert fa["judge_only"]["estimate"] == pytest.approx(
        np.mean([scores[(c, "B")] - scores[(c, "A")] for c in PAIRWISE]))
    # one human says a judged-supported claim of B is unsupported: B's share drops by
    # (1/2)/10 within that stratum's estimate, scaled up by N_h / n_h
    sup_b = next(r for r in rows if items[r["item_id"]]["judge_label"] == "supported")
    flip = [{"item_id": sup_b["item_id"], "label": "unsupported"}]
    R.import_labels(store, RUN, _write_jsonl(tmp_path / "flip.jsonl", flip), reviewer="bob")
    fb = R.ppi_headlines(store, RUN)["faithfulness"]
    sign = 1 if items[sup_b["item_id"]]["m"]["variant"] == "B" else -1
    n_sup = sum(1 for (c, v), cl in CLAIMS.items() for verdict, _ in cl if verdict == "supported")
    # the flipped item's y is the mean of two reviewers (1 and 0) -> r = sign*(1-.5)/(10*2)
    expect = fa["ppi"]["estimate"] - n_sup * (sign * 0.5 / 20) / 3
    assert fb["ppi"]["estimate"] == pytest.approx(expect)


def test_a_stratum_with_more_labels_than_units_is_a_callers_bug():
    from abtest.review.ppi import _ppi_core

    with pytest.raises(ValueError, match=r"stratum 's': more labelled units \(3\) than units "
                                         r"\(2\)"):
        _ppi_core(0.0, 0.0, {"s": (2, [0.1, 0.2, 0.3])}, 0.05)
