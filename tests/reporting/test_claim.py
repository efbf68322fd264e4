"""The licensed claim, a pure function of a report dict: every test starts from one report in
which everything holds and changes exactly one thing, so the single withheld reason names
what changed."""

from __future__ import annotations


import pytest

from abtest.core.models import Config
from abtest.reporting.build import licensed_claim
from support.sample_reports import CFG, claim, make_report, withheld
from support.sample_reports import judge_validation as _val


def test_licensed_when_everything_holds():
    c = claim(make_report())
    assert c["licensed"] is True and c["reasons"] == []
    s = c["sentence"]
    assert s.startswith("Given these contexts, variant B was more faithful and no less complete "
                        "than A, paired over 40 questions")
    assert "faithfulness +0.080" in s and "95% CI 0.030 to 0.130" in s and "Holm p = 0.004" in s
    # each condition's own N: coverage rests on the cases with key points only (34 of 40)
    assert "coverage B − A -0.005 over 34 questions, margin 0.05" in s
    assert "refusals on answerable questions B − A +0.000 over 60, margin 0.05" in s
    assert "correct abstention on unanswerable questions B − A +0.500 over 30, margin 0.1" in s
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
    assert "lower one-sided 95% limit -0.090 ≤ −0.05 (the margin)" in r


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
    assert "upper one-sided 95% limit 0.180 ≥ 0.05 (the margin)" in r


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
    assert "lower one-sided 95% limit -0.350 ≤ −0.1" in r


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


def test_claim_withheld_when_coverage_has_no_pairs():
    from abtest.core.models import Config

    rep = make_report()
    rep["metrics"]["coverage"] = {"difference": None, "n": 0}
    c = licensed_claim(rep, Config())
    assert not c["licensed"] and any("coverage was not measured" in r for r in c["reasons"])


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
