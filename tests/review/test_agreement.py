"""Per-judge agreement against kappa computed by hand, and `review status`."""

from __future__ import annotations


import pytest

from abtest import review as R
from support.review_data import (RUN)
from support.review_data import _label_all_pairwise_and_10_claims


def test_agreement_matches_hand_computed_kappa(store, tmp_path):
    _label_all_pairwise_and_10_claims(store, tmp_path)
    ag = R.agreement(store, RUN)
    # claims: po = 7/10, pe = (5*6 + 5*4)/100 = 0.5, kappa = (0.7 - 0.5)/(1 - 0.5) = 0.4
    fa = ag["faithfulness"]
    assert fa["n"] == 10
    assert fa["agreement"] == pytest.approx(0.7)
    assert fa["kappa"] == pytest.approx(0.4)
    assert fa["ci_low"] < 0.4 < fa["ci_high"]
    assert fa["confusion"] == {"supported": {"supported": 4, "unsupported": 1},
                               "unsupported": {"supported": 2, "unsupported": 3}}
    # pairwise, position-consistent items only (c01 c02 c04 c05 c07 c09 c10):
    # judge  B A tie B B A B ; human B A tie A B A tie -> po = 5/7
    # judge marginals A2 B4 tie1, human A3 B2 tie2 -> pe = (6 + 8 + 2)/49 = 16/49
    # kappa = (35/49 - 16/49) / (33/49) = 19/33
    pw = ag["pairwise"]
    assert pw["n"] == 7
    assert pw["agreement"] == pytest.approx(5 / 7)
    assert pw["kappa"] == pytest.approx(19 / 33)
    # position-inconsistent items reported separately: c03 (B,A) c06 (A,B) c08 (B,tie)
    pi = pw["position_inconsistent"]
    assert pi["n"] == 3
    assert pi["human_labels"] == {"B": 2, "tie": 1}
    assert pi["agree_with_ab_order"] == pytest.approx(1 / 3)
    assert pi["agree_with_ba_order"] == pytest.approx(2 / 3)
    assert pw["all_items"]["n"] == 10
    assert ag["reviewers"] == ["ann"]


def test_status_counts_and_report_compatibility(store, tmp_path):
    st = R.status(store, RUN)
    assert st["n_items"] == 0 and not st["validated"]
    assert "review export" in st["message"]
    _label_all_pairwise_and_10_claims(store, tmp_path)
    st = R.status(store, RUN)
    n_items = len(store.review_items(RUN))
    assert st["n_items"] == n_items == 10 + 40      # all pairwise cases + every claim
    assert st["n_labelled_items"] == 20 and st["n_unlabelled_items"] == 30
    assert st["min_labels"] == 30 and st["min_kappa"] == 0.6
    assert st["by_judge"] == {"pairwise": {"items": 10, "labelled_items": 10, "labels": 10},
                              "faithfulness": {"items": 40, "labelled_items": 10, "labels": 10}}
    val = st["validation"]
    # labels are never pooled: each judge has only its own
    assert val["pairwise"]["n_labels"] == 10 and val["faithfulness"]["n_labels"] == 10
    assert val["faithfulness"]["kappa"] == pytest.approx(0.4)  # hand computed below
    assert "10 human label(s) of its items (need 30)" in val["faithfulness"]["reason"]
    assert "faithfulness: 10 human label(s)" in st["message"] and not st["validated"]
    # the report's judge validation reads the same rows and gets the same kappas
    from abtest.reporting.build import build_report

    rep_val = build_report(store, RUN).as_dict()["judge_validation"]
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        assert rep_val[j] == pytest.approx(val[j])
    st2 = R.status(store, RUN, min_labels=10, min_kappa=0.3)
    assert st2["validation"]["faithfulness"]["n_labels"] == 10
    # kappa 0.4 > 0.3, but its lower 95% limit is not: still not validated
    assert st2["validation"]["faithfulness"]["ci_low"] < 0.3
    assert st2["validation"]["faithfulness"]["validated"] is False
    text = R.render_status(st)
    assert "faithfulness" in text and "not validated" in text
    assert "position-inconsistent items: 3" in text and "PPI" in text


def test_no_agreement_is_worded_once_and_a_degenerate_interval_is_not_printed():
    """A judge that used one label while humans varied has kappa 0 with an asymptotic SE of 0:
    no interval (not "[0.000, 0.000]"); both raters on one label: kappa undefined. Every page
    words the two the same way (fmt.kappa_text)."""
    from abtest.core.fmt import kappa_text
    from abtest.stats import cohen_kappa

    one_sided = cohen_kappa(["A"] * 6, ["A", "B", "A", "B", "A", "A"])
    # p_o = 4/6, p_e = 4/6 (the judge's marginal is all A): kappa (p_o - p_e)/(1 - p_e) = 0
    assert one_sided.kappa == 0.0 and one_sided.ci_low is None and one_sided.ci_high is None
    assert kappa_text(one_sided.kappa, one_sided.ci_low, one_sided.ci_high) == "0.000 (no interval)"
    both = cohen_kappa(["A"] * 4, ["A"] * 4)
    assert both.kappa is None
    assert kappa_text(both.kappa, both.ci_low, both.ci_high) == "no agreement measured"
    assert kappa_text(0.4, -0.157, 0.957) == "0.400 [-0.157, 0.957]"
