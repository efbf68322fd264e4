"""Groups through the real run and report (issue 43): repeated cases under new ids are one
group, the report says "N cases in G groups (R repeats)", every paired metric is tested on
the groups, and `report --group-by` regroups a stored run."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def _cases(n_distinct: int, copies: int):
    from abtest.core.models import Case, Chunk

    out = []
    for i in range(n_distinct):
        for k in range(copies):   # the same question and context under another id
            out.append(Case(id=f"q{i:02d}-{k}", question=f"What is fact {i}?", answerable=True,
                            corpus_version="v1", retriever="test", reference_answer=f"fact {i}",
                            category="factual" if i % 2 else "edge",
                            context=[Chunk(id=f"d{i}#c1", text=f"Fact {i} is that {i} is a "
                                                               "number.")]))
    return out


def test_repeats_are_one_group_everywhere_the_report_speaks(tmp_path, monkeypatch):
    install(Brain())
    proj = make_project(tmp_path / "p", _cases(8, 3))
    monkeypatch.chdir(proj)
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code in (0, 1), r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    g = rep["groups"]
    assert (g["n_cases"], g["n_groups"], g["n_repeats"]) == (24, 8, 16)
    assert g["text"] == "24 cases in 8 groups (16 repeats)"
    f = rep["metrics"]["faithfulness"]
    assert f["n"] == 24 and f["n_groups"] == 8
    # 8 groups: the betting interval on the group means (valid, wide), and no licence
    assert f["p_value"] is not None and f["inference"].startswith("betting on the 8 group means")
    assert f["ci_low"] < f["difference"] < f["ci_high"] and f["ci_high"] - f["ci_low"] > 0.1
    assert any("too few groups" in x for x in rep["claim"]["reasons"])
    md = CliRunner().invoke(cli, ["report", "latest"]).stdout
    assert "- Groups: 24 cases in 8 groups (16 repeats)" in md
    assert "faithfulness: 24 cases in 8 groups" in md
    html = CliRunner().invoke(cli, ["report", "latest", "--format", "html"]).stdout
    assert "24 cases in 8 groups (16 repeats)" in html

    # regrouped by another field at report time: two categories, still repeats merged
    rep2 = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json",
                                               "--group-by", "category"]).stdout)
    assert rep2["groups"]["n_groups"] == 2 and rep2["groups"]["group_by"] == "category"
    # a field some cases lack: exit 2, one line naming the case and the field
    bad = CliRunner().invoke(cli, ["report", "latest", "--group-by", "meta.source"])
    assert bad.exit_code == 2
    assert "meta.source" in bad.stderr and "q00-0" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_one_case_per_group_changes_no_figure(tmp_path, monkeypatch):
    """Distinct questions: every group a singleton, the report's figures are the iid ones
    (no group fields on the metrics, no groups line)."""
    install(Brain())
    proj = make_project(tmp_path / "p", _cases(12, 1))
    monkeypatch.chdir(proj)
    assert CliRunner().invoke(cli, RUN).exit_code in (0, 1)
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep["groups"]["n_groups"] == rep["groups"]["n_cases"] == 12
    assert rep["metrics"]["faithfulness"].get("n_groups") is None
    assert "- Groups:" not in CliRunner().invoke(cli, ["report", "latest"]).stdout
