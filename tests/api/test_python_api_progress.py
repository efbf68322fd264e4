"""Progress (issue 45, item 3): tqdm bars by default where someone watches (a terminal, a
notebook) for capture, run (cases with calls, tokens and cost so far) and live; `progress=False`
is silent; a callable gets the command line's lines, and an object with `step` the counts
(a custom UI); the CLI prints its stderr lines as before."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import abtest
from abtest.cli import cli
from support.fakes import Brain, install, make_project, small_cases

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    brain = install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    return p, brain


class UI:
    """A custom UI: lines and counts."""

    def __init__(self):
        self.lines: list[str] = []
        self.steps: list[tuple] = []

    def __call__(self, line):
        self.lines.append(line)

    def step(self, stage, done, total, stats=None):
        self.steps.append((stage, done, total, stats() if stats else None))


def _stored_calls(p, run_id):
    import duckdb

    con = duckdb.connect(str(p / "results" / "abtest.duckdb"), read_only=True)
    try:
        return con.execute("SELECT count(*) FILTER (WHERE NOT cached), "
                           "sum(prompt_tokens) + sum(completion_tokens) FROM llm_calls "
                           "WHERE run_id = ?", [run_id]).fetchone()
    finally:
        con.close()


def test_a_custom_ui_gets_counts_with_calls_and_tokens_and_a_callable_the_lines(project):
    p, brain = project
    n = len(small_cases())
    ui = UI()
    h = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="ui",
                   progress=ui)
    assert h.status == "complete"
    runs = [s for s in ui.steps if s[0] == "run"]
    assert [s[1] for s in runs] == list(range(1, n + 1)) and {s[2] for s in runs} == {n}
    calls, tokens = _stored_calls(p, "ui")
    assert runs[-1][3]["calls"] == calls == len(brain.calls) and runs[-1][3]["tokens"] == tokens
    assert not any(re.match(r"\[\d+/\d+\]", x) for x in ui.lines)   # counts went to step
    lines: list[str] = []
    abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="lines",
               progress=lines.append)
    counted = [re.match(r"\[(\d+)/(\d+)\] (\S+): ok$", x) for x in lines]
    assert sorted(int(m.group(1)) for m in counted if m) == list(range(1, n + 1))
    assert sorted(m.group(3) for m in counted if m) == sorted(c.id for c in small_cases())


def test_progress_false_is_silent_and_the_default_shows_bars_where_someone_watches(
        project, capfd, monkeypatch):
    p, _ = project
    abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="quiet",
               progress=False)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    # nobody watching (stderr is no terminal here): the default is quiet too
    abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="unwatched")
    assert capfd.readouterr().err == ""
    monkeypatch.setattr("abtest.core.progress.watched", lambda: True)
    n = len(small_cases())
    abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="bars")
    err = capfd.readouterr().err
    assert re.search(rf"run: 100%.*\b{n}/{n}\b.*calls=\d+.*tokens=\d+", err), err[-600:]
    calls, _ = _stored_calls(p, "bars")
    assert f"calls={calls}," in err        # the stored count (here all cached: 0)
    abtest.capture([{"id": "q1", "question": "where"}, {"id": "q2", "question": "what"}],
                   lambda q, k: [{"id": "c1", "text": f"about {q}"}], "fixtures/cap", k=1)
    err = capfd.readouterr().err
    assert re.search(r"capture: 100%.*\b2/2\b", err), err[-600:]


def test_the_cli_still_prints_its_lines(project):
    n = len(small_cases())
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0, r.stderr
    steps = re.findall(r"^abtest: \[(\d+)/(\d+)\] \S+: ok$", r.stderr, re.M)
    assert sorted(int(i) for i, _ in steps) == list(range(1, n + 1))
    assert {int(t) for _, t in steps} == {n}


def test_a_live_runs_item_lines_fill_its_bar(capfd):
    from abtest.core.progress import Bars

    bars = Bars("live")
    bars("asking 3 golden questions")              # a line that is not a count prints
    for i in (1, 2, 3):
        bars(f"[{i}/3] g{i} A: 120 ms (total), 2 chunks")
    assert bars.bars["live"].n == 3 and bars.bars["live"].total == 3
    bars.close()
    err = capfd.readouterr().err
    assert "abtest: asking 3 golden questions" in err and re.search(r"live: 100%.*\b3/3\b", err)


def test_review_export_reports_its_stages_and_writes_the_pack_the_cli_writes(project, tmp_path):
    p, _ = project
    h = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", progress=False)
    ui = UI()
    pack = abtest.review_export(h.run_id, tmp_path / "api", n=5, progress=ui)
    assert [s[:3] for s in ui.steps] == [("review export", 1, 2), ("review export", 2, 2)]
    r = CliRunner().invoke(cli, ["review", "export", h.run_id, "--n", "5", "--out",
                                 str(tmp_path / "cli")])
    assert r.exit_code == 0, r.stderr
    for name in ("items.jsonl", "labels.csv"):
        assert (tmp_path / "api" / name).read_text() == (tmp_path / "cli" / name).read_text()
    assert f"{pack['n_items']} items to label" in r.stderr
    assert f"abtest review import {h.run_id} FILE" in r.stderr


def test_a_notebook_without_ipywidgets_gets_text_bars_and_no_iprogress_warning(
        project, capfd, monkeypatch):
    """tqdm.auto in a kernel without ipywidgets warns "IProgress not found" and falls back to
    text: abtest takes the text bar itself, with no warning (ipywidgets is the `notebook`
    extra)."""
    import importlib.util
    import sys
    import types
    import warnings

    real = importlib.util.find_spec
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ipywidgets" else real(name, *a))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="nb")
    assert h.status == "complete"
    assert not [w for w in caught if "IProgress" in str(w.message)]
    err = capfd.readouterr().err
    assert "IProgress" not in err and re.search(r"run: 100%", err), err[-400:]


def test_a_sequential_run_fills_one_bar_over_its_cases_with_the_look_in_its_name(
        tmp_path, monkeypatch):
    from abtest.core.progress import Bars
    from support.fakes import many_cases

    install(Brain())
    monkeypatch.chdir(make_project(tmp_path / "s", many_cases(60)))
    seen: list[tuple] = []

    class Watched(Bars):
        def step(self, stage, done, total, stats=None, desc=None):
            seen.append((stage, done, total, desc))
            super().step(stage, done, total, stats, desc=desc)

        def close(self):
            self.kept = dict(self.bars)
            super().close()

    bars = Watched("run")
    h = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", sequential=True,
                   progress=bars)
    assert h.status == "complete"
    assert list(bars.bars) == ["run"]                     # one bar, not one per look
    assert {t for _, _, t, _ in seen} == {60}             # over every case it may take
    looks = [d for _, _, _, d in seen]
    assert looks[0] == "run (look 1)" and len(set(looks)) == h.report().sequential.looks_done
    dones = [d for _, d, _, _ in seen]
    assert dones == sorted(dones) and dones[-1] == h.result.n_used   # it counts on, look to look

