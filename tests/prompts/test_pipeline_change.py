"""Pipeline-change detector and rendered-prompt snapshots: all without any LLM call."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from abtest.cli import cli


def dry(*extra):
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml", "--dry-run", *extra])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_plain_prompt_change_is_a_prompt_comparison(project, brain):
    plan = dry()
    assert plan["comparison_kind"] == "prompt" and plan["pipeline_reasons"] == []
    assert brain.calls == []


def test_changed_context_template_is_a_pipeline_change(project, brain):
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text()
                                       + 'context_template: "{{ chunk.text }} (source {{ chunk.id }})"\n')
    plan = dry()
    assert plan["comparison_kind"] == "pipeline_change"
    assert any("context template" in r for r in plan["pipeline_reasons"])
    assert brain.calls == []


def test_different_context_bytes_detected_per_case(project, brain):
    from abtest.core.config import load_config
    from abtest.running.plan import plan_run

    Path("variants/a.yaml").write_text(Path("variants/a.yaml").read_text()
                                       + 'context_template: "[{{ chunk.id }}]  {{ chunk.text }}"\n')
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text()
                                       + 'context_template: "[{{ chunk.id }}] {{ chunk.text }}"\n')
    plan = plan_run(load_config(), "fixtures/small", "variants/a.yaml", "variants/b.yaml")
    assert plan.comparison_kind == "pipeline_change"
    assert all(a != b for (a, b), _ in map(plan.render, plan.fixture.iter_cases()))
    assert brain.calls == []


def test_overflow_that_would_drop_a_chunk(project, brain):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text()
                                   + "max_input_tokens: 260\n")
    # 260 tokens minus max_tokens 200 leaves 60: the rendered prompts cannot fit
    plan = dry()
    assert plan["comparison_kind"] == "pipeline_change"
    assert any("exceed the input budget" in r for r in plan["pipeline_reasons"])
    assert brain.calls == []


def test_pipeline_change_withholds_claim_in_report(project, brain):
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text()
                                       + 'context_template: "{{ chunk.text }}"\n')
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0
    assert "pipeline change" in r.stderr
    run_id = r.stdout.strip().splitlines()[-1]
    rep = json.loads(CliRunner().invoke(cli, ["report", run_id, "--format", "json"]).stdout)
    assert rep["comparison_kind"] == "pipeline_change"
    assert rep["claim"]["licensed"] is False
    assert any("re-measure end to end; the frozen claim does not apply" in x
               for x in rep["claim"]["reasons"])
    md = CliRunner().invoke(cli, ["report", run_id]).stdout
    assert "This is a pipeline change, re-measure end to end" in md


def test_model_override_is_a_model_comparison(project, brain):
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text() + "model: fake/other\n")
    plan = dry()
    assert plan["comparison_kind"] == "model"


def test_report_shows_prompt_diff_between_a_and_b(project, brain):
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    rep = json.loads(CliRunner().invoke(cli, ["report", r.stdout.strip().splitlines()[-1],
                                              "--format", "json"]).stdout)
    pd = rep["prompt_diff"]
    assert pd["changed_parts"] == ["system", "user"]
    assert "-You are a helpful assistant." in pd["diff"]
    assert "+Answer only from the context." in pd["diff"]


def test_snapshot_create_match_diff_update(project, brain):
    def snap(*extra):
        return CliRunner().invoke(cli, ["snapshot", "variants/b.yaml", "--fixture", "fixtures/small",
                                        *extra])

    r = snap()
    assert r.exit_code == 0 and "created" in r.stdout
    stored = Path("variants/__snapshots__/b.q1.txt")
    assert stored.exists()
    text = stored.read_text()
    assert "===== system =====" in text and "[c1] Normandy is a region in France." in text
    assert snap().exit_code == 0
    # an accidental whitespace change shows up as a diff, exit 1
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text().replace(
        "<question>{{ question }}</question>", "<question> {{ question }}</question>"))
    r = snap()
    assert r.exit_code == 1
    assert "-<question>Where is Normandy?</question>" in r.stdout
    assert "+<question> Where is Normandy?</question>" in r.stdout
    assert snap("--update").exit_code == 0
    assert snap().exit_code == 0
    assert snap("--case", "q3").exit_code == 0  # another case gets its own snapshot
    assert Path("variants/__snapshots__/b.q3.txt").exists()
    assert brain.calls == []


def test_checks_stored_and_reported_before_judges(project, brain):
    from abtest.core.config import load_config
    from abtest.store import Store

    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    run_id = r.stdout.strip().splitlines()[-1]
    s = Store(load_config().store_path, read_only=True)
    rows = s.checks(run_id)
    s.close()
    names = {x["name"] for x in rows}
    assert {"citations_resolve", "citation_accuracy", "must_not_say", "length", "json"} <= names
    acc = {(x["case_id"], x["variant"]): x["passed"] for x in rows if x["name"] == "citation_accuracy"}
    assert acc[("q1", "A")] is False and acc[("q1", "B")] is True
    md = CliRunner().invoke(cli, ["report", run_id]).stdout
    assert md.index("## Deterministic checks") < md.index("## Metric scores")
    rep = json.loads(CliRunner().invoke(cli, ["report", run_id, "--format", "json"]).stdout)
    ca = rep["metrics"]["checks"]["citation_accuracy"]
    assert ca["n10"] == 0 and ca["n01"] == 2 and ca["test"] == "mcnemar_midp"
