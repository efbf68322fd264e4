"""support.built: one build per process, independent copies whose runs name their own folder."""

from __future__ import annotations

import duckdb

from support.built import Built


def test_a_build_runs_once_and_each_copy_is_its_own(tmp_path):
    from abtest.store import Store

    builds = []

    def build(root):
        builds.append(root)
        (root / "results").mkdir()
        (root / "fixtures").mkdir()
        (root / "fixtures" / "cases.jsonl").write_text("original\n")
        with Store(root / "results" / "abtest.duckdb") as s:
            s.create_run({"run_id": "r1", "kind": "frozen",
                          "fixture_path": str(root.resolve() / "fixtures")})
        return {"run_id": "r1"}

    built = Built(lambda name: _fresh(tmp_path, name))
    one, v1 = built.copy("b", build, tmp_path / "one")
    two, v2 = built.copy("b", build, tmp_path / "two")
    assert len(builds) == 1 and v1 == v2 == {"run_id": "r1"} and v1 is not v2
    (one / "fixtures" / "cases.jsonl").write_text("edited\n")
    assert (two / "fixtures" / "cases.jsonl").read_text() == "original\n"
    assert (builds[0] / "fixtures" / "cases.jsonl").read_text() == "original\n"
    for copy in (one, two):
        con = duckdb.connect(str(copy / "results" / "abtest.duckdb"), read_only=True)
        assert con.execute("SELECT fixture_path FROM runs").fetchone()[0] == \
            str(copy.resolve() / "fixtures")
        con.close()


def _fresh(tmp_path, name):
    d = tmp_path / f"{name}-build"
    d.mkdir()
    return d
