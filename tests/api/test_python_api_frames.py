"""Frames (issue 45, item 4): `Report.cases_frame()`, `.metrics_frame()`, `.incidents_frame()`
hold what the store and the report hold (checked against the store's rows read here with
plain SQL, and against the report's JSON), and without pandas each says how to install it."""

from __future__ import annotations

import math
import sys

import duckdb
import pytest

import abtest
from support.fakes import Brain, install, make_project


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    install(Brain())
    p = make_project(tmp_path_factory.mktemp("frames") / "p")   # A answers Mars: an incident
    cfg = str(p / "abtest.yaml")
    h = abtest.run(p / "fixtures" / "small", p / "variants" / "a.yaml",
                   p / "variants" / "b.yaml", config=cfg, run_id="f1")
    assert h.status == "complete"
    return p, h, h.report()


def _store_rows(p, sql, params):
    con = duckdb.connect(str(p / "results" / "abtest.duckdb"), read_only=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _same(x, y) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        return (x is None or (isinstance(x, float) and math.isnan(x))) == \
            (y is None or (isinstance(y, float) and math.isnan(y))) and \
            (x is None or math.isnan(x) or y is None or math.isnan(y) or abs(x - y) < 1e-12)
    return x == y


def test_cases_frame_is_the_stores_rows_one_per_case(run):
    p, h, rep = run
    df = rep.cases_frame()
    assert list(df["case_id"]) == [c.case_id for c in rep.per_case]
    assert list(df["finished"]) == [c.finished for c in rep.per_case]
    assert list(df["question"]) == [c.question for c in rep.per_case]
    assert set(df["run_id"]) == {h.run_id}
    answers = {(c, v): a for c, v, a in _store_rows(
        p, "SELECT case_id, variant, answer FROM generations WHERE run_id = ?", [h.run_id])}
    for _, row in df.iterrows():
        assert row["answer_a"] == answers[(row["case_id"], "A")]
        assert row["answer_b"] == answers[(row["case_id"], "B")]
    judged = _store_rows(p, "SELECT case_id, judge, subject, verdict, score FROM judgments "
                            "WHERE run_id = ? AND sample = 0", [h.run_id])
    pairs = {(j, s) for _, j, s, _, _ in judged}
    assert {"pairwise", "faithfulness", "coverage", "abstention"} <= {j for j, _ in pairs}
    for j, s in pairs:
        assert f"{j}_{s.lower()}_verdict" in df.columns and f"{j}_{s.lower()}_score" in df.columns
    by_case = df.set_index("case_id")
    for cid, j, s, verdict, score in judged:
        got = by_case.loc[cid]
        assert _same(got[f"{j}_{s.lower()}_verdict"], verdict), (cid, j, s)
        assert _same(got[f"{j}_{s.lower()}_score"], score), (cid, j, s)
    # incidents: the report's, by case
    want = {}
    for i in rep.incidents:
        want[i.case_id] = want.get(i.case_id, []) + [i.variant]
    assert want, "the small fixture's Mars answer of A is an incident"
    assert {c: v.split(",") for c, v in zip(df["case_id"], df["incidents"]) if v} == want


def test_metrics_frame_is_the_reports_table(run):
    p, h, rep = run
    df = rep.metrics_frame()
    assert list(df.columns) == ["metric", "a", "b", "difference", "ci_low", "ci_high",
                                "p_value", "p_holm", "n", "n_groups"]
    m = rep.model_dump(mode="json")["metrics"]
    want = [k for k in ("pairwise", "faithfulness", "coverage", "quality", "relevance",
                        "conformance") if m.get(k)]
    want += [f"abstention_{s}" for s in ("answerable", "unanswerable") if m["abstention"][s]]
    assert list(df["metric"]) == want
    for _, row in df.iterrows():
        key = row["metric"]
        src = m["abstention"][key.split("_", 1)[1]] if key.startswith("abstention_") else m[key]
        for col in ("a", "b", "difference", "ci_low", "ci_high", "p_value", "p_holm", "n"):
            assert _same(row[col], src[col]), (key, col)
        assert row["n_groups"] == rep.groups.n_groups


def test_incidents_frame_lists_each_incident_with_its_unsupported_claims(run):
    p, h, rep = run
    df = rep.incidents_frame()
    assert list(df.columns) == ["run_id", "case_id", "variant", "faithfulness", "answer",
                                "unsupported"]
    assert [(c, v) for c, v in zip(df["case_id"], df["variant"])] == \
        [(i.case_id, i.variant) for i in rep.incidents]
    for (_, row), inc in zip(df.iterrows(), rep.incidents):
        claims = [c for c, in _store_rows(
            p, "SELECT claim FROM claims WHERE run_id = ? AND case_id = ? AND variant = ? AND "
               "verdict <> 'supported' ORDER BY idx", [h.run_id, inc.case_id, inc.variant])]
        assert list(row["unsupported"]) == claims == [u.claim for u in inc.unsupported]
        assert row["faithfulness"] == inc.faithfulness and row["answer"] == inc.answer


def test_without_pandas_each_frame_says_how_to_install_it(run, monkeypatch):
    p, h, rep = run
    for mod in [m for m in sys.modules if m == "pandas" or m.startswith("pandas.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "pandas", None)    # `import pandas` raises ImportError
    for name in ("cases_frame", "metrics_frame", "incidents_frame"):
        with pytest.raises(abtest.UserError) as ei:
            getattr(rep, name)()
        msg = str(ei.value)
        assert msg == f"Report.{name}() needs pandas, an optional extra: " \
                      "pip install 'abtest[pandas]'"


def test_a_report_read_from_a_file_names_its_store(run):
    p, h, rep = run
    again = abtest.Report.model_validate_json(rep.to_json())
    with pytest.raises(abtest.UserError, match="name its store"):
        again.cases_frame()
    df = again.cases_frame(store=p / "results" / "abtest.duckdb")
    assert list(df["case_id"]) == [c.case_id for c in rep.per_case]
