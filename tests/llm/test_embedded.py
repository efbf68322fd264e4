"""The real embedded model (SmolLM2-135M via xllamacpp) end to end on 3 cases.

Asserts on the pipeline, never on the tiny model's answer quality.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import has_embedded_model
from support.fakes import make_project, small_cases

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
    assert "; 0 provider calls" in r2.stderr


def test_embedded_model_is_deterministic_without_cache():
    from abtest.llm import embedded as local_model

    req = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 16,
           "temperature": 0}
    a = local_model.chat(req)["choices"][0]["message"]["content"]
    b = local_model.chat(req)["choices"][0]["message"]["content"]
    assert a == b and a.strip()


# answers of up to 1,500 tokens (~15 s each on two cores), one call at a time
LONG = (CONFIG.replace("max_tokens: 48", "max_tokens: 1500").replace("concurrency: 2",
                                                                      "concurrency: 1")
        .replace("judges: [pairwise, faithfulness, abstention]", "judges: [pairwise]"))


def test_ctrl_c_stops_a_run_on_the_embedded_model_within_five_seconds(tmp_path):
    """A call to the embedded model takes minutes on two cores (here up to 1,500 tokens): Ctrl-C
    stops it at its next token, the run is stored "stopped" and the case it was answering
    stays unfinished, with nothing of that call stored."""
    import signal
    import subprocess
    import sys
    import time

    from abtest.store import Store

    cases = [c.model_copy(update={"question": "Tell a very long story about Normandy, in "
                                              "great detail, chapter by chapter."})
             for c in small_cases()[:2]]
    proj = make_project(tmp_path, cases, config=LONG)
    proc = subprocess.Popen([sys.executable, "-m", "abtest.cli", "run", "--fixture",
                             "fixtures/small", "--a", "variants/a.yaml", "--b",
                             "variants/b.yaml", "--run-id", "long"], cwd=proj,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr is not None
        for line in proc.stderr:   # the run has begun its first case
            if "run long:" in line:
                break
        time.sleep(4)              # the model is loaded and generating (1,500 tokens: ~15 s)
        assert proc.poll() is None
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[1]
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest
    assert took < 5, took
    assert "run long stopped (SIGINT); finished work is saved (0 of 2 cases finished)" in rest
    st = Store(proj / "results" / "abtest.duckdb", read_only=True)
    try:
        assert st.get_run("long")["status"] == "stopped"
        assert st.generations("long") == [] or all(g["error"] is None and g["answer"]
                                                   for g in st.generations("long"))
        assert not [c for c in st.llm_calls("long") if c["error"]]   # no error was stored
    finally:
        st.close()
