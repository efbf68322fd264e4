"""Hybrid local retrieval: BM25 + vector search merged by reciprocal-rank fusion, optional rerank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli

CORPUS = [
    {"id": "car", "text": "Car repair shops fix engines and brakes."},
    {"id": "bike", "text": "Bicycle repair needs a pump and tyre levers."},
    {"id": "cake", "text": "Baking a cake needs flour, eggs and sugar."},
]
SYNONYMS = {"automobile": "car", "vehicle": "car"}
VOCAB = ["car", "bicycle", "cake", "repair", "engines", "flour"]


def toy_embed(texts):
    """Bag-of-words over a tiny vocabulary, with synonyms folded: a stand-in embedding model."""
    out = []
    for t in texts:
        words = [SYNONYMS.get(w.strip(".,?").lower(), w.strip(".,?").lower()) for w in t.split()]
        out.append([float(sum(w.startswith(v) for w in words)) + 1e-3 for v in VOCAB])
    return out


@pytest.fixture
def index(tmp_path):
    from abtest.retrieval.index import build_index

    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    build_index(tmp_path / "c.jsonl", tmp_path / "idx.duckdb")
    return tmp_path / "idx.duckdb"


def test_rrf_formula():
    from abtest.retrieval.base import RetrievedChunk as C
    from abtest.retrieval.local import LocalRetriever

    fused = LocalRetriever.rrf([[C("a", "A"), C("b", "B")], [C("b", "B"), C("c", "C")]], c=60)
    assert [x.id for x in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(round(1 / 62 + 1 / 61, 6))
    assert fused[1].score == pytest.approx(round(1 / 61, 6))


def test_vector_search_finds_what_bm25_misses(index):
    from abtest.retrieval import get_retriever

    bm25 = get_retriever(f"local:{index}", k=2)
    hyb = get_retriever(f"local:{index}", k=2, embed_fn=toy_embed, embed_label="toy")
    q = [("q", "Where can my automobile get serviced?")]
    assert "car" not in [c.id for c in bm25.retrieve_many(q)["q"]]
    got = hyb.retrieve_many(q)["q"]
    assert got[0].id == "car"
    assert hyb.name.startswith("hybrid@k=2,vec=toy+rrf")


def test_reranker_reorders(index):
    from abtest.retrieval import get_retriever

    def prefer_cake(query, docs):
        return [1.0 if "cake" in d else 0.0 for d in docs]

    r = get_retriever(f"local:{index}", k=2, rerank_fn=prefer_cake, rerank_label="toy")
    got = r.retrieve_many([("q", "repair cake")])["q"]
    assert got[0].id == "cake" and got[0].score == 1.0
    assert r.rerank_fallbacks == {}


def test_reranker_unavailable_falls_back_and_is_recorded(index, tmp_path):
    from abtest.capturing import capture
    from abtest.core.models import Question
    from abtest.retrieval import get_retriever

    def down(query, docs):
        raise ConnectionError("rerank service unreachable")

    plain = get_retriever(f"local:{index}", k=2)
    r = get_retriever(f"local:{index}", k=2, rerank_fn=down, rerank_label="toy")
    q = [("q", "bicycle repair")]
    assert [c.id for c in r.retrieve_many(q)["q"]] == [c.id for c in plain.retrieve_many(q)["q"]]
    fx = capture([Question(id="q", question="bicycle repair")], r, out=tmp_path / "fx",
                 corpus_version="v", k=2)
    assert "ConnectionError" in fx.manifest.notes["rerank_fallback"]["q"]


def test_capture_with_configured_embedding_model(index, tmp_path, monkeypatch):
    from fake_llm_server import FakeLLMServer

    srv = FakeLLMServer(max_seconds=60)
    url = srv.start()
    try:
        monkeypatch.chdir(tmp_path)
        Path("abtest.yaml").write_text(f'embedding: {{model: openai/emb, api_base: "{url}"}}\n')
        Path("q.jsonl").write_text(json.dumps({"id": "q1", "question": "car repair"}) + "\n")
        r = CliRunner().invoke(cli, ["capture", "q.jsonl", "--retriever", f"local:{index}",
                                     "--out", "fixtures/h", "--k", "2"])
        assert r.exit_code == 0, r.stderr
        m = json.loads(Path("fixtures/h/manifest.json").read_text())
        assert m["retriever"].startswith("hybrid@k=2,vec=openai/emb+rrf")
        assert any("/embeddings" in x["path"] for x in srv.requests)
    finally:
        srv.stop()
