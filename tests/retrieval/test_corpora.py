"""A corpus another library wrote becomes the local index as it is: LlamaIndex's persisted
docstore (a real one, tests/data/imports/README.md) and node dumps, LangChain Documents.
Expected ids and texts are read from the files with json here, never with abtest's reader."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from abtest.retrieval.bm25 import IndexStore
from support.fakes import DATA as TEST_DATA
from support.fakes import make_project

LI = TEST_DATA / "imports" / "llamaindex"
LC = TEST_DATA / "imports" / "langchain"
DOCSTORE = LI / "chat-llamaindex_basic_law_germany.docstore.json"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    return p


def index(path: Path) -> tuple[object, dict[str, tuple[str, dict | None]]]:
    r = CliRunner().invoke(cli, ["index", str(path), "--index", "ix.duckdb"])
    if r.exit_code != 0:
        return r, {}
    with IndexStore("ix.duckdb", read_only=True) as st:
        ids, _ = st.all_texts()
        got = st.get_chunks(ids)
    return r, {i: (h.text, h.metadata) for i, h in got.items()}


def test_a_llamaindex_docstore_is_the_corpus_node_for_node(proj):
    doc = json.loads(DOCSTORE.read_text(encoding="utf-8"))
    nodes = [e["__data__"] for e in doc["docstore/data"].values()]
    r, got = index(DOCSTORE)
    assert r.exit_code == 0, r.stderr
    assert {n["id_"]: (n["text"], n["metadata"] or None) for n in nodes} == got
    left = r.stderr.split("not kept (an index has no place for them): ")[1]
    assert f"embedding ({len(nodes)})" in left and f"relationships ({len(nodes)})" in left


def test_a_cut_docstore_is_refused_in_one_line(proj):
    raw = DOCSTORE.read_bytes()
    (proj / "docstore.json").write_bytes(raw[: len(raw) // 2])
    r = CliRunner().invoke(cli, ["index", "docstore.json", "--index", "ix.duckdb"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "docstore.json: the file ends mid-record (line" in r.stderr
    assert not Path("ix.duckdb").exists()


@pytest.mark.parametrize("src", [DOCSTORE, LC / "documents.json"])
def test_a_corpus_in_another_encoding_is_refused_in_one_line(proj, src):
    raw = src.read_bytes()
    (proj / "latin.json").write_bytes(raw.replace(b"e", b"\xe9", 1))
    r = CliRunner().invoke(cli, ["index", "latin.json", "--index", "ix.duckdb"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "latin.json" in r.stderr and "UTF-8" in r.stderr
    assert not Path("ix.duckdb").exists()


def test_a_docstore_node_without_text_is_named(proj):
    doc = json.loads(DOCSTORE.read_text(encoding="utf-8"))
    key = next(iter(doc["docstore/data"]))
    del doc["docstore/data"][key]["__data__"]["text"]
    (proj / "docstore.json").write_text(json.dumps(doc))
    r = CliRunner().invoke(cli, ["index", "docstore.json", "--index", "ix.duckdb"])
    assert r.exit_code == 2, r.stderr
    assert f"docstore.json: docstore/data.{key}: a node needs `id_` and `text`" in r.stderr


def _langchain_expected(docs: list[dict]) -> dict[str, tuple[str, dict | None]]:
    out = {}
    for d in docs:
        md = d.get("metadata") or {}
        cid = d.get("id") or next((str(md[k]) for k in ("id", "doc_id", "chunk_id",
                                                         "document_id") if k in md), None) \
            or "sha256:" + hashlib.sha256(d["page_content"].encode()).hexdigest()[:16]
        out[cid] = (d["page_content"], md or None)
    return out


def test_langchain_documents_are_the_corpus(proj):
    docs = json.loads((LC / "documents.json").read_text(encoding="utf-8"))
    r, got = index(LC / "documents.json")
    assert r.exit_code == 0, r.stderr
    assert got == _langchain_expected(docs)
    dumped = json.loads((LC / "documents.dumpd.json").read_text(encoding="utf-8"))
    r, got2 = index(LC / "documents.dumpd.json")
    assert r.exit_code == 0, r.stderr
    assert got2 == _langchain_expected([d["kwargs"] for d in dumped])


def test_llamaindex_node_dumps_are_the_corpus(proj):
    nodes = json.loads((LI / "nodes.json").read_text(encoding="utf-8"))
    r, got = index(LI / "nodes.json")
    assert r.exit_code == 0, r.stderr
    assert got == {n["id_"]: (n["text"], n["metadata"] or None) for n in nodes}
    doc = json.loads((LI / "docstore.json").read_text(encoding="utf-8"))   # 0.14's writer
    r, got2 = index(LI / "docstore.json")
    assert r.exit_code == 0, r.stderr
    assert got2 == got and set(doc["docstore/data"]) == set(got)
