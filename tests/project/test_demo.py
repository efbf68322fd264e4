"""`abtest demo` leaves a working project; --live runs the end-to-end check beside it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from abtest.cli import cli
from support.fakes import Brain, install


def test_demo_with_live_on_a_scripted_model(tmp_path, monkeypatch):
    install(Brain())
    d = tmp_path / "demo"
    r = CliRunner().invoke(cli, ["demo", str(d), "--n", "6", "--model", "fake/gen", "--live"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    for p in ("abtest.yaml", "fixtures/normans/manifest.json", "variants/plain.yaml",
              "variants/grounded.yaml", "results/abtest.duckdb", "data/SOURCE.md", "data/LICENSE.md"):
        assert (d / p).exists(), p
    out = r.stdout
    run_id = out.split("run id: ")[1].split()[0]
    rep = json.loads((d / "results" / f"report-{run_id}.json").read_text())
    # the scripted model: B (grounded) cites, A (plain) does not; both state the same chunk text,
    # so the citing answer wins every pairwise comparison and nothing else differs
    pw = rep["metrics"]["pairwise"]
    assert rep["n_cases"] == 6 and (pw["b_wins"], pw["a_wins"], pw["no_preference"]) == (6, 0, 0)
    assert pw["p_value"] == pytest.approx(st.binomtest(6, 6).pvalue)
    fam = [pw["p_value"]] + [1.0] * 4  # faithfulness, coverage, both refusal rates: no difference
    assert pw["p_holm"] == pytest.approx(multipletests(fam, method="holm")[1][0])
    assert pw["significant"] is False and pw["direction"] is None
    f = rep["metrics"]["faithfulness"]
    assert (f["a"], f["b"], f["difference"], f["p_value"]) == (1.0, 1.0, 0.0, 1.0)
    assert rep["claim"]["licensed"] is False
    assert rep["claim"]["reasons"][0] == "self-judging: the judge model is the generator model"
    # B answers the three unanswerable questions: the out-of-scope rule fails; B cites the first
    # chunk retrieved, so citation accuracy is the share of cases where that is the expected one
    cases = [json.loads(x) for x in (d / "fixtures/normans/cases.jsonl").read_text().splitlines()]
    hit = [c["context"][0]["id"] in c["expected_citations"] for c in cases if c.get("expected_citations")]
    want = ["out_of_scope: 0.000 vs threshold 1.0"]
    if sum(hit) / len(hit) < 0.9:
        want.append(f"citation_accuracy: {sum(hit) / len(hit):.3f} vs threshold 0.9")
    assert rep["gate"]["decision"] == "FAIL" and rep["gate"]["reasons"] == want
    assert (d / "results" / f"report-{run_id}.html").exists()
    assert "frozen claim: " in out and "live claim: " in out
    assert "End to end" in out.split("live claim: ")[1]
    live_id = out.split("live run id: ")[1].split()[0]
    # every other command works in the demo project afterwards
    monkeypatch.chdir(d)
    assert CliRunner().invoke(cli, ["fixtures", "verify", "fixtures/normans"]).exit_code == 0
    assert CliRunner().invoke(cli, ["report", run_id, "--format", "md"]).exit_code == 0
    g = CliRunner().invoke(cli, ["gate", live_id])
    assert g.exit_code == 1 and "out_of_scope: 0.000 vs threshold 1.0" in g.stdout
    h = CliRunner().invoke(cli, ["history", "--format", "json"])
    assert h.exit_code == 0 and run_id in h.stdout


def test_demo_all_judges_shows_every_score(tmp_path, monkeypatch):
    install(Brain())
    monkeypatch.chdir(tmp_path)
    d = tmp_path / "demo"
    # a relative directory, as a user types it
    r = CliRunner().invoke(cli, ["demo", "demo", "--n", "4", "--model", "fake/gen", "--all-judges"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    run_id = r.stdout.split("run id: ")[1].split()[0]
    rep = json.loads((d / "results" / f"report-{run_id}.json").read_text())
    for k in ("pairwise", "faithfulness", "coverage", "abstention", "quality", "relevance", "keywords"):
        assert rep["metrics"].get(k), k
    assert rep["metrics"]["keywords"]["n"] == 4
    s = rep["metrics"]["keywords"]["summary"]
    want = (f"Search-keyword quality (the captured keywords, the same for A and B): average "
            f"{s['average']:.3f}, median {s['median']:.3f} over 4 case(s).")
    md = (d / "results" / f"report-{run_id}.md").read_text()
    assert want in md
    html = CliRunner().invoke(cli, ["--config", str(d / "abtest.yaml"), "report", run_id,
                                    "--format", "html"]).stdout
    assert want in html


def test_demo_fixture_records_no_machine_path(tmp_path):
    install(Brain())
    d = tmp_path / "demo"
    r = CliRunner().invoke(cli, ["demo", str(d), "--n", "2", "--model", "fake/gen"])
    assert r.exit_code == 0, r.stderr
    m = json.loads((d / "fixtures" / "normans" / "manifest.json").read_text())
    assert m["retriever"] == "bm25@k=2 local:results/index.duckdb"
