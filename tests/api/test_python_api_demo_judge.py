"""No silent fallback judge (issue 45, item 8): a run whose judge is the embedded model only
because the config names none warns once (the API through `warnings.warn`, the CLI as one
stderr line) and its report says so at the top; `judge: embedded` set on purpose, or the
demo's own config, is silent. The embedded provider is replaced by the fake brain here, so
the run takes seconds and no model is loaded."""

from __future__ import annotations

import json
import warnings

import pytest
from click.testing import CliRunner

import abtest
from abtest.cli import cli
from support.fakes import CONFIG, Brain, install, make_project

# the fake project's config without its judge line: the case this file is about
NO_JUDGE = "".join(line for line in CONFIG.splitlines(keepends=True)
                   if not line.startswith("judge:"))
RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.fixture
def embedded_is_the_brain(monkeypatch):
    """`local/…` (the embedded model) answered by the fake brain for this test only."""
    from abtest.llm import register_scripted_provider
    from abtest.llm.provider import TEST_PROVIDERS, get_litellm, register_providers

    brain = install(Brain())
    register_providers()                      # the real embedded entry, registered first
    lit = get_litellm()
    monkeypatch.setattr(lit, "custom_provider_map", list(lit.custom_provider_map))
    monkeypatch.setitem(TEST_PROVIDERS, "local", brain)
    register_scripted_provider("local", brain)
    return brain


def _judge_models(brain) -> set[str]:
    return {c["req"]["model"] for c in brain.calls if c["req"].get("response_format")}


def test_an_unconfigured_judge_warns_once_and_the_report_says_so_first(
        tmp_path, monkeypatch, embedded_is_the_brain):
    p = make_project(tmp_path / "p", config=NO_JUDGE)
    monkeypatch.chdir(p)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        h = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml")
    assert h.status == "complete"
    assert any("smollm2" in m for m in _judge_models(embedded_is_the_brain))   # it did judge
    ours = [w for w in seen if issubclass(w.category, abtest.AbtestWarning)]
    assert len(ours) == 1 and "for demonstration only" in str(ours[0].message)
    rep = h.report()
    assert rep.demo_judge and rep.demo_judge.startswith("Demonstration only: the judge is the "
                                                         "embedded model")
    md = rep.to_markdown().splitlines()
    assert md[0].startswith("# abtest report") and md[2] == f"> **{rep.demo_judge}**"
    assert rep.to_html().index('id="demo-judge"') < rep.to_html().index('id="summary"')
    assert rep.demo_judge[:40] in rep._repr_markdown_()
    # the CLI: one line on stderr, the report key in its JSON
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "demonstration only" in ln]
    assert lines == ["abtest: warning: the judge is the embedded model because the config "
                     "names none: its verdicts are for demonstration only (set `judge:` to a "
                     "real model, or `judge: embedded` to mean it)"], r.stderr
    out = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert out["demo_judge"] == rep.demo_judge


def test_judge_embedded_on_purpose_is_silent(tmp_path, monkeypatch, embedded_is_the_brain):
    p = make_project(tmp_path / "p", config=NO_JUDGE + "judge: embedded\n")
    monkeypatch.chdir(p)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        h = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml")
    assert h.status == "complete"
    assert any("smollm2" in m for m in _judge_models(embedded_is_the_brain))
    assert not [w for w in seen if issubclass(w.category, abtest.AbtestWarning)]
    assert h.report().demo_judge is None
    assert "demo_judge" not in json.loads(h.report().to_json())
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0 and "demonstration only" not in r.stderr


def test_the_demo_and_a_configured_judge_do_not_count_as_a_fallback():
    import yaml

    from abtest.project.demo import DEMO_CONFIG
    from abtest.core.models import Config

    demo = Config.model_validate(yaml.safe_load(DEMO_CONFIG % {"model": "local/smollm2"}))
    assert demo.judge.model == "local/smollm2" and not demo.judge_is_fallback()
    assert Config().judge_is_fallback()
    assert not Config(judges=[]).judge_is_fallback()          # nothing judges: nothing to warn
    assert not Config.model_validate({"judge": {"model": "openai/x"}}).judge_is_fallback()
    assert Config.model_validate({"judge": "embedded"}).judge == Config().judge
