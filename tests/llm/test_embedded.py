"""The real embedded model (SmolLM2-135M via xllamacpp) end to end on 3 cases.

Asserts on the pipeline, never on the tiny model's answer quality.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from fakes import has_embedded_model
from fakes import make_project, small_cases

pytestmark = [pytest.mark.embedded,
              pytest.mark.skipif(not has_embedded_model(),
                                 reason="embedded model not installed (run ./scripts/setup)")]

CONFIG = """\
generator: {model: local/smollm2, temperature: 0, max_tokens: 48}
judge: {model: local/smollm2, temperature: 0, max_tokens: 200}
concurrency: 2
max_input_tokens: 2048
store: results/abtest.duckdb
judges: [pairwise, faithfulness, abstention]
allow_self_judge: true
"""


def test_embedded_model_end_to_end(tmp_path, monkeypatch):
    cases = [c for c in small_cases() if c.id in ("q1", "q3", "q4")]
    monkeypatch.chdir(make_project(tmp_path, cases, config=CONFIG))
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code in (0, 3), r.stderr
    run_id = r.stdout.strip().splitlines()[-1]
    rep = json.loads(CliRunner().invoke(cli, ["report", run_id, "--format", "json"]).stdout)
    assert rep["n_cases"] == 3
    resolved = rep["models"]["generator"]["resolved"]
    assert resolved and resolved[0].startswith("smollm2-135m-instruct-q4_1@sha256:")
    assert "/" not in resolved[0].split("@")[0]  # no machine path reaches the report
    assert rep["self_judge"] is True
    assert any("self-judging" in x for x in rep["claim"]["reasons"])
    for row in rep["per_case"]:
        assert row["answer_a"] and row["answer_b"]
    # deterministic at temperature 0: a second run is served entirely from the cache,
    # and a fresh store reproduces the same answers byte for byte
    r2 = CliRunner().invoke(cli, ["--config", "abtest.yaml", "run", "--fixture", "fixtures/small",
                                  "--a", "variants/a.yaml", "--b", "variants/b.yaml"])
    assert r2.exit_code in (0, 3)
    assert ", 0 provider calls" in r2.stderr


def test_embedded_model_is_deterministic_without_cache():
    from abtest.llm import embedded as local_model

    req = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 16,
           "temperature": 0}
    a = local_model.chat(req)["choices"][0]["message"]["content"]
    b = local_model.chat(req)["choices"][0]["message"]["content"]
    assert a == b and a.strip()
