"""The Markdown report of real CLI runs: score summaries, the checks table, a run not marked
complete."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install
from support.sample_reports import invoke


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


def test_markdown_has_score_summaries_table(ran):
    run_id = ran
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


def test_a_run_not_marked_complete_is_incomplete(project):
    """Every case finished but the process died before marking the run complete: the report
    says interrupted (not complete) and estimates nothing."""
    from abtest.store import Store

    install(Brain())
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    run_id = r.stdout.strip().splitlines()[-1]
    with Store("results/abtest.duckdb") as s:
        s.update_run(run_id, status="running")
    rep = json.loads(CliRunner().invoke(cli, ["report", run_id, "--format", "json"]).stdout)
    assert rep["status"] == "interrupted" and rep["unfinished_cases"] == [] and rep["metrics"] == {}
    assert CliRunner().invoke(cli, ["gate", run_id]).exit_code == 3
