"""The improvement loop: golden drafts, confirmation, suggestions, history, compare."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def schema_name(req) -> str | None:
    return ((req.get("response_format") or {}).get("json_schema") or {}).get("name")


# --------------------------------------------------------------------------- golden
TOPICS = ["returns", "shipping", "warranty"]


def make_docs(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for t in TOPICS:
        paras = [f"# {t.title()} policy"]
        for k in range(1, 15):
            paras.append(f"Rule {k} of the {t} policy: customers may do thing {k} within {k + 1} days "
                         f"of delivery, except in case {k}.")
        (docs / f"{t}.md").write_text("\n\n".join(paras) + "\n")
    (docs / "notes.txt").write_text("The office opens at nine on weekdays and closes at five.\n\n"
                                    "Since 2024 the help desk also answers by chat during the day.\n")
    (docs / "image.png").write_bytes(b"\x89PNG not text")
    return docs


def golden_brain(brain: Brain) -> Brain:
    def override(messages, req):
        if schema_name(req) != "draftreply":
            return None
        prompt = messages[-1]["content"]
        cat = re.search(r"^Category: (\S+)", prompt, re.M).group(1)
        ids = re.findall(r"^\[([^\]]+)\]", prompt, re.M)
        q = f"In the {cat} sense, what do {' and '.join(ids)} say?"
        if cat == "out-of-scope":
            return {"question": f"What is the refund policy for gift cards near {ids[0]}?",
                    "answerable": False, "reference_answer": "", "relevant_chunk_ids": [],
                    "expected_citations": [], "key_points": []}
        return {"question": q, "answerable": True, "reference_answer": f"See {ids[0]}.",
                "relevant_chunk_ids": ids + ["made-up#p9"], "expected_citations": ids[:1],
                "key_points": [f"fact from {ids[0]}"]}
    brain.override = override
    return brain


def test_category_targets_round_by_largest_remainder():
    from abtest.capturing.golden import category_targets

    assert category_targets(30) == {"factual": 12, "multi_chunk": 6, "out_of_scope": 5, "edge": 4,
                                    "temporal": 3}
    assert category_targets(40) == {"factual": 16, "multi_chunk": 8, "out_of_scope": 6, "edge": 6,
                                    "temporal": 4}
    for n in range(1, 60):
        assert sum(category_targets(n).values()) == n


def test_paragraph_chunking_and_ids(tmp_path):
    from abtest.capturing.golden import load_docs

    chunks = load_docs(make_docs(tmp_path))
    ids = [c.id for c in chunks]
    assert ids[0] == "notes.txt#p1" and "notes.txt#p2" in ids and "returns.md#p15" in ids
    assert not any("image.png" in i for i in ids)
    assert len(ids) == len(set(ids)) == 2 + 3 * 15


def test_draft_respects_shares_marks_drafts_and_is_capturable(project, brain):
    golden_brain(brain)
    docs = make_docs(project)
    code, out, err = invoke("golden", "draft", "--docs", docs, "--n", 30, "--out", "golden.json",
                            "--corpus-out", "corpus.jsonl")
    assert code == 0, err
    items = json.loads(Path("golden.json").read_text())
    assert len(items) == 30
    cats = {c: sum(1 for i in items if i["category"] == c)
            for c in ("factual", "multi_chunk", "out_of_scope", "edge", "temporal")}
    assert cats == {"factual": 12, "multi_chunk": 6, "out_of_scope": 5, "edge": 4, "temporal": 3}
    assert all(i["draft"] is True for i in items)
    assert len({i["id"] for i in items}) == 30
    known = {json.loads(line)["id"] for line in Path("corpus.jsonl").read_text().splitlines()}
    for i in items:
        assert set(i) >= {"id", "question", "answerable", "category", "reference_answer",
                          "relevant_chunk_ids", "expected_citations", "draft"}
        assert set(i["relevant_chunk_ids"]) <= known  # the invented id was dropped
        if i["category"] == "out_of_scope":
            assert i["answerable"] is False and i["relevant_chunk_ids"] == []
            assert i["reference_answer"]  # the refusal the assistant should give
        else:
            assert i["answerable"] is True and i["relevant_chunk_ids"]
            assert set(i["expected_citations"]) <= set(i["relevant_chunk_ids"])
        if i["category"] == "multi_chunk":
            assert len(i["relevant_chunk_ids"]) >= 2
    # the judge model drafted through the gateway with the versioned prompt
    drafts = [c for c in brain.calls if schema_name(c["req"]) == "draftreply"]
    assert len(drafts) == 30 and all(c["req"]["model"] == "judge" for c in drafts)
    assert "warning" not in err
    # capture accepts the file and the drafts stay labelled on the fixture
    code, _, err = invoke("index", "corpus.jsonl", "--index", "results/index.duckdb")
    assert code == 0, err
    code, _, err = invoke("capture", "golden.json", "--retriever", "local:results/index.duckdb",
                          "--out", "fixtures/gold")
    assert code == 0, err
    from abtest.capturing import load_fixture
    from abtest.capturing.golden import draft_summary, is_draft_fixture

    fx = load_fixture("fixtures/gold")
    assert is_draft_fixture(fx.cases) and is_draft_fixture([c.model_dump() for c in fx.cases])
    assert draft_summary(fx.cases)["n_draft"] == 30


def test_draft_is_seeded_and_cached(project, brain, tmp_path):
    golden_brain(brain)
    docs = make_docs(project)
    assert invoke("golden", "draft", "--docs", docs, "--n", 10, "--out", "g1.json")[0] == 0
    n_calls = len(brain.calls)
    assert invoke("golden", "draft", "--docs", docs, "--n", 10, "--out", "g2.json")[0] == 0
    assert Path("g1.json").read_text() == Path("g2.json").read_text()
    assert len(brain.calls) == n_calls  # every reply came from the store's cache


def test_existing_file_is_extended_not_replaced(project, brain):
    golden_brain(brain)
    docs = make_docs(project)
    mine = [{"id": "mine_1", "question": "Who signs the returns form?", "answerable": True,
             "category": "factual", "reference_answer": "The manager.", "draft": False,
             "tags": ["hand-written"]},
            {"id": "q_007", "question": "Is there a policy for Mars?", "answerable": False,
             "category": "out_of_scope", "draft": False}]
    Path("golden.json").write_text(json.dumps(mine))
    code, _, err = invoke("golden", "draft", "--docs", docs, "--n", 30, "--out", "golden.json")
    assert code == 0, err
    items = json.loads(Path("golden.json").read_text())
    assert items[:2] == mine  # kept as they were, first
    assert len(items) == 30
    cats = [i["category"] for i in items]
    assert cats.count("factual") == 12 and cats.count("out_of_scope") == 5
    assert all(i["draft"] is True for i in items[2:])
    assert len({i["id"] for i in items}) == 30 and "q_008" in {i["id"] for i in items}
    before = Path("golden.json").read_text()
    # grow it: only the shortfall is drafted, nothing is lost
    code, out, err = invoke("golden", "draft", "--docs", docs, "--n", 40, "--out", "golden.json")
    assert code == 0, err
    grown = json.loads(Path("golden.json").read_text())
    assert grown[:30] == json.loads(before) and len(grown) == 40
    assert [i["category"] for i in grown].count("multi_chunk") == 8
    # already at the shares: nothing drafted, file untouched
    code, out, _ = invoke("golden", "draft", "--docs", docs, "--n", 40, "--out", "golden.json")
    assert code == 0 and "nothing to draft" in out


def test_small_sets_warn(project, brain):
    golden_brain(brain)
    docs = make_docs(project)
    code, _, err = invoke("golden", "draft", "--docs", docs, "--n", 5, "--out", "tiny.json")
    assert code == 0 and "proof of concept" in err and "below 10" in err
    code, _, err = invoke("golden", "draft", "--docs", docs, "--n", 12, "--out", "poc.json")
    assert code == 0 and "production gate" in err


@pytest.mark.parametrize("setup, expect", [
    (lambda p: None, "documents not found"),
    (lambda p: (p / "empty").mkdir(), "no .txt or .md files"),
    (lambda p: (p / "c.jsonl").write_text('{"id": "a", "text": "fine"}\n{"id": "b"\n'), "line 2"),
    (lambda p: (p / "c.jsonl").write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n'),
     "duplicate chunk id"),
    (lambda p: (p / "docs.csv").write_text("id,text\n"), "expected a folder"),
])
def test_bad_docs_input_exits_2_and_writes_nothing(project, brain, setup, expect):
    golden_brain(brain)
    setup(project)
    arg = {"documents not found": "missing", "no .txt or .md files": "empty",
           "expected a folder": "docs.csv"}.get(expect, "c.jsonl")
    code, _, err = invoke("golden", "draft", "--docs", arg, "--out", "golden.json")
    assert code == 2, err
    assert expect in err and "Traceback" not in err
    assert not Path("golden.json").exists() and not brain.calls


def test_bad_existing_golden_file_exits_2(project, brain):
    docs = make_docs(project)
    Path("golden.json").write_text('[{"id": "x", "question": ""}]')
    code, _, err = invoke("golden", "draft", "--docs", docs, "--out", "golden.json")
    assert code == 2 and "golden.json" in err and "question" in err


def test_unusable_replies_keep_finished_work_and_exit_3(project, brain):
    golden_brain(brain)
    inner = brain.override

    def override(messages, req):
        if schema_name(req) == "draftreply" and "Category: temporal" in messages[-1]["content"]:
            return {"question": "When?", "answerable": False, "reference_answer": "",
                    "relevant_chunk_ids": [], "expected_citations": []}
        return inner(messages, req)
    brain.override = override
    docs = make_docs(project)
    code, _, err = invoke("golden", "draft", "--docs", docs, "--n", 10, "--out", "golden.json")
    assert code == 3 and "could not be drafted" in err
    items = json.loads(Path("golden.json").read_text())
    assert len(items) == 9 and "temporal" not in {i["category"] for i in items}


def test_confirm_flips_draft_flags(project):
    items = [{"id": f"q_00{k}", "question": f"Question {k}?", "draft": True} for k in range(1, 5)]
    Path("golden.json").write_text(json.dumps(items))
    code, out, _ = invoke("golden", "confirm", "golden.json", "--ids", "q_001,q_003")
    assert code == 0 and "confirmed 2" in out
    got = {i["id"]: i["draft"] for i in json.loads(Path("golden.json").read_text())}
    assert got == {"q_001": False, "q_002": True, "q_003": False, "q_004": True}
    before = Path("golden.json").read_text()
    code, _, err = invoke("golden", "confirm", "golden.json", "--ids", "q_002,nope")
    assert code == 2 and "nope" in err and Path("golden.json").read_text() == before
    code, _, err = invoke("golden", "confirm", "golden.json")
    assert code == 2 and "--all" in err
    code, out, _ = invoke("golden", "confirm", "golden.json", "--all")
    assert code == 0 and "0 of 4 still draft" in out
    assert all(i["draft"] is False for i in json.loads(Path("golden.json").read_text()))


# --------------------------------------------------------------------------- runs
def run_ok(*extra, fixture="fixtures/small", b="variants/b.yaml"):
    code, out, err = invoke("run", "--fixture", fixture, "--a", "variants/a.yaml", "--b", b, *extra)
    assert code == 0, err
    return out.strip().splitlines()[-1]


def test_suggest_writes_valid_variant_and_prints_diff(project, brain):
    run_id = run_ok()
    seen = {}

    def override(messages, req):
        if schema_name(req) != "suggestion":
            return None
        prompt = messages[-1]["content"]
        seen["prompt"] = prompt
        system = re.search(r"<current_system>\n(.*?)\n</current_system>", prompt, re.S).group(1)
        user = re.search(r"<current_user>\n(.*?)\n</current_user>", prompt, re.S).group(1)
        return {"system": system + "\nKeep answers under 80 words.", "user": user,
                "edits": ["added a length limit (formatting drift)"], "rationale": "small fix"}
    brain.override = override
    before = Path("variants/b.yaml").read_text()
    code, out, err = invoke("suggest", run_id, "--variant", "B")
    assert code == 0, err
    target = Path("variants/grounded-suggested.yaml")
    assert target.exists() and Path("variants/b.yaml").read_text() == before  # never replaced
    from abtest.prompts.variants import load_variant

    lv = load_variant(target)
    assert lv.name == "grounded-suggested"
    assert "Keep answers under 80 words." in lv.variant.system
    assert "{{ context }}" in lv.variant.user and "<context>" in lv.variant.user  # tags survive
    assert "+  Keep answers under 80 words." in out and out.startswith("--- variants/b.yaml")
    assert "-  Answer only" not in out  # untouched lines are context, not edits
    # the model saw the report: headline numbers and the current templates
    assert "Pairwise (blind, both orders)" in seen["prompt"] and "{{ question }}" in seen["prompt"]
    # a second suggestion does not silently overwrite the first
    code, _, err = invoke("suggest", run_id)
    assert code == 2 and "--force" in err


def test_suggest_refuses_invalid_templates(project, brain):
    run_id = run_ok()

    def override(messages, req):
        if schema_name(req) == "suggestion":
            return {"system": "Be brief.", "user": "Question: {{ question }} {{ secret }}",
                    "edits": ["x"], "rationale": "y"}
        return None
    brain.override = override
    code, _, err = invoke("suggest", run_id, "--variant", "grounded")
    assert code == 3 and "secret" in err
    assert not Path("variants/grounded-suggested.yaml").exists()
    # the model was told what was wrong once (one repair)
    asks = [c for c in brain.calls if schema_name(c["req"]) == "suggestion"]
    assert len(asks) == 2 and "cannot be used" in asks[1]["messages"][-1]["content"]


def test_suggest_refuses_changed_variant(project, brain):
    run_id = run_ok()
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text() + "\n# edited\n")
    code, _, err = invoke("suggest", run_id)
    assert code == 2 and "changed since run" in err


def flip_q1(messages, req):
    """Run 2's judge prefers the uncited answer on q1 only."""
    if schema_name(req) == "pairwiseverdict" and "Where is Normandy?" in messages[-1]["content"]:
        prompt = messages[-1]["content"]
        r1 = re.search(r"<response_1>\n?(.*?)\n?</response_1>", prompt, re.S).group(1)
        return {"winner": "2" if "[" in r1 else "1", "margin": 0.9, "rationale": "flipped"}
    return None


def test_history_and_compare(project, brain):
    run1 = run_ok()
    # a different judge model string in run 2 so the cache does not replay run 1's verdicts
    cfg = Path("abtest.yaml")
    cfg.write_text(cfg.read_text().replace("fake/judge", "fake/judge2"))
    brain.override = flip_q1
    run2 = run_ok()

    code, out, err = invoke("history", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["run_id"] for r in rows] == [run1, run2]
    r1, r2 = rows
    assert r1["pairwise"]["b_wins"] == 3 and r1["pairwise"]["ties"] == 1
    assert r1["pairwise"]["p_value"] == pytest.approx(0.25)
    assert r2["pairwise"]["a_wins"] == 1 and r2["pairwise"]["b_wins"] == 2
    assert r1["fixture"]["cases_sha256"] == r2["fixture"]["cases_sha256"]
    assert len(r1["variants"]["b"]["sha256"]) == 64 and r1["variants"]["b"]["name"] == "grounded"
    assert r1["models"]["judge"] == {"requested": "fake/judge", "resolved": ["judge (scripted-1)"]}
    assert r2["models"]["judge"]["requested"] == "fake/judge2"
    assert r1["models"]["generator"]["requested"] == "fake/gen"
    assert "git_commit" in r1 and r1["status"] == "complete"
    assert r1["faithfulness"]["difference"] is not None
    code, out, _ = invoke("history")
    assert code == 0 and run1 in out and run2 in out and "3/0/1" in out and "2/1/1" in out
    code, out, _ = invoke("history", "--fixture", "fixtures/small", "--format", "json")
    assert code == 0 and len(json.loads(out)) == 2
    code, _, err = invoke("history", "--fixture", "no-such-fixture")
    assert code == 2

    code, out, err = invoke("compare", run1, run2, "--format", "json")
    assert code == 0, err
    cmp = json.loads(out)
    assert cmp["flipped"] == ["q1"]
    q1 = next(c for c in cmp["cases"] if c["case_id"] == "q1")
    assert (q1["outcome_1"], q1["outcome_2"]) == ("B", "A")
    assert q1["faithfulness_b_1"] == q1["faithfulness_b_2"] == 1.0
    code, out, _ = invoke("compare", run1, run2, "--changed-only")
    assert code == 0 and "q1" in out and "q2" not in out.split("flipped")[0].split("\n\n")[1]
    assert "flipped: 1 of 4 (q1)" in out


def test_compare_refuses_different_fixtures(project, brain):
    from abtest.capturing import write_fixture
    from support.fakes import small_cases

    run1 = run_ok()
    write_fixture(project / "fixtures" / "other", small_cases()[:3], corpus_version="v1",
                  retriever="test")
    run2 = run_ok(fixture="fixtures/other")
    code, _, err = invoke("compare", run1, run2)
    assert code == 2 and "different fixtures" in err
