"""The command line's shared behaviour: run references, --config anywhere, Ctrl-C, closed pipes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install
from support.cli import abtest_popen

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.fixture(autouse=True)
def _brain():
    return install(Brain())


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def one_run() -> str:
    code, out, err = invoke(*RUN)
    assert code == 0, err
    return out.strip().splitlines()[-1]


def test_a_run_is_named_by_id_prefix_or_latest_everywhere(project, tmp_path):
    first = one_run()
    second = one_run()
    by_id = json.loads(invoke("report", second, "--format", "json")[1])
    assert by_id["run_id"] == second
    # a unique prefix and `latest` name the same run
    prefix = second[:-2]
    assert not first.startswith(prefix)
    for ref in ("latest", prefix):
        code, out, err = invoke("report", ref, "--format", "json")
        assert code == 0, err
        assert json.loads(out)["run_id"] == second
    # every command that names a run takes `latest`
    assert invoke("gate", "latest")[0] in (0, 1)
    code, out, err = invoke("export", "latest", "--format", "jsonl", "--out", tmp_path / "ex")
    assert code == 0, err
    assert any(p.endswith(".jsonl") for p in out.split())
    assert invoke("review", "status", "latest")[0] == 0
    code, out, _ = invoke("compare", first, "latest", "--format", "json")
    assert code == 0 and second in out


def test_an_ambiguous_prefix_and_an_empty_store_are_bad_input(project):
    from abtest.store import Store

    code, _, err = invoke("report", "latest")
    assert code == 2 and "results store not found" in err
    Store(Path("results/abtest.duckdb")).close()  # a store with no run in it
    code, _, err = invoke("report", "latest")
    assert code == 2 and "no runs in the store yet" in err and len(err.strip().splitlines()) == 1
    a, b = one_run(), one_run()
    common = os.path.commonprefix([a, b])
    assert common  # run ids start with the date
    code, _, err = invoke("report", common)
    assert code == 2 and "ambiguous" in err and a in err and b in err
    code, _, err = invoke("report", "zz-no-such-run")
    assert code == 2 and "no run 'zz-no-such-run'" in err


def test_config_works_before_and_after_the_command(project):
    one_run()
    other = Path("elsewhere")
    other.mkdir()
    shutil.move("results", other / "results")
    cfg = Path("abtest.yaml").read_text().replace("store: results/abtest.duckdb",
                                                  "store: elsewhere/results/abtest.duckdb")
    assert cfg != Path("abtest.yaml").read_text()
    Path("other.yaml").write_text(cfg)
    # the default config now points at an empty place
    assert invoke("report", "latest")[0] == 2
    for args in (["--config", "other.yaml", "report", "latest"],
                 ["report", "--config", "other.yaml", "latest"],
                 ["report", "latest", "--config", "other.yaml"],
                 ["review", "status", "latest", "--config", "other.yaml"]):
        code, _, err = invoke(*args)
        assert code == 0, (args, err)


def test_ctrl_c_exits_130_and_says_finished_work_is_saved(project, monkeypatch):
    import abtest.running.runner

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(abtest.running.runner, "run", interrupted)
    code, _, err = invoke(*RUN)
    assert code == 130
    assert err.strip() == "abtest: interrupted; finished work is saved (use --resume)"


def test_a_closed_pipe_ends_quietly(tmp_path):
    from abtest.capturing import write_fixture
    from abtest.core.models import Case, Chunk

    # far more output than a pipe holds, so the writer meets the closed pipe
    cases = [Case(id=f"q{i:05d}", question="what is in chunk number %d? " % i * 3,
                  context=[Chunk(id="c", text="t")], corpus_version="v", retriever="r",
                  answerable=True) for i in range(3000)]
    write_fixture(tmp_path / "big", cases, name="big", corpus_version="v", retriever="r")
    env = {k: v for k, v in os.environ.items() if k != "ABTEST_DEBUG"}
    p = abtest_popen(["fixtures", "show", str(tmp_path / "big")],   # a real process, preloaded
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.read(10)
    p.stdout.close()  # the reader goes away, as `| head -c 10` does
    err = p.stderr.read().decode()
    code = p.wait(timeout=120)
    assert "internal error" not in err and "Traceback" not in err and "Exception" not in err, err
    assert code == 141  # 128 + SIGPIPE, as a unix tool ends when its reader goes away
