"""The release gate, rule by rule, from a report in which everything passes (one thing
changed per test), and for live runs."""

from __future__ import annotations


import pytest

from abtest.reporting.gate import evaluate_gate
from abtest.core.models import Gates
from support.sample_reports import gate, make_report, rule


def _incident(variant):
    return {"case_id": "q9", "variant": variant, "faithfulness": 0.5, "question": "?",
            "answer": "!", "unsupported": [], "context_ids": []}


def live_report(precision=0.9, recall=0.9, p95=1200.0):
    rep = make_report(kind="live", comparison_kind="live")
    rep["metrics"]["retrieval"] = {"context_precision": {"n": 40, "a": 0.7, "b": precision},
                                   "context_recall": {"n": 40, "a": 0.7, "b": recall}}
    rep["metrics"]["latency"] = {"p50_ms_b": 600.0, "p95_ms_b": p95}
    return rep


def _check(n_b, pass_b, n_a=None, pass_a=None):
    return {"n": min(n_b, n_a or 0), "n_a_applicable": n_a or 0, "n_b_applicable": n_b,
            "n_b_pass": pass_b, "pass_rate_b": pass_b / n_b if n_b else None,
            "pass_rate_a": (pass_a / n_a) if n_a else None}


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
    ({"p95": 6200.0}, "p95_latency_ms", "p95_latency_ms: 6200.000 vs threshold 5000.0"),
    ({"p95": 5000.0}, "p95_latency_ms", "p95_latency_ms: 5000.000 vs threshold 5000.0"),
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


def test_gate_fails_when_faithfulness_not_measured():
    rep = make_report()
    rep["metrics"].pop("faithfulness")
    g = evaluate_gate(rep, Gates())
    assert g["decision"] == "FAIL" and any("faithfulness" in r for r in g["reasons"])


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
