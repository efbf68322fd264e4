"""The licensed claim and the release gate, as pure functions of a report dict.

Every claim test starts from one report in which everything holds and changes
exactly one thing, so the single withheld reason names what changed. Gate tests
do the same per rule. The last tests render the markdown of a real CLI run.
"""

from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from abtest.gate import evaluate_gate
from abtest.models import Config, Gates
from abtest.reporting.build import licensed_claim
from fakes import Brain, install

CFG = Config()  # alpha 0.05; margins coverage 0.05, answerable refusals 0.05, unanswerable 0.10


def _val(kappa=0.85, lo=0.72, n=40, ok=True):
    return {"n_labels": n, "kappa": kappa, "ci_low": lo, "ci_high": min(1.0, 2 * kappa - lo),
            "validated": ok, "reason": None if ok else f"kappa {kappa}, lower 95% limit {lo} < 0.6"}


_BASE = {
    "kind": "frozen",
    "status": "complete",
    "n_finished": 40,
    "unfinished_cases": [],
    "comparison_kind": "prompt",
    "pipeline_reasons": [],
    "judges": ["pairwise", "faithfulness", "coverage", "abstention"],
    "models": {"generator": {"requested": "openai/gpt-4o-mini",
                             "resolved": ["gpt-4o-mini-2024-07-18"]},
               "judge": {"requested": "openai/gpt-4o", "resolved": ["gpt-4o-2024-08-06"]}},
    "self_judge": False,
    "judge_validation": {"pairwise": _val(0.5, 0.3, ok=False), "faithfulness": _val(0.72, 0.61),
                         "coverage": _val(0.9, 0.8), "abstention": _val(1.0, 1.0),
                         "claim_judges": ["faithfulness", "coverage", "abstention"],
                         "validated": True},
    "golden": {"is_draft": False, "n_draft": 0, "n_cases": 40, "draft_ids": [], "note": None},
    "metrics": {
        "faithfulness": {"n": 40, "a": 0.87, "b": 0.95, "difference": 0.08, "ci_low": 0.03,
                         "ci_high": 0.13, "conf_level": 0.95, "p_value": 0.001, "p_holm": 0.004,
                         "n_dropped": 0,
                         "dropped": {"a_only": [], "b_only": [], "both": [],
                                     "reasons": {"A": {}, "B": {}}},
                         "drop_bound": {"imputed_a": 0, "imputed_b": 0, "holds": True,
                                        "difference": 0.08, "p_value": 0.001}},
        "coverage": {"n": 34, "a": 0.80, "b": 0.795, "difference": -0.005, "ci_low": -0.012,
                     "ci_high": 0.002, "noninferiority": {"margin": 0.05, "ci_low": -0.011,
                                                          "conf_level": 0.9, "holds": True}},
        "abstention": {
            "answerable": {"n": 60, "a": 0.0, "b": 0.0, "difference": 0.0, "better": "lower",
                           "noninferiority": {"holds": True, "upper": 0.015, "margin": 0.05,
                                              "min_n": 52}},
            "unanswerable": {"n": 30, "a": 0.5, "b": 1.0, "difference": 0.5, "better": "higher",
                             "noninferiority": {"holds": True, "lower": 0.3, "margin": 0.1,
                                                "min_n": 25}},
        },
        "checks": {"citation_accuracy": {"n": 30, "n_b_applicable": 30, "pass_rate_a": 0.8,
                                         "pass_rate_b": 0.95}},
    },
    "incidents": [],
}


def make_report(**overrides) -> dict:
    """A fresh report in which the claim is licensed and the gate passes; top-level overrides."""
    rep = copy.deepcopy(_BASE)
    rep.update(copy.deepcopy(overrides))
    return rep


def claim(rep: dict) -> dict:
    return licensed_claim(rep, CFG)


def withheld(rep: dict) -> str:
    """The claim is withheld for exactly one reason; return it."""
    c = claim(rep)
    assert c["licensed"] is False and c["sentence"] is None
    assert len(c["reasons"]) == 1, c["reasons"]
    return c["reasons"][0]


def gate(rep: dict) -> dict:
    return evaluate_gate(rep, Gates())


def rule(g: dict, name: str) -> dict:
    return next(r for r in g["rules"] if r["name"] == name)


# --------------------------------------------------------------------------- licensed claim


def test_licensed_when_everything_holds():
    c = claim(make_report())
    assert c["licensed"] is True and c["reasons"] == []
    s = c["sentence"]
    assert s.startswith("Given these contexts, variant B was more faithful and no less complete "
                        "than A, paired over 40 questions")
    assert "faithfulness +0.080" in s and "95% CI 0.030 to 0.130" in s and "Holm p = 0.004" in s
    assert "coverage B − A -0.005, margin 0.05" in s
    assert "refusals on answerable questions B − A +0.000, margin 0.05" in s
    assert "correct abstention on unanswerable questions B − A +0.500, margin 0.1" in s
    assert "faithfulness 0.720 (lower limit 0.610, 40 labels)" in s
    assert "pairwise" not in s  # the claim does not rest on the pairwise judge


def test_sentence_counts_the_pairs_the_test_used_and_names_the_drops():
    rep = make_report(n_finished=44)
    f = rep["metrics"]["faithfulness"]
    f.update(n=40, n_dropped=4, dropped={"a_only": ["q1"], "b_only": ["q2", "q3"], "both": ["q4"],
                                         "reasons": {"A": {"abstained": 2},
                                                     "B": {"abstained": 3}}})
    f["drop_bound"].update(imputed_a=1, imputed_b=2, holds=True)
    s = claim(rep)["sentence"]
    assert "paired over 40 questions; 4 dropped" in s and "A 1, B 2, both 1" in s


def test_holm_p_equal_to_alpha_is_significant():
    rep = make_report()
    rep["metrics"]["faithfulness"]["p_holm"] = CFG.alpha  # reject when p_holm <= alpha
    assert claim(rep)["licensed"] is True


def test_not_significant_when_holm_p_above_alpha():
    rep = make_report()
    rep["metrics"]["faithfulness"]["p_holm"] = 0.2
    r = withheld(rep)
    assert r.startswith("not significant: faithfulness B − A = +0.080")
    assert "Holm p = 0.200" in r and "95% CI 0.030 to 0.130" in r


def test_significant_in_a_favour_is_said_so():
    rep = make_report()
    rep["metrics"]["faithfulness"].update(difference=-0.184, ci_low=-0.29, ci_high=-0.08,
                                          p_holm=0.003)
    r = withheld(rep)
    assert r.startswith("significant, in A's favour: faithfulness B − A = -0.184")
    assert "not significant" not in r


def test_no_test_possible_when_holm_p_missing():
    rep = make_report()
    rep["metrics"]["faithfulness"]["p_holm"] = None
    r = withheld(rep)
    assert r.startswith("no test possible") and "Holm p = n/a" in r


def test_ci_level_follows_alpha():
    rep = make_report()
    rep["metrics"]["faithfulness"].update(p_holm=0.2, conf_level=0.99)
    c = licensed_claim(rep, Config(alpha=0.01))
    assert any("99% CI" in r for r in c["reasons"]) and not any("95%" in r for r in c["reasons"])


def test_withheld_when_faithfulness_not_measured():
    rep = make_report()
    del rep["metrics"]["faithfulness"]
    assert withheld(rep).startswith("faithfulness was not measured")


def test_one_sided_drops_must_survive_the_worst_case_bound():
    rep = make_report()
    f = rep["metrics"]["faithfulness"]
    f["dropped"].update(b_only=["q1", "q2", "q3"], reasons={"A": {}, "B": {"abstained": 3}})
    f["n_dropped"] = 3
    f["drop_bound"].update(imputed_b=3, holds=False, difference=-0.01, p_value=0.8)
    r = withheld(rep)
    assert r.startswith("the faithfulness gain does not survive the answerable pairs only one "
                        "variant left unscored (3 without a B score — B overall: abstained 3, 0 "
                        "without an A score)")
    assert "B − A = -0.010 (p = 0.800)" in r


def test_coverage_fell():
    rep = make_report()
    rep["metrics"]["coverage"].update(difference=-0.06, noninferiority={
        "margin": 0.05, "holds": False, "ci_low": -0.09, "conf_level": 0.9})
    r = withheld(rep)
    assert r.startswith("coverage not shown non-inferior: B − A = -0.060")
    assert "lower 90% limit -0.090 ≤ −0.05 (the margin)" in r


def test_coverage_without_noninferiority_result_is_not_shown_noninferior():
    rep = make_report()
    del rep["metrics"]["coverage"]["noninferiority"]  # e.g. fewer than 2 pairs
    assert withheld(rep).startswith("coverage not shown non-inferior")


def test_coverage_not_measured():
    rep = make_report()
    del rep["metrics"]["coverage"]
    assert withheld(rep).startswith("coverage was not measured")


def test_answerable_refusals_rose():
    rep = make_report()
    rep["metrics"]["abstention"]["answerable"].update(
        difference=0.1, noninferiority={"holds": False, "upper": 0.18, "margin": 0.05, "min_n": 52})
    r = withheld(rep)
    assert r.startswith("refusals on answerable cases rose: B − A = +0.100")
    assert "upper 90% limit 0.180 ≥ 0.05 (the margin)" in r


def test_answerable_refusals_not_shown_not_to_rise_names_the_smallest_n():
    rep = make_report()
    ab = rep["metrics"]["abstention"]["answerable"]
    ab["n"] = 40
    ab["noninferiority"].update(holds=False, upper=0.06)
    r = withheld(rep)
    assert r.startswith("refusals on answerable cases not shown not to rise")
    assert "with 40 such cases it cannot hold at this margin: it needs at least 52" in r


def test_refusals_not_measured_withholds():
    rep = make_report()
    del rep["metrics"]["abstention"]
    assert withheld(rep).startswith("refusals were not measured (the abstention judge is off)")


def test_unanswerable_abstention_fell():
    rep = make_report()
    rep["metrics"]["abstention"]["unanswerable"].update(
        difference=-0.2, noninferiority={"holds": False, "lower": -0.35, "margin": 0.1, "min_n": 25})
    r = withheld(rep)
    assert r.startswith("correct abstention on unanswerable cases fell: B − A = -0.200")
    assert "lower 90% limit -0.350 ≤ −0.1" in r


def test_no_unanswerable_cases_withholds():
    rep = make_report()
    rep["metrics"]["abstention"]["unanswerable"] = {"n": 0, "a": None, "b": None}
    r = withheld(rep)
    assert r.startswith("no unanswerable cases") and "add-unanswerable" in r


@pytest.mark.parametrize("judge", ["faithfulness", "coverage", "abstention"])
def test_each_claim_judge_must_be_validated(judge):
    rep = make_report()
    rep["judge_validation"][judge] = _val(0.3, 0.1, ok=False)
    rep["judge_validation"]["validated"] = False
    r = withheld(rep)
    assert r == f"{judge} judge not validated: kappa 0.3, lower 95% limit 0.1 < 0.6"


def test_pairwise_judge_validation_is_not_part_of_the_claim():
    rep = make_report()
    assert rep["judge_validation"]["pairwise"]["validated"] is False
    assert claim(rep)["licensed"] is True


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


def test_self_judging():
    assert withheld(make_report(self_judge=True)).startswith(
        "self-judging: the judge model is the generator model")


def test_pipeline_change():
    rep = make_report(comparison_kind="pipeline_change",
                      pipeline_reasons=["variant B overrides context_template"])
    r = withheld(rep)
    assert r.startswith("pipeline change:")
    assert "re-measure end to end; the frozen claim does not apply" in r
    assert "(variant B overrides context_template)" in r


def test_model_comparison():
    r = withheld(make_report(comparison_kind="model"))
    assert r.startswith("model comparison:") and "not a prompt comparison" in r


def test_incomplete_run():
    r = withheld(make_report(status="incomplete", unfinished_cases=["q3", "q7"]))
    assert r.startswith("incomplete run: 2 case(s) unfinished; nothing is estimated")


@pytest.mark.parametrize("role", ["generator", "judge"])
def test_model_version_drift(role):
    rep = make_report()
    rep["models"][role]["resolved"] = ["m-2024-07-18", "m-2024-11-20"]
    assert withheld(rep) == (f"model version drift: the {role} resolved to "
                             "m-2024-07-18, m-2024-11-20")


def test_unconfirmed_drafts():
    note = ("3 of 40 questions are unconfirmed drafts (model-written, not yet checked by a person; "
            "confirm with `abtest golden confirm`, then re-capture)")
    rep = make_report(golden={"is_draft": True, "n_draft": 3, "n_cases": 40,
                              "draft_ids": ["q1", "q2", "q3"], "note": note})
    assert withheld(rep) == note


def test_golden_none_is_not_a_draft():
    assert claim(make_report(golden=None))["licensed"] is True


def test_several_problems_list_every_reason():
    rep = make_report(self_judge=True, comparison_kind="model")
    rep["judge_validation"]["coverage"] = _val(0.3, 0.1, ok=False)
    reasons = claim(rep)["reasons"]
    assert len(reasons) == 3
    assert [r.split(":")[0] for r in reasons] == ["model comparison", "self-judging",
                                                  "coverage judge not validated"]


@pytest.mark.parametrize("rep", [make_report(), make_report(self_judge=True),
                                 make_report(comparison_kind="pipeline_change",
                                             pipeline_reasons=["retriever changed"])])
def test_frozen_claim_never_claims_end_to_end(rep):
    c = claim(rep)
    assert c["scope"].startswith("frozen:")
    assert "never an end-to-end claim" in c["scope"]
    if c["licensed"]:
        s = c["sentence"].lower()
        assert s.startswith("given these contexts")
        assert "end to end" not in s and "end-to-end" not in s


# --------------------------------------------------------------------------- gate


def test_gate_passes_frozen_run_with_unmeasurable_rules_not_applicable():
    g = gate(make_report())
    assert g["decision"] == "PASS" and g["exit_code"] == 0 and g["reasons"] == []
    for name in ("context_precision", "context_recall", "p95_latency_ms"):
        r = rule(g, name)
        assert r["status"] == "not_applicable" and r["value"] is None  # never a default pass
        assert "live" in r["note"]
    assert rule(g, "answer_relevance")["status"] == "not_applicable"
    for name in ("faithfulness", "out_of_scope", "citation_accuracy"):
        assert rule(g, name)["status"] == "pass"
    assert g["incidents_b"] == 0


def test_gate_fails_on_faithfulness_below_090():
    rep = make_report()
    rep["metrics"]["faithfulness"]["b"] = 0.89
    g = gate(rep)
    assert g["decision"] == "FAIL" and g["exit_code"] == 1
    assert rule(g, "faithfulness")["status"] == "fail"
    assert g["reasons"] == ["faithfulness: 0.890 vs threshold 0.9"]


def test_gate_faithfulness_at_threshold_passes():
    rep = make_report()
    rep["metrics"]["faithfulness"]["b"] = 0.90
    assert gate(rep)["decision"] == "PASS"


def test_gate_fails_without_out_of_scope_cases():
    rep = make_report()
    rep["metrics"]["abstention"]["unanswerable"] = {"n": 0, "a": None, "b": None}
    g = gate(rep)
    assert g["decision"] == "FAIL" and g["exit_code"] == 1
    assert rule(g, "out_of_scope")["status"] == "fail"
    assert len(g["reasons"]) == 1 and g["reasons"][0].startswith("out_of_scope: no out-of-scope")


def test_gate_fails_without_abstention_metric_at_all():
    rep = make_report()
    del rep["metrics"]["abstention"]
    g = gate(rep)
    assert g["exit_code"] == 1 and rule(g, "out_of_scope")["status"] == "fail"


def test_gate_fails_when_out_of_scope_refusal_rate_below_one():
    rep = make_report()
    rep["metrics"]["abstention"]["unanswerable"]["b"] = 5 / 6
    g = gate(rep)
    assert g["decision"] == "FAIL" and g["exit_code"] == 1
    assert g["reasons"] == ["out_of_scope: 0.833 vs threshold 1.0"]


def test_gate_fails_on_citation_accuracy_below_090():
    rep = make_report()
    rep["metrics"]["checks"]["citation_accuracy"]["pass_rate_b"] = 0.85
    g = gate(rep)
    assert g["decision"] == "FAIL" and g["exit_code"] == 1
    assert g["reasons"] == ["citation_accuracy: 0.850 vs threshold 0.9"]


def test_gate_citation_accuracy_not_applicable_without_expected_citations():
    rep = make_report()
    rep["metrics"]["checks"]["citation_accuracy"] = {"n": 0, "pass_rate_a": None,
                                                     "pass_rate_b": None}
    g = gate(rep)
    r = rule(g, "citation_accuracy")
    assert r["status"] == "not_applicable" and "expected_citations" in r["note"]
    assert g["decision"] == "PASS"


def _incident(variant):
    return {"case_id": "q9", "variant": variant, "faithfulness": 0.5, "question": "?",
            "answer": "!", "unsupported": [], "context_ids": []}


def test_gate_fails_on_hallucination_incident_in_b():
    g = gate(make_report(incidents=[_incident("B")]))
    assert g["decision"] == "FAIL" and g["exit_code"] == 1 and g["incidents_b"] == 1
    assert g["reasons"] == ["1 hallucination incident(s) in B (faithfulness < 0.85)"]


def test_gate_ignores_incident_in_a_alone():
    g = gate(make_report(incidents=[_incident("A")]))
    assert g["decision"] == "PASS" and g["exit_code"] == 0 and g["incidents_b"] == 0


def test_gate_incomplete_even_if_everything_else_passes():
    g = gate(make_report(status="incomplete", unfinished_cases=["q3"]))
    assert g["decision"] == "INCOMPLETE" and g["exit_code"] == 3
    assert g["reasons"][0].startswith("incomplete run: 1 case(s) unfinished")
    assert all(r["status"] != "fail" for r in g["rules"])


def test_gate_incomplete_outranks_fail():
    rep = make_report(status="incomplete", unfinished_cases=["q3"])
    rep["metrics"]["faithfulness"]["b"] = 0.5
    g = gate(rep)
    assert g["exit_code"] == 3 and g["reasons"][0].startswith("incomplete run")
    assert any(r.startswith("faithfulness") for r in g["reasons"])


def test_gate_answer_relevance_not_applicable_without_relevance_judge():
    r = rule(gate(make_report()), "answer_relevance")
    assert r["status"] == "not_applicable" and r["note"] == "relevance judge not enabled"


def test_gate_answer_relevance_passes_when_present_and_high_enough():
    rep = make_report()
    rep["metrics"]["relevance"] = {"n": 40, "a": 0.8, "b": 0.85, "difference": 0.05}
    g = gate(rep)
    assert rule(g, "answer_relevance")["status"] == "pass" and g["exit_code"] == 0


def test_gate_fails_on_answer_relevance_below_080():
    rep = make_report()
    rep["metrics"]["relevance"] = {"n": 40, "a": 0.8, "b": 0.75, "difference": -0.05}
    g = gate(rep)
    assert g["decision"] == "FAIL" and g["exit_code"] == 1
    assert g["reasons"] == ["answer_relevance: 0.750 vs threshold 0.8"]


def live_report(precision=0.9, recall=0.9, p95=1200.0):
    rep = make_report(kind="live", comparison_kind="live")
    rep["metrics"]["retrieval"] = {"context_precision": {"n": 40, "a": 0.7, "b": precision},
                                   "context_recall": {"n": 40, "a": 0.7, "b": recall}}
    rep["metrics"]["latency"] = {"p50_ms_b": 600.0, "p95_ms_b": p95}
    return rep


def test_gate_live_evaluates_retrieval_and_latency_and_passes():
    g = gate(live_report())
    assert g["decision"] == "PASS" and g["exit_code"] == 0
    assert rule(g, "context_precision") == {"name": "context_precision", "value": 0.9,
                                            "threshold": 0.75, "op": ">=", "status": "pass"}
    assert rule(g, "context_recall")["status"] == "pass"
    r = rule(g, "p95_latency_ms")
    assert r["status"] == "pass" and r["value"] == 1200.0 and r["op"] == "<"


@pytest.mark.parametrize("kwargs,name,reason", [
    ({"precision": 0.6}, "context_precision", "context_precision: 0.600 vs threshold 0.75"),
    ({"recall": 0.7}, "context_recall", "context_recall: 0.700 vs threshold 0.75"),
    ({"p95": 6200.0}, "p95_latency_ms", "p95_latency_ms: 6200.000 vs threshold 5000"),
    ({"p95": 5000.0}, "p95_latency_ms", "p95_latency_ms: 5000.000 vs threshold 5000"),
])
def test_gate_live_fails_each_live_rule(kwargs, name, reason):
    g = gate(live_report(**kwargs))
    assert g["decision"] == "FAIL" and g["exit_code"] == 1
    assert rule(g, name)["status"] == "fail"
    assert g["reasons"] == [reason]


def test_gate_live_without_retrieval_data_is_not_applicable_not_passed():
    rep = make_report(kind="live")
    g = gate(rep)
    for name in ("context_precision", "context_recall", "p95_latency_ms"):
        assert rule(g, name)["status"] == "not_applicable"


def test_gate_frozen_ignores_live_only_numbers():
    rep = live_report(precision=0.1, recall=0.1, p95=99999.0)
    rep["kind"] = "frozen"
    g = gate(rep)
    assert g["decision"] == "PASS"
    for name in ("context_precision", "context_recall", "p95_latency_ms"):
        assert rule(g, name)["status"] == "not_applicable"


def test_gate_reasons_name_every_failing_rule():
    rep = make_report(incidents=[_incident("B")])
    rep["metrics"]["faithfulness"]["b"] = 0.8
    rep["metrics"]["checks"]["citation_accuracy"]["pass_rate_b"] = 0.5
    g = gate(rep)
    assert g["exit_code"] == 1
    names = [r.split(":")[0] for r in g["reasons"]]
    assert names[:2] == ["faithfulness", "citation_accuracy"]
    assert "hallucination incident" in g["reasons"][2]


# --------------------------------------------------------------------------- markdown


def invoke(*args):
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _summary_table(md: str) -> list[list[str]]:
    lines = md.splitlines()
    start = lines.index("### Score summaries")
    assert start > lines.index("## Metric scores") and start < lines.index("## Gate decision")
    table = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip("|").split("|")])
    return table


def test_markdown_has_score_summaries_table(project):
    install(Brain())
    code, out, err = invoke("run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                            "--b", "variants/b.yaml")
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    rep = json.loads(invoke("report", run_id, "--format", "json")[1])
    code, md, _ = invoke("report", run_id)
    assert code == 0
    table = _summary_table(md)
    assert table[0] == ["metric", "variant", "average", "median", "p25", "p75", "min", "max",
                        "high (≥0.8)", "medium (0.6–0.8)", "low (<0.6)"]
    rows = {(r[0], r[1]): r for r in table[2:]}  # skip the |---| rule
    expected = [k for k in ("faithfulness", "coverage", "quality", "relevance", "conformance")
                if (rep["metrics"].get(k) or {}).get("summary_a")]
    assert "faithfulness" in expected
    assert sorted({k for k, _ in rows}) == sorted(expected)
    for key in expected:
        for v in ("A", "B"):
            s = rep["metrics"][key][f"summary_{v.lower()}"]
            row = rows[(key, v)]
            assert row[2] == f"{s['average']:.3f}" and row[3] == f"{s['median']:.3f}"
            assert row[6] == f"{s['min']:.3f}" and row[7] == f"{s['max']:.3f}"
            assert [int(x) for x in row[8:11]] == [s["high"], s["medium"], s["low"]]
            assert s["high"] + s["medium"] + s["low"] == s["n"]


def test_score_summaries_skip_absent_metrics():
    from abtest.reporting.markdown import _score_summaries

    summ = {"n": 2, "n_missing": 0, "average": 0.75, "median": 0.75, "p25": 0.625, "p75": 0.875,
            "min": 0.5, "max": 1.0, "high": 1, "medium": 0, "low": 1}
    m = {"faithfulness": {"n": 2, "summary_a": summ, "summary_b": summ},
         "coverage": {"n": 0, "note": "no case has a score on both sides"},  # no summaries
         "conformance": None,  # build_report sets this default
         "pairwise": {"n": 2, "summary_a": summ}}  # not a continuous metric
    rows = _score_summaries(m)
    assert [r[:2] for r in rows] == [["faithfulness", "A"], ["faithfulness", "B"]]
    assert rows[0][2:] == ["0.750", "0.750", "0.625", "0.875", "0.500", "1.000", "1", "0", "1"]
    assert _score_summaries({}) == []


def test_gate_fails_when_faithfulness_not_measured():
    rep = make_report()
    rep["metrics"].pop("faithfulness")
    g = evaluate_gate(rep, Gates())
    assert g["decision"] == "FAIL" and any("faithfulness" in r for r in g["reasons"])


def test_claim_withheld_when_coverage_has_no_pairs():
    from abtest.models import Config

    rep = make_report()
    rep["metrics"]["coverage"] = {"difference": None, "n": 0}
    c = licensed_claim(rep, Config())
    assert not c["licensed"] and any("coverage was not measured" in r for r in c["reasons"])


# --------------------------------------------------------------------------- smallest N


@pytest.mark.parametrize("margin", [0.02, 0.05, 0.10])
def test_smallest_n_is_where_binary_noninferiority_first_can_hold(margin):
    """At the stated N, zero refusals on both sides shows non-inferiority; one case fewer
    never can (checked with the Tango interval itself)."""
    from abtest import stats as S
    from abtest.reporting.metrics import binary
    from abtest.sizing import min_n_binary_noninferiority

    n = min_n_binary_noninferiority(margin, 0.05)
    for size, holds in ((n, True), (n - 1, False)):
        ci = S.paired_proportion_diff_ci(0, 0, 0, size, conf_level=0.90)
        assert (ci.ci_high < margin) is holds
        ids = [str(i) for i in range(size)]
        never = {i: False for i in ids}
        assert binary("x", never, never, ids, 0.05, margin=margin)["noninferiority"]["holds"] is holds
    if margin == 0.02:
        assert n == 133  # the figure the claim-soundness issue measured on main


def test_dry_run_states_the_smallest_fixture_that_can_license(project):
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml", "--dry-run"])
    assert r.exit_code == 0, r.stderr
    mn = json.loads(r.stdout)["claim_minimum_n"]
    assert mn["fixture"] == {"answerable": 3, "unanswerable": 1} and mn["can_license"] is False
    assert (mn["answerable"], mn["unanswerable"]) == (52, 25)
    assert "needs at least 52 answerable and 25 unanswerable cases" in mn["text"]


# --------------------------------------------------------------------------- metrics


def _jv(fa, fb, *, ans=None, abst=None):
    """Judge maps for compute_metrics from per-case faithfulness scores (None = no claims)."""
    jv = {("faithfulness", "A"): {}, ("faithfulness", "B"): {}}
    for cid, (x, y) in enumerate(zip(fa, fb)):
        for v, s in (("A", x), ("B", y)):
            jv[("faithfulness", v)][str(cid)] = {"verdict": "scored" if s is not None else
                                                 "no_claims", "score": s}
    return jv


def test_holm_family_is_fixed_from_the_configuration_not_the_data():
    from statsmodels.stats.multitest import multipletests

    from abtest.reporting.metrics import compute_metrics

    rng = __import__("random").Random(3)
    fa = [rng.random() for _ in range(40)]
    fb = [min(1.0, x + 0.1 + rng.uniform(-0.2, 0.2)) for x in fa]
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

    ids = [str(i) for i in range(20)]
    m, _, _ = compute_metrics(ids, _jv([0.5] * 20, [1.0] * 20), {}, {}, CFG, ["faithfulness"])
    f = m["faithfulness"]
    assert f["difference"] == 0.5 and f["p_value"] == pytest.approx(2 * 0.5 ** 20)
    assert f["significant"] is True and f["direction"] == "B"
    assert (f["ci_low"], f["ci_high"]) == (0.5, 0.5)


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


# --------------------------------------------------------------------------- gate: checks


def _check(n_b, pass_b, n_a=None, pass_a=None):
    return {"n": min(n_b, n_a or 0), "n_a_applicable": n_a or 0, "n_b_applicable": n_b,
            "n_b_pass": pass_b, "pass_rate_b": pass_b / n_b if n_b else None,
            "pass_rate_a": (pass_a / n_a) if n_a else None}


def test_gate_fails_a_broken_output_contract():
    rep = make_report()
    rep["metrics"]["checks"]["json"] = _check(10, 0)  # only B declares JSON output
    g = gate(rep)
    assert g["decision"] == "FAIL" and rule(g, "check:json")["status"] == "fail"
    assert g["reasons"] == ["check:json: 0.000 vs threshold 1.0"]
    assert rule(g, "check:json")["note"] == "0 of 10 B answers pass"


def test_gate_ignores_checks_b_does_not_define():
    rep = make_report()
    rep["metrics"]["checks"]["length"] = _check(0, 0, n_a=10, pass_a=2)
    g = gate(rep)
    assert g["decision"] == "PASS" and not any(r["name"] == "check:length" for r in g["rules"])


def test_gate_compares_at_the_printed_precision():
    rep = make_report()
    rep["metrics"]["faithfulness"]["b"] = 0.8999999
    g = gate(rep)  # prints as 0.900: must not FAIL a 0.90 bar
    assert rule(g, "faithfulness")["status"] == "pass" and g["decision"] == "PASS"
    rep["metrics"]["faithfulness"]["b"] = 0.8994
    assert rule(gate(rep), "faithfulness")["status"] == "fail"


def test_checks_table_keeps_a_check_only_b_defines(project):
    """A check B declares and A does not still appears, with B's pass rate, and gates."""
    from pathlib import Path

    install(Brain())
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text()
                                       + "output: {format: json, required_keys: [answer]}\n")
    code = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                    "--b", "variants/b.yaml"])
    run_id = code.stdout.strip().splitlines()[-1]
    rep = json.loads(CliRunner().invoke(cli, ["report", run_id, "--format", "json"]).stdout)
    j = rep["metrics"]["checks"]["json"]
    assert (j["n_a_applicable"], j["n_b_applicable"], j["pass_rate_b"], j["n"]) == (0, 4, 0.0, 0)
    g = CliRunner().invoke(cli, ["gate", run_id])
    assert g.exit_code == 1 and "check:json: 0.000 vs threshold 1.0" in g.stdout
    md = CliRunner().invoke(cli, ["report", run_id]).stdout
    assert "| json " in md


# --------------------------------------------------------------------------- mutation follow-ups


def test_sentence_has_no_drop_note_without_drops_and_its_level_follows_alpha():
    s = claim(make_report())["sentence"]
    assert "dropped" not in s
    rep = make_report()
    rep["metrics"]["faithfulness"]["conf_level"] = 0.99
    c = licensed_claim(rep, Config(alpha=0.01))
    assert c["licensed"] and "99% CI" in c["sentence"]


@pytest.mark.parametrize("imputed_a,imputed_b", [(2, 2), (3, 0), (0, 3)])
def test_any_failed_drop_bound_withholds_a_significant_gain(imputed_a, imputed_b):
    rep = make_report()
    rep["metrics"]["faithfulness"]["drop_bound"].update(imputed_a=imputed_a, imputed_b=imputed_b,
                                                        holds=False)
    r = withheld(rep)
    assert r.startswith("the faithfulness gain does not survive")
    assert f"({imputed_b} without a B score" in r and f", {imputed_a} without an A score" in r


def test_coverage_noninferiority_needs_two_pairs():
    from abtest.reporting.metrics import noninferiority_continuous

    ni = noninferiority_continuous({"1": 0.5}, {"1": 0.9}, ["1"], 0.05, 0.05)
    assert ni["holds"] is False and ni["note"] == "fewer than 2 pairs"
    # one-sided missing scores are not pairs
    ni = noninferiority_continuous({"1": 0.5, "2": None}, {"1": 0.9, "2": 0.7}, ["1", "2"],
                                   0.05, 0.05)
    assert ni["holds"] is False


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


@pytest.mark.parametrize("n_ans,n_un,ok", [(52, 25, True), (51, 25, False), (52, 24, False),
                                           (400, 0, False)])
def test_minimum_n_decides_can_license(n_ans, n_un, ok):
    from abtest.sizing import minimum_n

    assert minimum_n(CFG, n_ans, n_un)["can_license"] is ok


@pytest.mark.parametrize("margins", [{"abstention_answerable": 0.0},
                                     {"abstention_unanswerable": 0.0}])
def test_a_zero_refusal_margin_has_no_minimum_fixture(margins):
    """At margin 0 a B that refuses as often as A never holds, so no fixture size is enough."""
    from abtest.sizing import minimum_n, minimum_n_text

    mn = minimum_n(Config(margins=margins), 5000, 5000)
    assert mn["can_license"] is False
    assert "cannot license a claim" in minimum_n_text(mn)
    assert "no fixture can license" in minimum_n_text(minimum_n(Config(margins=margins)))


@pytest.mark.parametrize("judges,n", [(None, 8), (["faithfulness", "coverage", "abstention"], 8),
                                      (["faithfulness"], 6)])
def test_minimum_n_for_faithfulness_follows_the_holm_family(judges, n):
    """n equal gains give p = 2·0.5ⁿ, which must pass α/m (m = the family size)."""
    from abtest.sizing import minimum_n

    cfg = Config(margins={"abstention_answerable": 0.9}, **({"judges": judges} if judges else {}))
    m = {None: 5, 3: 4, 1: 1}[None if judges is None else len(judges)]  # abstention counts twice
    want = next(k for k in range(2, 100) if 2 * 0.5 ** k <= 0.05 / m)
    assert minimum_n(cfg)["answerable"] == want == n


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


@pytest.mark.parametrize("p_holm", [0.001, CFG.alpha])
def test_drop_bound_is_checked_for_a_gain_significant_at_the_boundary(p_holm):
    rep = make_report()
    rep["metrics"]["faithfulness"]["p_holm"] = p_holm
    rep["metrics"]["faithfulness"]["drop_bound"].update(imputed_b=1, holds=False)
    assert withheld(rep).startswith("the faithfulness gain does not survive")


def test_only_configured_judges_need_validation():
    rep = make_report(judges=["pairwise", "faithfulness", "abstention"])
    del rep["metrics"]["coverage"]
    rep["judge_validation"]["coverage"] = {"n_labels": 0, "kappa": None, "validated": False,
                                           "reason": "0 human label(s) of its items (need 30)"}
    # one reason: coverage is off; its judge's validation is not asked for as well
    assert withheld(rep).startswith("coverage was not measured")


def test_judge_validation_ignores_unlabelled_pairs():
    from abtest.review.agreement import judge_validation

    pairs = [("covered", "covered")] * 16 + [("not_covered", "not_covered")] * 16 + \
        [(None, "covered"), ("covered", None)]
    v = judge_validation({"coverage": pairs}, CFG)["coverage"]
    assert v["n_labels"] == 32 and v["kappa"] == 1.0 and v["validated"] is True


def test_smallest_faithfulness_n_passes_holm_at_equality():
    from abtest.sizing import minimum_n

    # alpha = 0.0625 = 2 · 0.5⁵: five equal gains reach exactly alpha, and Holm rejects p ≤ alpha
    cfg = Config(alpha=0.0625, judges=["faithfulness"], margins={"abstention_answerable": 0.9})
    assert minimum_n(cfg)["answerable"] == 5


@pytest.mark.parametrize("diff,p_holm,want", [(0.1, 0.01, "B"), (-0.1, 0.01, "A"),
                                              (0.1, 0.05, "B"), (0.1, 0.0500001, None),
                                              (0.0, 0.01, None), (0.1, None, None)])
def test_direction_is_the_significant_side(diff, p_holm, want):
    from abtest.reporting.metrics import direction

    assert direction({"difference": diff, "p_holm": p_holm}, 0.05) == want
    assert direction({}, 0.05) is None and direction({"difference": None, "p_holm": 0.01}, 0.05) is None


def test_continuous_values_against_scipy():
    """Means, drops, bootstrap and MDE of one metric, each computed independently."""
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
    bs = sst.bootstrap((b - a,), np.mean, n_resamples=5000, confidence_level=0.95,
                       method="percentile", vectorized=True, rng=np.random.default_rng(0))
    assert m["bootstrap"]["ci_low"] == pytest.approx(bs.confidence_interval.low)
    assert m["bootstrap"]["ci_high"] == pytest.approx(bs.confidence_interval.high)
    sd = float(np.std(b - a, ddof=1))
    dz = abs(float(np.ravel(TTestPower().solve_power(effect_size=None, nobs=20, alpha=0.01,
                                                      power=0.8))[0]))
    assert m["mde"]["alpha"] == pytest.approx(0.01) and m["mde"]["power"] == 0.8
    assert m["mde"]["mde"] == pytest.approx(dz * sd)
    assert m["secondary"]["method"] == "asymptotic" or "exact" in m["secondary"]["test"]
    big = continuous("x", {str(i): 0.5 for i in range(40)},
                     {str(i): 0.5 + (0.1 if i % 2 else -0.05) for i in range(40)},
                     [str(i) for i in range(40)], 0.05)
    assert "bootstrap" not in big  # only below 30 pairs
    none = continuous("x", {"1": None}, {"1": None}, ["1"], 0.05)
    assert none["significant"] is False and none["n"] == 0 and none["n_dropped"] == 1


def test_drop_bound_edges():
    from scipy import stats as sst

    from abtest.reporting.metrics import drop_bound

    # fewer than two pairs: no bound, never holds
    b1 = drop_bound({"1": 0.5}, {"1": None}, ["1"], {"1": True}, 0.05)
    assert b1["holds"] is False and b1["n"] == 1 and b1["imputed_b"] == 1
    # exactly two pairs: a test; an unknown answerability counts as answerable (worst case)
    b2 = drop_bound({"1": 0.2, "2": 0.9}, {"1": 0.9, "2": None}, ["1", "2"], {}, 0.05)
    want = sst.ttest_rel([0.9, 0.0], [0.2, 0.9])
    assert b2["n"] == 2 and b2["imputed_b"] == 1 and b2["p_value"] == pytest.approx(want.pvalue)
    # an unanswerable one-sided drop stays out
    b3 = drop_bound({"1": 0.2, "2": 0.9, "3": 0.1}, {"1": 0.9, "2": None, "3": 0.8},
                    ["1", "2", "3"], {"2": False}, 0.05)
    assert b3["n"] == 2 and b3["imputed_b"] == 0


def test_binary_counts_rates_and_strict_margins():
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
    ci90 = S.paired_proportion_diff_ci(4, 3, 5, 20, conf_level=0.90)
    assert m["noninferiority"]["lower"] == pytest.approx(ci90.ci_low)
    # a limit exactly at the margin does not show non-inferiority (strict inequalities)
    at = binary("u", a, b, ids, 0.05, margin=-ci90.ci_low, higher_is_better=True)
    assert at["noninferiority"]["holds"] is False
    assert binary("u", a, b, ids, 0.05, margin=-ci90.ci_low + 1e-9,
                  higher_is_better=True)["noninferiority"]["holds"] is True
    at = binary("a", a, b, ids, 0.05, margin=ci90.ci_high)
    assert at["noninferiority"]["holds"] is False
    assert binary("a", a, b, ids, 0.05, margin=ci90.ci_high + 1e-9)["noninferiority"]["holds"]
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


def _sides(pairs):
    from abtest.reporting.metrics import length_bias

    return length_bias([o for o, _, _ in pairs], [a for _, a, _ in pairs],
                       [b for _, _, b in pairs], 0.05)


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
    from abtest.models import Config as C
    from abtest.reporting.build import _incidents

    cfg = C()  # incident when faithfulness < 0.85
    jv = {("faithfulness", "A"): {"q1": {"score": 0.85}, "q2": {"score": 0.8499}},
          ("faithfulness", "B"): {"q1": {"score": None}, "q2": {"score": 1.0}}}
    inc = _incidents(["q1", "q2"], jv, [], {}, {}, cfg)
    assert [(i["case_id"], i["variant"]) for i in inc] == [("q2", "A")]


def test_a_run_not_marked_complete_is_incomplete(project):
    """Every case finished but the process died before marking the run complete: the report
    says incomplete and estimates nothing."""
    from abtest.store import Store

    install(Brain())
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    run_id = r.stdout.strip().splitlines()[-1]
    with Store("results/abtest.duckdb") as s:
        s.update_run(run_id, status="running")
    rep = json.loads(CliRunner().invoke(cli, ["report", run_id, "--format", "json"]).stdout)
    assert rep["status"] == "incomplete" and rep["unfinished_cases"] == [] and rep["metrics"] == {}
    assert CliRunner().invoke(cli, ["gate", run_id]).exit_code == 3


def test_bound_and_margins_at_their_exact_boundaries():
    from scipy import stats as sst

    from abtest.reporting.metrics import (drop_bound, min_n_binary_noninferiority,
                                       noninferiority_continuous, pairwise)

    a = {"1": 0.2, "2": 0.4, "3": 0.1, "4": 0.3}
    b = {"1": 0.9, "2": 0.5, "3": 0.6, "4": 0.35}
    ids = list(a)
    p = sst.ttest_rel([b[i] for i in ids], [a[i] for i in ids]).pvalue
    # the bound holds when its p is exactly alpha (reject when p <= alpha)
    assert drop_bound(a, b, ids, {}, p)["holds"] is True
    assert drop_bound(a, b, ids, {}, p * 0.999999)["holds"] is False
    # two pairs are enough for a non-inferiority test
    two = noninferiority_continuous({"1": 0.5, "2": 0.5}, {"1": 0.5, "2": 0.5}, ["1", "2"], 0.05, 0.05)
    assert "note" not in two or two["note"] != "fewer than 2 pairs"
    assert two["p_value"] == pytest.approx(0.25)
    assert min_n_binary_noninferiority(0.0, 0.05) is None
    # first-position wins counted per order: A-first says A, B-first says B
    m, _ = pairwise(["1", "2", "3"], ["A", "B", "A"], ["B", "B", "tie"], [1] * 3, [1] * 3, 0.05)
    assert m["first_position_win_rate"] == pytest.approx(4 / 5)  # A, A; B, B of 5 decided


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
