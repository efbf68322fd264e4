"""Fixture lifecycle through the CLI: index → capture → verify/status/diff/show → add-unanswerable."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli

CORPUS = [
    {"id": "ret#1", "title": "Returns", "text": "Damaged goods may be returned within 30 days of delivery."},
    {"id": "ret#2", "title": "Returns", "text": "Gift cards cannot be returned or refunded."},
    {"id": "shp#1", "title": "Shipping", "text": "Standard shipping takes 3 to 5 business days."},
    {"id": "shp#2", "title": "Shipping", "text": "Express conduits deliver parcels overnight."},
]
QUESTIONS = [
    {"id": "q1", "question": "How long do I have to return damaged goods?", "answerable": True,
     "category": "factual", "relevant_chunk_ids": ["ret#1"], "expected_citations": ["ret#1"],
     "reference_answer": "30 days"},
    {"id": "q2", "question": "How long does standard shipping take?", "answerable": True,
     "category": "factual", "relevant_chunk_ids": ["shp#1"]},
    {"id": "q3", "question": "What is the warranty on laptops?", "answerable": False,
     "category": "out_of_scope"},
]


def cli_ok(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return r


@pytest.fixture
def kb(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    Path("questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in QUESTIONS))
    cli_ok("index", "corpus.jsonl", "--index", "results/index.duckdb")
    return tmp_path


def test_search_json_lines_best_first(kb):
    r = cli_ok("search", "results/index.duckdb", "returned AND (damaged OR gift)", "--format", "json")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert {x["id"] for x in rows} == {"ret#1", "ret#2"}
    assert all({"id", "score"} <= set(x) for x in rows)
    assert rows[0]["score"] >= rows[-1]["score"]
    r = cli_ok("search", "results/index.duckdb", "conduit", "--format", "json")
    assert [json.loads(x)["id"] for x in r.stdout.splitlines()] == ["shp#2"]  # plural


def test_capture_local_seals_and_copies_golden_fields(kb):
    r = cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
               "--out", "fixtures/june", "--corpus-version", "2026-06-30", "--k", "2")
    assert "captured 3 cases" in r.stdout
    m = json.loads(Path("fixtures/june/manifest.json").read_text())
    assert m["n_cases"] == 3 and m["corpus_version"] == "2026-06-30"
    assert m["retriever"].startswith("bm25@k=2")
    lines = Path("fixtures/june/cases.jsonl").read_text().splitlines()
    cases = [json.loads(x) for x in lines]
    assert [c["id"] for c in cases] == ["q1", "q2", "q3"]  # sorted, canonical
    q1 = cases[0]
    assert q1["context"][0]["id"] == "ret#1" and len(q1["context"]) <= 2
    assert q1["expected_citations"] == ["ret#1"] and q1["reference_answer"] == "30 days"
    assert q1["search_terms"] and q1["keywords"] and len(q1["retrieval_scores"]) == len(q1["context"])
    cli_ok("fixtures", "verify", "fixtures/june")


def test_capture_jsonl_import_ragas_rows(kb):
    Path("cap.jsonl").write_text(json.dumps({"question": QUESTIONS[0]["question"],
                                             "contexts": ["Damaged goods may be returned within 30 days."]})
                                 + "\n")
    Path("one.jsonl").write_text(json.dumps(QUESTIONS[0]) + "\n")
    cli_ok("capture", "one.jsonl", "--retriever", "jsonl:cap.jsonl", "--out", "fixtures/imp")
    case = json.loads(Path("fixtures/imp/cases.jsonl").read_text())
    assert case["context"][0]["text"].startswith("Damaged goods")


def test_status_warns_on_stale_and_missing_kinds(kb):
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/june", "--refresh-every-days", "7")
    r = cli_ok("fixtures", "status", "fixtures/june", "--format", "json")
    st = json.loads(r.stdout)
    assert st["n_cases"] == 3 and st["unanswerable"] == 1
    assert st["categories"]["factual"]["n"] == 2 and st["categories"]["out_of_scope"]["n"] == 1
    assert any("no multi_chunk cases" in w for w in st["warnings"])
    assert any("no superseded cases" in w for w in st["warnings"])
    assert not st["stale"]
    from abtest.capturing import fixture_status, load_fixture

    later = datetime.now(timezone.utc) + timedelta(days=10)
    st2 = fixture_status(load_fixture("fixtures/june"), today=later)
    assert st2["stale"] and any(w.startswith("stale") for w in st2["warnings"])
    r = cli_ok("fixtures", "status", "fixtures/june")
    assert "warning: no multi_chunk" in r.stderr


def test_diff_shows_churn(kb):
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/old", "--k", "2")
    changed = [dict(r) for r in CORPUS]
    changed[0]["text"] = "Damaged goods may be returned within 14 days of delivery."
    Path("corpus2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in changed))
    cli_ok("index", "corpus2.jsonl", "--index", "results/index2.duckdb")
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index2.duckdb",
           "--out", "fixtures/new", "--k", "2")
    d = json.loads(cli_ok("fixtures", "diff", "fixtures/old", "fixtures/new", "--format", "json").stdout)
    assert d["added"] == [] and d["removed"] == []
    q1 = next(c for c in d["changed"] if c["id"] == "q1")
    assert q1["text_changed"] == ["ret#1"]
    assert d["context_changed_share"] == pytest.approx(len(d["changed"]) / 3)
    r = cli_ok("fixtures", "diff", "fixtures/old", "fixtures/new")
    assert "context changed in" in r.stdout


def test_add_unanswerable_counterfactuals(kb):
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/june", "--k", "2")
    cli_ok("fixtures", "add-unanswerable", "fixtures/june", "--from-answerable", "2")
    cli_ok("fixtures", "verify", "fixtures/june")  # resealed
    cases = {json.loads(x)["id"]: json.loads(x) for x in
             Path("fixtures/june/cases.jsonl").read_text().splitlines()}
    cf = [c for c in cases.values() if "synthetic" in (c.get("tags") or [])]
    assert len(cf) == 2
    for c in cf:
        assert c["answerable"] is False
        orig = cases[c["id"].removesuffix("__cf")]
        assert not set(orig["relevant_chunk_ids"]) & {x["id"] for x in c["context"]}


def test_show_case(kb):
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/june")
    r = cli_ok("fixtures", "show", "fixtures/june", "--case", "q1")
    assert json.loads(r.stdout)["id"] == "q1"
    r = cli_ok("fixtures", "show", "fixtures/june")
    assert "q3\tunanswerable" in r.stdout


def test_capture_python_retriever(kb, monkeypatch):
    Path("myret.py").write_text(
        "def retrieve(question, k):\n"
        "    return [{'id': 'p1', 'text': 'Production chunk for ' + question, 'score': 0.9}][:k]\n")
    monkeypatch.syspath_prepend(str(kb))
    cli_ok("capture", "questions.jsonl", "--retriever", "python:myret:retrieve", "--out", "fixtures/py")
    case = json.loads(Path("fixtures/py/cases.jsonl").read_text().splitlines()[0])
    assert case["context"][0]["id"] == "p1" and case["retrieval_scores"] == [0.9]
    assert case["retriever"].startswith("python")


def test_init_scaffolds_a_project(tmp_path):
    r = cli_ok("init", str(tmp_path / "proj"))
    for p in ("abtest.yaml", "fixtures", "variants/a.yaml", "variants/b.yaml", "results/.gitkeep"):
        assert (tmp_path / "proj" / p).exists(), p
    from abtest.core.config import load_config
    from abtest.prompts.variants import load_variant

    load_config(tmp_path / "proj" / "abtest.yaml")
    load_variant(tmp_path / "proj" / "variants" / "b.yaml")
    assert "next:" in r.stdout


def test_capture_with_llm_keywords(kb):
    from support.fakes import Brain, install

    brain = install(Brain())
    Path("abtest.yaml").write_text("judge: {model: fake/judge}\nstore: results/abtest.duckdb\n")
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/kw", "--keywords-llm", "--k", "2")
    q1 = json.loads(Path("fixtures/kw/cases.jsonl").read_text().splitlines()[0])
    assert q1["keywords"] == ["return", "damaged", "goods"]
    assert q1["search_terms"] == "return OR damaged OR goods"
    assert q1["context"][0]["id"] == "ret#1"
    assert len(brain.calls) == 3
    m = json.loads(Path("fixtures/kw/manifest.json").read_text())
    assert "kw=" in m["retriever"]


def test_capture_truncates_long_chunks(kb):
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/short", "--max-chars", "12")
    case = json.loads(Path("fixtures/short/cases.jsonl").read_text().splitlines()[0])
    assert all(len(c["text"]) <= 12 for c in case["context"])
    assert "max_chars=12" in json.loads(Path("fixtures/short/manifest.json").read_text())["retriever"]


def test_verified_fixture_holds_compact_seals_and_refuses_a_line_edited_in_use(tmp_path):
    from abtest.errors import UserError
    from abtest.capturing import load_fixture, write_fixture
    from abtest.core.models import Case, Chunk

    cases = [Case(id=f"q{i}", question=f"Q{i}?", answerable=True, corpus_version="v", retriever="r",
                  context=[Chunk(id=f"c{i}", text=f"text {i}")]) for i in range(5)]
    write_fixture(tmp_path / "fx", cases, corpus_version="v", retriever="r")
    fx = load_fixture(tmp_path / "fx")
    assert fx.manifest.cases == [] and len(fx._sealed) == 32 * 5  # ids + digests, no objects
    assert [c.id for c in fx.iter_cases()] == fx.ids() == [f"q{i}" for i in range(5)]
    assert [c.id for c in fx.iter_cases({"q3"})] == ["q3"]
    path = tmp_path / "fx" / "cases.jsonl"
    path.write_text(path.read_text().replace("text 3", "text 9"))
    with pytest.raises(UserError, match="changed while in use"):
        list(fx.iter_cases())


def test_loading_tells_an_edited_line_from_a_reformatted_one_and_names_bad_fields(tmp_path):
    """Seals are checked on the line's own bytes first; a line that does not match is
    re-serialised only to tell an edit (tampered) from a reformat (bytes differ)."""
    from abtest.errors import UserError
    from abtest.capturing import load_fixture, write_fixture
    from abtest.core.models import Case, Chunk

    cases = [Case(id=f"q{i}", question=f"Q{i}?", answerable=True, corpus_version="v", retriever="r",
                  context=[Chunk(id=f"c{i}", text=f"text {i}")]) for i in range(3)]
    write_fixture(tmp_path / "fx", cases, corpus_version="v", retriever="r")
    path = tmp_path / "fx" / "cases.jsonl"
    sealed = path.read_text()
    lines = sealed.splitlines()
    # same content, other key order and spacing: the case is intact, the file's bytes are not
    lines[1] = json.dumps(dict(reversed(list(json.loads(lines[1]).items()))), indent=None,
                          separators=(", ", ": "))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match="reformatted") as exc:
        load_fixture(tmp_path / "fx")
    assert "tampered" not in str(exc.value)
    path.write_text(sealed.replace("text 1", "text 7"))
    with pytest.raises(UserError, match="tampered") as exc:
        load_fixture(tmp_path / "fx")
    assert "case q1" in str(exc.value)
    # a line pydantic's JSON parser refuses is re-read for a one-line error naming the field
    path.write_text(sealed.replace('"answerable":true', '"answerable":"perhaps"', 1))
    assert '"perhaps"' in path.read_text()
    with pytest.raises(UserError, match="answerable") as exc:
        load_fixture(tmp_path / "fx")
    assert "line 1" in str(exc.value) and "case q0" in str(exc.value)
    path.write_text(sealed.replace("{", "[", 1))
    with pytest.raises(UserError, match="invalid JSON") as exc:
        load_fixture(tmp_path / "fx")
    assert "line 1" in str(exc.value)


def test_chunk_text_with_unicode_line_separators_round_trips(tmp_path):
    """JSON leaves U+2028, U+2029 and U+0085 unescaped; a reader that split lines on them
    (str.splitlines) broke the very fixture abtest had just written."""
    from abtest.capturing import load_fixture, write_fixture
    from abtest.core.models import Case, Chunk

    text = "first line\u2028second\u2029third \x85 fourth\r fifth"
    case = Case(id="q1", question="what?", context=[Chunk(id="c1", text=text)],
                corpus_version="v", retriever="r", answerable=True)
    write_fixture(tmp_path / "fx", [case, case.model_copy(update={"id": "q2"})], name="fx",
                  corpus_version="v", retriever="r")
    fx = load_fixture(tmp_path / "fx")
    assert [c.context[0].text for c in fx.cases] == [text, text]
    assert [c.id for c in fx.iter_cases({"q2"})] == ["q2"]


def test_questions_file_with_a_byte_order_mark_and_crlf_lines(tmp_path):
    from abtest.capturing import load_questions

    q = tmp_path / "q.jsonl"
    q.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "question": "one?"}\r\n{"id": "b", "question": "two?"}\r\n')
    assert [x.id for x in load_questions(q)] == ["a", "b"]


def test_jsonl_writes_replace_a_file_whole_and_read_back(tmp_path, monkeypatch):
    """The one writer: UTF-8 lines any reader of abtest reads back; a failed write leaves the
    old file as it was and no temporary file behind."""
    from abtest.core import records as jsonl

    rows = [{"id": "a", "text": "Zürich\u2028next"}, {"id": "b", "n": 2}]
    p = jsonl.write_jsonl(tmp_path / "out" / "rows.jsonl", rows)
    assert [r for _, r in jsonl.read_jsonl(p)] == rows
    assert p.read_text(encoding="utf-8").count("\n") == 2 and "Zürich" in p.read_text("utf-8")

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(jsonl.os, "replace", broken)  # the temporary file exists by then
    with pytest.raises(OSError):
        jsonl.write_jsonl(p, [{"id": "c"}])
    monkeypatch.undo()
    assert [r for _, r in jsonl.read_jsonl(p)] == rows
    assert sorted(x.name for x in p.parent.iterdir()) == ["rows.jsonl"]


def _bad(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.strip().splitlines() if "error" in ln]  # progress may precede
    assert len(lines) == 1 and "Traceback" not in r.output, r.stderr
    return lines[0]


@pytest.mark.parametrize("field, value", [
    ("corpus_version", "2099-01-01"), ("captured_at", "2099-01-01T00:00:00Z"),
    ("retriever", "a better retriever"), ("refresh_every_days", 9999), ("name", "other"),
    ("notes", {"x": 1}),
])
def test_every_manifest_field_the_report_reads_is_sealed(kb, field, value):
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/f", "--corpus-version", "v7")
    m = Path("fixtures/f/manifest.json")
    data = json.loads(m.read_text())
    assert data["schema_version"] == 2 and len(data["manifest_sha256"]) == 64
    data[field] = value
    m.write_text(json.dumps(data, indent=2))
    for args in (("fixtures", "verify", "fixtures/f"), ("fixtures", "status", "fixtures/f")):
        line = _bad(*args)
        assert "manifest.json" in line and "manifest_sha256" in line and "changed after sealing" in line


def test_a_manifest_sealed_before_the_field_seal_must_be_resealed_and_keeps_its_capture(kb):
    cli_ok("capture", "questions.jsonl", "--retriever", "local:results/index.duckdb",
           "--out", "fixtures/f", "--refresh-every-days", "90")
    m = Path("fixtures/f/manifest.json")
    data = json.loads(m.read_text())
    old = dict(data, schema_version=1, captured_at="2026-01-02T03:04:05Z")
    del old["manifest_sha256"]
    m.write_text(json.dumps(old, indent=2))
    line = _bad("fixtures", "verify", "fixtures/f")
    assert "older abtest" in line and "abtest fixtures seal fixtures/f" in line
    cli_ok("fixtures", "seal", "fixtures/f")
    new = json.loads(m.read_text())
    assert new["schema_version"] == 2 and new["captured_at"] == "2026-01-02T03:04:05Z"
    assert new["refresh_every_days"] == 90 and new["cases_sha256"] == data["cases_sha256"]
    cli_ok("fixtures", "verify", "fixtures/f")
    # cases edited since: they were not captured then, so the capture time is now
    lines = Path("fixtures/f/cases.jsonl").read_text().splitlines()
    case = json.loads(lines[0])
    case["question"] += " Please."
    Path("fixtures/f/cases.jsonl").write_text("\n".join([json.dumps(case)] + lines[1:]) + "\n")
    cli_ok("fixtures", "seal", "fixtures/f")
    assert json.loads(m.read_text())["captured_at"] != "2026-01-02T03:04:05Z"


def test_an_imported_capture_keeps_its_own_corpus_version(kb):
    rows = [{"id": "q1", "question": QUESTIONS[0]["question"], "corpus_version": "kb-2026-11-30",
             "contexts": ["Damaged goods may be returned within 30 days."]},
            {"id": "q2", "question": QUESTIONS[1]["question"],
             "contexts": ["Standard shipping takes 3 to 5 business days."]}]
    Path("cap.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    Path("two.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS[:2]))
    r = cli_ok("capture", "two.jsonl", "--retriever", "jsonl:cap.jsonl", "--out", "fixtures/imp")
    cases = {c["id"]: c for c in map(json.loads, Path("fixtures/imp/cases.jsonl").read_text()
                                     .splitlines())}
    today = datetime.now(timezone.utc).date().isoformat()
    assert cases["q1"]["corpus_version"] == "kb-2026-11-30"
    assert cases["q2"]["corpus_version"] in (today, (datetime.now().date()).isoformat())
    assert "1 case(s) had no corpus version" in r.stderr
    man = json.loads(Path("fixtures/imp/manifest.json").read_text())
    assert man["corpus_version"] == ",".join(sorted({"kb-2026-11-30", cases["q2"]["corpus_version"]}))
    # --corpus-version labels the rows without one; the source's own label still wins
    r = cli_ok("capture", "two.jsonl", "--retriever", "jsonl:cap.jsonl", "--out", "fixtures/imp2",
               "--corpus-version", "v9")
    cases = {c["id"]: c for c in map(json.loads, Path("fixtures/imp2/cases.jsonl").read_text()
                                     .splitlines())}
    assert (cases["q1"]["corpus_version"], cases["q2"]["corpus_version"]) == ("kb-2026-11-30", "v9")
    assert "no corpus version" not in r.stderr
    Path("cap.jsonl").write_text(json.dumps(dict(rows[0], corpus_version=7)) + "\n")
    assert "corpus_version" in _bad("capture", "two.jsonl", "--retriever", "jsonl:cap.jsonl",
                                    "--out", "fixtures/imp3")
