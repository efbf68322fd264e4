"""The judge validation rule: a judge is validated on its own labelled items when the lower
limit of Cohen's kappa clears the configured bar, per judge, at the configured alpha."""

from __future__ import annotations


import pytest

from abtest.core.models import Config
from support.sample_reports import CFG


def st_kappa(pairs):
    """kappa and its 95% lower limit, computed independently with statsmodels."""
    import numpy as np
    from scipy.stats import norm
    from statsmodels.stats.inter_rater import cohens_kappa

    labels = sorted({x for p in pairs for x in p})
    t = np.zeros((len(labels), len(labels)))
    for j, h in pairs:
        t[labels.index(j), labels.index(h)] += 1
    r = cohens_kappa(t)
    return r.kappa, r.kappa - norm.ppf(0.975) * r.var_kappa ** 0.5


def test_judge_validation_decides_on_the_lower_limit_per_judge():
    from abtest.review.agreement import judge_validation

    # faithfulness: 30 labels, 27 agree → kappa 0.8 but a wide CI; coverage: perfect
    faith = [("supported", "supported")] * 14 + [("unsupported", "unsupported")] * 13 + \
        [("supported", "unsupported")] * 3
    cov = [("covered", "covered")] * 15 + [("not_covered", "not_covered")] * 15
    val = judge_validation({"faithfulness": faith, "coverage": cov}, CFG)
    k = st_kappa(faith)
    assert val["faithfulness"]["kappa"] == pytest.approx(k[0])
    assert val["faithfulness"]["ci_low"] == pytest.approx(k[1])
    assert k[0] >= 0.6 > k[1]  # the point estimate would pass; the lower limit does not
    assert val["faithfulness"]["validated"] is False
    assert "lower 95% limit 0.593 < 0.6" in val["faithfulness"]["reason"]
    assert val["coverage"]["validated"] is True and val["coverage"]["kappa"] == 1.0
    assert val["abstention"]["validated"] is False and "0 human label(s)" in val["abstention"]["reason"]
    assert val["validated"] is False


def test_judge_validation_at_the_boundary_and_at_another_alpha():
    from abtest.review.agreement import judge_validation

    pairs = [("supported", "supported")] * 20 + [("unsupported", "unsupported")] * 18 + \
        [("supported", "unsupported")] * 2
    k, lo = st_kappa(pairs)
    at = Config(review={"min_labels": 30, "min_kappa": lo})
    assert judge_validation({"faithfulness": pairs}, at)["faithfulness"]["validated"] is True
    above = Config(review={"min_labels": 30, "min_kappa": lo + 1e-9})
    assert judge_validation({"faithfulness": pairs}, above)["faithfulness"]["validated"] is False
    # at alpha 0.01 the lower limit is the 99% one, computed independently
    from scipy.stats import norm

    v99 = judge_validation({"faithfulness": pairs}, Config(alpha=0.01))["faithfulness"]
    se = (k - lo) / norm.ppf(0.975)
    assert v99["ci_low"] == pytest.approx(k - norm.ppf(0.995) * se)
    two = judge_validation({"faithfulness": pairs[:1] + pairs[-1:]},
                           Config(review={"min_labels": 2, "min_kappa": -0.5}))["faithfulness"]
    assert two["n_labels"] == 2 and two["kappa"] is not None


def test_judge_validation_ignores_unlabelled_pairs():
    from abtest.review.agreement import judge_validation

    pairs = [("covered", "covered")] * 16 + [("not_covered", "not_covered")] * 16 + \
        [(None, "covered"), ("covered", None)]
    v = judge_validation({"coverage": pairs}, CFG)["coverage"]
    assert v["n_labels"] == 32 and v["kappa"] == 1.0 and v["validated"] is True
