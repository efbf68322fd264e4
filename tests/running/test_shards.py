"""`run --shard i/n` and `abtest merge`: shards run apart (here: two stores, as two machines
would) and merged — from this store, another store file, or a parquet export — give the
report of one run over the same answers."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import CONFIG, Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
RUN_SPECIFIC = ("run_id", "created_at", "generated_at", "calls")


def _ok(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code in (0, 1), (args, r.stderr)   # 1 is a gate FAIL, still a finished run
    return r


def _report(*args):
    r = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(r.stdout)
    return rep, {k: v for k, v in rep.items() if k not in RUN_SPECIFIC}


def test_shards_merged_equal_one_full_run(tmp_path, monkeypatch):
    from abtest.running.shards import in_shard

    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    # the other machine polls batches at its own pace: an operational setting, not the comparison
    (p / "other.yaml").write_text(CONFIG.replace("results/abtest.duckdb", "results/other.duckdb")
                                  + "batch_poll_s: 5\n")
    _ok(*RUN, "--run-id", "full")
    full, same_full = _report("report", "full")
    assert full["status"] == "complete" and full["n_cases"] == 4

    # shard 1/2 here, shard 2/2 on "another machine" (another store)
    _ok(*RUN, "--run-id", "s1", "--shard", "1/2")
    _ok("--config", "other.yaml", *RUN, "--run-id", "s2", "--shard", "2/2")
    s1, _ = _report("report", "s1")
    mine = sorted(c for c in ("q1", "q2", "q3", "q4") if in_shard(c, (1, 2)))
    assert s1["status"] == "incomplete" and s1["n_finished"] == len(mine)
    other = sorted(set(["q1", "q2", "q3", "q4"]) - set(mine))
    assert sorted(s1["unfinished_cases"]) == other
    assert all("in another shard (this run is shard 1/2" in s1["unfinished_reasons"][c][0]
               for c in other)

    r = CliRunner().invoke(cli, ["merge", "s1", "results/other.duckdb:s2", "--into", "m1"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == "m1"
    merged, same = _report("report", "m1")
    assert merged["status"] == "complete" and same == same_full

    # the same shard from a parquet export folder
    r = CliRunner().invoke(cli, ["--config", "other.yaml", "export", "s2", "--out", "exp"])
    assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(cli, ["merge", "s1", "exp", "--into", "m2"])
    assert r.exit_code == 0, r.stderr
    assert _report("report", "m2")[1] == same_full


def test_merge_refuses_what_is_not_one_comparison(tmp_path, monkeypatch):
    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    _ok(*RUN, "--run-id", "s1", "--shard", "1/2")
    _ok(*RUN, "--run-id", "s2", "--shard", "2/2")
    _ok(*RUN[:-1], "variants/a.yaml", "--run-id", "aa", "--shard", "2/2")
    for args, says in ((["s1", "s1"], "shards must not overlap"),
                       (["s1", "aa"], "their variant_b_sha256 differ"),
                       (["s1", "s2", "--into", "s1"], "already exists"),
                       (["s1", "nope.duckdb:x"], "not found"),
                       (["s1", "nope"], "no run 'nope' in the store")):  # no crash on a bad id
        into = [] if "--into" in args else ["--into", "mx"]
        r = CliRunner().invoke(cli, ["merge", *args, *into])
        assert r.exit_code == 2 and says in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1
    r = CliRunner().invoke(cli, ["report", "mx"])
    assert r.exit_code == 2            # nothing half-written
    for bad in ("3/2", "0/2", "x", "1/0"):
        r = CliRunner().invoke(cli, [*RUN, "--shard", bad])
        assert r.exit_code == 2 and "--shard" in r.stderr
    # --models starts one run per model: it takes no --shard, and each run holds --max-cost
    models = ["run", "--fixture", "fixtures/small", "--a", "variants/b.yaml", "--models",
              "fake/gen,fake/weak"]
    r = CliRunner().invoke(cli, [*models, "--shard", "1/2"])
    assert r.exit_code == 2 and "--shard" in r.stderr
    r = CliRunner().invoke(cli, [*models, "--max-cost", "1"])
    assert r.exit_code == 2 and "no price is known for model fake/gen" in r.stderr
    # a shard resumes as the same shard only
    r = CliRunner().invoke(cli, [*RUN, "--run-id", "s1", "--resume"])
    assert r.exit_code == 2 and "same --shard" in r.stderr
