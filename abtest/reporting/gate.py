"""The release gate over one run's report: PASS (0) / FAIL (1) / INCOMPLETE (3).

The candidate is variant B. A metric a frozen run cannot measure is 'not
applicable' and never counts as passed; an incident, a missing out-of-scope set, a
deterministic check B defines failing on more than its allowance (gates.checks) or a
Holm-family metric significantly worse for B than for A blocks PASS (absolute bars alone
pass a B that refuses most answerable questions yet stays faithful on the rest); an
incomplete run is never passed. Values are compared at the precision the report prints
them.
"""

from __future__ import annotations

from abtest.core.fmt import num, signed
from abtest.core.models import Gates
from abtest.reporting.metrics import metric_at
from abtest.reporting import incidents as _incidents


PRECISION = 3  # the report prints rates with 3 decimals; a bar is compared at that precision


def _rule(name, value, threshold, op, *, note=None) -> dict:
    if value is None:
        return {"name": name, "value": None, "threshold": threshold, "status": "not_applicable",
                "note": note or "not measurable in this run"}
    # 0.7999999 prints as 0.800 and must not fail a 0.80 bar
    shown = round(value, PRECISION) if op == ">=" else value
    ok = shown >= threshold if op == ">=" else value < threshold
    return {"name": name, "value": value, "threshold": threshold, "op": op,
            "status": "pass" if ok else "fail", **({"note": note} if note else {})}


def regressions(report: dict) -> list[str]:
    """Each metric of the report's Holm family that is significantly worse for B than for A
    (after Holm), by its direction: a rise in refusals of answerable questions is worse."""

    out = []
    for key in (report.get("holm") or {}).get("family") or []:
        mm = metric_at(report.get("metrics") or {}, key) or {}
        d = mm.get("direction")
        if d is None:
            continue
        if (d == "A") if mm.get("better", "higher") == "higher" else (d == "B"):
            out.append(f"{key} B − A {signed(mm.get('difference'))} (Holm p = "
                       f"{num(mm.get('p_holm'))})")
    return out


def _regression_rule(report: dict) -> dict:
    """FAIL when B is significantly worse than A on any metric of the Holm family; not
    applicable until the family is tested (an incomplete run estimates nothing)."""

    m = report.get("metrics") or {}
    tested = [k for k in (report.get("holm") or {}).get("family") or []
              if (metric_at(m, k) or {}).get("p_holm") is not None]
    if report.get("status") != "complete" or not tested:
        return {"name": "no_regression", "value": None, "threshold": 1.0, "status":
                "not_applicable", "note": "no Holm-family metric tested in this run"}
    worse = regressions(report)
    return {"name": "no_regression", "value": float(len(worse)), "threshold": 1.0, "op": "<",
            "status": "fail" if worse else "pass",
            "note": ("significantly worse for B: " + "; ".join(worse)) if worse else
            f"no metric of the Holm family ({', '.join(tested)}) significantly worse for B"}


def evaluate_gate(report: dict, gates: Gates) -> dict:
    m = report.get("metrics", {})
    live = report.get("kind") == "live"
    rules = []
    f = m.get("faithfulness") or {}
    if f.get("b") is None:
        rules.append({"name": "faithfulness", "value": None, "threshold": gates.faithfulness,
                      "status": "fail", "note": "faithfulness not measured: the gate cannot pass "
                      "without it"})
    else:
        # B over all its scored answers (b_all), not only those A scored too: where A refused,
        # B's answers count as well (a report from before b_all: the paired mean)
        b_all = f.get("b_all", f.get("b"))
        n_all, n = f.get("n_b_all"), f.get("n")
        rules.append(_rule("faithfulness", b_all, gates.faithfulness, ">=",
                           note=(f"over all {n_all} of B's scored answers ({n} paired)"
                                 if n_all is not None and n_all != n else None)))
    rel = m.get("relevance") or m.get("answer_relevance") or {}
    rules.append(_rule("answer_relevance", rel.get("b"), gates.answer_relevance, ">=",
                       note=None if rel else "relevance judge not enabled"))
    retr = m.get("retrieval") or {}
    for key, thr in (("context_precision", gates.context_precision),
                     ("context_recall", gates.context_recall)):
        rules.append(_rule(key, (retr.get(key) or {}).get("b") if live else None, thr, ">=",
                           note=None if live else "retrieval metric: measurable only on a live run"))
    ab_un = (m.get("abstention") or {}).get("unanswerable") or {}
    oos_n = ab_un.get("n") or 0
    if oos_n == 0:
        rules.append({"name": "out_of_scope", "value": None, "threshold": gates.out_of_scope,
                      "status": "fail", "note": "no out-of-scope (unanswerable) cases: the gate "
                      "cannot pass without them"})
    else:
        rules.append(_rule("out_of_scope", ab_un.get("b"), gates.out_of_scope, ">="))
    checks = m.get("checks") or {}
    ca = checks.get("citation_accuracy") or {}
    has_ca = ca.get("n_b_applicable")
    rules.append(_rule("citation_accuracy", ca.get("pass_rate_b") if has_ca else None,
                       gates.citation_accuracy, ">=",
                       note=None if has_ca else "no case has expected_citations"))
    for name, c in checks.items():  # every other deterministic check B defines
        if name == "citation_accuracy" or not c.get("n_b_applicable"):
            continue
        rules.append(_rule(f"check:{name}", c.get("pass_rate_b"), gates.checks, ">=",
                           note=f"{c.get('n_b_pass')} of {c['n_b_applicable']} B answers pass"))
    rules.append(_regression_rule(report))
    lat = (m.get("latency") or {}).get("p95_ms_b") if live else None
    rules.append(_rule("p95_latency_ms", lat, gates.p95_latency_ms, "<",
                       note=None if live else "latency of the real system: measurable only live"))
    if report.get("status") != "complete":
        # nothing is estimated from an incomplete run: a rule without a value is not measured
        # yet, not failed (there are out-of-scope cases; their figures are withheld)
        for r in rules:
            if r["value"] is None and r["status"] == "fail":
                r.update(status="not_applicable",
                         note="not measured yet: the run is incomplete, nothing is estimated")

    incidents = _incidents.of(report, "B")
    reasons = [f"{r['name']}: {r['value']:.{PRECISION}f} vs threshold {r['threshold']}"
               if r["value"] is not None and r["name"] != "no_regression"
               else f"{r['name']}: {r.get('note')}" for r in rules if r["status"] == "fail"]
    if incidents:
        reasons.append(f"{len(incidents)} hallucination incident(s) in B (faithfulness < "
                       f"{gates.incident_faithfulness})")
    if report.get("status") != "complete":
        decision = "INCOMPLETE"
        reasons.insert(0, f"incomplete run: {len(report.get('unfinished_cases', []))} case(s) "
                          "unfinished; nothing is estimated")
    elif reasons:
        decision = "FAIL"
    else:
        decision = "PASS"
    return {"decision": decision, "exit_code": {"PASS": 0, "FAIL": 1, "INCOMPLETE": 3}[decision],
            "rules": rules, "incidents_b": len(incidents), "reasons": reasons}
