"""A standing guard: every command `abtest --help` lists is walked with a valid project, a
missing file, a malformed value and a path-like id. A new command without an entry here
fails `test_every_command_has_an_entry`, so none ships without these four checks.

Bad input must give exit 2 and one line (no traceback, no usage block); a valid call must
never end as an internal error.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
EVIL = "../../escaped"
NA = None  # this scenario has no input of that kind for the command (the reason is beside it)

# command path: {"ok": args, "missing": args, "bad": args, "id": args}; "{run}" is the run id
CASES: dict[str, dict[str, list[str] | None]] = {
    "init": {"ok": ["init", "newproj"], "missing": NA,  # creates what is missing
             "bad": ["init", "abtest.yaml"], "id": NA},
    "demo": {"ok": ["demo", "demo-dir", "--n", "3", "--model", "fake/gen"], "missing": NA,
             "bad": ["demo", "demo-dir", "--n", "many"], "id": NA},
    "view": {"ok": NA,  # a server: tests/view/test_view.py serves a store and clicks through it
             "missing": ["view", "--store", "nope.duckdb"],
             "bad": ["view", "--port", "http"], "id": NA},
    "doctor": {"ok": ["doctor", "--no-load"], "missing": NA,  # reports what is missing, line by line
               "bad": ["doctor", "--format", "xml"], "id": NA},
    "index": {"ok": ["index", "corpus.jsonl", "--index", "results/i2.duckdb"],
              "missing": ["index", "nope.jsonl"],
              "bad": ["index", "bad.jsonl", "--index", "results/i3.duckdb"], "id": NA},
    "search": {"ok": ["search", "results/index.duckdb", "Normandy"],
               "missing": ["search", "nope.duckdb", "x"],
               "bad": ["search", "results/index.duckdb", "x", "--k", "lots"], "id": NA},
    "capture": {"ok": ["capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
                       "--out", "fixtures/cap"],
                "missing": ["capture", "nope.jsonl", "--retriever", "local:results/index.duckdb",
                            "--out", "fixtures/cap2"],
                "bad": ["capture", "bad.jsonl", "--retriever", "local:results/index.duckdb",
                        "--out", "fixtures/cap3"], "id": NA},
    "fixtures verify": {"ok": ["fixtures", "verify", "fixtures/small"],
                        "missing": ["fixtures", "verify", "fixtures/nope"],
                        "bad": ["fixtures", "verify", "fixtures/broken"], "id": NA},
    "fixtures seal": {"ok": ["fixtures", "seal", "fixtures/small"],
                      "missing": ["fixtures", "seal", "fixtures/nope"],
                      "bad": ["fixtures", "seal", "fixtures/broken"], "id": NA},
    "fixtures status": {"ok": ["fixtures", "status", "fixtures/small"],
                        "missing": ["fixtures", "status", "fixtures/nope"],
                        "bad": ["fixtures", "status", "fixtures/small", "--format", "xml"],
                        "id": NA},
    "fixtures diff": {"ok": ["fixtures", "diff", "fixtures/small", "fixtures/small"],
                      "missing": ["fixtures", "diff", "fixtures/small", "fixtures/nope"],
                      "bad": ["fixtures", "diff", "fixtures/small", "fixtures/broken"], "id": NA},
    "fixtures show": {"ok": ["fixtures", "show", "fixtures/small"],
                      "missing": ["fixtures", "show", "fixtures/nope"],
                      "bad": ["fixtures", "show", "fixtures/small", "--case", "no-such-case"],
                      "id": NA},
    "fixtures add-unanswerable": {
        "ok": ["fixtures", "add-unanswerable", "fixtures/copy", "--from-answerable", "1"],
        "missing": ["fixtures", "add-unanswerable", "fixtures/nope", "--from-answerable", "1"],
        "bad": ["fixtures", "add-unanswerable", "fixtures/copy", "--from-answerable", "-3"],
        "id": NA},
    "run": {"ok": RUN, "missing": ["run", "--fixture", "fixtures/nope", "--a", "variants/a.yaml",
                                   "--b", "variants/b.yaml"],
            "bad": RUN[:-1] + ["variants/bad.yaml"], "id": RUN + ["--run-id", EVIL]},
    "report": {"ok": ["report", "{run}"], "missing": NA,  # --out is written, not read
               "bad": ["report", "{run}", "--format", "pdf"], "id": ["report", EVIL]},
    "gate": {"ok": ["gate", "{run}"], "missing": ["gate", "{run}", "--thresholds", "nope.yaml"],
             "bad": ["gate", "{run}", "--thresholds", "bad.yaml"], "id": ["gate", EVIL]},
    "export": {"ok": ["export", "{run}", "--out", "exp"], "missing": NA,
               "bad": ["export", "{run}", "--out", "exp2", "--format", "xls"],
               "id": ["export", EVIL, "--out", "exp3"]},
    "merge": {"ok": NA,  # needs shards of one comparison: tests/running/test_shards.py
              "missing": ["merge", "nope.duckdb:x", "--into", "m1"],
              "bad": ["merge", "{run}", "--into", "m2", "--bogus"],
              "id": ["merge", "{run}", "--into", EVIL]},
    "snapshot": {"ok": ["snapshot", "variants/a.yaml", "--fixture", "fixtures/small"],
                 "missing": ["snapshot", "variants/nope.yaml", "--fixture", "fixtures/small"],
                 "bad": ["snapshot", "variants/bad.yaml", "--fixture", "fixtures/small"],
                 "id": NA},
    "judge-check": {"ok": NA,  # needs the licensed FaithBench/LLMBar data: tests/judges/test_judges.py
                    "missing": ["judge-check", "pairwise", "--data", "nope.jsonl"],
                    "bad": ["judge-check", "pairwise", "--data", "bad.jsonl"], "id": NA},
    "review export": {"ok": ["review", "export", "{run}", "--n", "2"], "missing": NA,
                      "bad": ["review", "export", "{run}", "--n", "two"],
                      "id": ["review", "export", EVIL]},
    "review import": {"ok": NA,  # labels need a pack: tests/review/test_review_cli.py
                      "missing": ["review", "import", "{run}", "nope.csv"],
                      "bad": ["review", "import", "{run}", "bad.csv"],
                      "id": ["review", "import", EVIL, "bad.csv"]},
    "review status": {"ok": ["review", "status", "{run}"], "missing": NA,
                      "bad": ["review", "status", "{run}", "--format", "xml"],
                      "id": ["review", "status", EVIL]},
    "golden draft": {"ok": NA,  # writes questions with the judge model: tests/project/test_loop.py
                     "missing": ["golden", "draft", "--docs", "nope.jsonl"],
                     "bad": ["golden", "draft", "--docs", "corpus.jsonl", "--n", "x"], "id": NA},
    "golden confirm": {"ok": NA,  # needs a drafted file: tests/project/test_loop.py
                       "missing": ["golden", "confirm", "nope.jsonl", "--all"],
                       "bad": ["golden", "confirm", "bad.jsonl", "--all"], "id": NA},
    "suggest": {"ok": ["suggest", "{run}", "--variant", "B"], "missing": NA,
                "bad": ["suggest", "{run}", "--variant", "C"], "id": ["suggest", EVIL]},
    "runs": {"ok": ["runs"], "missing": NA, "bad": ["runs", "--format", "xml"], "id": NA},
    "history": {"ok": ["history"], "missing": NA,
                "bad": ["history", "--format", "xml"], "id": NA},
    "compare": {"ok": ["compare", "{run}", "{run}"], "missing": NA,
                "bad": ["compare", "{run}", "{run}", "--format", "xml"],
                "id": ["compare", "{run}", EVIL]},
    "live": {"ok": NA,  # needs two reachable targets: tests/livecheck/test_live.py
             "missing": ["live", "--golden", "nope.jsonl", "--a", "http://127.0.0.1:9/a",
                         "--b", "http://127.0.0.1:9/b"],
             "bad": ["live", "--golden", "questions.jsonl", "--a", "http://127.0.0.1:9/a",
                     "--b", "http://127.0.0.1:9/b", "--timeout-s", "soon"],
             "id": ["live", "--golden", "questions.jsonl", "--a", "http://127.0.0.1:9/a",
                    "--b", "http://127.0.0.1:9/b", "--run-id", EVIL]},
    "serve-demo": {"ok": ["serve-demo", "--index", "results/index.duckdb", "--variant",
                          "variants/a.yaml", "--max-seconds", "0.2"],
                   "missing": ["serve-demo", "--index", "nope.duckdb", "--variant",
                               "variants/a.yaml"],
                   "bad": ["serve-demo", "--index", "results/index.duckdb", "--variant",
                           "variants/a.yaml", "--port", "http"], "id": NA},
}


def _commands(group: click.Group, prefix: str = ""):
    for name, cmd in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + " ")
        else:
            yield path


def test_every_command_has_an_entry():
    listed = set(_commands(cli))
    assert listed == set(CASES), (f"missing: {sorted(listed - set(CASES))}; "
                                  f"stale: {sorted(set(CASES) - listed)}")
    for name, entry in CASES.items():
        assert set(entry) == {"ok", "missing", "bad", "id"}, name


@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    import os

    root = tmp_path_factory.mktemp("every") / "p"
    install(Brain())
    make_project(root)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        corpus = [{"id": f"d{i}", "text": t} for i, t in enumerate(
            ["Normandy is a region in France.", "Rollo was a Viking leader.",
             "The Normans spoke Norman French."])]
        Path("corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
        Path("questions.jsonl").write_text(json.dumps({"id": "q1", "question": "Who was Rollo?"})
                                           + "\n")
        Path("bad.jsonl").write_text('{"id": "x", "text": "fine"}\n{oops\n')
        Path("bad.yaml").write_text("faithfulness: [unclosed\n")
        Path("bad.csv").write_text("item_id,label\n\x00\x01,,,\n")
        Path("variants/bad.yaml").write_text("name: [unclosed\n")
        Path("fixtures/broken").mkdir()
        Path("fixtures/broken/cases.jsonl").write_text("{not json\n")
        import shutil

        shutil.copytree("fixtures/small", "fixtures/copy")
        r = CliRunner().invoke(cli, ["index", "corpus.jsonl"])
        assert r.exit_code == 0, r.output
        r = CliRunner().invoke(cli, RUN + ["--run-id", "r1"])
        assert r.exit_code in (0, 1), r.output
        yield root
    finally:
        os.chdir(cwd)


def _args(args):
    return [a.replace("{run}", "r1") for a in args]


def _invoke(proj, args):
    install(Brain())
    return CliRunner().invoke(cli, _args(args))


def _params(kind):
    return [pytest.param(name, CASES[name][kind], id=name) for name in CASES
            if CASES[name][kind] is not None]


@pytest.mark.parametrize("name, args", _params("ok"))
def test_a_valid_call_never_ends_as_an_internal_error(proj, name, args):
    r = _invoke(proj, args)
    assert r.exit_code in (0, 1, 3), (r.exit_code, r.stdout[-500:], r.stderr)
    assert "internal error" not in r.stderr and "Traceback" not in r.output


def _one_bad_line(r) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout[-500:], r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("abtest: error: "), lines[0]
    assert "Traceback" not in r.output and "internal error" not in r.stderr
    return lines[0]


@pytest.mark.parametrize("name, args", _params("missing"))
def test_a_missing_file_is_named_in_one_line(proj, name, args):
    missing = next(a for a in args if "nope" in a)
    assert missing in _one_bad_line(_invoke(proj, args))


@pytest.mark.parametrize("name, args", _params("bad"))
def test_a_malformed_value_gives_one_line(proj, name, args):
    _one_bad_line(_invoke(proj, args))


@pytest.mark.parametrize("name, args", _params("id"))
def test_a_path_like_id_is_refused_and_nothing_escapes(proj, name, args):
    line = _one_bad_line(_invoke(proj, args))
    assert "not a valid run id" in line and EVIL in line
    assert not (proj.parent / "escaped").exists() and not (proj / "escaped").exists()
    assert not list(proj.parent.parent.glob("escaped*"))
