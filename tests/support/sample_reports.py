"""A report dict in which everything holds (the claim licensed, the gate passing), for tests
that change exactly one thing and read the one reason it makes: the claim's, the gate's."""

from __future__ import annotations

import copy

from click.testing import CliRunner

from abtest.cli import cli
from abtest.reporting.gate import evaluate_gate
from abtest.core.models import Config, Gates
from abtest.reporting.build import licensed_claim


CFG = Config()  # alpha 0.05; margins coverage 0.05, answerable refusals 0.05, unanswerable 0.10


def judge_validation(kappa=0.85, lo=0.72, n=40, ok=True):
    return {"n_labels": n, "kappa": kappa, "ci_low": lo, "ci_high": min(1.0, 2 * kappa - lo),
            "validated": ok, "reason": None if ok else f"kappa {kappa}, lower 95% limit {lo} < 0.6"}


BASE_REPORT = {
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
    "judge_validation": {"pairwise": judge_validation(0.5, 0.3, ok=False), "faithfulness": judge_validation(0.72, 0.61),
                         "coverage": judge_validation(0.9, 0.8), "abstention": judge_validation(1.0, 1.0),
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
    rep = copy.deepcopy(BASE_REPORT)
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


def invoke(*args):
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr
