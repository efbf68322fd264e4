"""One truth: the report's intervals, p-values and non-inferiority decisions are
`abtest.stats.paired` on the same cases (the door users call with their own arrays), for a
small tied world, a larger one, and one whose cases share groups."""

from __future__ import annotations

import pytest

import validity_sim as V
from abtest import stats
from abtest.reporting.metrics import compute_metrics, group_labels
from abtest.core.models import Config

SC = {s.name: s for s in V.SCENARIOS}


def _pairs(jv, judge, ids):
    a, b = jv.get((judge, "A")) or {}, jv.get((judge, "B")) or {}
    both = [c for c in ids if (a.get(c) or {}).get("score") is not None
            and (b.get(c) or {}).get("score") is not None]
    return both, [a[c]["score"] for c in both], [b[c]["score"] for c in both]


@pytest.mark.parametrize("name,n", [("true_effect", 24), ("true_effect", 200),
                                    ("duplicates_effect", 60), ("null", 120)])
def test_the_report_reads_stats_paired(name, n):
    cfg = Config()
    sc = SC[name]
    w = V.World(sc, n, 7)
    jv, lengths, ids, answerable = V.judgments(w, sc, 7, cfg)
    groups = w.groups or None
    m, _, _ = compute_metrics(ids, jv, answerable, lengths, cfg, cfg.judges, groups=groups)

    both, a, b = _pairs(jv, "faithfulness", ids)
    pr = stats.paired(a, b, groups=group_labels(both, groups), alpha=cfg.alpha)
    f = m["faithfulness"]
    assert (f["difference"], f["ci_low"], f["ci_high"], f["p_value"]) == (
        pr.estimate, pr.ci_low, pr.ci_high, pr.p_value)
    assert f["ci_method"].startswith(pr.method)

    both, a, b = _pairs(jv, "coverage", ids)
    cov = stats.paired(a, b, groups=group_labels(both, groups), margin=cfg.margins.coverage,
                       alpha=cfg.alpha)
    ni = m["coverage"]["noninferiority"]
    assert (ni["ci_low"], ni["p_value"], ni["holds"]) == (cov.ni_limit, cov.ni_p_value,
                                                          cov.noninferior)

    for key, better, margin in (("answerable", "lower", cfg.margins.abstention_answerable),
                                ("unanswerable", "higher", cfg.margins.abstention_unanswerable)):
        sub = [c for c in ids if answerable[c] is (key == "answerable")]
        xa = [float(jv[("abstention", "A")][c]["verdict"] == "abstained") for c in sub]
        xb = [float(jv[("abstention", "B")][c]["verdict"] == "abstained") for c in sub]
        ab = stats.paired(xa, xb, kind="binary", groups=group_labels(sub, groups), margin=margin,
                          better=better, alpha=cfg.alpha)
        got = m["abstention"][key]
        side = "upper" if better == "lower" else "lower"
        assert (got["ci_low"], got["ci_high"], got["p_value"]) == (ab.ci_low, ab.ci_high,
                                                                   ab.p_value)
        assert (got["noninferiority"][side], got["noninferiority"]["holds"]) == (
            ab.ni_limit, ab.noninferior)
